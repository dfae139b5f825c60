import '../polyfill.js';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { pino } from 'pino';
import type { ShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { resolveBuiltinModel } from '../models/builtin-store.js';
import type { Router } from '../router/index.js';
import { RPC_TUNNEL_PROTOCOL, openRpcTunnel, serveRpcTunnel, type RpcTunnel } from './rpc-tunnel.js';
import { startLoopbackRouter, type LoopbackRouter } from '../../test/support/loopback-router.js';
import { sleep, until } from '../../test/support/wait.js';
import { builtEngines } from '../../test/support/engines.js';

// Real libp2p routers on 127.0.0.1 with mDNS off, and real TCP sockets on both ends of the tunnel.

type Node = LoopbackRouter;

const routers: Router[] = [];
const servers: Server[] = [];
after(async () => {
  await Promise.all(routers.map((router) => router.stop()));
  for (const server of servers) server.close();
});

async function startNode(): Promise<Node> {
  const node = await startLoopbackRouter('tunnel');
  routers.push(node.router);
  return node;
}

async function pair(): Promise<[Node, Node]> {
  const [a, b] = await Promise.all([startNode(), startNode()]);
  for (const [x, y] of [[a, b], [b, a]] as const) {
    x.roster.add(y.router.nodeId);
    x.router.updateRoster([{ nodeId: y.router.nodeId, addrs: y.router.addrs() }]);
  }
  await a.router.dial(`${b.router.addrs()[0] ?? ''}/p2p/${b.router.nodeId}`);
  return [a, b];
}

function stop(node: Node): Promise<void> {
  const at = routers.indexOf(node.router);
  if (at !== -1) routers.splice(at, 1);
  return node.router.stop();
}

/** A TCP server on 127.0.0.1 standing in for ggml-rpc-server. */
async function listen(onConnection: (socket: Socket) => void): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    onConnection(socket);
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port, sockets };
}

/** Echoes everything and closes its side once the client closed its own (half-close carried through). */
function echo(socket: Socket): void {
  socket.pipe(socket);
}

/** `halfOpen: false` behaves like llama-server: the remote's end of the connection ends ours too. */
async function connect(port: number, halfOpen = true): Promise<Socket> {
  const socket = createConnection({ host: '127.0.0.1', port, allowHalfOpen: halfOpen });
  socket.on('error', () => {});
  await once(socket, 'connect');
  return socket;
}

/** Writes `payload` then ends; resolves with the hash and length of everything read until the remote ended. */
async function roundTrip(port: number, payload: Buffer): Promise<{ sha: string; bytes: number }> {
  const socket = await connect(port);
  const hash = createHash('sha256');
  let bytes = 0;
  socket.on('data', (chunk: Buffer) => {
    hash.update(chunk);
    bytes += chunk.byteLength;
  });
  const ended = once(socket, 'end');
  socket.end(payload);
  await ended;
  socket.destroy();
  return { sha: hash.digest('hex'), bytes };
}

/** A logger whose lines a failing assertion can show (why a tunnel broke). */
function captureLog(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) }), lines };
}

/** Resolves when the socket has closed, however (once(socket, 'close') would reject on a reset). */
function closed(socket: Socket): Promise<void> {
  return new Promise((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())));
}

const sha = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

for (const transport of ['direct', 'stream'] as const) {
  // `direct`: the bytes go through a direct TLS socket keyed over the stream; `stream`: through the libp2p stream's frames.
  const direct = transport === 'direct';
  describe(`RPC tunnel (/shoal/rpc-tunnel/1) over ${transport === 'direct' ? 'a direct socket' : 'the libp2p stream'}`, { timeout: 120_000 }, () => {
    test('bytes round-trip intact through the tunnel, several connections at once, half-close carried', async () => {
      const [driver, donor] = await pair();
      const backend = await listen(echo);
      const logs = captureLog();
      await serveRpcTunnel(donor.router, (id) => (id === 'inst-rpc' ? backend.port : null), { log: logs.log, direct });
      await serveRpcTunnel(driver.router, () => null);
      await using tunnel = await openRpcTunnel(driver.router, donor.router.nodeId, 'inst-rpc', { log: logs.log, direct });
      assert.notEqual(tunnel.port, backend.port);

      const big = randomBytes(6 * 1024 * 1024);
      const t0 = performance.now();
      const result = await roundTrip(tunnel.port, big);
      const bigMs = performance.now() - t0;
      assert.equal(result.bytes, big.byteLength, `the echo came back short; the tunnel logged:\n${logs.lines.join('')}`);
      assert.equal(result.sha, sha(big));

      const payloads = [randomBytes(3 * 1024 * 1024), randomBytes(1), randomBytes(700 * 1024)];
      const results = await Promise.all(payloads.map((payload) => roundTrip(tunnel.port, payload)));
      results.forEach((r, i) => assert.deepEqual(r, { sha: sha(payloads[i] as Buffer), bytes: payloads[i]?.byteLength }));
      assert.equal(tunnel.broken, null);
      assert.deepEqual(tunnel.connections, direct ? { direct: 4, stream: 0 } : { direct: 0, stream: 4 }, 'every connection went the way this transport says');

      // Many small writes with replies in between (the shape of RPC commands) keep their order.
      const socket = await connect(tunnel.port);
      let received = '';
      socket.setEncoding('utf8');
      socket.on('data', (text: string) => (received += text));
      for (let i = 0; i < 50; i++) {
        socket.write(`cmd-${i};`);
        await until(`reply ${i}`, () => received.endsWith(`cmd-${i};`), 2000);
      }
      socket.destroy();
      console.log(`# measured: 6 MiB echoed through the tunnel (12 MiB moved) in ${bigMs.toFixed(0)} ms`);
      await Promise.all([stop(driver), stop(donor)]);
    });

    test('a slow RPC server holds the sender back instead of the tunnel buffering', async () => {
      const [driver, donor] = await pair();
      const hash = createHash('sha256');
      let received = 0;
      let held: Socket | null = null;
      const backend = await listen((socket) => {
        held = socket;
        socket.pause(); // reads nothing until told
        socket.on('data', (chunk: Buffer) => {
          hash.update(chunk);
          received += chunk.byteLength;
        });
        socket.on('end', () => socket.end('done'));
      });
      const logs = captureLog();
      await serveRpcTunnel(donor.router, () => backend.port, { log: logs.log, direct });
      await serveRpcTunnel(driver.router, () => null);
      await using tunnel = await openRpcTunnel(driver.router, donor.router.nodeId, 'inst-rpc', { log: logs.log, direct });

      const payload = randomBytes(64 * 1024 * 1024);
      const client = await connect(tunnel.port);
      // Written chunk by chunk, each after the previous one was taken, so `accepted` is what really left.
      let accepted = 0;
      const writing = (async (): Promise<void> => {
        for (let at = 0; at < payload.byteLength; at += 256 * 1024) {
          const chunk = payload.subarray(at, at + 256 * 1024);
          await new Promise<void>((resolve, reject) => client.write(chunk, (error) => (error ? reject(error) : resolve())));
          accepted += chunk.byteLength;
        }
        client.end();
      })();
      await until('the RPC server to be connected', () => held !== null);
      // Wait until the sender stalls (nothing accepted for a second), or everything has gone.
      let last = -1;
      while (accepted !== last && accepted < payload.byteLength) {
        last = accepted;
        await sleep(1000);
      }
      const stalledAt = accepted;
      // Socket buffers (four kernel sides) and the tunnel's windows hold some MiB; the rest must still wait.
      assert.ok(stalledAt < 48 * 1024 * 1024, `${(stalledAt / 1048576).toFixed(1)} MiB of 64 left the client while nothing was read: the tunnel buffers without bound`);
      (held as Socket | null)?.resume();
      const reply = once(client, 'data');
      reply.catch(() => {});
      await until(`everything to arrive (the tunnel logged: ${logs.lines.join('')})`, () => received === payload.byteLength, 30_000);
      await writing;
      assert.equal(hash.digest('hex'), sha(payload));
      assert.equal(String((await reply)[0]), 'done');
      client.destroy();
      console.log(`# measured: with the RPC server not reading, the sender stalled after ${(stalledAt / 1048576).toFixed(1)} MiB of 64`);
      await Promise.all([stop(driver), stop(donor)]);
    });

    test('when the donor goes, piped sockets are destroyed at once and onBroken fires', async () => {
      const [driver, donor] = await pair();
      const backend = await listen(echo);
      await serveRpcTunnel(donor.router, () => backend.port, { direct });
      await serveRpcTunnel(driver.router, () => null);
      const tunnel = await openRpcTunnel(driver.router, donor.router.nodeId, 'inst-rpc', { direct });
      const broken: ShoalError[] = [];
      tunnel.onBroken((error) => broken.push(error));

      const sockets = await Promise.all([connect(tunnel.port, false), connect(tunnel.port, false)]);
      const closedAt: number[] = [];
      for (const socket of sockets) socket.on('close', () => closedAt.push(performance.now()));
      for (const socket of sockets) {
        const reply = once(socket, 'data');
        socket.write('ping');
        assert.equal(String((await reply)[0]), 'ping');
      }
      await until('the backend to hold both connections', () => backend.sockets.size === 2);

      const stoppedAt = performance.now();
      await stop(donor);
      await until('both driver-side sockets to close', () => closedAt.length === 2, 3000);
      await until('onBroken', () => broken.length === 1, 3000);
      assert.equal(broken[0]?.code, 'INSTANCE_LOST');
      assert.match(broken[0]?.message ?? '', new RegExp(donor.router.nodeId));
      assert.equal(tunnel.broken, broken[0]);
      await until('the backend sockets to close', () => backend.sockets.size === 0, 3000);
      const afterMs = Math.max(...closedAt) - stoppedAt;
      assert.ok(afterMs < 2000, `sockets closed ${afterMs.toFixed(0)} ms after the donor stopped`);

      // A late subscriber hears it too; the listener is gone.
      const late = await new Promise<ShoalError>((resolve) => tunnel.onBroken(resolve));
      assert.equal(late, broken[0]);
      await assert.rejects(connect(tunnel.port));
      await tunnel.close();
      assert.equal(broken.length, 1);
      console.log(`# measured: driver-side sockets closed ${afterMs.toFixed(0)} ms after the donor stopped`);
      await stop(driver);
    });

    test('a donor with no RPC server for the instance, or one that is unreachable, breaks the tunnel with the reason', async () => {
      const [driver, donor] = await pair();
      const backend = await listen(echo);
      const deadPort = backend.port;
      backend.server.close();
      await serveRpcTunnel(donor.router, (id) => (id === 'inst-dead' ? deadPort : null), { direct });
      await serveRpcTunnel(driver.router, () => null);

      for (const [instanceId, pattern] of [
        ['inst-none', /inst-none has no RPC server on node/],
        ['inst-dead', /could not connect to the RPC server of instance inst-dead/],
      ] as const) {
        const tunnel = await openRpcTunnel(driver.router, donor.router.nodeId, instanceId, { direct });
        const brokenWith = new Promise<ShoalError>((resolve) => tunnel.onBroken(resolve));
        const socket = await connect(tunnel.port);
        const gone = closed(socket);
        socket.write('hello');
        await gone;
        const error = await brokenWith;
        assert.equal(error.code, 'INSTANCE_LOST');
        assert.match(error.message, pattern);
        await tunnel.close();
      }

      // A stranger (not a member) cannot open the tunnel protocol; neither can a member at a non-member.
      const stranger = await startNode();
      stranger.roster.add(donor.router.nodeId);
      stranger.router.updateRoster([{ nodeId: donor.router.nodeId, addrs: donor.router.addrs() }]);
      const tunnel = await openRpcTunnel(stranger.router, donor.router.nodeId, 'inst-dead', { direct });
      const brokenWith = new Promise<ShoalError>((resolve) => tunnel.onBroken(resolve));
      // Not awaiting 'connect': the reset may come before it is reported.
      const socket = createConnection({ host: '127.0.0.1', port: tunnel.port });
      socket.on('error', () => {});
      socket.write('hello');
      await closed(socket);
      const strangerError = await brokenWith;
      assert.equal(strangerError.code, 'INSTANCE_LOST');
      assert.match(strangerError.message, /reset|refused|closed/);
      await tunnel.close();
      const refused = donor.router.stats().refusedStreams[RPC_TUNNEL_PROTOCOL] ?? 0;
      assert.ok(refused >= 1, 'the donor refused the stranger\'s tunnel stream');
      await Promise.all([stop(driver), stop(donor), stop(stranger)]);
    });

    test('close() destroys piped sockets and stops listening without reporting a break', async () => {
      const [driver, donor] = await pair();
      const backend = await listen(echo);
      await serveRpcTunnel(donor.router, () => backend.port, { direct });
      await serveRpcTunnel(driver.router, () => null);
      const tunnel: RpcTunnel = await openRpcTunnel(driver.router, donor.router.nodeId, 'inst-rpc', { direct });
      let brokenCalls = 0;
      tunnel.onBroken(() => brokenCalls++);
      const socket = await connect(tunnel.port);
      const reply = once(socket, 'data');
      socket.write('x');
      await reply;
      const gone = closed(socket);
      await tunnel.close();
      await gone;
      await until('the backend socket to close', () => backend.sockets.size === 0, 3000);
      await assert.rejects(connect(tunnel.port));
      await tunnel.close();
      await sleep(100);
      assert.equal(brokenCalls, 0);
      // The donor still serves new tunnels on the same connection.
      const again = await openRpcTunnel(driver.router, donor.router.nodeId, 'inst-rpc', { direct });
      const payload = randomBytes(100_000);
      assert.equal((await roundTrip(again.port, payload)).sha, sha(payload));
      await again.close();
      assert.ok(driver.router.isConnected(donor.router.nodeId));
      await Promise.all([stop(driver), stop(donor)]);
    });

    test('the protocol refuses a first frame that is not the open frame', async () => {
      const [driver, donor] = await pair();
      await serveRpcTunnel(donor.router, () => 1, { direct });
      const channel = await driver.router.openStream(donor.router.nodeId, RPC_TUNNEL_PROTOCOL);
      await channel.send(new Uint8Array([1, 2, 3]));
      const answer = (await channel.next()) as { type: string; code: string };
      assert.deepEqual([answer.type, answer.code], ['error', 'BAD_REQUEST']);
      const bad = await driver.router.openStream(donor.router.nodeId, RPC_TUNNEL_PROTOCOL);
      await bad.send({ type: 'open', instanceId: 'x', extra: 1 });
      await assert.rejects(bad.next());
      await Promise.all([stop(driver), stop(donor)]);
    });
  });
}

describe('RPC tunnel: a process exits after its routers stop under open connections', { timeout: 90_000 }, () => {
  for (const transport of ['direct', 'stream'] as const) {
    test(`over ${transport === 'direct' ? 'a direct socket' : 'the libp2p stream'}`, async () => {
      // A reset refused by libuv (a socket whose FIN was still queued) left a handle Node never closed:
      // the process then spun at 100 % CPU in its exit cleanup instead of exiting.
      const child = spawn(process.execPath, [fileURLToPath(new URL('./rpc-tunnel-exit.fixture.js', import.meta.url)), transport], { stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
      const outcome = await Promise.race([exited, sleep(30_000).then(() => null)]);
      if (outcome === null) child.kill('SIGKILL');
      assert.match(output, /stopped/, `the fixture did not get to stop its routers: ${output}`);
      assert.notEqual(outcome, null, 'the process did not exit within 30 s of stopping');
      assert.deepEqual(outcome, [0, null], output);
    });
  }
});

describe('RPC tunnel: direct sockets negotiated', { timeout: 60_000 }, () => {
  test('a donor that does not offer direct sockets is tunnelled to over the stream', async () => {
    const [driver, donor] = await pair();
    const backend = await listen(echo);
    await serveRpcTunnel(donor.router, () => backend.port, { direct: false });
    await using tunnel = await openRpcTunnel(driver.router, donor.router.nodeId, 'inst-rpc', { direct: true });
    const payload = randomBytes(300_000);
    assert.equal((await roundTrip(tunnel.port, payload)).sha, sha(payload));
    assert.deepEqual(tunnel.connections, { direct: 0, stream: 1 });
    await Promise.all([stop(driver), stop(donor)]);
  });
});

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A child in its own process group, killed with it. */
function spawnGroup(binary: string, args: string[]): { child: ChildProcess; output: () => string; [Symbol.dispose](): void } {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-16_384);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return {
    child,
    output: () => output,
    [Symbol.dispose]: () => {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}

async function untilAccepts(port: number, proc: { child: ChildProcess; output: () => string }): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (proc.child.exitCode !== null) assert.fail(`the process exited with ${proc.child.exitCode}: ${proc.output()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  assert.fail(`nothing listened on ${port}: ${proc.output()}`);
}

async function llamaServer(binary: string, model: string, extra: string[]): Promise<{ url: string; process: ReturnType<typeof spawnGroup> }> {
  const port = await freePort();
  const proc = spawnGroup(binary, ['-m', model, '--host', '127.0.0.1', '--port', String(port), '-t', '1', '-tb', '1', '--parallel', '1', '-c', '256', '--fit', 'off', '--no-webui', ...extra]);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (proc.child.exitCode !== null) assert.fail(`llama-server exited with ${proc.child.exitCode}: ${proc.output()}`);
    const healthy = await fetch(`${url}/health`).then((r) => r.ok, () => false);
    if (healthy) return { url, process: proc };
    await sleep(100);
  }
  assert.fail(`llama-server did not become healthy: ${proc.output()}`);
}

async function complete(url: string): Promise<{ content: string; tokens: number }> {
  const response = await fetch(`${url}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'Once upon a time', n_predict: 12, temperature: 0 }) });
  assert.equal(response.status, 200, await response.clone().text());
  const body = (await response.json()) as { content: string; tokens_predicted: number };
  return { content: body.content, tokens: body.tokens_predicted };
}

const found = await builtEngines();

describe('RPC tunnel with the real llama.cpp engines', { skip: typeof found === 'string' ? found : false, timeout: 300_000 }, () => {
  test('llama-server --rpc through the tunnel to a real ggml-rpc-server answers like a local one; losing the donor fails it at once', async () => {
    const binaries = found as { server: string; rpc: string };
    const dir = await mkdtemp(join(tmpdir(), 'shoal-rpc-tunnel-'));
    try {
      const model = (await resolveBuiltinModel('shoal/tiny', join(dir, 'models')))?.path;
      assert.ok(model !== undefined);
      const rpcPort = await freePort();
      using rpc = spawnGroup(binaries.rpc, ['-H', '127.0.0.1', '-p', String(rpcPort), '-t', '1']);
      await untilAccepts(rpcPort, rpc);

      const [driver, donor] = await pair();
      const logs = captureLog();
      await serveRpcTunnel(donor.router, (id) => (id === 'inst-split' ? rpcPort : null), { log: logs.log });
      await serveRpcTunnel(driver.router, () => null);
      await using tunnel = await openRpcTunnel(driver.router, donor.router.nodeId, 'inst-split', { log: logs.log });
      const broken: ShoalError[] = [];
      tunnel.onBroken((error) => broken.push(error));

      let alone: { content: string; tokens: number };
      {
        const local = await llamaServer(binaries.server, model, ['-ngl', '0']);
        using _local = local.process;
        alone = await complete(local.url);
      }
      // Every layer on the RPC device: all compute crosses the tunnel.
      const split = await llamaServer(binaries.server, model, ['-ngl', '999', '--rpc', `127.0.0.1:${tunnel.port}`]);
      using _split = split.process;
      assert.deepEqual(await complete(split.url), alone, `the split answered differently; tunnel log: ${logs.lines.join('')}`);
      assert.equal(alone.tokens, 12);
      assert.equal(broken.length, 0, logs.lines.join(''));
      assert.match(rpc.output(), /Accepted client connection/);

      // Mid-generation, the donor's node goes: the tunnel breaks and llama-server's RPC device fails.
      const response = await fetch(`${split.url}/completion`, {
        method: 'POST',
        body: JSON.stringify({ prompt: 'Once upon a time', n_predict: 200, ignore_eos: true, temperature: 0, stream: true }),
      });
      assert.equal(response.status, 200);
      const reader = response.body!.getReader();
      const first = await reader.read();
      assert.equal(first.done, false);
      await stop(donor);
      let finished = false;
      try {
        for (;;) {
          const chunk = await reader.read();
          if (chunk.done) break;
          if (/"stop":\s*true/.test(new TextDecoder().decode(chunk.value))) finished = true;
        }
      } catch {
        // the server went away mid-stream: what we expect
      }
      assert.equal(finished, false, 'the generation completed although its RPC device was gone');
      await until('onBroken', () => broken.length === 1, 5000);
      assert.equal(broken[0]?.code, 'INSTANCE_LOST');
      await stop(driver);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
