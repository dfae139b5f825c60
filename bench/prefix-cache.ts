import { parseArgs } from 'node:util';
import { defaultEngineThreads, ensureBenchModel, ensureLlamaServer, intOption, log, machineInfo, printResult, startLlamaServer, startShoal, versions, type Server, type TensorType } from './common.js';
import { summarize } from './stats.js';

/**
 * Prompt cache reuse: the first and second turn of a long conversation (about `--prompt-tokens` of
 * history), time to first token of each, through Shoal's API on each engine it has here and on
 * llama-server launched by hand. Two conversations are interleaved on two slots (A1, B1, B2, A2), so a
 * second turn only starts fast when the server put it back on the slot that holds its first (the
 * least recently used slot would be the other one's).
 * Prints one JSON object.
 */

interface Message {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

interface Turn {
  ttftMs: number;
  promptTokens: number;
  /** `usage.prompt_tokens_details.cached_tokens` where the server reports it. */
  cachedTokens: number | null;
  text: string;
}

const BENCHMARK = 'prefix-cache';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    params: { type: 'string' },
    type: { type: 'string', default: 'f16' },
    threads: { type: 'string' },
    reps: { type: 'string' },
    'prompt-tokens': { type: 'string' },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});

const quick = values.quick === true;
const params = values.params ?? (quick ? '100M' : '200M');
const threads = intOption('threads', values.threads, defaultEngineThreads(quick));
const reps = intOption('reps', values.reps, quick ? 2 : 5);
const promptTokens = intOption('prompt-tokens', values['prompt-tokens'], 2000);
const answerTokens = 16;
const slots = 2;
// Room for the history, both answers and the second question.
const contextPerSlot = Math.max(1024, 2 ** Math.ceil(Math.log2(promptTokens * 1.25 + 4 * answerTokens)));

/** `count` words of filler no other conversation shares (`tag` differs per conversation). */
function filler(tag: string, count: number): string {
  return Array.from({ length: count }, (_, i) => `${tag}${i % 97} word${(i * 7) % 31}`).join(' ');
}

/** A history of a system prompt and three exchanges, `words` filler words in all. */
function history(tag: string, words: number): Message[] {
  const part = Math.max(1, Math.floor(words / 7));
  return [
    { role: 'system', content: `Conversation ${tag}. ${filler(`${tag}s`, part)}` },
    ...[1, 2, 3].flatMap((i): Message[] => [
      { role: 'user', content: filler(`${tag}u${i}`, part * 1.5) },
      { role: 'assistant', content: filler(`${tag}a${i}`, part / 2) },
    ]),
    { role: 'user', content: filler(`${tag}q`, part) },
  ];
}

async function turn(server: Server, messages: Message[]): Promise<Turn> {
  const start = performance.now();
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: server.modelId, messages, temperature: 0, max_tokens: answerTokens, stream: true, stream_options: { include_usage: true } }),
  });
  if (!res.ok || !res.body) throw new Error(`${server.url} answered ${res.status}: ${await res.text()}`);
  let first = 0;
  let text = '';
  let usage = null as { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } } | null;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes as Uint8Array, { stream: true });
    for (let split = buffer.indexOf('\n\n'); split >= 0; split = buffer.indexOf('\n\n')) {
      const event = buffer.slice(0, split);
      buffer = buffer.slice(split + 2);
      const data = event.startsWith('data: ') ? event.slice(6) : null;
      if (data === null || data === '[DONE]') continue;
      const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string | null } }[]; usage?: typeof usage };
      const content = chunk.choices?.[0]?.delta?.content;
      if (content) {
        if (first === 0) first = performance.now();
        text += content;
      }
      if (chunk.usage) usage = chunk.usage;
    }
  }
  if (first === 0) throw new Error(`${server.url} streamed no content`);
  return { ttftMs: first - start, promptTokens: usage?.prompt_tokens ?? NaN, cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? null, text };
}

interface Side {
  name: string;
  engine: string;
  firstTtftMs: ReturnType<typeof summarize>;
  secondTtftMs: ReturnType<typeof summarize>;
  /** Median second-turn TTFT over the median first-turn TTFT. */
  ratio: number;
  promptTokens: { first: number[]; second: number[] };
  cachedTokens: (number | null)[];
}

/** `reps` rounds of two interleaved two-turn conversations, each round's conversations new to the server. */
async function measure(name: string, server: Server, wordsPerConversation: number): Promise<Side> {
  const first: Turn[] = [];
  const second: Turn[] = [];
  for (let rep = 0; rep < reps; rep++) {
    // The same conversations on every side (each side is a server of its own), so their prompts tokenize alike.
    const conversations = ['A', 'B'].map((c) => history(`r${rep}${c}`, wordsPerConversation));
    const firsts: Turn[] = [];
    for (const messages of conversations) firsts.push(await turn(server, messages));
    // B's second turn first: a server handing out the least recently used slot would put it on A's.
    for (const [i, messages] of [...conversations.entries()].reverse()) {
      const next = [...messages, { role: 'assistant' as const, content: firsts[i]!.text }, { role: 'user' as const, content: `And then? (${rep}${i})` }];
      second.push(await turn(server, next));
    }
    first.push(...firsts);
  }
  const firstTtftMs = summarize(first.map((t) => t.ttftMs));
  const secondTtftMs = summarize(second.map((t) => t.ttftMs));
  log(BENCHMARK, `${name}: first turn ${firstTtftMs.median} ms, second ${secondTtftMs.median} ms to the first token`);
  return {
    name,
    engine: server.engine,
    firstTtftMs,
    secondTtftMs,
    ratio: Math.round((secondTtftMs.median / firstTtftMs.median) * 1000) / 1000,
    promptTokens: { first: first.map((t) => t.promptTokens), second: second.map((t) => t.promptTokens) },
    cachedTokens: second.map((t) => t.cachedTokens),
  };
}

/**
 * Filler words that make a conversation of about `promptTokens` on this model's tokenizer and template:
 * a small sample first, then once more at that estimate (filler grows longer with its length), each
 * conversation new to the server.
 */
async function calibrate(server: Server): Promise<number> {
  // Small enough for any context: generated models tokenize filler at a dozen tokens a word or more.
  let words = 70;
  for (const tag of ['cal', 'cbl']) {
    const { promptTokens: measured } = await turn(server, history(tag, words));
    if (!Number.isFinite(measured) || measured <= 0) throw new Error(`${server.url} reports no prompt tokens`);
    words = Math.max(7, Math.round((words * promptTokens) / measured));
  }
  return words;
}

async function main(): Promise<void> {
  const model = await ensureBenchModel(params, values.type as TensorType, values['model-dir']);
  const serving = { model, threads, parallel: slots, contextPerSlot };
  const sides: Side[] = [];
  let words = 0;
  let binary: string | null = null;
  try {
    binary = await ensureLlamaServer();
  } catch (error) {
    log(BENCHMARK, `no llama-server here, so only the in-process engine: ${(error as Error).message}`);
  }
  const runs: { name: string; start: () => Promise<Server> }[] = [
    { name: 'shoalLlamaCpp', start: () => startShoal({ ...serving, engine: 'llama_cpp' }) },
    ...(binary !== null
      ? [
          { name: 'shoalLlamaServer', start: () => startShoal({ ...serving, engine: 'llama_server' }) },
          { name: 'llamaServer', start: () => startLlamaServer(binary!, serving) },
        ]
      : []),
  ];
  for (const run of runs) {
    log(BENCHMARK, `starting ${run.name} on ${model.path}, ${threads} thread(s), ${slots} slots of ${contextPerSlot} tokens`);
    const server = await run.start();
    try {
      if (words === 0) words = await calibrate(server);
      // One unmeasured short request pages the weights in.
      await turn(server, [{ role: 'user', content: `warm up ${run.name}` }]);
      sides.push(await measure(run.name, server, words));
    } finally {
      await server.stop();
    }
  }
  printResult({
    benchmark: BENCHMARK,
    quick,
    method:
      `per round two new conversations of about ${promptTokens} prompt tokens (a system prompt and three exchanges of filler), first turns A1, B1, ` +
      `then second turns B2, A2 (the first answer and a short question appended), ${answerTokens} tokens each, temperature 0, ${slots} slots; ` +
      `time to first token of a streaming chat completion`,
    model: { name: model.name, params: model.params, type: model.type, bytes: model.bytes },
    threads,
    reps,
    contextPerSlot,
    sides,
    targets: { ratio: '<= 0.3' },
    machine: machineInfo(),
    versions: await versions(),
  });
}

await main();
