import '../polyfill.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { encode } from '@msgpack/msgpack';
import { pino } from 'pino';
import { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import { INVITE_PROTOCOL, RouterError, WIRE_VERSION, createRouter, type PeerHello, type Router } from './index.js';
import { sleep, until } from '../../test/support/wait.js';

// Every router here listens on 127.0.0.1 with mDNS off; peers find each other only by explicit dials.

const CONTROL = 'shoal/test/control/v1';
const TELEMETRY = 'shoal/test/telemetry/v1';
const ControlMessage = z.strictObject({ type: z.literal('note'), n: z.number().int(), text: z.string().optional() });
const TelemetryMessage = z.strictObject({ type: z.literal('progress'), key: z.string(), n: z.number().int() });

interface Node {
  router: Router;
  key: PrivateKey;
  roster: Set<string>;
  logs: string[];
}

const open: Router[] = [];
after(async () => {
  await Promise.all(open.map((router) => router.stop()));
});

async function startNode(options: { key?: PrivateKey; port?: number; wireVersion?: number; allowUnknown?: (id: string) => boolean; pingTimeoutMs?: number } = {}): Promise<Node> {
  const key = options.key ?? (await generateKeyPair('Ed25519'));
  const roster = new Set<string>();
  const logs: string[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) });
  const router = await createRouter({
    privateKey: key,
    name: `node-${logs.length}-${Math.random().toString(36).slice(2, 6)}`,
    isMember: (id) => roster.has(id),
    host: '127.0.0.1',
    p2pPort: options.port ?? 0,
    mdns: false,
    log,
    ...(options.wireVersion === undefined ? {} : { wireVersion: options.wireVersion }),
    ...(options.allowUnknown === undefined ? {} : { allowUnknown: options.allowUnknown }),
    ...(options.pingTimeoutMs === undefined ? {} : { pingTimeoutMs: options.pingTimeoutMs }),
  });
  open.push(router);
  return { router, key, roster, logs };
}

function addr(node: Node): string {
  const first = node.router.addrs()[0];
  assert.ok(first !== undefined, 'a router listens somewhere');
  return `${first}/p2p/${node.router.nodeId}`;
}

/** Makes every node in `nodes` a member in every other's roster. */
function admitAll(nodes: Node[]): void {
  for (const node of nodes) {
    for (const other of nodes) if (other !== node) node.roster.add(other.router.nodeId);
    node.router.updateRoster(nodes.filter((n) => n !== node).map((n) => ({ nodeId: n.router.nodeId, addrs: n.router.addrs() })));
  }
}

function subscribersOf(router: Router, topic: string): string[] {
  return router.libp2p.services.pubsub.getSubscribers(topic).map((p) => p.toString());
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function stop(node: Node): Promise<void> {
  const at = open.indexOf(node.router);
  if (at !== -1) open.splice(at, 1);
  return node.router.stop();
}

describe('router', { timeout: 60_000 }, () => {
  test('members gossip to each other; the sender is the signed author', async () => {
    const t0 = performance.now();
    const [a, b, c] = await Promise.all([startNode(), startNode(), startNode()]);
    const startMs = performance.now() - t0;
    admitAll([a, b, c]);
    const t1 = performance.now();
    await Promise.all([a.router.dial(addr(b)), a.router.dial(addr(c)), b.router.dial(addr(c))]);
    const connectMs = performance.now() - t1;

    const topics = [a, b, c].map((n) => n.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 1024 }));
    const received: Array<Array<{ n: number; from: string; at: number }>> = [[], [], []];
    topics.forEach((topic, i) => topic.subscribe((message, meta) => received[i]?.push({ n: message.n, from: meta.from, at: performance.now() })));
    const meshMs = await until('every node to see the others subscribed', () =>
      [a, b, c].every((n) => subscribersOf(n.router, CONTROL).length === 2),
    );

    const latencies: number[] = [];
    for (let i = 0; i < 20; i++) {
      const sentAt = performance.now();
      const result = await topics[0]?.publish({ type: 'note', n: i });
      assert.equal(result?.recipients, 2);
      await until(`message ${i} at b and c`, () => received[1]?.some((m) => m.n === i) === true && received[2]?.some((m) => m.n === i) === true);
      const arrivals = [received[1], received[2]].map((list) => list?.find((m) => m.n === i)?.at ?? NaN);
      latencies.push(Math.max(...arrivals) - sentAt);
    }
    assert.ok(received[1]?.every((m) => m.from === a.router.nodeId));
    await topics[2]?.publish({ type: 'note', n: 100 });
    await until('c → a', () => received[0]?.some((m) => m.n === 100 && m.from === c.router.nodeId) === true);
    assert.equal(received[0]?.length, 1, 'a never receives its own messages');
    assert.equal(a.router.stats().topics[CONTROL]?.published, 20);
    console.log(
      `# measured: start of 3 routers ${startMs.toFixed(0)} ms, 3 dials with hello ${connectMs.toFixed(0)} ms, ` +
        `subscriptions seen ${meshMs.toFixed(0)} ms later, gossip latency to both peers median ${median(latencies).toFixed(1)} ms (max ${Math.max(...latencies).toFixed(1)})`,
    );
    await Promise.all([a, b, c].map(stop));
  });

  test('a non-member can do hello and nothing else: no gossip either way, no data-plane stream', async () => {
    const [a, b, c] = await Promise.all([startNode(), startNode(), startNode()]);
    admitAll([a, b]);
    // c plays an attacker that believes a and b are its fellow members.
    c.roster.add(a.router.nodeId);
    c.roster.add(b.router.nodeId);
    const hellosAtA: PeerHello[] = [];
    a.router.onHello((hello) => hellosAtA.push(hello));
    await a.router.dial(addr(b));
    const helloFromA = await c.router.dial(addr(a));
    assert.equal(helloFromA.nodeId, a.router.nodeId);
    assert.equal(helloFromA.fingerprint, a.router.fingerprint);
    await until('a to hear c', () => hellosAtA.some((h) => h.nodeId === c.router.nodeId));
    const cHello = hellosAtA.find((h) => h.nodeId === c.router.nodeId);
    assert.equal(cHello?.member, false);
    assert.equal(cHello?.fingerprint, c.router.fingerprint);
    assert.ok(cHello?.addrs.includes(c.router.addrs()[0] ?? '?'), 'the hello carries the listen addresses');

    const topics = [a, b, c].map((n) => n.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 1024 }));
    const received: number[][] = [[], [], []];
    topics.forEach((topic, i) => topic.subscribe((message) => received[i]?.push(message.n)));
    await until('a and b to see each other subscribed', () => subscribersOf(a.router, CONTROL).length === 1 && subscribersOf(b.router, CONTROL).length === 1);
    await sleep(300);
    assert.deepEqual(subscribersOf(a.router, CONTROL), [b.router.nodeId], 'c is not a subscriber a knows of');
    assert.ok(!a.router.libp2p.services.pubsub.getPeers().some((p) => p.toString() === c.router.nodeId), 'c is not a gossipsub peer of a');
    assert.equal(c.router.libp2p.services.pubsub.getPeers().length, 0, 'c has no gossipsub peer');

    assert.equal((await topics[0]?.publish({ type: 'note', n: 1 }))?.recipients, 1);
    await until('b to receive', () => received[1]?.includes(1) === true);
    assert.equal((await topics[2]?.publish({ type: 'note', n: 2 }))?.recipients, 0);
    await sleep(400);
    assert.deepEqual(received[2], [], 'c received nothing');
    assert.deepEqual(received[0], [], 'a received nothing from c');
    assert.deepEqual(received[1], [1], 'b received only a');

    // Raw attempts from c at a's members-only protocols are cut off by a's stream guard.
    for (const protocol of ['/meshsub/1.2.0', '/meshsub/1.1.0', '/ipfs/id/1.0.0']) {
      const stream = await c.router.libp2p.dialProtocol(a.router.libp2p.peerId, protocol).catch(() => null);
      if (stream !== null) await until(`a to reset c's ${protocol} stream`, () => stream.status !== 'open', 2000);
    }
    await a.router.handle('/shoal/test/echo/1', (request: unknown) => request);
    await assert.rejects(
      c.router.request(a.router.nodeId, '/shoal/test/echo/1', { hi: 1 }, { timeoutMs: 3000 }),
      (error: unknown) => error instanceof RouterError && (error.reason === 'reset' || error.reason === 'closed'),
    );
    const refused = a.router.stats().refusedStreams;
    assert.ok((refused['/shoal/test/echo/1'] ?? 0) >= 1, `a refused c's data-plane stream: ${JSON.stringify(refused)}`);
    assert.ok((refused['/meshsub/1.2.0'] ?? 0) >= 1, 'a refused c\'s gossipsub stream');
    assert.ok((refused['/ipfs/id/1.0.0'] ?? 0) >= 1, 'a refused c\'s identify');
    // And a will not open one towards c either.
    await c.router.handle('/shoal/test/echo/1', (request: unknown) => request);
    await assert.rejects(a.router.request(c.router.nodeId, '/shoal/test/echo/1', {}), (error: unknown) => error instanceof RouterError && error.reason === 'refused');
    // The connection is still up, and the invite protocol (the other pre-membership exchange) works on it.
    assert.ok(a.router.isConnected(c.router.nodeId));
    await a.router.handle(INVITE_PROTOCOL, (request: { code: string }, ctx) => ({ seen: request.code, from: ctx.from }));
    assert.deepEqual(await c.router.request(a.router.nodeId, INVITE_PROTOCOL, { code: 'x' }), { seen: 'x', from: c.router.nodeId });

    // Admitting c (both rosters) lets gossip flow on the same connection.
    admitAll([a, b, c]);
    await until('a and c to see each other subscribed', () => subscribersOf(a.router, CONTROL).includes(c.router.nodeId) && subscribersOf(c.router, CONTROL).includes(a.router.nodeId));
    await topics[0]?.publish({ type: 'note', n: 3 });
    await until('c to receive after admission', () => received[2]?.includes(3) === true);

    // Removing c closes its connections.
    for (const n of [a, b]) {
      n.roster.delete(c.router.nodeId);
      n.router.updateRoster([...n.roster].map((id) => ({ nodeId: id, addrs: [] })));
    }
    await until('a to close c', () => !a.router.isConnected(c.router.nodeId), 3000);
    await Promise.all([a, b, c].map(stop));
  });

  test('a peer that allowUnknown refuses cannot connect at all', async () => {
    const a = await startNode({ allowUnknown: () => false });
    const c = await startNode();
    c.roster.add(a.router.nodeId);
    await assert.rejects(c.router.dial(addr(a), { signal: AbortSignal.timeout(3000) }), RouterError);
    assert.equal(a.router.isConnected(c.router.nodeId), false);
    await Promise.all([a, c].map(stop));
  });

  test('oversize and invalid gossip is dropped and counted; outgoing messages are checked too', async () => {
    const [a, b] = await Promise.all([startNode(), startNode()]);
    admitAll([a, b]);
    await a.router.dial(addr(b));
    const topicA = a.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 256 });
    const topicB = b.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 256 });
    const got: number[] = [];
    topicA.subscribe((message) => got.push(message.n));
    await until('mesh', () => subscribersOf(b.router, CONTROL).length === 1);
    // Gossipsub silently drops a publish made before its outbound stream to the peer exists; warm the
    // path with valid messages until one arrives, so what follows is not lost to that race.
    for (let tries = 0; !got.includes(0) && tries < 100; tries++) {
      await topicB.publish({ type: 'note', n: 0 });
      await sleep(50);
    }
    assert.ok(got.includes(0), 'gossip reaches the peer');
    const warmups = got.length;
    got.length = 0;

    const raw = b.router.libp2p.services.pubsub;
    await raw.publish(CONTROL, encode({ type: 'note', n: 1, text: 'x'.repeat(1000) })); // oversize
    await raw.publish(CONTROL, new Uint8Array([0xc1, 0x00])); // 0xc1 is never valid msgpack
    await raw.publish(CONTROL, encode({ type: 'note', n: 'two' })); // schema-invalid
    await raw.publish(CONTROL, encode({ type: 'unknown-kind', n: 3 })); // unknown message type
    await topicB.publish({ type: 'note', n: 4 });
    await until('the valid one', () => got.includes(4));
    assert.deepEqual(got, [4]);
    const stats = a.router.stats().topics[CONTROL];
    assert.deepEqual(stats, { received: warmups + 1, dropped_invalid: 3, dropped_oversize: 1, dropped_non_member: 0, published: 0 });

    await assert.rejects(topicB.publish({ type: 'note', n: 5, text: 'y'.repeat(1000) }), (error: unknown) => error instanceof ShoalError && error.code === 'PAYLOAD_TOO_LARGE');
    await assert.rejects(topicB.publish({ type: 'note', n: 1.5 }), (error: unknown) => error instanceof ShoalError && error.code === 'BAD_REQUEST');
    await Promise.all([a, b].map(stop));
  });

  test('data plane: request/response, errors, frame limits, streaming with backpressure, self short-circuit', async () => {
    const [a, b] = await Promise.all([startNode(), startNode()]);
    admitAll([a, b]);
    await a.router.dial(addr(b));
    const Echo = z.strictObject({ text: z.string() });
    await b.router.handle<z.infer<typeof Echo>, { echo: string; from: string }>(
      '/shoal/test/echo/1',
      (request, ctx) => {
        if (request.text === 'missing') throw new ShoalError('NOT_FOUND', 'no such thing');
        return { echo: request.text, from: ctx.from };
      },
      { schema: Echo, maxMessageBytes: 1024 },
    );

    const times: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t = performance.now();
      const answer = await a.router.request<{ echo: string; from: string }>(b.router.nodeId, '/shoal/test/echo/1', { text: `hi ${i}` });
      times.push(performance.now() - t);
      assert.deepEqual(answer, { echo: `hi ${i}`, from: a.router.nodeId });
    }
    await assert.rejects(a.router.request(b.router.nodeId, '/shoal/test/echo/1', { text: 'missing' }), (error: unknown) => error instanceof RouterError && error.reason === 'remote_error' && error.code === 'NOT_FOUND');
    await assert.rejects(a.router.request(b.router.nodeId, '/shoal/test/echo/1', { text: 7 }), (error: unknown) => error instanceof RouterError && error.reason === 'remote_error' && error.code === 'BAD_REQUEST');
    // Over b's 1 KiB frame limit: b resets the stream on the length header.
    await assert.rejects(a.router.request(b.router.nodeId, '/shoal/test/echo/1', { text: 'z'.repeat(5000) }), (error: unknown) => error instanceof RouterError && error.reason === 'reset');
    // Over our own limit: refused before sending.
    await assert.rejects(a.router.request(b.router.nodeId, '/shoal/test/echo/1', { text: 'z'.repeat(5000) }, { maxMessageBytes: 1000 }), (error: unknown) => error instanceof RouterError && error.reason === 'frame_too_large');
    await assert.rejects(a.router.request(b.router.nodeId, '/shoal/test/nothing/1', {}), (error: unknown) => error instanceof RouterError && error.reason === 'no_handler');
    // The connection survived all of that.
    assert.deepEqual(await a.router.request(b.router.nodeId, '/shoal/test/echo/1', { text: 'still' }), { echo: 'still', from: a.router.nodeId });

    // Streaming: a request frame in, many token frames out, in order.
    const Tokens = z.strictObject({ count: z.number().int(), size: z.number().int() });
    await b.router.handleStream<z.infer<typeof Tokens>>(
      '/shoal/test/tokens/1',
      async (channel) => {
        const request = await channel.next();
        if (request === undefined) return;
        for (let i = 0; i < request.count; i++) await channel.send({ i, pad: 'p'.repeat(request.size) });
      },
      { schema: Tokens, maxMessageBytes: 64 * 1024 },
    );
    const channel = await a.router.openStream<{ i: number; pad: string }>(b.router.nodeId, '/shoal/test/tokens/1');
    await channel.send({ count: 100, size: 10 });
    await channel.close();
    const seen: number[] = [];
    for await (const frame of channel) seen.push(frame.i);
    assert.deepEqual(seen, Array.from({ length: 100 }, (_, i) => i));

    // Backpressure: 2000 frames of 16 KiB (32 MB) into a slow reader arrive whole and in order.
    const bulk = await a.router.openStream<{ i: number; pad: string }>(b.router.nodeId, '/shoal/test/tokens/1');
    await bulk.send({ count: 2000, size: 16 * 1024 });
    await bulk.close();
    let expected = 0;
    const tBulk = performance.now();
    for await (const frame of bulk) {
      assert.equal(frame.i, expected++);
      if (expected % 200 === 0) await sleep(20);
    }
    assert.equal(expected, 2000);
    const bulkMs = performance.now() - tBulk;

    // A frame over the reader's limit ends its iteration with frame_too_large.
    const small = await a.router.openStream(b.router.nodeId, '/shoal/test/tokens/1', { maxMessageBytes: 1000 });
    await small.send({ count: 1, size: 5000 });
    await small.close();
    await assert.rejects(
      (async () => {
        for await (const frame of small) void frame;
      })(),
      (error: unknown) => error instanceof RouterError && error.reason === 'frame_too_large',
    );

    // Self: the handler runs in process, no stream is opened.
    let selfCalls = 0;
    await a.router.handle('/shoal/test/self/1', (request: { n: number }, ctx) => {
      selfCalls++;
      return { doubled: request.n * 2, from: ctx.from };
    });
    const streamsBefore = a.router.libp2p.getConnections().reduce((sum, conn) => sum + conn.streams.length, 0);
    assert.deepEqual(await a.router.request(a.router.nodeId, '/shoal/test/self/1', { n: 21 }), { doubled: 42, from: a.router.nodeId });
    assert.equal(selfCalls, 1);
    assert.equal(a.router.libp2p.getConnections().reduce((sum, conn) => sum + conn.streams.length, 0), streamsBefore);
    await a.router.handleStream('/shoal/test/tokens/1', async (selfChannel) => {
      const request = (await selfChannel.next()) as { count: number };
      for (let i = 0; i < request.count; i++) await selfChannel.send({ i });
    });
    const selfStream = await a.router.openStream<{ i: number }>(a.router.nodeId, '/shoal/test/tokens/1');
    await selfStream.send({ count: 50 });
    await selfStream.close();
    let selfSeen = 0;
    for await (const frame of selfStream) assert.equal(frame.i, selfSeen++);
    assert.equal(selfSeen, 50);
    await assert.rejects(a.router.request(a.router.nodeId, '/shoal/test/nothing/1', {}), (error: unknown) => error instanceof RouterError && error.reason === 'no_handler');

    console.log(`# measured: request/response median ${median(times).toFixed(2)} ms; 32 MB in 16 KiB frames to a slow reader in ${bulkMs.toFixed(0)} ms`);
    await Promise.all([a, b].map(stop));
  });

  test('nodes of different wire versions refuse each other with a log line on both sides', async () => {
    const a = await startNode();
    const d = await startNode({ wireVersion: WIRE_VERSION + 1 });
    admitAll([a, d]);
    await assert.rejects(d.router.dial(addr(a), { signal: AbortSignal.timeout(3000) }), RouterError);
    const lineAtA = `peer ${d.router.nodeId} speaks wire version ${WIRE_VERSION + 1}, this node speaks ${WIRE_VERSION}: upgrade the older one`;
    const lineAtD = `peer ${a.router.nodeId} speaks wire version ${WIRE_VERSION}, this node speaks ${WIRE_VERSION + 1}: upgrade the older one`;
    await until('both log lines', () => a.logs.some((l) => l.includes(lineAtA)) && d.logs.some((l) => l.includes(lineAtD)), 3000);
    await until('the connection to close', () => !a.router.isConnected(d.router.nodeId) && !d.router.isConnected(a.router.nodeId), 3000);
    assert.ok(a.router.stats().hello.mismatched >= 1);
    const warn = JSON.parse(a.logs.find((l) => l.includes(lineAtA)) ?? '{}') as { level?: number };
    assert.equal(warn.level, 40, 'logged as a warning');
    await Promise.all([a, d].map(stop));
  });

  test('a member that restarts on the same port is redialled', async () => {
    const [a, b] = await Promise.all([startNode(), startNode()]);
    admitAll([a, b]);
    await a.router.dial(addr(b));
    const port = Number(/\/tcp\/(\d+)/.exec(b.router.addrs()[0] ?? '')?.[1]);
    const ups: string[] = [];
    const downs: string[] = [];
    a.router.onPeerUp((id) => ups.push(id));
    a.router.onPeerDown((id) => downs.push(id));
    const topicA = a.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 1024 });

    await stop(b);
    await until('a to notice b went', () => downs.includes(b.router.nodeId), 3000);
    const restartedAt = performance.now();
    // Same key, same port, and an empty roster: only a's redial can bring them back together.
    const b2 = await startNode({ key: b.key, port });
    b2.roster.add(a.router.nodeId);
    const got: number[] = [];
    b2.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 1024 }).subscribe((m) => got.push(m.n));
    const reconnectMs = await until('a to redial b', () => ups.includes(b.router.nodeId) && a.router.isConnected(b.router.nodeId), 5000);
    // Both directions: b2 seeing a's subscription proves a's outbound gossip stream to b2 exists. A
    // stream lost to the race with b2's roster is repaired by the sweep (two redial ticks and a redial).
    await until('subscriptions after the redial', () => subscribersOf(a.router, CONTROL).includes(b.router.nodeId) && subscribersOf(b2.router, CONTROL).includes(a.router.nodeId), 10_000);
    await topicA.publish({ type: 'note', n: 9 });
    await until('gossip after the redial', () => got.includes(9));
    console.log(`# measured: reconnected ${reconnectMs.toFixed(0)} ms after the restarted node listened (${(performance.now() - restartedAt).toFixed(0)} ms until gossip flowed); redial interval 2000 ms`);
    await Promise.all([a, b2].map(stop));
  });

  test('a member connection whose gossip stream failed is repaired by the roster sweep', async () => {
    // Gossipsub opens its outbound stream once per connection and never retries; one lost to a race
    // or a stall left the peer deaf to our gossip until the connection happened to drop.
    const [a, b] = await Promise.all([startNode(), startNode()]);
    admitAll([a, b]);
    const topicA = a.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 1024 });
    const got: number[] = [];
    b.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 1024 }).subscribe((m) => got.push(m.n));
    await a.router.dial(addr(b));
    const pubsubA = a.router.libp2p.services.pubsub as unknown as { streamsOutbound: Map<string, { rawStream: { abort(error: Error): void } }> };
    await until('a gossip stream from a to b', () => pubsubA.streamsOutbound.has(b.router.nodeId));
    pubsubA.streamsOutbound.get(b.router.nodeId)?.rawStream.abort(new Error('lost in the test'));
    await until('gossipsub to forget the stream', () => !pubsubA.streamsOutbound.has(b.router.nodeId));
    let n = 100;
    const repairedMs = await until(
      'gossip from a at b again',
      () => {
        if (got.length > 0) return true;
        void topicA.publish({ type: 'note', n: n++ }).catch(() => {});
        return false;
      },
      15_000,
    );
    console.log(`# measured: gossip flowed again ${repairedMs.toFixed(0)} ms after its stream was lost (redial interval 2000 ms)`);
    await Promise.all([a, b].map(stop));
  });

  test('with a 1 s ping timeout, a peer that goes silent (SIGSTOP) is noticed in about 2 s', async () => {
    // The default timeout is 10 s (bulk transfers delay pings); the monitor works the same at any setting.
    const a = await startNode({ pingTimeoutMs: 1000 });
    const child = spawn(process.execPath, [fileURLToPath(new URL('./peer-process.fixture.js', import.meta.url))], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const [line] = (await once(child.stdout, 'data')) as [Buffer];
      const peer = JSON.parse(line.toString()) as { nodeId: string; addr: string };
      a.roster.add(peer.nodeId);
      await a.router.dial(peer.addr);
      const downs: string[] = [];
      a.router.onPeerDown((id) => downs.push(id));
      await sleep(1500); // a few healthy pings first
      assert.equal(downs.length, 0, 'no drop while healthy');
      const frozenAt = performance.now();
      child.kill('SIGSTOP');
      const noticedMs = await until('a to drop the silent peer', () => downs.includes(peer.nodeId), 6000);
      assert.ok(noticedMs < 3500, `noticed after ${noticedMs.toFixed(0)} ms`);
      console.log(`# measured: a silent peer was dropped ${(performance.now() - frozenAt).toFixed(0)} ms after it froze (ping every 1 s, timeout 1 s)`);
    } finally {
      child.kill('SIGKILL');
      await stop(a);
    }
  });

  test('a flood of telemetry does not delay a control message', async () => {
    const [a, b] = await Promise.all([startNode(), startNode()]);
    admitAll([a, b]);
    await a.router.dial(addr(b));
    const controlA = a.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 1024 });
    const telemetryA = a.router.registerTopic({ name: TELEMETRY, schema: TelemetryMessage, plane: 'telemetry', maxBytes: 512 });
    const controlB = b.router.registerTopic({ name: CONTROL, schema: ControlMessage, plane: 'control', maxBytes: 1024 });
    const telemetryB = b.router.registerTopic({ name: TELEMETRY, schema: TelemetryMessage, plane: 'telemetry', maxBytes: 512 });
    await until('mesh', () => subscribersOf(a.router, CONTROL).length === 1 && subscribersOf(a.router, TELEMETRY).length === 1);
    // Grafted both ways, not only subscribed: a publish before the heartbeat that grafts b can miss it,
    // which on a loaded CI machine read as a 2 s delay of the control message.
    // (The implementation has getMeshPeers; @libp2p/gossipsub's exported interface omits it.)
    const meshOf = (n: Node): string[] => (n.router.libp2p.services.pubsub as unknown as { getMeshPeers(topic: string): string[] }).getMeshPeers(CONTROL);
    await until('grafted', () => meshOf(a).length === 1 && meshOf(b).length === 1, 10_000);

    let telemetryBeforeControl = -1;
    let telemetryCount = 0;
    let controlAt = 0;
    telemetryB.subscribe(() => telemetryCount++);
    controlB.subscribe(() => {
      controlAt = performance.now();
      telemetryBeforeControl = telemetryCount;
    });
    for (let i = 0; i < 1000; i++) await telemetryA.publish({ type: 'progress', key: `model-${i}`, n: i }, { key: `model-${i}` });
    assert.equal(a.router.stats().telemetry.queued, 1000, 'all 1000 wait in the queue (distinct keys)');
    const sentAt = performance.now();
    await controlA.publish({ type: 'note', n: 1 });
    await until('the control message', () => controlAt > 0, 2000);
    const controlMs = controlAt - sentAt;
    assert.ok(controlMs < 250, `control took ${controlMs.toFixed(1)} ms behind 1000 queued telemetry messages`);
    assert.ok(telemetryBeforeControl <= 5, `${telemetryBeforeControl} telemetry messages overtook the control message`);
    const drainMs = await until('the telemetry to drain', () => telemetryCount === 1000, 20_000);

    // Last write wins: 500 updates of one key while the queue is busy collapse to a few sends.
    for (let i = 0; i < 300; i++) await telemetryA.publish({ type: 'progress', key: 'x', n: i }, { key: `other-${i}` });
    for (let i = 0; i < 500; i++) await telemetryA.publish({ type: 'progress', key: 'same', n: i }, { key: 'same' });
    const stats = a.router.stats().telemetry;
    assert.ok(stats.replaced >= 490, `replaced ${stats.replaced}`);
    console.log(`# measured: control arrived ${controlMs.toFixed(1)} ms after publish with 1000 telemetry queued (${telemetryBeforeControl} overtook it); the 1000 drained in ${drainMs.toFixed(0)} ms`);
    await Promise.all([a, b].map(stop));
  });
});
