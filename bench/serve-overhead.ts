import { parseArgs } from 'node:util';
import { getLlama, LlamaChat, LlamaLogLevel, resolveChatWrapper, type ChatHistoryItem } from 'node-llama-cpp';
import { benchPrompt, defaultEngineThreads, ensureBenchModel, intOption, log, machineInfo, printResult, startShoal, streamChat, versions, type TensorType } from './common.js';
import { alternation, summarize } from './stats.js';

/**
 * Decode tokens/s and time to first token through Shoal's API (a real node, streaming over HTTP)
 * versus node-llama-cpp called directly in this process: same model, threads and engine build, A/B
 * alternated so drift hits both sides alike. Prints one JSON object.
 */

interface Sample {
  ttftMs: number;
  decodeTokPerS: number;
  tokens: number;
}

const BENCHMARK = 'serve-overhead';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    params: { type: 'string' },
    type: { type: 'string', default: 'f16' },
    threads: { type: 'string' },
    reps: { type: 'string' },
    tokens: { type: 'string' },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});

const quick = values.quick === true;
const params = values.params ?? (quick ? '100M' : '200M');
const threads = intOption('threads', values.threads, defaultEngineThreads(quick));
const reps = intOption('reps', values.reps, quick ? 5 : 7);
const maxTokens = intOption('tokens', values.tokens, quick ? 64 : 128);
const tensorType = values.type as TensorType;
const contextSize = 1024;

async function main(): Promise<void> {
  const model = await ensureBenchModel(params, tensorType, values['model-dir']);

  const llama = await getLlama({ gpu: false, build: 'never', maxThreads: threads, logLevel: LlamaLogLevel.error });
  const llamaModel = await llama.loadModel({ modelPath: model.path });
  const context = await llamaModel.createContext({ contextSize, sequences: 1, threads });
  const chatWrapper = resolveChatWrapper(llamaModel);

  async function direct(prompt: string): Promise<Sample> {
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

  const shoal = await startShoal({ model, threads, parallel: 1, contextPerSlot: contextSize });
  const sides = [
    { name: 'direct', run: direct },
    { name: 'shoal', run: (prompt: string) => streamChat(shoal, prompt, maxTokens) },
  ] as const;
  const samples: Record<'direct' | 'shoal', Sample[]> = { direct: [], shoal: [] };
  try {
    let n = 0;
    // One unmeasured round each warms caches and pages the weights in, in both processes.
    for (const side of sides) await side.run(benchPrompt(n++));
    for (let rep = 0; rep < reps; rep++) {
      for (const side of alternation(sides, rep)) samples[side.name].push(await side.run(benchPrompt(n++)));
    }
  } finally {
    await shoal.stop();
    await context.dispose();
    await llamaModel.dispose();
    await llama.dispose();
  }

  const figures = (list: Sample[]) => ({ decodeTokPerS: summarize(list.map((x) => x.decodeTokPerS)), ttftMs: summarize(list.map((x) => x.ttftMs)) });
  const d = figures(samples.direct);
  const s = figures(samples.shoal);
  log(BENCHMARK, `decode ${s.decodeTokPerS.median} via Shoal vs ${d.decodeTokPerS.median} tok/s direct; TTFT ${s.ttftMs.median} vs ${d.ttftMs.median} ms`);
  printResult({
    benchmark: BENCHMARK,
    quick,
    method:
      `one request at a time (temperature 0, ${maxTokens} tokens, a prompt new to both sides each time): a streaming chat completion from a Shoal node ` +
      `versus LlamaChat.generateResponse on node-llama-cpp in the benchmark process, alternating which goes first`,
    model: { name: model.name, params: model.params, type: tensorType, bytes: model.bytes },
    shoalEngine: shoal.engine,
    threads,
    reps,
    maxTokens,
    tokensPerRun: { direct: samples.direct.map((x) => x.tokens), shoal: samples.shoal.map((x) => x.tokens) },
    direct: d,
    shoal: s,
    decodeRatio: Math.round((s.decodeTokPerS.median / d.decodeTokPerS.median) * 1000) / 1000,
    ttftOverheadMs: Math.round((s.ttftMs.median - d.ttftMs.median) * 100) / 100,
    targets: { decodeRatio: '>= 0.97', ttftOverheadMs: '<= 10' },
    machine: machineInfo(),
    versions: await versions(),
  });
}

await main();
