import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { DownloadView } from '../src/node/models-service.js';
import { startTestNode, type TestNode } from '../test/support/node-process.js';
import { ensureBenchModel, intOption, log, machineInfo, printResult, versions, type TensorType } from './common.js';
import { alternation, ratio, summarize, type Summary } from './stats.js';

/**
 * Peer copy throughput: a generated GGUF (about 1 GB; 200 MB with --quick) that node A pulled from the
 * local hub (test/support/hub-server.ts, its own process, loopback) is pulled by node B of the same
 * two-node cluster (two real `shoal run` processes on loopback), which copies it from A over the data
 * plane (`/shoal/model-copy/1`: libp2p, Noise, yamux; SHA-256 as it is written, fsync, rename), against
 *
 *   - curl: a plain `curl -o` of the same file from the hub server (the baseline);
 *   - curlFsync: the same curl followed by an fsync of the file (`sync FILE`): a copy into the store
 *     is durable before it counts, so this separates the cost of durability from that of the copy;
 *
 * each repetition in rotated order. Between copies B removes its copy only (`DELETE /models/:id?local=1`),
 * so each copy starts from nothing; the time of a copy runs from B's POST /models/pull to the finish
 * time B records. Prints one JSON object.
 */

const BENCHMARK = 'peer-copy';
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
const REPO = 'bench/peer-GGUF';

interface Transfer {
  bytes: number;
  seconds: number;
}

interface Context {
  hubUrl: string;
  path: string;
  size: number;
  a: TestNode;
  b: TestNode;
  modelId: string;
  workDir: string;
}

async function api<T>(node: TestNode, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${node.url}${path}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: (text === '' ? null : JSON.parse(text)) as T };
}

async function finished(node: TestNode, id: string): Promise<DownloadView> {
  for (;;) {
    const { body } = await api<{ download: DownloadView }>(node, 'GET', `/models/downloads/${id}`);
    if (body.download.finishedAt !== null) return body.download;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function peerCopy(ctx: Context): Promise<Transfer> {
  const startedMs = Date.now();
  const started = await api<{ download: DownloadView }>(ctx.b, 'POST', '/models/pull', { id: ctx.modelId });
  if (started.status !== 202) throw new Error(`B's pull answered ${started.status}: ${JSON.stringify(started.body)}`);
  const done = await finished(ctx.b, started.body.download.id);
  if (done.state !== 'done') throw new Error(`B's pull ${done.state}: ${done.error?.message ?? ''}`);
  if (done.source?.kind !== 'peer') throw new Error(`B got the model from ${JSON.stringify(done.source)}, not from A`);
  const seconds = (Date.parse(done.finishedAt as string) - startedMs) / 1000;
  const bytes = (await stat(done.path as string)).size;
  if (bytes !== ctx.size) throw new Error(`B's copy has ${bytes} bytes, the hub serves ${ctx.size}`);
  const removed = await api(ctx.b, 'DELETE', `/models/${ctx.modelId}?local=1`);
  if (removed.status !== 200) throw new Error(`removing B's copy answered ${removed.status}: ${JSON.stringify(removed.body)}`);
  return { bytes, seconds };
}

async function curlInto(ctx: Context, fsync: boolean): Promise<Transfer> {
  const file = join(ctx.workDir, `curl-${Date.now()}.gguf`);
  const url = `${ctx.hubUrl}/${REPO}/resolve/main/${encodeURIComponent(ctx.path)}`;
  const started = performance.now();
  await runChecked('curl', ['--silent', '--show-error', '--fail', '--output', file, url]);
  if (fsync) await runChecked('sync', [file]);
  const seconds = (performance.now() - started) / 1000;
  const bytes = (await stat(file)).size;
  await rm(file, { force: true });
  return { bytes, seconds };
}

const BASELINE = 'curl';
const curl = (ctx: Context): Promise<Transfer> => curlInto(ctx, false);
const curlFsync = (ctx: Context): Promise<Transfer> => curlInto(ctx, true);
const MEASUREMENTS: Record<string, (ctx: Context) => Promise<Transfer>> = { curl, peerCopy, curlFsync };

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
  if (!(await runChecked('curl', ['--version']).then(() => true, () => false))) throw new Error('curl is not installed: it is the baseline this benchmark compares with (apt-get install curl)');
  const model = await ensureBenchModel(params, values.type as TensorType, values['model-dir']);
  const path = basename(model.path);
  log(BENCHMARK, `serving ${model.path} (${(model.bytes / 1e6).toFixed(0)} MB) from a local hub`);
  const hub = await startHub(model.path, path);
  const workRoot = await mkdtemp(join(values.dir!, 'shoal-peer-copy-'));
  const env = { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: '0', SHOAL_LOG_LEVEL: 'warn' };
  let a: TestNode | null = null;
  let b: TestNode | null = null;
  const samples: Record<string, Transfer[]> = Object.fromEntries(Object.keys(MEASUREMENTS).map((name) => [name, []]));
  try {
    [a, b] = await Promise.all([
      startTestNode({ args: ['--name', 'holder'], env, dataDir: join(workRoot, 'a') }),
      startTestNode({ args: ['--name', 'copier'], env, dataDir: join(workRoot, 'b') }),
    ]);
    const added = await api<{ card: { id: string }; download: DownloadView }>(a, 'POST', '/models/add', { repo: REPO, pull: true });
    if (added.status !== 201) throw new Error(`add on A answered ${added.status}: ${JSON.stringify(added.body)}`);
    const modelId = added.body.card.id;
    const pulled = await finished(a, added.body.download.id);
    if (pulled.state !== 'done') throw new Error(`A's pull ${pulled.state}: ${pulled.error?.message ?? ''}`);
    const code = (await api<{ code: string }>(a, 'POST', '/cluster/invite-code', {})).body?.code;
    await joinCluster(b, code);
    const aId = (await api<{ nodeId: string }>(a, 'GET', '/state')).body.nodeId;
    const deadline = Date.now() + 30_000;
    while (!((await api<{ artifacts: Record<string, { models: { modelId: string }[] }> }>(b, 'GET', '/state')).body.artifacts[aId]?.models.some((m) => m.modelId === modelId))) {
      if (Date.now() > deadline) throw new Error('B never heard that A holds the model');
      await new Promise((r) => setTimeout(r, 200));
    }
    const ctx: Context = { hubUrl: hub.url, path, size: hub.size, a, b, modelId, workDir: workRoot };
    // One unmeasured round: page cache warm on both sides, both clients' code warm.
    for (const name of Object.keys(MEASUREMENTS)) await MEASUREMENTS[name]!(ctx);
    for (let rep = 0; rep < reps; rep++) {
      for (const name of alternation(Object.keys(MEASUREMENTS), rep)) {
        const t = await MEASUREMENTS[name]!(ctx);
        samples[name]!.push(t);
        log(BENCHMARK, `rep ${rep + 1} ${name}: ${(t.bytes / t.seconds / 1e6).toFixed(0)} MB/s`);
      }
    }
  } finally {
    await Promise.all([a, b].map((n) => n?.stop()));
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
      `one file copied by node B from node A (two shoal processes on loopback, one cluster) through POST /models/pull, timed from the request to B's recorded finish; ` +
      `the baseline is curl of the same file from the local hub server (its own process); ${reps} repetitions after one unmeasured round, rotating the order; ` +
      'MB/s = file bytes / wall seconds (1 MB = 10^6 B)',
    file: { name: path, bytes: model.bytes, params: model.params, type: model.type },
    reps,
    baseline: BASELINE,
    measurements: Object.keys(MEASUREMENTS),
    throughput,
    ratios,
    targetRatio: `>= ${TARGET_RATIO}`,
    meetsTarget: ratios.peerCopy !== null && ratios.peerCopy !== undefined && ratios.peerCopy >= TARGET_RATIO,
    machine: machineInfo(),
    versions: await versions(),
  });
}

/** B joins A's cluster with A's join code (discovery is off on loopback). */
async function joinCluster(b: TestNode, code: string | undefined): Promise<void> {
  if (!code) throw new Error('A gave no join code');
  const joined = await api(b, 'POST', '/cluster/join', { code });
  if (joined.status !== 200) throw new Error(`B's join answered ${joined.status}: ${JSON.stringify(joined.body)}`);
}

await main();
