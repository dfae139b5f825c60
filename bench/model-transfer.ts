import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ModelStore } from '../src/models/store/store.js';
import { ensureBenchModel, intOption, log, machineInfo, printResult, versions, type TensorType } from './common.js';
import { alternation, ratio, summarize, type Summary } from './stats.js';

/**
 * Model transfer throughput: a generated GGUF (about 1 GB; 200 MB with --quick) served by the local hub
 * (test/support/hub-server.ts, in its own process over loopback), fetched
 *
 *   - hubDownload: through Shoal's real download path, ModelStore.pull (what `shoal models pull` and
 *     POST /models/pull run): repo and file listing, the Range probe, the streamed body hashed with
 *     SHA-256 as it is written, fsync, verification and rename into the store;
 *   - curl: a plain `curl -o` of the same resolve URL from the same server (the baseline);
 *   - curlFsync: the same curl followed by an fsync of the file (`sync FILE`), to separate the cost of
 *     durability from that of Shoal's code;
 *
 * each repetition in rotated order, into fresh directories on one filesystem. Each measurement is one
 * function of the context; the report compares every one with the curl baseline. Prints one JSON object.
 */

const BENCHMARK = 'model-transfer';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    params: { type: 'string' },
    type: { type: 'string', default: 'f16' },
    reps: { type: 'string' },
    dir: { type: 'string', default: tmpdir() },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});

const quick = values.quick === true;
// f16 weights are 2 bytes per parameter: 500M → ~1 GB, 100M → ~200 MB.
const params = values.params ?? (quick ? '100M' : '500M');
const reps = intOption('reps', values.reps, quick ? 3 : 5);
const TARGET_RATIO = 0.9;
const REPO = 'bench/transfer-GGUF';

interface TransferContext {
  /** The hub's base URL. */
  hubUrl: string;
  repo: string;
  /** The file's name in the repo. */
  path: string;
  size: number;
  /** A fresh directory for this one transfer, removed afterwards. */
  workDir: string;
}

interface Transfer {
  bytes: number;
  seconds: number;
}

type Measurement = (ctx: TransferContext) => Promise<Transfer>;

async function hubDownload(ctx: TransferContext): Promise<Transfer> {
  // reserveBytes 0: disk admission is not what is measured, and must not refuse on a small CI disk.
  const store = await ModelStore.open({ dataDir: ctx.workDir, hub: { endpoint: ctx.hubUrl }, reserveBytes: 0 });
  const started = performance.now();
  const model = await store.pull({ repo: ctx.repo });
  const seconds = (performance.now() - started) / 1000;
  const bytes = (await stat(model.path)).size;
  if (bytes !== ctx.size) throw new Error(`ModelStore.pull wrote ${bytes} bytes, the hub serves ${ctx.size}`);
  return { bytes, seconds };
}

function curlInto(ctx: TransferContext, file: string): Promise<void> {
  const url = `${ctx.hubUrl}/${ctx.repo}/resolve/main/${encodeURIComponent(ctx.path)}`;
  return runChecked('curl', ['--silent', '--show-error', '--fail', '--output', file, url]);
}

async function curl(ctx: TransferContext): Promise<Transfer> {
  const file = join(ctx.workDir, ctx.path);
  const started = performance.now();
  await curlInto(ctx, file);
  const seconds = (performance.now() - started) / 1000;
  return { bytes: (await stat(file)).size, seconds };
}

async function curlFsync(ctx: TransferContext): Promise<Transfer> {
  const file = join(ctx.workDir, ctx.path);
  const started = performance.now();
  await curlInto(ctx, file);
  await runChecked('sync', [file]);
  const seconds = (performance.now() - started) / 1000;
  return { bytes: (await stat(file)).size, seconds };
}

/** The baseline first; every other measurement is reported as a ratio to it. */
const BASELINE = 'curl';
const MEASUREMENTS: Record<string, Measurement> = { curl, hubDownload, curlFsync };

function runChecked(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited with ${code ?? signal}: ${stderr.trim()}`))));
  });
}

async function startHub(file: string, path: string): Promise<{ child: ChildProcess; url: string; size: number }> {
  const script = fileURLToPath(new URL('./hub-serve.js', import.meta.url));
  const child = spawn(process.execPath, [script, '--file', file, '--repo', REPO, '--path', path], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`the hub server exited with ${code} before listening`))));
  const line = await Promise.race([new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve)), exited]);
  const info = JSON.parse(line) as { url: string; size: number };
  return { child, url: info.url, size: info.size };
}

async function main(): Promise<void> {
  if (!(await commandWorks('curl', ['--version']))) throw new Error('curl is not installed: it is the baseline this benchmark compares with (apt-get install curl)');
  const model = await ensureBenchModel(params, values.type as TensorType, values['model-dir']);
  const path = basename(model.path);
  log(BENCHMARK, `serving ${model.path} (${(model.bytes / 1e6).toFixed(0)} MB) from a local hub`);
  const hub = await startHub(model.path, path);
  const workRoot = await mkdtemp(join(values.dir!, 'shoal-transfer-'));
  const samples: Record<string, Transfer[]> = Object.fromEntries(Object.keys(MEASUREMENTS).map((name) => [name, []]));
  try {
    const run = async (name: string): Promise<Transfer> => {
      const workDir = await mkdtemp(join(workRoot, `${name}-`));
      try {
        return await MEASUREMENTS[name]!({ hubUrl: hub.url, repo: REPO, path, size: hub.size, workDir });
      } finally {
        await rm(workDir, { recursive: true, force: true });
      }
    };
    // One unmeasured round: the served file into the page cache, both clients' code warm.
    for (const name of Object.keys(MEASUREMENTS)) await run(name);
    for (let rep = 0; rep < reps; rep++) {
      for (const name of alternation(Object.keys(MEASUREMENTS), rep)) {
        const t = await run(name);
        samples[name]!.push(t);
        log(BENCHMARK, `rep ${rep + 1} ${name}: ${(t.bytes / t.seconds / 1e6).toFixed(0)} MB/s`);
      }
    }
  } finally {
    hub.child.stdin!.end();
    await rm(workRoot, { recursive: true, force: true });
  }

  const throughput: Record<string, { mbPerS: Summary; seconds: Summary }> = {};
  for (const [name, list] of Object.entries(samples)) {
    throughput[name] = { mbPerS: summarize(list.map((t) => t.bytes / t.seconds / 1e6)), seconds: summarize(list.map((t) => t.seconds)) };
  }
  const base = throughput[BASELINE]!.mbPerS.median;
  const ratios = Object.fromEntries(Object.keys(MEASUREMENTS).filter((name) => name !== BASELINE).map((name) => [name, ratio(throughput[name]!.mbPerS.median, base)]));
  printResult({
    benchmark: BENCHMARK,
    quick,
    method:
      `one file from the local hub server (its own process, loopback); every measurement into a fresh directory under ${values.dir}, ` +
      `${reps} repetitions after one unmeasured round, rotating the order; MB/s = file bytes / wall seconds (1 MB = 10^6 B)`,
    file: { name: path, bytes: model.bytes, params: model.params, type: model.type },
    reps,
    baseline: BASELINE,
    measurements: Object.keys(MEASUREMENTS),
    throughput,
    ratios,
    targetRatio: `>= ${TARGET_RATIO}`,
    meetsTarget: ratios.hubDownload !== null && ratios.hubDownload !== undefined && ratios.hubDownload >= TARGET_RATIO,
    machine: machineInfo(),
    versions: await versions(),
  });
}

function commandWorks(command: string, args: string[]): Promise<boolean> {
  return runChecked(command, args).then(
    () => true,
    () => false,
  );
}

await main();
