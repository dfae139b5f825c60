import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { getLlama, LlamaChat, LlamaLogLevel, resolveChatWrapper, type ChatHistoryItem } from 'node-llama-cpp';
import { physicalCoreCount } from '../src/common/cpu.js';
import { TINY_MODEL_SPEC } from '../src/models/generate/builtin.js';
import { countParams, generateRandomModel } from '../src/models/generate/random-model.js';
import { benchPrompt, ensureBenchModel, intOption, liveGroups, log, machineInfo, printResult, startShoal, streamChat, versions, type BenchModel, type Server, type TensorType } from './common.js';
import { alternation, percentiles, ratio, summarize } from './stats.js';

/**
 * The in-process engine under load: N concurrent streaming chat completions through a Shoal node
 * forced onto node-llama-cpp (`--engine llama_cpp`, `--parallel N`) against the same node-llama-cpp
 * build called directly by a child Node process of this benchmark, loaded as Shoal's runner child
 * loads it (src/worker/runner/llama-cpp-engine.ts and supervisor.ts: getLlama with gpu false and
 * maxThreads, one context of N sequences with the same per-sequence context and threads, the
 * library's default batch size and flash attention, UV_THREADPOOL_SIZE=1), each request a LlamaChat
 * on a sequence of its own through the chat wrapper the model resolves to. Bursts alternate sides;
 * per side it reports aggregate tok/s (all tokens of a burst / burst start → last stream closed,
 * median over the bursts), TTFT p50/p95 over every request, and the CPU each process spent per
 * token. Prints one JSON object.
 *
 * The direct side runs in its own process for the same reason Shoal's runner does: so neither
 * this benchmark's HTTP clients nor its event loop share a process with the engine measured.
 */

const BENCHMARK = 'in-process-concurrency';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    models: { type: 'string' },
    type: { type: 'string', default: 'f16' },
    threads: { type: 'string' },
    clients: { type: 'string' },
    reps: { type: 'string' },
    tokens: { type: 'string' },
    'model-dir': { type: 'string', default: 'bench/models' },
    // Internal: this process is the direct side's child, driven over IPC.
    'direct-child': { type: 'boolean', default: false },
  },
});

// ---------------------------------------------------------------------------------------------------
// The direct side: node-llama-cpp in a child process, one LlamaChat per request

interface LoadMessage {
  type: 'load';
  modelPath: string;
  contextPerSlot: number;
  sequences: number;
  threads: number;
}
interface BurstMessage {
  type: 'burst';
  prompts: string[];
  maxTokens: number;
}
type ToChild = LoadMessage | BurstMessage | { type: 'stop' };

interface RequestSample {
  ttftMs: number;
  tokens: number;
  /** Burst start → this request's last token. */
  endMs: number;
}
type FromChild = { type: 'ready'; contextSize: number; sequences: number } | { type: 'burst'; samples: RequestSample[] } | { type: 'error'; message: string };

async function directChild(): Promise<void> {
  const send = (message: FromChild): void => void process.send!(message);
  process.on('disconnect', () => process.exit(0));
  let engine: Awaited<ReturnType<typeof loadDirect>> | null = null;
  process.on('message', (message: ToChild) => {
    void (async () => {
      try {
        if (message.type === 'load') {
          engine = await loadDirect(message);
          send({ type: 'ready', contextSize: engine.context.contextSize, sequences: engine.context.totalSequences });
        } else if (message.type === 'burst') {
          const started = performance.now();
          send({ type: 'burst', samples: await Promise.all(message.prompts.map((prompt) => engine!.chat(prompt, message.maxTokens, started))) });
        } else {
          await engine?.dispose();
          process.exit(0);
        }
      } catch (error) {
        send({ type: 'error', message: (error as Error).stack ?? String(error) });
      }
    })();
  });
}

/** The model loaded with the options Shoal's runner passes (LlamaCppEngine.load), nothing else. */
async function loadDirect(o: LoadMessage) {
  const llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, progressLogs: false, maxThreads: o.threads, logLevel: LlamaLogLevel.warn });
  const model = await llama.loadModel({ modelPath: o.modelPath });
  const context = await model.createContext({ contextSize: Math.min(o.contextPerSlot, model.trainContextSize), sequences: o.sequences, threads: o.threads });
  const chatWrapper = resolveChatWrapper(model);
  return {
    context,
    async chat(prompt: string, maxTokens: number, burstStarted: number): Promise<RequestSample> {
      const sequence = context.getSequence();
      const chat = new LlamaChat({ contextSequence: sequence, chatWrapper });
      const history: ChatHistoryItem[] = [{ type: 'user', text: prompt }, { type: 'model', response: [] }];
      let first = 0;
      let tokens = 0;
      try {
        await chat.generateResponse(history, {
          maxTokens,
          temperature: 0,
          repeatPenalty: false,
          onToken: (t) => {
            if (tokens === 0) first = performance.now();
            tokens += t.length;
          },
        });
      } finally {
        chat.dispose();
        await sequence.dispose();
      }
      const end = performance.now();
      if (tokens === 0) throw new Error('the direct side generated no token');
      return { ttftMs: first - burstStarted, tokens, endMs: end - burstStarted };
    },
    async dispose(): Promise<void> {
      await context.dispose();
      await model.dispose();
      await llama.dispose();
    },
  };
}

interface DirectSide {
  pid: number;
  contextSize: number;
  sequences: number;
  burst(prompts: string[], maxTokens: number): Promise<RequestSample[]>;
  stop(): Promise<void>;
}

async function startDirect(o: Omit<LoadMessage, 'type'>): Promise<DirectSide> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['--direct-child'], {
    detached: true,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // As the supervisor sets it for Shoal's runner child (the same fallback, so both sides agree).
    env: { ...process.env, UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? '1' },
  });
  liveGroups.add(child.pid!);
  const exited = new Promise<never>((_, reject) => child.once('exit', (code, signal) => reject(new Error(`the direct child exited with ${code ?? signal}`))));
  exited.catch(() => undefined);
  const next = (): Promise<FromChild> =>
    Promise.race([
      new Promise<FromChild>((resolve) => child.once('message', (m: FromChild) => resolve(m))),
      exited,
    ]).then((m) => {
      if (m.type === 'error') throw new Error(`the direct child failed: ${m.message}`);
      return m;
    });
  child.send({ type: 'load', ...o } satisfies ToChild);
  const ready = await next();
  if (ready.type !== 'ready') throw new Error(`the direct child answered ${ready.type} to load`);
  return {
    pid: child.pid!,
    contextSize: ready.contextSize,
    sequences: ready.sequences,
    async burst(prompts, maxTokens) {
      child.send({ type: 'burst', prompts, maxTokens } satisfies ToChild);
      const answer = await next();
      if (answer.type !== 'burst') throw new Error(`the direct child answered ${answer.type} to a burst`);
      return answer.samples;
    },
    async stop() {
      if (!liveGroups.delete(child.pid!)) return;
      child.send({ type: 'stop' } satisfies ToChild);
      const timer = setTimeout(() => child.kill('SIGKILL'), 8000);
      await exited.catch(() => undefined);
      clearTimeout(timer);
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// The comparison

/**
 * CPU time (user + system, all threads) a process has used, from /proc, in ms: the engine's own
 * work per token on either side, and the Shoal node's relaying on top. Null where /proc is missing.
 */
function processCpuMs(pid: number): number | null {
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th, in USER_HZ (100 per second).
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/** The pid of the runner child behind a node's default model (its /healthz says). */
async function runnerPid(server: Server): Promise<number | null> {
  const health = (await (await fetch(`${server.url}/healthz`)).json()) as { models?: { pid?: number | null }[] };
  const pid = health.models?.[0]?.pid;
  return typeof pid === 'number' ? pid : null;
}

async function tinyModel(dir: string): Promise<BenchModel> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, 'shoal-tiny.gguf');
  if (!existsSync(path)) await generateRandomModel(TINY_MODEL_SPEC, path);
  return { path, name: 'shoal-tiny', params: countParams(TINY_MODEL_SPEC), type: 'f32', bytes: statSync(path).size };
}

interface Burst {
  samples: RequestSample[];
  aggregateTokPerS: number;
  loadAverage1m: number;
}

function toBurst(samples: RequestSample[], load: number): Burst {
  const tokens = samples.reduce((sum, s) => sum + s.tokens, 0);
  return { samples, aggregateTokPerS: (tokens * 1000) / Math.max(...samples.map((s) => s.endMs)), loadAverage1m: load };
}

type SideName = 'shoal' | 'direct';

async function compare(model: BenchModel, o: { threads: number; clients: number; reps: number; maxTokens: number; contextPerSlot: number }) {
  let promptNo = 0;
  const prompts = (): string[] => Array.from({ length: o.clients }, () => benchPrompt(promptNo++));
  log(BENCHMARK, `${model.name}: a Shoal node (--engine llama_cpp) and a direct node-llama-cpp child, ${o.threads} thread(s), ${o.clients} sequences`);
  const shoal = await startShoal({ model, threads: o.threads, parallel: o.clients, contextPerSlot: o.contextPerSlot, engine: 'llama_cpp' });
  let direct: DirectSide | null = null;
  try {
    if (!shoal.engine.startsWith('node-llama-cpp')) throw new Error(`the Shoal node serves ${model.name} with ${shoal.engine}, not the in-process engine this benchmark measures`);
    direct = await startDirect({ modelPath: model.path, contextPerSlot: o.contextPerSlot, sequences: o.clients, threads: o.threads });
    const runner = await runnerPid(shoal);
    const d = direct;
    const sides: { name: SideName; burst: () => Promise<RequestSample[]>; pids: Record<string, number | null> }[] = [
      {
        name: 'shoal',
        burst: async () => {
          const started = performance.now();
          const list = await Promise.all(prompts().map((prompt) => streamChat(shoal, prompt, o.maxTokens)));
          return list.map((s) => ({ ttftMs: s.ttftMs, tokens: s.tokens, endMs: s.endedAt - started }));
        },
        pids: { node: shoal.pid, runner },
      },
      { name: 'direct', burst: () => d.burst(prompts(), o.maxTokens), pids: { child: d.pid } },
    ];
    // Unmeasured: one full burst each, so weights are paged in and every sequence has run once.
    for (const side of sides) await side.burst();

    const bursts: Record<SideName, Burst[]> = { shoal: [], direct: [] };
    const cpuMs: Record<SideName, Record<string, number>> = { shoal: {}, direct: {} };
    for (let rep = 0; rep < o.reps; rep++) {
      for (const side of alternation(sides, rep)) {
        const before = Object.fromEntries(Object.entries(side.pids).map(([k, pid]) => [k, pid === null ? null : processCpuMs(pid)]));
        const samples = await side.burst();
        for (const [k, pid] of Object.entries(side.pids)) {
          const after = pid === null ? null : processCpuMs(pid);
          const was = before[k];
          if (after !== null && typeof was === 'number') cpuMs[side.name][k] = (cpuMs[side.name][k] ?? 0) + after - was;
        }
        bursts[side.name].push(toBurst(samples, loadavg()[0]!));
      }
    }
    const figures = (name: SideName) => {
      const list = bursts[name];
      const all = list.flatMap((b) => b.samples);
      const tokens = all.reduce((sum, s) => sum + s.tokens, 0);
      return {
        aggregateTokPerS: summarize(list.map((b) => b.aggregateTokPerS)),
        ttftMs: percentiles(all.map((s) => s.ttftMs)),
        ttftP95PerBurstMs: summarize(list.map((b) => percentiles(b.samples.map((s) => s.ttftMs)).p95)),
        cpuMsPerToken: Object.fromEntries(Object.entries(cpuMs[name]).map(([k, ms]) => [k, Math.round((ms / tokens) * 1000) / 1000])),
        loadAverage1m: summarize(list.map((b) => b.loadAverage1m)),
        tokens: all.map((s) => s.tokens),
      };
    };
    const s = figures('shoal');
    const dd = figures('direct');
    log(BENCHMARK, `${model.name}: ${s.aggregateTokPerS.median} via Shoal vs ${dd.aggregateTokPerS.median} tok/s direct; TTFT p95 ${s.ttftMs.p95} vs ${dd.ttftMs.p95} ms`);
    return {
      model: { name: model.name, params: model.params, type: model.type, bytes: model.bytes },
      shoalEngine: shoal.engine,
      directContext: { contextSize: direct.contextSize, sequences: direct.sequences },
      shoalCommand: `shoal run --default-model ${model.path} --engine llama_cpp --threads ${o.threads} --parallel ${o.clients} --context-size ${o.contextPerSlot} --gpu false`,
      shoal: s,
      direct: dd,
      aggregateRatio: ratio(s.aggregateTokPerS.median, dd.aggregateTokPerS.median),
      ttftP50Ratio: ratio(s.ttftMs.p50, dd.ttftMs.p50),
      ttftP95Ratio: ratio(s.ttftMs.p95, dd.ttftMs.p95),
    };
  } finally {
    await direct?.stop();
    await shoal.stop();
  }
}

async function main(): Promise<void> {
  const quick = values.quick === true;
  // The node's own default (one thread per physical core) on both sides, --quick included: this is
  // the configuration a user of the in-process engine gets.
  const threads = intOption('threads', values.threads, physicalCoreCount());
  const clients = intOption('clients', values.clients, 16);
  const reps = intOption('reps', values.reps, quick ? 3 : 5);
  const maxTokens = intOption('tokens', values.tokens, quick ? 32 : 64);
  const contextPerSlot = 512;
  const names = (values.models ?? '20M,tiny').split(',').map((m) => m.trim());
  const loadAtStart = loadavg()[0]!;
  const results = [];
  for (const name of names) {
    const model = name === 'tiny' ? await tinyModel(values['model-dir']!) : await ensureBenchModel(name, values.type as TensorType, values['model-dir']);
    results.push(await compare(model, { threads, clients, reps, maxTokens, contextPerSlot }));
  }
  printResult({
    benchmark: BENCHMARK,
    quick,
    method:
      `bursts of ${clients} requests at once (temperature 0, ${maxTokens} tokens each, prompts new to both sides): streaming chat completions from a Shoal node ` +
      `on its in-process engine versus LlamaChat.generateResponse, one per sequence of one ${clients}-sequence context, in a child Node process loaded as Shoal's runner loads the model; ` +
      `sides alternate which goes first, ${reps} measured burst(s) each after one unmeasured; aggregate tok/s = tokens of the burst / (burst start → last token), median over bursts; ` +
      `TTFT from each request's start (the direct side's burst start) to its first token, percentiles over every request; ` +
      `cpuMsPerToken = CPU time of each process (/proc, 10 ms ticks) over the measured bursts / tokens; ratios are Shoal ÷ direct`,
    threads,
    clients,
    contextPerSlot,
    reps,
    maxTokens,
    uvThreadpoolSize: process.env.UV_THREADPOOL_SIZE ?? '1',
    targets: { aggregateRatio: '>= 0.9' },
    meetsTarget: typeof results[0]?.aggregateRatio === 'number' && results[0].aggregateRatio >= 0.9,
    results,
    loadAverage: { start: Math.round(loadAtStart * 100) / 100, end: Math.round(loadavg()[0]! * 100) / 100 },
    machine: machineInfo(),
    versions: await versions(),
  });
}

if (values['direct-child'] === true) await directChild();
else await main();
