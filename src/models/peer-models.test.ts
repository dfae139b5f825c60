import '../polyfill.js';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, open as openFile, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { pino } from 'pino';
import { ggufFixture, HubServer } from '../../test/support/hub-server.js';
import { MAX_TELEMETRY_MESSAGE_BYTES, TelemetryMessage, telemetryTopic } from '../master/core/messages.js';
import type { ArtifactsMessage } from '../wire/telemetry.js';
import type { ClusterId, NodeId } from '../common/ids.js';
import type { ClusterState } from '../master/state/state.js';
import { defaultSettings } from '../master/state/settings.js';
import { createRouter, offerDirect, type FrameChannel, type Router } from '../router/index.js';
import { CopyFrame, CopyRequest, MODEL_COPY_MAX_MESSAGE_BYTES, MODEL_COPY_PROTOCOL, type PeerModelRecord } from './model-copy.js';
import { ClusterRemoveError } from './cluster-remove-error.js';
import { ModelsService } from './service/service.js';
import type { DownloadView } from './views.js';
import { PeerModels, type PeerModelsPlane } from './peer-models.js';

// Two nodes in one process over real libp2p routers on loopback: the artifacts report on a real
// gossipsub topic, copies over /shoal/model-copy/1, removal over /shoal/model-delete/1, both stores
// real and fed by the local hub. Node processes and the CLI are covered by test/integration/model-copy.test.ts.

const REPO = 'acme/Copy-GGUF';
const Q4 = 'Copy-Q4_K_M.gguf';
const Q8 = 'Copy-Q8_0.gguf';
const F16 = 'Copy-F16.gguf';
const Q4_ID = `${REPO}:Q4_K_M`;
const Q8_ID = `${REPO}:Q8_0`;
const F16_ID = `${REPO}:F16`;
const CLUSTER = 'c0ffee'.padEnd(32, '0') as ClusterId;
const log = pino({ level: process.env.SHOAL_LOG_LEVEL ?? 'silent' });

interface TestNode {
  router: Router;
  models: ModelsService;
  peers: PeerModels;
  inUse: Set<string>;
  roster: Set<string>;
  dataDir: string;
}

const sha256 = async (path: string): Promise<string> => createHash('sha256').update(await readFile(path)).digest('hex');

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function finished(node: TestNode, id: string): Promise<DownloadView> {
  return until(`download ${id}`, () => {
    const d = node.models.getDownload(id);
    return d.finishedAt !== null ? d : undefined;
  });
}

type Linkable = Pick<TestNode, 'router' | 'roster'>;

/** Nodes of one test cluster: real routers on loopback, real stores fed by `hub`, the shared `state`. */
function cluster(ctx: { dir: () => string; hub: () => HubServer; state: ClusterState }): { node: (name: string, options?: { direct?: boolean }) => Promise<TestNode>; plane: (n: TestNode) => PeerModelsPlane; link: (x: Linkable, y: Linkable) => Promise<void> } {
  const { state } = ctx;
  async function node(name: string, options: { direct?: boolean } = {}): Promise<TestNode> {
    const dataDir = join(ctx.dir(), name);
    const roster = new Set<string>();
    const router = await createRouter({ privateKey: await generateKeyPair('Ed25519'), name, isMember: (id) => roster.has(id), host: '127.0.0.1', p2pPort: 0, mdns: false, log });
    const peers = new PeerModels({ log, ...options });
    const inUse = new Set<string>();
    const models = await ModelsService.open({ dataDir, log, endpoint: ctx.hub().url, reserveBytes: 0, inUse: () => inUse, peers });
    state.members[router.nodeId as NodeId] = { nodeId: router.nodeId, name, nickname: null, status: 'active' } as ClusterState['members'][NodeId];
    return { router, models, peers, inUse, roster, dataDir };
  }

  /** The control plane's part peer-models uses: the real telemetry topic, the state above. */
  function plane(n: TestNode): PeerModelsPlane {
    const topic = n.router.registerTopic({ name: telemetryTopic(CLUSTER), schema: TelemetryMessage, plane: 'telemetry', maxBytes: MAX_TELEMETRY_MESSAGE_BYTES });
    const listeners = new Set<(m: ArtifactsMessage, from: NodeId) => void>();
    topic.subscribe((message, meta) => {
      if (message.type === 'artifacts' && message.nodeId === meta.from) for (const l of listeners) l(message, meta.from as NodeId);
    });
    return {
      nodeId: n.router.nodeId as NodeId,
      net: n.router,
      view: () => ({ state }),
      publishTelemetry: (message) => void topic.publish(message, { key: message.type }),
      onArtifacts: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
  }

  const addrsOf = new Map<string, string[]>();
  /** Members of each other (with every member each already had), connected. */
  async function link(x: Linkable, y: Linkable): Promise<void> {
    for (const [self, other] of [[x, y], [y, x]] as const) {
      addrsOf.set(other.router.nodeId, other.router.addrs());
      self.roster.add(other.router.nodeId);
      self.router.updateRoster([...self.roster].map((id) => ({ nodeId: id, addrs: addrsOf.get(id) ?? [] })));
    }
    await x.router.dial(`${y.router.addrs()[0]}/p2p/${y.router.nodeId}`);
  }

  return { node, plane, link };
}

describe('copying models between two members', { timeout: 120_000 }, () => {
  let dir: string;
  let hub: HubServer;
  let a: TestNode;
  let b: TestNode;
  const state: ClusterState = { clusterId: CLUSTER, members: {}, dissolved: false, instances: {}, settings: defaultSettings() };
  const { node, plane, link } = cluster({ dir: () => dir, hub: () => hub, state });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-peer-models-'));
    const q4 = await ggufFixture(join(dir, 'q4.gguf'), { seed: 21, vocabSize: 3072 });
    const q8 = await ggufFixture(join(dir, 'q8.gguf'), { seed: 22 });
    hub = await HubServer.start([{ repo: REPO, files: [{ path: Q4, filePath: q4 }, { path: Q8, filePath: q8 }] }]);
    a = await node('alpha');
    b = await node('beta');
    await link(a, b);
    await a.peers.start({ plane: plane(a), models: a.models, name: 'alpha' });
    await b.peers.start({ plane: plane(b), models: b.models, name: 'beta' });
  });

  after(async () => {
    for (const n of [a, b]) {
      await n?.peers.stop();
      await n?.models.close();
      await n?.router.stop();
    }
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('a model one member holds is copied by the other over the data plane, verified, without touching the hub', async () => {
    await a.models.add({ repo: REPO, quant: 'Q4_K_M', pull: true });
    const pulledA = await finished(a, a.models.listDownloads().downloads.at(-1)!.id);
    assert.equal(pulledA.state, 'done', JSON.stringify(pulledA.error));
    assert.deepEqual(pulledA.source, { kind: 'hub', endpoint: hub.url });
    const head = hub.head(REPO);
    await until('beta to hear alpha’s artifacts', () => (b.peers.holders(Q4_ID, head).length === 1 ? true : undefined));
    assert.deepEqual(b.peers.artifactsView()[a.router.nodeId]?.models, [{ modelId: Q4_ID, revision: head, bytes: hub.file(REPO, Q4).size }]);

    await b.models.add({ repo: REPO, quant: 'Q4_K_M' });
    hub.resetCounters();
    const started = await b.models.pull(Q4_ID);
    const done = await finished(b, started.download.id);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.deepEqual(done.source, { kind: 'peer', nodeId: a.router.nodeId, name: 'alpha' });
    assert.equal(done.fetchedBytes, hub.file(REPO, Q4).size);
    assert.deepEqual(hub.requests, [], 'not one request to the hub');
    assert.equal(await sha256(done.path!), hub.file(REPO, Q4).sha256);
    assert.deepEqual(b.peers.copied, { direct: 1, stream: 0 }, 'over a direct socket, as both sides allow by default');
    assert.deepEqual(a.peers.served, { direct: 1, stream: 0 });
  });

  test('the holder serves only files its index lists, from any offset; a part file or any other path is refused', async () => {
    const head = hub.head(REPO);
    const read = async (request: Record<string, unknown>): Promise<{ head: unknown; bytes: number }> => {
      const channel = await b.router.openStream<CopyFrame>(a.router.nodeId, MODEL_COPY_PROTOCOL, { schema: CopyFrame, maxMessageBytes: MODEL_COPY_MAX_MESSAGE_BYTES });
      await channel.send(request);
      await channel.close();
      const first = await channel.next();
      let bytes = 0;
      for await (const frame of channel) if (frame instanceof Uint8Array) bytes += frame.byteLength;
      return { head: first, bytes };
    };
    const size = hub.file(REPO, Q4).size;
    const resumed = await read({ type: 'read', repo: REPO, revision: head, path: Q4, offset: size - 1000 });
    assert.deepEqual(resumed.head, { type: 'file', size, sha256: hub.file(REPO, Q4).sha256, gitOid: hub.file(REPO, Q4).gitOid });
    assert.equal(resumed.bytes, 1000);
    for (const path of ['index.json', `../${head}/${Q4}`, `${Q4}.part`, Q8, '/etc/passwd']) {
      const refused = await read({ type: 'read', repo: REPO, revision: head, path, offset: 0 });
      assert.equal((refused.head as { type: string; code: string }).code, 'NOT_FOUND', path);
      assert.equal(refused.bytes, 0);
    }
    const past = await read({ type: 'read', repo: REPO, revision: head, path: Q4, offset: size + 1 });
    assert.equal((past.head as { code: string }).code, 'BAD_REQUEST');
    const bad = await b.router.openStream<CopyFrame>(a.router.nodeId, MODEL_COPY_PROTOCOL, { schema: CopyFrame, maxMessageBytes: MODEL_COPY_MAX_MESSAGE_BYTES });
    await bad.send({ type: 'read', repo: REPO, revision: head, path: Q4, offset: 0, extra: true });
    await assert.rejects(bad.next(), 'a request off its schema resets the stream');
    assert.equal(await b.peers.describe(a.router.nodeId, 'acme/Nothing:Q4', AbortSignal.timeout(5000)), null);
  });

  test('a holder whose bytes do not verify is given up for the hub, which resumes nothing it sent', async () => {
    await a.models.add({ repo: REPO, quant: 'Q8_0', pull: true });
    const pulled = await finished(a, a.models.listDownloads().downloads.at(-1)!.id);
    assert.equal(pulled.state, 'done');
    // Same size, one byte flipped: the member's copy rotted on its disk.
    const handle = await openFile(pulled.path!, 'r+');
    await handle.write(Buffer.from([0xff ^ (await readFile(pulled.path!))[1000]!]), 0, 1, 1000);
    await handle.close();
    const head = hub.head(REPO);
    await until('alpha to report Q8', () => (b.peers.holders(Q8_ID, head).length === 1 ? true : undefined));

    hub.resetCounters();
    // No card on beta: the member's description is what it copies, and the hub is the fallback.
    const started = await b.models.pull(Q8_ID);
    const done = await finished(b, started.download.id);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.deepEqual(done.source, { kind: 'hub', endpoint: hub.url });
    assert.equal(done.peerFailures.length, 1);
    assert.match(done.peerFailures[0]!.message, /from member alpha does not match the hub's sha256/);
    assert.equal(hub.transfers(Q8).length, 1);
    assert.equal(hub.transfers(Q8)[0]!.range, undefined, 'the corrupt prefix was deleted: a whole fresh download');
    assert.equal(await sha256(done.path!), hub.file(REPO, Q8).sha256);
  });

  test('removal reaches every member; one using the model refuses and says so', async () => {
    a.inUse.add(Q4_ID);
    const partly = await b.models.removeEverywhere(Q4_ID);
    assert.deepEqual(
      partly.nodes.map((n) => [n.name, n.self, n.outcome, n.error?.reason ?? null]),
      [
        ['beta', true, 'removed', null],
        ['alpha', false, 'refused', 'MODEL_IN_USE'],
      ],
    );
    assert.ok(partly.freedBytes > 0 && partly.totalFreedBytes === partly.freedBytes);
    assert.equal(b.models.store.get(Q4_ID), null);
    assert.ok(a.models.store.get(Q4_ID));

    // Nothing left to remove on beta, alpha still refuses: the refusal is the answer, 409-shaped.
    await assert.rejects(b.models.removeEverywhere(Q4_ID), (e: unknown) => {
      assert.ok(e instanceof ClusterRemoveError);
      assert.equal(e.reason, 'MODEL_IN_USE');
      assert.match(e.message, /^alpha refused: .*loaded/);
      assert.deepEqual(e.nodes.map((n) => n.outcome), ['absent', 'refused']);
      return true;
    });

    a.inUse.clear();
    const everywhere = await b.models.removeEverywhere(Q8_ID);
    assert.deepEqual(everywhere.nodes.map((n) => n.outcome), ['removed', 'removed']);
    assert.ok(everywhere.totalFreedBytes > everywhere.freedBytes);
    assert.equal(a.models.store.get(Q8_ID), null);
    assert.equal(existsSync(join(a.dataDir, 'cards', 'acme--Copy-GGUF--Q8_0.toml')), false, 'the card went too');
    await assert.rejects(b.models.removeEverywhere(Q8_ID), (e: unknown) => e instanceof ClusterRemoveError && e.code === 'NOT_FOUND' && /no model .* on any of the 2 members/.test(e.message));
  });
});

describe('the bytes of a copy over a direct socket or the stream', { timeout: 120_000 }, () => {
  let dir: string;
  let hub: HubServer;
  let a: TestNode;
  let b: TestNode;
  /** Direct sockets off: neither asks for one nor offers one. */
  let c: TestNode;
  /** A scripted holder (real router, real direct sockets) that cuts its copies as `plans` say. */
  let d: { router: Router; roster: Set<string>; timer: NodeJS.Timeout };
  type Plan = 'whole' | 'cut-socket' | 'cut-stream';
  const plans: Plan[] = [];
  const reads: { offset: number; direct: string | undefined; plan: Plan; copierClosed: boolean }[] = [];
  const state: ClusterState = { clusterId: CLUSTER, members: {}, dissolved: false, instances: {}, settings: defaultSettings() };
  const { node, plane, link } = cluster({ dir: () => dir, hub: () => hub, state });

  /** Serves F16 like a holder, over a direct socket always; a cut plan stops after a third (socket) or two thirds (stream). */
  async function scriptedHolder(bytes: Buffer): Promise<typeof d> {
    const roster = new Set<string>();
    const router = await createRouter({ privateKey: await generateKeyPair('Ed25519'), name: 'delta', isMember: (id) => roster.has(id), host: '127.0.0.1', p2pPort: 0, mdns: false, log });
    state.members[router.nodeId as NodeId] = { nodeId: router.nodeId, name: 'delta', nickname: null, status: 'active' } as ClusterState['members'][NodeId];
    const head = hub.head(REPO);
    const served = hub.file(REPO, F16);
    const record: PeerModelRecord = { modelId: F16_ID as PeerModelRecord['modelId'], repo: REPO, revision: head, group: 'F16', primaryPath: F16, files: [{ path: F16, size: served.size, sha256: served.sha256, gitOid: served.gitOid }], bytes: served.size };
    await router.handleStream<CopyRequest>(
      MODEL_COPY_PROTOCOL,
      async (channel, ctx) => {
        const request = await channel.next();
        if (request === undefined || request.type === 'direct-answer') return;
        if (request.type === 'describe') return channel.send({ type: 'model', model: record });
        const plan = plans.shift() ?? 'whole';
        const read = { offset: request.offset, direct: request.direct, plan, copierClosed: false };
        reads.push(read);
        await channel.send({ type: 'file', size: served.size, sha256: served.sha256, gitOid: served.gitOid });
        if (request.direct === undefined) throw new Error('the copier did not ask for a direct socket');
        const socket = await offerDirect(channel as FrameChannel<unknown>, request.direct, { enabled: true, signal: ctx.signal });
        if (socket === null) throw new Error('the copier did not take the direct socket');
        socket.on('error', () => undefined);
        socket.resume();
        const closed = new Promise<void>((resolve) => socket.once('close', resolve));
        const end = plan === 'whole' ? bytes.byteLength : Math.max(request.offset + 1, Math.floor((bytes.byteLength * (plan === 'cut-socket' ? 1 : 2)) / 3));
        await new Promise<void>((resolve, reject) => socket.write(bytes.subarray(request.offset, end), (error) => (error ? reject(error) : resolve())));
        if (plan === 'whole') {
          socket.end();
          await closed;
        } else if (plan === 'cut-socket') {
          // Gone without TLS's close_notify, the stream closing normally: only the byte count tells.
          socket.destroy();
        } else {
          // The stream (the socket's lifetime) dies; the socket stays open until the copier drops it.
          channel.abort();
          await Promise.race([closed, new Promise((r) => setTimeout(r, 10_000))]);
          read.copierClosed = socket.destroyed;
          socket.destroy();
        }
      },
      { schema: CopyRequest, maxMessageBytes: MODEL_COPY_MAX_MESSAGE_BYTES },
    );
    const topic = router.registerTopic({ name: telemetryTopic(CLUSTER), schema: TelemetryMessage, plane: 'telemetry', maxBytes: MAX_TELEMETRY_MESSAGE_BYTES });
    let seq = 0;
    const report = (): void => void topic.publish({ type: 'artifacts', clusterId: CLUSTER, nodeId: router.nodeId, seq: seq++, models: [{ modelId: record.modelId, revision: head, bytes: served.size }] }, { key: 'artifacts' });
    const timer = setInterval(report, 500);
    return { router, roster, timer };
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-peer-direct-'));
    const q4 = await ggufFixture(join(dir, 'q4.gguf'), { seed: 41, vocabSize: 3072 });
    const q8 = await ggufFixture(join(dir, 'q8.gguf'), { seed: 42 });
    const f16 = await ggufFixture(join(dir, 'f16.gguf'), { seed: 43, vocabSize: 3072 });
    hub = await HubServer.start([{ repo: REPO, files: [{ path: Q4, filePath: q4 }, { path: Q8, filePath: q8 }, { path: F16, filePath: f16 }] }]);
    a = await node('alpha');
    b = await node('beta');
    c = await node('gamma', { direct: false });
    d = await scriptedHolder(await readFile(f16));
    for (const [x, y] of [[a, b], [a, c], [b, c], [b, d]] as const) await link(x, y);
    for (const [n, name] of [[a, 'alpha'], [b, 'beta'], [c, 'gamma']] as const) await n.peers.start({ plane: plane(n), models: n.models, name });
  });

  after(async () => {
    if (d) clearInterval(d.timer);
    await d?.router.stop();
    for (const n of [a, b, c]) {
      await n?.peers.stop();
      await n?.models.close();
      await n?.router.stop();
    }
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const pulled = async (n: TestNode, id: string): Promise<DownloadView> => finished(n, (await n.models.pull(id)).download.id);

  test('a copy goes over a direct socket, and one by a member with direct sockets off over the stream: the same verified bytes', async () => {
    await a.models.add({ repo: REPO, quant: 'Q4_K_M', pull: true });
    assert.equal((await finished(a, a.models.listDownloads().downloads.at(-1)!.id)).state, 'done');
    const head = hub.head(REPO);
    await until('beta and gamma to hear alpha’s artifacts', () => (b.peers.holders(Q4_ID, head).length === 1 && c.peers.holders(Q4_ID, head).length === 1 ? true : undefined));

    hub.resetCounters();
    const direct = await pulled(b, Q4_ID);
    assert.equal(direct.state, 'done', JSON.stringify(direct.error));
    assert.deepEqual(direct.source, { kind: 'peer', nodeId: a.router.nodeId, name: 'alpha' });
    assert.deepEqual(b.peers.copied, { direct: 1, stream: 0 });
    assert.deepEqual(a.peers.served, { direct: 1, stream: 0 });

    const stream = await pulled(c, Q4_ID);
    assert.equal(stream.state, 'done', JSON.stringify(stream.error));
    assert.equal(stream.source?.kind, 'peer');
    assert.deepEqual(c.peers.copied, { direct: 0, stream: 1 }, 'gamma does not ask');
    assert.deepEqual(hub.requests, [], 'not one request to the hub');

    const want = await readFile(join(dir, 'q4.gguf'));
    for (const copy of [direct, stream]) {
      assert.ok((await readFile(copy.path!)).equals(want), copy.path!);
      assert.equal(copy.fetchedBytes, want.byteLength);
    }
  });

  test('a member that asks a holder with direct sockets off gets the bytes over the stream', async () => {
    await c.models.add({ repo: REPO, quant: 'Q8_0', pull: true });
    assert.equal((await finished(c, c.models.listDownloads().downloads.at(-1)!.id)).state, 'done');
    await until('beta to hear gamma hold Q8', () => (b.peers.holders(Q8_ID, hub.head(REPO)).length === 1 ? true : undefined));
    const before = { copied: b.peers.copied, served: c.peers.served };

    hub.resetCounters();
    const done = await pulled(b, Q8_ID);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.deepEqual(done.source, { kind: 'peer', nodeId: c.router.nodeId, name: 'gamma' });
    assert.deepEqual(b.peers.copied, { ...before.copied, stream: before.copied.stream + 1 }, 'asked, declined: the stream');
    assert.deepEqual(c.peers.served, { ...before.served, stream: before.served.stream + 1 });
    assert.deepEqual(hub.requests, []);
    assert.equal(await sha256(done.path!), hub.file(REPO, Q8).sha256);
  });

  test('a holder that stops mid-copy over a direct socket: the copy resumes from the part file, from the same member', async () => {
    await until('beta to hear delta hold F16', () => (b.peers.holders(F16_ID, hub.head(REPO)).length === 1 ? true : undefined));
    const size = hub.file(REPO, F16).size;
    const before = b.peers.copied;
    reads.length = 0;
    plans.push('cut-socket', 'whole');
    hub.resetCounters();
    const done = await pulled(b, F16_ID);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.deepEqual(done.source, { kind: 'peer', nodeId: d.router.nodeId, name: 'delta' });
    assert.deepEqual(reads.map((r) => [r.plan, r.direct]), [['cut-socket', '127.0.0.1'], ['whole', '127.0.0.1']]);
    const resumedAt = reads[1]!.offset;
    assert.ok(resumedAt > 0 && resumedAt <= Math.floor(size / 3), `resumed at ${resumedAt} of ${size}`);
    assert.deepEqual(b.peers.copied, { ...before, direct: before.direct + 1 }, 'the cut copy is not counted');
    assert.deepEqual(hub.requests, []);
    assert.equal(await sha256(done.path!), hub.file(REPO, F16).sha256);
  });

  test('a holder whose socket and then whose stream is cut: retries spent, the hub resumes where the part file ends', async () => {
    await b.models.remove(F16_ID);
    const size = hub.file(REPO, F16).size;
    reads.length = 0;
    plans.push('cut-socket', 'cut-stream');
    hub.resetCounters();
    const done = await pulled(b, F16_ID);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.deepEqual(done.source, { kind: 'hub', endpoint: hub.url });
    assert.deepEqual(reads.map((r) => r.plan), ['cut-socket', 'cut-stream']);
    assert.equal(reads[1]!.copierClosed, true, 'the copier dropped the socket when the stream died');
    assert.equal(done.peerFailures.length, 1);
    assert.equal(done.peerFailures[0]!.nodeId, d.router.nodeId);
    const transfers = hub.transfers(F16);
    assert.equal(transfers.length, 1);
    const from = Number(/^bytes=(\d+)-/.exec(transfers[0]!.range ?? '')?.[1]);
    assert.ok(from >= reads[1]!.offset && from > 0 && from <= Math.floor((2 * size) / 3), `the hub resumed from ${transfers[0]!.range ?? 'no range'}`);
    assert.equal(await sha256(done.path!), hub.file(REPO, F16).sha256);
  });
});
