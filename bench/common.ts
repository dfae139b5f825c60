// What the inference benchmarks share: generated models, the engines, a hand-launched llama-server,
// a Shoal node, one streaming OpenAI client for both, and the machine and versions a result was
// measured on.

import '../src/polyfill.js';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { physicalCoreCount } from '../src/common/cpu.js';
import { bundledSource, findEngine, findEngineBuild, nodeLlamaCppDir } from '../src/doctor/engines.js';
import { countParams, generateRandomModel, modelSpecForParams } from '../src/models/generate/random-model.js';
import { freePort, startTestNode, type TestNode } from '../test/support/node-process.js';
import { parseLinkRate } from './link.js';
import { ratio, summarize, type Summary } from './stats.js';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function log(benchmark: string, message: string): void {
  process.stderr.write(`[${benchmark}] ${message}\n`);
}

/** "200M", "1.5B", "20k", "5000" as a count. */
export function parseCount(text: string): number {
  const match = /^(\d+(?:\.\d+)?)([kMB]?)$/.exec(text.trim());
  if (!match) throw new Error(`a parameter count looks like 200M, 1.5B or 20k, got "${text}"`);
  const scale = { '': 1, k: 1e3, M: 1e6, B: 1e9 }[match[2] as '' | 'k' | 'M' | 'B'];
  return Math.round(Number(match[1]) * scale);
}

/**
 * Engine threads for both sides of a comparison: one per physical core (Shoal's own default), or 1 in
 * --quick runs, which are for a small machine busy with other work, where threads that wait on each
 * other stall many times over whenever one is descheduled.
 */
export function defaultEngineThreads(quick: boolean): number {
  return quick ? 1 : physicalCoreCount();
}

/** A positive integer option, or the fallback when absent; a malformed one stops the benchmark. */
export function intOption(name: string, value: string | boolean | undefined, fallback: number): number {
  if (value === undefined || typeof value === 'boolean') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got "${value}"`);
  return n;
}

/** A comma-separated list of positive integers ("1,2,4,8,16"). */
export function intListOption(name: string, value: string | undefined, fallback: number[]): number[] {
  if (value === undefined) return fallback;
  const list = value.split(',').map((part) => Number(part.trim()));
  if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--${name} must list positive integers like 1,2,4, got "${value}"`);
  return list;
}

// ---------------------------------------------------------------------------------------------------
// Models and engines

export type TensorType = 'f32' | 'f16' | 'q8_0' | 'q4_0';

export interface BenchModel {
  path: string;
  name: string;
  params: number;
  type: TensorType;
  bytes: number;
}

/**
 * A generated random-weight model of about `params` parameters, cached as `<dir>/bench-<params>-<type>.gguf`
 * (generation is deterministic, so a cached file is the same model). Its end-of-sequence token is
 * suppressed, so every request decodes exactly the tokens asked for.
 */
export async function ensureBenchModel(params: string, type: TensorType, dir = 'bench/models'): Promise<BenchModel> {
  const spec = modelSpecForParams(parseCount(params), { tensorType: type, name: `bench-${params}-${type}` });
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${spec.name}.gguf`);
  if (!existsSync(path)) {
    process.stderr.write(`generating ${path} (${countParams(spec)} params)...\n`);
    await generateRandomModel(spec, path);
  }
  return { path, name: spec.name, params: countParams(spec), type, bytes: (await stat(path)).size };
}

/**
 * The provisioned llama-server for the pinned llama.cpp commit. A benchmark never builds it: a build
 * inside the run takes minutes and its load would skew every figure, so a missing engine fails at once
 * with the command that provisions it.
 */
export async function ensureLlamaServer(): Promise<string> {
  const found = await findEngine('llama-server');
  if (found) return found;
  throw new Error(
    `llama-server is not provisioned for llama.cpp ${bundledSource()?.commit.slice(0, 8) ?? '(source bundle missing)'}: run \`shoal doctor --fix\` first, or start a node with \`shoal run\` and wait until \`shoal status\` shows the engines ready`,
  );
}

// ---------------------------------------------------------------------------------------------------
// Processes: whatever is still alive when a benchmark exits, however it exits, is ended: hand-launched
// engines with their process group (SIGKILL), Shoal nodes with SIGTERM so they end their own engines.
// Every benchmark that starts processes registers them here.

export const liveGroups = new Set<number>();
export const liveNodes = new Set<TestNode>();
/** Scratch directories (transfer benchmarks write files of a gigabyte there), removed on any exit. */
export const liveDirs = new Set<string>();

process.once('exit', () => {
  for (const pid of liveGroups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const node of liveNodes) node.process.kill('SIGTERM');
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));

export interface Server {
  url: string;
  /** The model id to put in requests. */
  modelId: string;
  pid: number;
  /** What runs the model: `llama-server`, or for a Shoal node the engine its runner process is. */
  engine: string;
  stop(): Promise<void>;
}

export interface ServingOptions {
  model: BenchModel;
  threads: number;
  /** Requests served at once (llama-server slots, Shoal's --parallel). */
  parallel: number;
  /** Tokens of context each concurrent request gets. */
  contextPerSlot: number;
  /** What serves a Shoal node's default model (`--engine`); absent: the node's own choice, the default path. */
  engine?: 'llama_cpp' | 'llama_server';
}

/**
 * `llama-server` launched by hand, as a user who skips Shoal would: the model, `-t`/`-tb` threads,
 * `-np` slots with `-c` = slots × context per slot (each slot gets its share), CPU only.
 */
export async function startLlamaServer(binary: string, o: ServingOptions): Promise<Server> {
  const port = await freePort();
  const args = [
    '-m', o.model.path,
    '--host', '127.0.0.1',
    '--port', String(port),
    '-t', String(o.threads),
    '-tb', String(o.threads),
    '-np', String(o.parallel),
    '-c', String(o.contextPerSlot * o.parallel),
    '-ngl', '0',
    '--no-webui',
  ];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  liveGroups.add(child.pid!);
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-8000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (liveGroups.delete(child.pid!)) {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        // already gone
      }
      const timer = setTimeout(() => killGroupNow(child), 5000);
      await exited;
      clearTimeout(timer);
    }
  };
  try {
    await waitForOk(`${url}/health`, 120_000, exited);
  } catch (error) {
    await stop();
    throw new Error(`llama-server did not start (${binary} ${args.join(' ')}): ${(error as Error).message}\n${output}`, { cause: error });
  }
  return { url, modelId: o.model.name, pid: child.pid!, engine: 'llama-server', stop };
}

function killGroupNow(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function waitForOk(url: string, timeoutMs: number, exited: Promise<void>): Promise<void> {
  let dead = false;
  void exited.then(() => (dead = true));
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (dead) throw new Error('it exited');
    try {
      const res = await fetch(url);
      if (res.status === 200) return;
      last = `HTTP ${res.status}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await sleep(100);
  }
  throw new Error(`no 200 from ${url} within ${timeoutMs} ms (${last})`);
}

/** A real `shoal run` node (loopback, --no-mdns, no GPU) serving the model through its API. */
export async function startShoal(o: ServingOptions): Promise<Server> {
  const node = await startTestNode({
    args: ['--default-model', o.model.path, '--threads', String(o.threads), '--parallel', String(o.parallel), '--context-size', String(o.contextPerSlot), '--gpu', 'false', ...(o.engine ? ['--engine', o.engine] : [])],
    readyTimeoutMs: 180_000,
  });
  liveNodes.add(node);
  const models = (await (await fetch(`${node.url}/v1/models`)).json()) as { data: { id: string }[] };
  const modelId = models.data[0]?.id;
  if (!modelId) throw new Error(`the Shoal node lists no model: ${JSON.stringify(models)}`);
  return {
    url: node.url,
    modelId,
    pid: node.process.pid!,
    engine: await shoalEngine(node.url),
    stop: async () => {
      if (!liveNodes.delete(node)) return;
      const timer = setTimeout(() => node.process.kill('SIGKILL'), 8000);
      await node.stop('SIGTERM');
      clearTimeout(timer);
    },
  };
}

/**
 * The engine behind a node's default model, named from its runner process's command line (the node
 * may run node-llama-cpp in a child Node process or a managed llama-server): so a comparison says
 * which engine build it compared, whatever the node chose.
 */
async function shoalEngine(url: string): Promise<string> {
  try {
    const health = (await (await fetch(`${url}/healthz`)).json()) as { models?: { pid?: number | null }[] };
    const pid = health.models?.[0]?.pid;
    if (typeof pid !== 'number') return 'unknown';
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const program = argv[0]?.split('/').pop() ?? '';
    if (program.startsWith('llama-server')) return 'llama-server (managed by Shoal)';
    if (program === 'node' || program.startsWith('node')) return 'node-llama-cpp (prebuilt llama.cpp binaries)';
    return program || 'unknown';
  } catch {
    return 'unknown';
  }
}

// ---------------------------------------------------------------------------------------------------
// One streaming client for every OpenAI-compatible server

export interface StreamSample {
  /** Request sent → first content token received. */
  ttftMs: number;
  /** Tokens after the first, over the time after the first. */
  decodeTokPerS: number;
  tokens: number;
  /** Request sent → stream closed. */
  totalMs: number;
  /** performance.now() when the stream closed, to line up concurrent requests. */
  endedAt: number;
}

/**
 * A prompt no server has seen in this run (`n` differs per request), so no side serves it from a
 * prompt cache the other side lacks.
 */
export function benchPrompt(n: number): string {
  return `Request ${n}. Write a long story about a lighthouse keeper and the sea.`;
}

/** POSTs a streaming chat completion and times it; the token count is the server's usage figure. */
export async function streamChat(server: Server, prompt: string, maxTokens: number): Promise<StreamSample> {
  const start = performance.now();
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: server.modelId,
      messages: [{ role: 'user', content: prompt }],
      temperature: 0,
      max_tokens: maxTokens,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!res.ok || !res.body) throw new Error(`${server.url} answered ${res.status}: ${await res.text()}`);
  let first = 0;
  let chunks = 0;
  let usageTokens: number | null = null;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes as Uint8Array, { stream: true });
    let split = buffer.indexOf('\n\n');
    while (split >= 0) {
      const event = buffer.slice(0, split);
      buffer = buffer.slice(split + 2);
      split = buffer.indexOf('\n\n');
      const data = event.startsWith('data: ') ? event.slice(6) : null;
      if (data === null || data === '[DONE]') continue;
      const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string | null } }[]; usage?: { completion_tokens?: number } | null };
      if (chunk.choices?.[0]?.delta?.content) {
        if (first === 0) first = performance.now();
        chunks += 1;
      }
      if (typeof chunk.usage?.completion_tokens === 'number') usageTokens = chunk.usage.completion_tokens;
    }
  }
  const end = performance.now();
  if (first === 0) throw new Error(`${server.url} streamed no content`);
  const tokens = usageTokens ?? chunks;
  return { ttftMs: first - start, decodeTokPerS: tokens > 1 ? ((tokens - 1) * 1000) / (end - first) : NaN, tokens, totalMs: end - start, endedAt: end };
}

// ---------------------------------------------------------------------------------------------------
// Transfer benchmarks (model-transfer, peer-copy): options, the curl baseline, the local hub

export interface TransferOptions {
  quick: boolean;
  /** Parameters of the generated model; f16 is 2 bytes each: 500M ≈ 1 GB, 100M (--quick) ≈ 200 MB. */
  params: string;
  type: TensorType;
  reps: number;
  /** Where every measurement writes, so all of them write to one filesystem (absolute). */
  dir: string;
  /** Where generated models are cached (absolute). */
  modelDir: string;
  /** `--link <rate>`: the server and client sides in two network namespaces joined by a link shaped to this tc rate (bench/link.ts); null: loopback. */
  link: string | null;
  /**
   * Internal: set on the client side of a `--link` run, which the benchmark starts in the client's
   * namespace; JSON that says where the server side is. Null otherwise.
   */
  linkClient: string | null;
}

const TENSOR_TYPES: readonly TensorType[] = ['f32', 'f16', 'q8_0', 'q4_0'];

/** The options model-transfer and peer-copy share, from the command line. */
export function transferOptions(args: string[] = process.argv.slice(2)): TransferOptions {
  const { values } = parseArgs({
    args,
    options: {
      quick: { type: 'boolean', default: false },
      params: { type: 'string' },
      type: { type: 'string', default: 'f16' },
      reps: { type: 'string' },
      dir: { type: 'string', default: tmpdir() },
      'model-dir': { type: 'string', default: 'bench/models' },
      link: { type: 'string' },
      'link-client': { type: 'string' },
    },
  });
  const quick = values.quick === true;
  const type = values.type as TensorType;
  if (!TENSOR_TYPES.includes(type)) throw new Error(`--type must be one of ${TENSOR_TYPES.join(', ')}, got "${values.type}"`);
  if (values.link !== undefined && values['link-client'] !== undefined) throw new Error('--link and --link-client exclude each other (--link-client is internal)');
  return {
    quick,
    params: values.params ?? (quick ? '100M' : '500M'),
    type,
    reps: intOption('reps', values.reps, quick ? 3 : 5),
    dir: resolve(values.dir!),
    modelDir: resolve(values['model-dir']!),
    link: values.link === undefined ? null : parseLinkRate(values.link),
    linkClient: values['link-client'] ?? null,
  };
}

/** One timed transfer of a file. */
export interface Transfer {
  bytes: number;
  seconds: number;
}

/**
 * Prints a transfer benchmark's JSON: MB/s and seconds per measurement, each measurement's ratio to
 * `baseline`'s median MB/s, and whether `measured` meets `targetRatio`.
 */
export async function printTransferResult(r: {
  benchmark: string;
  options: TransferOptions;
  method: string;
  model: BenchModel;
  fileName: string;
  samples: Record<string, Transfer[]>;
  baseline: string;
  measured: string;
  targetRatio: number;
  link: unknown;
}): Promise<void> {
  const throughput: Record<string, { mbPerS: Summary; seconds: Summary }> = {};
  for (const [name, list] of Object.entries(r.samples)) {
    throughput[name] = { mbPerS: summarize(list.map((t) => t.bytes / t.seconds / 1e6)), seconds: summarize(list.map((t) => t.seconds)) };
  }
  const base = throughput[r.baseline]!.mbPerS.median;
  const names = Object.keys(r.samples);
  const ratios = Object.fromEntries(names.filter((name) => name !== r.baseline).map((name) => [name, ratio(throughput[name]!.mbPerS.median, base)]));
  const measured = ratios[r.measured];
  printResult({
    benchmark: r.benchmark,
    quick: r.options.quick,
    method: `${r.method}; ${r.options.reps} repetitions after one unmeasured round, rotating the order; MB/s = file bytes / wall seconds (1 MB = 10^6 B)`,
    file: { name: r.fileName, bytes: r.model.bytes, params: r.model.params, type: r.model.type },
    reps: r.options.reps,
    baseline: r.baseline,
    measurements: names,
    throughput,
    ratios,
    targetRatio: `>= ${r.targetRatio}`,
    meetsTarget: typeof measured === 'number' && measured >= r.targetRatio,
    link: r.link,
    machine: machineInfo(),
    versions: await versions(),
  });
}

/** The command line that gives `o` back to transferOptions() (for the client side of a --link run). */
export function transferArgs(o: TransferOptions): string[] {
  return [
    ...(o.quick ? ['--quick'] : []),
    '--params', o.params,
    '--type', o.type,
    '--reps', String(o.reps),
    '--dir', o.dir,
    '--model-dir', o.modelDir,
    ...(o.link === null ? [] : ['--link', o.link]),
    ...(o.linkClient === null ? [] : ['--link-client', o.linkClient]),
  ];
}

/** Runs a command to completion; rejects with its stderr when it does not exit 0. */
export function runChecked(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited with ${code ?? signal}: ${stderr.trim()}`))));
  });
}

/** Stops the benchmark when curl, the baseline of every transfer figure, is missing. */
export async function requireCurl(): Promise<void> {
  const works = await runChecked('curl', ['--version']).then(
    () => true,
    () => false,
  );
  if (!works) throw new Error('curl is not installed: it is the baseline this benchmark compares with (apt-get install curl)');
}

export interface HubProcess {
  /** As the hub says: http://127.0.0.1:<port> in the namespace it runs in. */
  url: string;
  port: number;
  size: number;
  child: ChildProcess;
  /** Closes its stdin, which ends it (it also ends when this process dies). */
  stop(): void;
}

/** How a process is started: in this namespace by default, or in a link's (bench/link.ts). */
export type Launch = (command: string, args: string[], stdio: ['pipe', 'pipe', 'inherit']) => ChildProcess;

/**
 * The local hub (bench/hub-serve.ts over test/support/hub-server.ts) serving `file` as `path` in
 * `repo`, in a process of its own so it shares no event loop with the clients measured.
 */
export async function startHub(file: string, repo: string, path: string, launch: Launch = (command, args, stdio) => spawn(command, args, { stdio })): Promise<HubProcess> {
  const script = fileURLToPath(new URL('./hub-serve.js', import.meta.url));
  const child = launch(process.execPath, [script, '--file', resolve(file), '--repo', repo, '--path', path], ['pipe', 'pipe', 'inherit']);
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`the hub server exited with ${code} before listening`))));
  // It also exits when stopped, long after listening: that rejection is nobody's error.
  exited.catch(() => undefined);
  const line = await Promise.race([new Promise<string>((resolveLine) => createInterface({ input: child.stdout! }).once('line', resolveLine)), exited]);
  const info = JSON.parse(line) as { url: string; size: number };
  return { url: info.url, port: Number(new URL(info.url).port), size: info.size, child, stop: () => void child.stdin!.end() };
}

// ---------------------------------------------------------------------------------------------------
// Machine and versions

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryBytes: number;
  gpu: string | null;
  /** 1-minute load average when asked: other work on the machine makes figures noisy. */
  loadAverage1m: number;
}

export function machineInfo(): MachineInfo {
  return { cpuModel: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memoryBytes: totalmem(), gpu: gpuName(), loadAverage1m: Math.round(loadavg()[0]! * 100) / 100 };
}

/** The first NVIDIA GPU's name, when nvidia-smi is there to say; else null. */
function gpuName(): string | null {
  const out = spawnSync('nvidia-smi', ['--query-gpu=name', '--format=csv,noheader'], { encoding: 'utf8', timeout: 5000 });
  const first = out.status === 0 ? out.stdout.split('\n')[0]?.trim() : '';
  return first ? first : null;
}

export interface Versions {
  shoal: string;
  node: string;
  nodeLlamaCpp: string;
  /** The llama.cpp commit node-llama-cpp bundles, which the hand-launched engines are built from. */
  llamaCppCommit: string | null;
  /** The commit of the engine build in the cache, when there is one (it should equal llamaCppCommit). */
  enginesBuildCommit: string | null;
}

export async function versions(): Promise<Versions> {
  return {
    shoal: packageVersion(fileURLToPath(new URL('../../package.json', import.meta.url))) ?? 'unknown',
    node: process.version,
    nodeLlamaCpp: nodeLlamaCppVersion() ?? 'unknown',
    llamaCppCommit: bundledSource()?.commit ?? null,
    enginesBuildCommit: (await findEngineBuild())?.manifest.commit ?? null,
  };
}

function packageVersion(path: string): string | null {
  try {
    const version = (JSON.parse(readFileSync(path, 'utf8')) as { version?: unknown }).version;
    return typeof version === 'string' ? version : null;
  } catch {
    return null;
  }
}

function nodeLlamaCppVersion(): string | null {
  try {
    return packageVersion(join(nodeLlamaCppDir(), 'package.json'));
  } catch {
    return null;
  }
}

/** Prints a benchmark's result as the one JSON object on stdout. */
export function printResult(result: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}
