import '../polyfill.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { multiaddr } from '@multiformats/multiaddr';
import {
  DIRECT_MAX_FAILED_HANDSHAKES,
  DirectAnswerFrame,
  DirectHost,
  DirectOfferFrame,
  connectDirect,
  ipOfMultiaddr,
  isLocalAddress,
  listenDirect,
  normalizeIp,
  takeDirect,
  directSocketStats,
  type DirectListener,
} from './direct-socket.js';
import { RouterError } from './errors.js';
import { createChannelPair, type FrameChannel } from './framing.js';

// Real TLS sockets on loopback. 127.0.0.2 is loopback too, so "another host" can be played locally.

async function listener(options: { peerHost?: string; acceptTimeoutMs?: number } = {}): Promise<DirectListener> {
  const made = await listenDirect({ host: '127.0.0.1', peerHost: options.peerHost ?? '127.0.0.1', ...(options.acceptTimeoutMs === undefined ? {} : { acceptTimeoutMs: options.acceptTimeoutMs }) });
  assert.ok(made !== null, '127.0.0.1 is a local address');
  return made;
}

function readAll(socket: TLSSocket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve, reject) => {
    socket.once('end', () => resolve(Buffer.concat(chunks)));
    socket.once('error', reject);
  });
}

function reasonOf(error: unknown): string {
  return error instanceof RouterError ? error.reason : `not a RouterError: ${String(error)}`;
}

describe('direct sockets', () => {
  test('an offer is taken by the one who holds its key; bytes go both ways and half-close is carried', async () => {
    await using offered = await listener();
    const before = directSocketStats();
    const client = await connectDirect('127.0.0.1', offered.offer);
    const server = await offered.take(1000);
    assert.deepEqual(directSocketStats(), { open: before.open + 2, connected: before.connected + 2 }, 'both ends are counted');
    const toServer = randomBytes(3 * 1024 * 1024);
    const toClient = randomBytes(1024 * 1024);
    const serverGot = readAll(server);
    const clientGot = readAll(client);
    client.end(toServer);
    // The client has ended its side; the server can still answer.
    assert.deepEqual(await serverGot, toServer);
    server.end(toClient);
    assert.deepEqual(await clientGot, toClient);
    client.destroy();
    server.destroy();
    for (let i = 0; i < 100 && directSocketStats().open !== before.open; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(directSocketStats().open, before.open, 'closed sockets are no longer open');
  });

  test('a wrong key fails the handshake and does not use up the offer', async () => {
    await using offered = await listener();
    const wrong: DirectOfferFrame = { ...offered.offer, key: randomBytes(32) };
    await assert.rejects(connectDirect('127.0.0.1', wrong), (error) => reasonOf(error) === 'unreachable');
    const otherIdentity: DirectOfferFrame = { ...offered.offer, identity: randomBytes(16).toString('hex') };
    await assert.rejects(connectDirect('127.0.0.1', otherIdentity));
    const client = await connectDirect('127.0.0.1', offered.offer);
    const server = await offered.take(1000);
    client.end('ok');
    assert.equal(String(await readAll(server)), 'ok');
    client.destroy();
    server.destroy();
  });

  test('a connection from another address than the stream peer is dropped, even with the right key', async () => {
    await using offered = await listener({ peerHost: '127.0.0.1' });
    // The right key from 127.0.0.2: without the address check this handshake would succeed.
    const raw = createConnection({ host: '127.0.0.1', port: offered.offer.port, localAddress: '127.0.0.2' });
    const stranger = tlsConnect({
      socket: raw,
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.2',
      ciphers: 'PSK-AES128-GCM-SHA256',
      pskCallback: () => ({ psk: Buffer.from(offered.offer.key), identity: offered.offer.identity }),
      checkServerIdentity: () => undefined,
    });
    const outcome = await new Promise<string>((resolve) => {
      stranger.once('secureConnect', () => resolve('connected'));
      stranger.once('error', () => resolve('refused'));
      stranger.once('close', () => resolve('refused'));
    });
    stranger.destroy();
    assert.equal(outcome, 'refused');
    // The peer itself still gets in.
    const client = await connectDirect('127.0.0.1', offered.offer);
    await offered.take(1000);
    client.destroy();
  });

  test('too many failed handshakes withdraw the offer', async () => {
    await using offered = await listener();
    const wrong: DirectOfferFrame = { ...offered.offer, key: randomBytes(32) };
    for (let i = 0; i < DIRECT_MAX_FAILED_HANDSHAKES; i++) await connectDirect('127.0.0.1', wrong).catch(() => undefined);
    await assert.rejects(offered.accepted, (error) => reasonOf(error) === 'refused');
    await assert.rejects(connectDirect('127.0.0.1', offered.offer, { timeoutMs: 1000 }));
  });

  test('an offer nobody takes is withdrawn at its deadline, and close() withdraws it at once', async () => {
    const late = await listener({ acceptTimeoutMs: 100 });
    await assert.rejects(late.accepted, (error) => reasonOf(error) === 'timeout');
    await assert.rejects(connectDirect('127.0.0.1', late.offer, { timeoutMs: 1000 }), (error) => reasonOf(error) === 'unreachable');
    const closed = await listener();
    closed.close();
    await assert.rejects(closed.accepted, (error) => reasonOf(error) === 'aborted');
    await assert.rejects(connectDirect('127.0.0.1', closed.offer, { timeoutMs: 1000 }));
  });

  test('an address that is not this machine gets no listener', async () => {
    assert.equal(await listenDirect({ host: '192.0.2.1', peerHost: '127.0.0.1' }), null);
    assert.equal(await listenDirect({ host: 'localhost', peerHost: '127.0.0.1' }), null);
    assert.equal(isLocalAddress('127.0.0.1'), true);
    assert.equal(isLocalAddress('::ffff:127.0.0.1'), true);
    assert.equal(isLocalAddress('192.0.2.1'), false);
  });

  test('connecting gives up at its deadline (a port that accepts TCP but never speaks TLS)', async () => {
    const silent = createServer(() => {});
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    try {
      const offer: DirectOfferFrame = { type: 'direct-offer', port: (silent.address() as AddressInfo).port, identity: 'ab'.repeat(16), key: randomBytes(32) };
      const started = performance.now();
      await assert.rejects(connectDirect('127.0.0.1', offer, { timeoutMs: 200 }), (error) => reasonOf(error) === 'timeout');
      assert.ok(performance.now() - started < 5000);
    } finally {
      silent.close();
    }
  });

  test('takeDirect answers connected: false when the offer cannot be reached, and the caller keeps to the stream', async () => {
    const [opener, server] = createChannelPair<unknown, unknown>('self', '/test/1');
    // An in-process pair has no remote host, so the opener cannot even try: it must still answer.
    const offer: DirectOfferFrame = { type: 'direct-offer', port: 9, identity: 'cd'.repeat(16), key: randomBytes(32) };
    let unreachable = 0;
    const socket = await takeDirect(opener as FrameChannel<unknown>, offer, { signal: AbortSignal.timeout(5000), onUnreachable: () => (unreachable += 1) });
    assert.equal(socket, null);
    assert.deepEqual(DirectAnswerFrame.parse(await server.next()), { type: 'direct-answer', connected: false });
    assert.equal(await takeDirect(opener as FrameChannel<unknown>, { type: 'direct-decline' }, { signal: AbortSignal.timeout(5000) }), null);
    assert.equal(unreachable, 0);
  });

  test('wire frames and addresses', () => {
    assert.equal(ipOfMultiaddr(multiaddr('/ip4/10.0.0.2/tcp/52601')), '10.0.0.2');
    assert.equal(ipOfMultiaddr(multiaddr('/ip6/::1/tcp/52601')), '::1');
    assert.equal(ipOfMultiaddr(multiaddr('/dns4/example.com/tcp/52601')), null);
    assert.equal(ipOfMultiaddr(multiaddr('/ip4/10.0.0.2/udp/5353')), null);
    assert.equal(normalizeIp('::ffff:10.0.0.2'), '10.0.0.2');
    assert.equal(normalizeIp('fe80::1'), 'fe80::1');
    assert.equal(DirectHost.safeParse('10.0.0.2').success, true);
    assert.equal(DirectHost.safeParse('fe80::1%eth0').success, false);
    assert.equal(DirectHost.safeParse('example.com').success, false);
    assert.equal(DirectOfferFrame.safeParse({ type: 'direct-offer', port: 1, identity: 'ab'.repeat(16), key: new Uint8Array(31) }).success, false);
    assert.equal(DirectOfferFrame.safeParse({ type: 'direct-offer', port: 0, identity: 'ab'.repeat(16), key: new Uint8Array(32) }).success, false);
    assert.equal(DirectOfferFrame.safeParse({ type: 'direct-offer', port: 1, identity: 'ab'.repeat(16), key: new Uint8Array(32) }).success, true);
  });
});
