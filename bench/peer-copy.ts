import { mkdtemp, rm, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { DownloadView } from '../src/models/views.js';
import { eventually } from '../test/support/cli.js';
import { lanCli, lanStatus, startLanNode, type LanNode } from '../test/support/lan-node.js';
import { killGroup, waitForExit } from '../test/support/netns.js';
import { startTestNode, waitForHealthy, type TestNode } from '../test/support/node-process.js';
import { ensureBenchModel, liveDirs, log, printTransferResult, requireCurl, runChecked, startHub, transferArgs, transferOptions, type Transfer } from './common.js';
import { createLink, linkRateBytesPerS, type Link } from './link.js';
import { alternation } from './stats.js';

/**
 * Peer copy throughput: a generated GGUF (about 1 GB; 200 MB with --quick) that node A pulled from the
 * local hub (test/support/hub-server.ts, its own process) is pulled by node B of the same two-node
 * cluster (two real `shoal run` processes), which copies it from A over the data plane
 * (`/shoal/model-copy/1`: libp2p, Noise, yamux; SHA-256 as it is written, fsync, rename), against
 *
 *   - curl: a plain `curl -o` of the same file from the hub server (the baseline);
 *   - curlFsync: the same curl followed by an fsync of the file (`sync FILE`): a copy into the store
 *     is durable before it counts, so this separates the cost of durability from that of the copy;
 *
 * each repetition in rotated order. Between copies B removes its copy only (`DELETE /models/:id?local=1`),
 * so each copy starts from nothing; the time of a copy runs from B's POST /models/pull to the finish
 * time B records. Prints one JSON object.
 *
 * Over loopback (the default) every process shares the CPU and the copy is bound by it. With
 * `--link <rate>` (e.g. 1gbit) the hub and node A run in one network namespace, node B and curl in
 * another, across a link shaped to that rate (bench/link.ts), the nodes without mDNS (B joins with A's
 * invite code): a copy between two machines of a LAN. This program runs again in B's namespace as the
 * client side, measures exactly as on loopback, and its result carries `link`.
 */

const BENCHMARK = 'peer-copy';
const options = transferOptions();
const TARGET_RATIO = 0.9;
const REPO = 'bench/peer-GGUF';

/** What the --link side that started this process (in B's namespace) tells it. */
const LinkClient = z.strictObject({
  hubUrl: z.string().url(),
  size: z.number().int().nonnegative(),
  /** B's API, in this namespace. */
  bUrl: z.string().url(),
  aNodeId: z.string().min(1),
  modelId: z.string().min(1),
  /** A's invite code, for B to join with. */
  code: z.string().min(1),
  link: z.strictObject({ rate: z.string(), qdisc: z.string() }),
});
type LinkClient = z.infer<typeof LinkClient>;


interface Context {
  hubUrl: string;
  path: string;
  size: number;
  /** B's API. */
  bUrl: string;
  modelId: string;
  workDir: string;
}

async function api<T>(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${url}${path}`, { method, headers: { 'x-shoal-client': 'bench', ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: (text === '' ? null : JSON.parse(text)) as T };
}

async function finished(url: string, id: string): Promise<DownloadView> {
  for (;;) {
    const { body } = await api<{ download: DownloadView }>(url, 'GET', `/models/downloads/${id}`);
    if (body.download.finishedAt !== null) return body.download;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function peerCopy(ctx: Context): Promise<Transfer> {
  const startedMs = Date.now();
  const started = await api<{ download: DownloadView }>(ctx.bUrl, 'POST', '/models/pull', { id: ctx.modelId });
  if (started.status !== 202) throw new Error(`B's pull answered ${started.status}: ${JSON.stringify(started.body)}`);
  const done = await finished(ctx.bUrl, started.body.download.id);
  if (done.state !== 'done') throw new Error(`B's pull ${done.state}: ${done.error?.message ?? ''}`);
  if (done.source?.kind !== 'peer') throw new Error(`B got the model from ${JSON.stringify(done.source)}, not from A`);
  const seconds = (Date.parse(done.finishedAt as string) - startedMs) / 1000;
  const bytes = (await stat(done.path as string)).size;
  if (bytes !== ctx.size) throw new Error(`B's copy has ${bytes} bytes, the hub serves ${ctx.size}`);
  const removed = await api(ctx.bUrl, 'DELETE', `/models/${ctx.modelId}?local=1`);
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

/** B joins A's cluster with A's join code (discovery is off), then waits to hear that A holds the model. */
async function joinAndSee(bUrl: string, code: string | undefined, aId: string, modelId: string): Promise<void> {
  if (!code) throw new Error('A gave no join code');
  const joined = await api(bUrl, 'POST', '/cluster/join', { code });
  if (joined.status !== 200) throw new Error(`B's join answered ${joined.status}: ${JSON.stringify(joined.body)}`);
  const deadline = Date.now() + 30_000;
  while (!(await api<{ artifacts: Record<string, { models: { modelId: string }[] }> }>(bUrl, 'GET', '/state')).body.artifacts[aId]?.models.some((m) => m.modelId === modelId)) {
    if (Date.now() > deadline) throw new Error('B never heard that A holds the model');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Loopback (A and B started here), or the client side of a --link run (A across the link, B in this namespace). */
async function main(client: LinkClient | null): Promise<void> {
  await requireCurl();
  const model = await ensureBenchModel(options.params, options.type, options.modelDir);
  const path = basename(model.path);
  const workRoot = await mkdtemp(join(options.dir, 'shoal-peer-copy-'));
  liveDirs.add(workRoot);
  let stopHub = (): void => undefined;
  let a: TestNode | null = null;
  let b: TestNode | null = null;
  const samples: Record<string, Transfer[]> = Object.fromEntries(Object.keys(MEASUREMENTS).map((name) => [name, []]));
  try {
    let ctx: Context;
    if (client) {
      log(BENCHMARK, `B copies ${path} (${(client.size / 1e6).toFixed(0)} MB) from A across a ${client.link.rate} link`);
      await waitForHealthy(client.bUrl, 60_000);
      await joinAndSee(client.bUrl, client.code, client.aNodeId, client.modelId);
      ctx = { hubUrl: client.hubUrl, path, size: client.size, bUrl: client.bUrl, modelId: client.modelId, workDir: workRoot };
    } else {
      log(BENCHMARK, `serving ${model.path} (${(model.bytes / 1e6).toFixed(0)} MB) from a local hub`);
      const hub = await startHub(model.path, REPO, path);
      stopHub = hub.stop;
      const env = { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: '0', SHOAL_LOG_LEVEL: 'warn' };
      [a, b] = await Promise.all([
        startTestNode({ args: ['--name', 'holder'], env, dataDir: join(workRoot, 'a') }),
        startTestNode({ args: ['--name', 'copier'], env, dataDir: join(workRoot, 'b') }),
      ]);
      const added = await api<{ card: { id: string }; download: DownloadView }>(a.url, 'POST', '/models/add', { repo: REPO, pull: true });
      if (added.status !== 201) throw new Error(`add on A answered ${added.status}: ${JSON.stringify(added.body)}`);
      const modelId = added.body.card.id;
      const pulled = await finished(a.url, added.body.download.id);
      if (pulled.state !== 'done') throw new Error(`A's pull ${pulled.state}: ${pulled.error?.message ?? ''}`);
      const code = (await api<{ code: string }>(a.url, 'POST', '/cluster/invite-code', {})).body?.code;
      const aId = (await api<{ nodeId: string }>(a.url, 'GET', '/state')).body.nodeId;
      await joinAndSee(b.url, code, aId, modelId);
      ctx = { hubUrl: hub.url, path, size: hub.size, bUrl: b.url, modelId, workDir: workRoot };
    }
    // One unmeasured round: page cache warm on both sides, both clients' code warm.
    for (const name of Object.keys(MEASUREMENTS)) await MEASUREMENTS[name]!(ctx);
    for (let rep = 0; rep < options.reps; rep++) {
      for (const name of alternation(Object.keys(MEASUREMENTS), rep)) {
        const t = await MEASUREMENTS[name]!(ctx);
        samples[name]!.push(t);
        log(BENCHMARK, `rep ${rep + 1} ${name}: ${(t.bytes / t.seconds / 1e6).toFixed(0)} MB/s`);
      }
    }
  } finally {
    await Promise.all([a, b].map((n) => n?.stop()));
    stopHub();
    await rm(workRoot, { recursive: true, force: true });
    liveDirs.delete(workRoot);
  }

  const where = client
    ? `one file copied by node B from node A (two shoal processes in two network namespaces, one cluster joined by invite code, no mDNS, across a link shaped by tc ${client.link.qdisc} on both ends) through POST /models/pull, timed from the request to B's recorded finish; ` +
      "the baseline is curl, in B's namespace, of the same file from the local hub server (its own process, in A's namespace)"
    : "one file copied by node B from node A (two shoal processes on loopback, one cluster) through POST /models/pull, timed from the request to B's recorded finish; " +
      'the baseline is curl of the same file from the local hub server (its own process)';
  await printTransferResult({
    benchmark: BENCHMARK,
    options,
    method: where,
    model,
    fileName: path,
    samples,
    baseline: BASELINE,
    measured: 'peerCopy',
    targetRatio: TARGET_RATIO,
    link: client?.link ?? null,
  });
}

/** Ends a node in a namespace: SIGTERM to its group (it ends its engines), SIGKILL when it lingers. */
async function stopLanNode(node: LanNode): Promise<void> {
  if (!node.process) return;
  killGroup(node.process, 'SIGTERM');
  await waitForExit(node.process, 8_000).catch(() => killGroup(node.process!, 'SIGKILL'));
}

function nodeOutput(node: LanNode): string {
  return `--- ${node.host.name} (${node.host.ns}) ---\n${node.output?.all.toString().slice(-3000) ?? ''}`;
}

/**
 * --link: the hub and A in the server's namespace, B in the client's; A pulls the model from the hub
 * and gives an invite code (through the CLI in its namespace, as a user would: A's API answers other
 * machines only with its admin token); then this program again, in B's namespace, joins B and
 * measures, and its result is passed through here. Namespaces and data removed afterwards.
 */
async function overLink(rate: string): Promise<void> {
  await requireCurl();
  // Generated here, before any namespace exists: the client side finds it cached.
  const model = await ensureBenchModel(options.params, options.type, options.modelDir);
  const path = basename(model.path);
  log(BENCHMARK, `node A and a local hub serving ${model.path} (${(model.bytes / 1e6).toFixed(0)} MB) across a ${rate} link from node B (network namespaces)`);
  const workRoot = await mkdtemp(join(options.dir, 'shoal-peer-copy-link-'));
  liveDirs.add(workRoot);
  let link: Link | null = null;
  const nodes: LanNode[] = [];
  let stopHub = (): void => undefined;
  try {
    link = await createLink(rate);
    const hub = await startHub(model.path, REPO, path, (command, args, stdio) => link!.spawn(link!.server, command, args, stdio));
    stopHub = hub.stop;
    const hubLanUrl = await link.exposeServerLoopback(hub.port);
    const common = { SHOAL_DISK_RESERVE_BYTES: '0', SHOAL_LOG_LEVEL: 'warn' };
    // A reaches the hub on its own loopback; B across the link, as curl does (B copies from A all the same).
    const a: LanNode = { host: link.server, dataDir: join(workRoot, 'a'), args: ['--no-mdns'], env: { ...common, SHOAL_HF_ENDPOINT: hub.url }, process: null, output: null };
    const b: LanNode = { host: link.client, dataDir: join(workRoot, 'b'), args: ['--no-mdns'], env: { ...common, SHOAL_HF_ENDPOINT: hubLanUrl }, process: null, output: null };
    nodes.push(a, b);
    for (const node of nodes) startLanNode(link.lan, node);
    const l = link;
    const lan = l.lan;
    try {
      await eventually('A to answer', 90_000, async () => ((await lanCli(lan, a, 'status', '--json')).code === 0 ? true : undefined));
      const added = await lanCli(lan, a, 'models', 'add', REPO, '--pull', '--json');
      if (added.code !== 0) throw new Error(`A's models add --pull failed (${added.code}): ${added.stderr}`);
      const pulled = JSON.parse(added.stdout) as DownloadView;
      if (pulled.state !== 'done') throw new Error(`A's pull ${pulled.state}: ${pulled.error?.message ?? ''}`);
      const aNodeId = (await lanStatus(lan, a)).nodeId;
      const code = /shoal1-\S+/.exec((await lanCli(lan, a, 'invite', '--code')).stdout)?.[0];
      if (!code) throw new Error('A gave no invite code');
      const client: LinkClient = { hubUrl: hubLanUrl, size: hub.size, bUrl: 'http://127.0.0.1:52600', aNodeId, modelId: pulled.modelId, code, link: l.summary };
      // Every transfer at most 4× its time at line rate, plus start-up and joining.
      const timeoutMs = 180_000 + ((options.reps + 1) * Object.keys(MEASUREMENTS).length * 4 * hub.size * 1000) / linkRateBytesPerS(rate);
      const result = await l.runClient(fileURLToPath(import.meta.url), transferArgs({ ...options, dir: workRoot, link: null, linkClient: JSON.stringify(client) }), timeoutMs);
      process.stdout.write(result);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${nodes.map(nodeOutput).join('\n')}`, { cause: error });
    }
  } finally {
    await Promise.all(nodes.map(stopLanNode));
    stopHub();
    await link?.destroy();
    await rm(workRoot, { recursive: true, force: true });
    liveDirs.delete(workRoot);
  }
}

if (options.link !== null) await overLink(options.link);
else await main(options.linkClient === null ? null : LinkClient.parse(JSON.parse(options.linkClient)));
