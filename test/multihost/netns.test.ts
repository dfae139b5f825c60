// Proves the multi-host harness (test/support/netns.ts): a private LAN of network namespaces with faults.
// Needs root; skipped with a message otherwise. All traffic stays inside the LAN's own namespaces.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  captureOutput,
  createLan,
  killGroup,
  listShoalNetResources,
  netnsAvailable,
  sweepStale,
  waitForExit,
  type Lan,
  type LanHost,
} from '../support/netns.js';

const available = await netnsAvailable();
const skip = available.ok ? false : `multi-host harness skipped: ${available.reason}`;

// Inline programs run inside the namespaces with `node -e` (argv = process.argv.slice(1)).
const ECHO_SERVER = String.raw`
const net = require('node:net');
const port = Number(process.argv[1]);
net.createServer((s) => { s.on('error', () => {}); s.pipe(s); })
  .listen(port, '0.0.0.0', () => console.log('echo listening ' + port));
setTimeout(() => process.exit(0), 120000); // bounded lifetime
`;

const TCP_PROBE = String.raw`
const net = require('node:net');
const [ip, port, timeoutMs] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const started = Date.now();
const done = (ok, why) => { console.log((ok ? 'OK ' : 'FAIL ') + why + ' ' + (Date.now() - started)); process.exit(ok ? 0 : 1); };
setTimeout(() => done(false, 'timeout'), timeoutMs);
const s = net.connect({ host: ip, port }, () => s.write('ping\n'));
let got = '';
s.on('data', (d) => { got += d; if (got.includes('ping\n')) done(true, 'echo'); });
s.on('error', (e) => done(false, e.code || e.message));
`;

const MCAST_RECEIVER = String.raw`
const dgram = require('node:dgram');
const [group, port, iface, windowMs] = [process.argv[1], Number(process.argv[2]), process.argv[3], Number(process.argv[4])];
const s = dgram.createSocket({ type: 'udp4', reuseAddr: true });
s.on('message', (m, r) => { console.log('got ' + m + ' from ' + r.address); process.exit(0); });
s.bind(port, () => { s.addMembership(group, iface); console.log('joined'); });
setTimeout(() => { console.log('none'); process.exit(2); }, windowMs);
`;

const MCAST_SENDER = String.raw`
const dgram = require('node:dgram');
const [group, port, iface, count] = [process.argv[1], Number(process.argv[2]), process.argv[3], Number(process.argv[4])];
const s = dgram.createSocket('udp4');
s.bind(0, iface, () => {
  s.setMulticastInterface(iface);
  s.setMulticastTTL(1);
  let n = 0;
  const t = setInterval(() => {
    s.send('hello ' + n + ' from ' + iface, port, group);
    if (++n >= count) { clearInterval(t); setTimeout(() => s.close(), 50); }
  }, 100);
});
`;

const TICKER = String.raw`
const { spawn } = require('node:child_process');
const tick = (role) => { let n = 0; const t = setInterval(() => { console.log(role + ' tick ' + n++); if (n > 800) { clearInterval(t); process.exit(0); } }, 25); };
spawn(process.execPath, ['-e', '(' + tick.toString() + ')("child")'], { stdio: 'inherit' });
tick('parent');
`;

const ECHO_PORT = 7000;
const PROBE_TIMEOUT_MS = 1_500;

async function startEcho(lan: Lan, host: LanHost, port = ECHO_PORT) {
  const child = lan.execNode(host, ECHO_SERVER, [String(port)]);
  const out = captureOutput(child, 8 * 1024);
  await out.all.waitFor(`echo listening ${port}`, 10_000, out.exited);
  return child;
}

async function tcp(lan: Lan, from: LanHost, to: { ip: string }, port = ECHO_PORT): Promise<{ ok: boolean; detail: string }> {
  const r = await lan.run(from, process.execPath, ['-e', TCP_PROBE, to.ip, String(port), String(PROBE_TIMEOUT_MS)], {
    timeoutMs: PROBE_TIMEOUT_MS + 10_000,
  });
  return { ok: r.code === 0, detail: `${from.name}->${to.ip}:${port} code=${r.code} ${r.stdout.trim()} ${r.stderr.trim()}` };
}

async function multicast(lan: Lan, from: LanHost, to: LanHost, windowMs: number, sends: number): Promise<string> {
  const group = '224.0.0.251';
  const port = '5399';
  const receiver = lan.execNode(to, MCAST_RECEIVER, [group, port, to.ip, String(windowMs)]);
  const out = captureOutput(receiver, 8 * 1024);
  await out.all.waitFor('joined', 10_000, out.exited);
  const sender = await lan.run(from, process.execPath, ['-e', MCAST_SENDER, group, port, from.ip, String(sends)], {
    timeoutMs: windowMs + 10_000,
  });
  assert.equal(sender.code, 0, `multicast sender failed: ${sender.stderr}`);
  await waitForExit(receiver, windowMs + 10_000);
  return out.all.toString().trim();
}

describe('multi-host harness (network namespaces)', { skip, timeout: 120_000 }, () => {
  let lan: Lan;
  let h1: LanHost;
  let h2: LanHost;
  let h3: LanHost;

  before(async () => {
    lan = await createLan({ hosts: 3 });
    [h1, h2, h3] = lan.hosts as [LanHost, LanHost, LanHost];
    for (const h of lan.hosts) await startEcho(lan, h);
  });

  after(async () => {
    await lan?.destroy();
  });

  it('puts each host in its own namespace with its address', async () => {
    assert.deepEqual(
      lan.hosts.map((h) => h.name),
      ['h1', 'h2', 'h3'],
    );
    for (const h of lan.hosts) {
      const r = await lan.run(h, 'ip', ['-o', '-4', 'addr', 'show', 'dev', 'eth0'], { timeoutMs: 5_000 });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`inet ${h.ip.replaceAll('.', '\\.')}/`));
      const routes = await lan.run(h, 'ip', ['route', 'show'], { timeoutMs: 5_000 });
      assert.match(routes.stdout, /^224\.0\.0\.0\/4 dev eth0/m);
      assert.doesNotMatch(routes.stdout, /^default/m, 'no way out of the LAN');
    }
  });

  it('two hosts reach each other (TCP echo both ways)', async () => {
    for (const [a, b] of [
      [h1, h2],
      [h2, h1],
      [h3, h1],
    ] as const) {
      const r = await tcp(lan, a, b);
      assert.ok(r.ok, r.detail);
    }
    // loopback works inside a namespace too
    const lo = await tcp(lan, h1, { ip: '127.0.0.1' });
    assert.ok(lo.ok, lo.detail);
  });

  it('a partition blocks TCP both ways, leaves the rest alone, and heal restores it', async () => {
    await lan.partition([h1], [h2, h3]);
    const rules = await lan.rules();
    const blocked = await Promise.all(
      [
        [h1, h2],
        [h2, h1],
        [h1, h3],
        [h3, h1],
      ].map(([a, b]) => tcp(lan, a as LanHost, b as LanHost)),
    );
    for (const r of blocked) assert.ok(!r.ok, `expected blocked: ${r.detail}\n${rules}`);
    const inside = await tcp(lan, h2, h3);
    assert.ok(inside.ok, `same side must still talk: ${inside.detail}`);
    await lan.heal();
    for (const [a, b] of [
      [h1, h2],
      [h2, h1],
      [h3, h1],
    ] as const) {
      const r = await tcp(lan, a, b);
      assert.ok(r.ok, `expected healed: ${r.detail}`);
    }
  });

  it('random drops: 100% blocks, 0% passes', async () => {
    await lan.dropRandom(h2, 100);
    const blockedIn = await tcp(lan, h1, h2);
    assert.ok(!blockedIn.ok, blockedIn.detail);
    const blockedOut = await tcp(lan, h2, h3);
    assert.ok(!blockedOut.ok, blockedOut.detail);
    const others = await tcp(lan, h1, h3);
    assert.ok(others.ok, `drops on h2 must not touch h1<->h3: ${others.detail}`);
    await lan.dropRandom(h2, 0);
    const passes = await tcp(lan, h1, h2);
    assert.ok(passes.ok, passes.detail);
    await lan.dropRandom(h3, 100);
    await lan.dropRandom(h1, 30);
    assert.match(await lan.rules(), /iifname "\w+p1" numgen random mod 100 < 30 drop/);
    await lan.clearDrops();
    const cleared = await tcp(lan, h1, h3);
    assert.ok(cleared.ok, cleared.detail);
    assert.doesNotMatch(await lan.rules(), /chain loss \{[^}]*drop/);
  });

  it('SIGSTOP/SIGCONT/SIGKILL reach a whole process group inside a namespace', async () => {
    const ticker = lan.execNode(h1, TICKER);
    const out = captureOutput(ticker, 4 * 1024);
    await out.all.waitFor(/parent tick \d+[\s\S]*child tick \d+|child tick \d+[\s\S]*parent tick \d+/, 10_000, out.exited);

    assert.ok(killGroup(ticker, 'SIGSTOP'));
    await new Promise((r) => setTimeout(r, 200)); // let output already in the pipe arrive
    const frozen = out.all.total;
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(out.all.total, frozen, 'a stopped group prints nothing');

    assert.ok(killGroup(ticker, 'SIGCONT'));
    const tail = out.all.total;
    // both processes tick again
    const resumed = async (role: string) => {
      const deadline = Date.now() + 5_000;
      while (Date.now() < deadline) {
        const text = out.all.toString();
        const since = text.slice(Math.max(0, text.length - (out.all.total - tail)));
        if (since.includes(`${role} tick`)) return;
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.fail(`${role} did not resume`);
    };
    await resumed('parent');
    await resumed('child');

    assert.ok(killGroup(ticker, 'SIGKILL'));
    const exit = await waitForExit(ticker, 5_000);
    assert.equal(exit.signal, 'SIGKILL');
    // the grandchild died with the group: nothing but the echo server is left in h1
    const deadline = Date.now() + 5_000;
    let pids: string[] = [];
    while (Date.now() < deadline) {
      const listing = await new Promise<string>((resolve) => {
        const p = spawn('ip', ['netns', 'pids', h1.ns], { stdio: ['ignore', 'pipe', 'ignore'] });
        let s = '';
        p.stdout.setEncoding('utf8').on('data', (c: string) => (s += c));
        p.once('close', () => resolve(s));
      });
      pids = listing.split('\n').filter(Boolean);
      if (pids.length === 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(pids.length, 1, `left in ${h1.ns}: ${pids.join(',')}`);
  });

  it('multicast crosses the bridge between namespaces, and a partition stops it', async () => {
    const got = await multicast(lan, h1, h2, 3_000, 10);
    assert.match(got, /got hello \d+ from 10\./, got);
    assert.match(got, new RegExp(`from ${h1.ip.replaceAll('.', '\\.')}`));

    await lan.partition([h1], [h2]);
    try {
      const none = await multicast(lan, h1, h2, 1_500, 15);
      assert.match(none, /none/, `partitioned multicast arrived: ${none}`);
    } finally {
      await lan.heal();
    }
  });

  it('delay proxy adds latency each way', async () => {
    const plain = await lan.run(h3, process.execPath, ['-e', TCP_PROBE, h2.ip, String(ECHO_PORT), '5000'], { timeoutMs: 15_000 });
    assert.equal(plain.code, 0, plain.stdout + plain.stderr);
    await using proxy = await lan.delayProxy({ listenNs: h1, listenPort: 7100, target: { ip: h2.ip, port: ECHO_PORT }, delayMs: 150 });
    const r = await lan.run(h3, process.execPath, ['-e', TCP_PROBE, proxy.ip, String(proxy.port), '5000'], { timeoutMs: 15_000 });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const ms = Number(/OK echo (\d+)/.exec(r.stdout)?.[1]);
    // a lower bound only: request and reply each wait 150 ms in the proxy
    assert.ok(ms >= 290, `round trip through the proxy took ${ms} ms`);
  });
});

describe('multi-host harness cleanup', { skip, timeout: 120_000 }, () => {
  it('destroy removes namespaces, links and processes; reports setup/teardown time', async (t) => {
    const setupStart = performance.now();
    const lan = await createLan({ hosts: 3, subnet: '10.213.250.0/24' });
    const setupMs = performance.now() - setupStart;
    assert.deepEqual(
      lan.hosts.map((h) => h.ip),
      ['10.213.250.1', '10.213.250.2', '10.213.250.3'],
    );
    const sleeper = lan.execNode('h2', 'setTimeout(() => {}, 60000)');
    await lan.partition(['h1'], ['h2']);
    await lan.dropRandom('h3', 50);

    const before = await listShoalNetResources();
    for (const ns of [lan.switchNs, ...lan.hosts.map((h) => h.ns)]) assert.ok(before.namespaces.includes(ns), ns);

    const teardownStart = performance.now();
    await lan.destroy();
    const teardownMs = performance.now() - teardownStart;
    await lan.destroy(); // idempotent

    assert.notEqual((await waitForExit(sleeper, 5_000)).signal, null);
    const left = await listShoalNetResources();
    assert.deepEqual(
      left.namespaces.filter((n) => n.startsWith(lan.prefix)),
      [],
      'namespaces of this LAN left',
    );
    assert.deepEqual(left.links, [], 'shl* links left in the host namespace');
    t.diagnostic(`3-host LAN: setup ${setupMs.toFixed(0)} ms, teardown ${teardownMs.toFixed(0)} ms`);
  });

  it('sweepStale removes leftovers of a dead run, processes included', async () => {
    // a pid that is surely dead: a process that has exited
    const gone = spawn(process.execPath, ['-e', '0']);
    await waitForExit(gone, 10_000);
    const stale = `shl${randomBytes(3).toString('hex').slice(0, 5)}-${gone.pid}-sw`;
    const add = spawn('ip', ['netns', 'add', stale]);
    assert.equal((await waitForExit(add, 10_000)).code, 0);
    // a process left running in the stale namespace, as a crashed run would leave it
    const orphan = spawn('ip', ['netns', 'exec', stale, process.execPath, '-e', 'setTimeout(() => {}, 60000)'], {
      detached: true,
      stdio: 'ignore',
    });
    try {
      await new Promise((r) => setTimeout(r, 200));
      const removed = await sweepStale();
      assert.ok(removed.includes(`netns ${stale}`), `sweep removed: ${removed.join(', ')}`);
      const exit = await waitForExit(orphan, 5_000);
      assert.equal(exit.signal, 'SIGKILL');
      assert.ok(!(await listShoalNetResources()).namespaces.includes(stale));
    } finally {
      killGroup(orphan, 'SIGKILL');
      spawn('ip', ['netns', 'delete', stale], { stdio: 'ignore' });
    }
  });
});
