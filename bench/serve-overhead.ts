import '../src/polyfill.js';
import { existsSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { getLlama, LlamaChat, LlamaLogLevel, resolveChatWrapper, type ChatHistoryItem } from 'node-llama-cpp';
import { physicalCoreCount } from '../src/common/cpu.js';
import { countParams, generateRandomModel, modelSpecForParams } from '../src/models/generate/random-model.js';
import { startTestNode } from '../test/support/node-process.js';
import { summarize } from './stats.js';

/**
 * Decode tokens/s and time to first token through Shoal's API (a real node, streaming over HTTP)
 * versus node-llama-cpp called directly in this process: same model, threads and prompt, A/B
 * alternated so drift hits both sides alike. Prints one JSON object.
 */

interface Sample {
  ttftMs: number;
  decodeTokPerS: number;
  tokens: number;
}

const { values } = parseArgs({
  options: {
    params: { type: 'string', default: '200M' },
    type: { type: 'string', default: 'f16' },
    threads: { type: 'string' },
    reps: { type: 'string', default: '5' },
    tokens: { type: 'string', default: '128' },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});

const threads = Number(values.threads ?? physicalCoreCount());
const reps = Number(values.reps);
const maxTokens = Number(values.tokens);
const paramCount = parseCount(values.params!);
const tensorType = values.type as 'f16' | 'q8_0' | 'q4_0' | 'f32';
const contextSize = 1024;
const prompt = 'Write a long story about a lighthouse keeper and the sea.';

function parseCount(text: string): number {
  const match = /^(\d+(?:\.\d+)?)([kMB]?)$/.exec(text);
  if (!match) throw new Error(`--params must look like 200M, got ${text}`);
  const scale = { '': 1, k: 1e3, M: 1e6, B: 1e9 }[match[2] as '' | 'k' | 'M' | 'B'];
  return Math.round(Number(match[1]) * scale);
}

async function ensureModel(): Promise<{ path: string; params: number; bytes: number }> {
  const spec = modelSpecForParams(paramCount, { tensorType, name: `bench-${values.params}-${tensorType}` });
  await mkdir(values['model-dir']!, { recursive: true });
  const path = join(values['model-dir']!, `${spec.name}.gguf`);
  if (!existsSync(path)) {
    process.stderr.write(`generating ${path} (${countParams(spec)} params)...\n`);
    await generateRandomModel(spec, path);
  }
  return { path, params: countParams(spec), bytes: (await stat(path)).size };
}

async function main(): Promise<void> {
  const model = await ensureModel();

  const llama = await getLlama({ gpu: false, build: 'never', maxThreads: threads, logLevel: LlamaLogLevel.error });
  const llamaModel = await llama.loadModel({ modelPath: model.path });
  const context = await llamaModel.createContext({ contextSize, sequences: 1, threads });
  const chatWrapper = resolveChatWrapper(llamaModel);

  async function direct(): Promise<Sample> {
    const sequence = context.getSequence();
    const chat = new LlamaChat({ contextSequence: sequence, chatWrapper });
    const history: ChatHistoryItem[] = [{ type: 'user', text: prompt }, { type: 'model', response: [] }];
    let first = 0;
    let tokens = 0;
    const start = performance.now();
    await chat.generateResponse(history, {
      maxTokens,
      temperature: 0,
      repeatPenalty: false,
      onToken: (t) => {
        if (tokens === 0) first = performance.now();
        tokens += t.length;
      },
    });
    const end = performance.now();
    chat.dispose();
    await sequence.dispose();
    return { ttftMs: first - start, decodeTokPerS: ((tokens - 1) * 1000) / (end - first), tokens };
  }

  const node = await startTestNode({
    args: ['--default-model', model.path, '--threads', String(threads), '--parallel', '1', '--context-size', String(contextSize), '--gpu', 'false'],
    readyTimeoutMs: 120_000,
  });
  const modelId = ((await (await fetch(`${node.url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;

  async function viaShoal(): Promise<Sample> {
    const start = performance.now();
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: modelId,
        messages: [{ role: 'user', content: prompt }],
        temperature: 0,
        max_tokens: maxTokens,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    if (!res.ok || !res.body) throw new Error(`shoal answered ${res.status}: ${await res.text()}`);
    let first = 0;
    let tokens = 0;
    let buffer = '';
    const decoder = new TextDecoder();
    for await (const bytes of res.body) {
      buffer += decoder.decode(bytes as Uint8Array, { stream: true });
      let split = buffer.indexOf('\n\n');
      while (split >= 0) {
        const data = buffer.slice(6, split);
        buffer = buffer.slice(split + 2);
        split = buffer.indexOf('\n\n');
        if (data === '[DONE]') continue;
        const chunk = JSON.parse(data) as { choices: { delta: { content?: string } }[]; usage?: { completion_tokens: number } | null };
        if (first === 0 && chunk.choices[0]?.delta.content) first = performance.now();
        if (chunk.usage) tokens = chunk.usage.completion_tokens;
      }
    }
    const end = performance.now();
    return { ttftMs: first - start, decodeTokPerS: ((tokens - 1) * 1000) / (end - first), tokens };
  }

  // One unmeasured round each warms caches and page-ins the weights in both processes.
  await direct();
  await viaShoal();
  const directSamples: Sample[] = [];
  const shoalSamples: Sample[] = [];
  for (let rep = 0; rep < reps; rep++) {
    if (rep % 2 === 0) {
      directSamples.push(await direct());
      shoalSamples.push(await viaShoal());
    } else {
      shoalSamples.push(await viaShoal());
      directSamples.push(await direct());
    }
  }
  await node.stop();
  await context.dispose();
  await llamaModel.dispose();
  await llama.dispose();

  const d = { decodeTokPerS: summarize(directSamples.map((s) => s.decodeTokPerS)), ttftMs: summarize(directSamples.map((s) => s.ttftMs)) };
  const s = { decodeTokPerS: summarize(shoalSamples.map((x) => x.decodeTokPerS)), ttftMs: summarize(shoalSamples.map((x) => x.ttftMs)) };
  const result = {
    benchmark: 'serve-overhead',
    model: { params: model.params, type: tensorType, bytes: model.bytes },
    threads,
    reps,
    maxTokens,
    tokensPerRun: { direct: directSamples.map((x) => x.tokens), shoal: shoalSamples.map((x) => x.tokens) },
    direct: d,
    shoal: s,
    decodeRatio: Math.round((s.decodeTokPerS.median / d.decodeTokPerS.median) * 1000) / 1000,
    ttftOverheadMs: Math.round((s.ttftMs.median - d.ttftMs.median) * 100) / 100,
    targets: { decodeRatio: '>= 0.97', ttftOverheadMs: '<= 10' },
  };
  console.log(JSON.stringify(result, null, 2));
}

await main();
