import '../polyfill.js';
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { pino } from 'pino';
import type { Router } from '../router/index.js';
import { NodeDiagnostics, type NodeMoment } from '../wire/diagnostics.js';
import { ClusterDiagnosticsService, DIAGNOSTICS_PROTOCOL, diagnosticsMembers } from './cluster-diagnostics.js';
import { nodeDiagnostics } from './node-diagnostics.js';
import { startLoopbackRouter, type LoopbackRouter } from '../../test/support/loopback-router.js';

// Real libp2p routers on 127.0.0.1: the protocol, its clock estimate and its failures as a viewer sees them.

const open: Router[] = [];
after(async () => {
  await Promise.all(open.map((router) => router.stop()));
});

async function node(): Promise<LoopbackRouter> {
  const started = await startLoopbackRouter('diag');
  open.push(started.router);
  return started;
}

function admit(x: LoopbackRouter, y: LoopbackRouter): void {
  x.roster.add(y.router.nodeId);
  x.router.updateRoster([...x.roster].map((nodeId) => ({ nodeId, addrs: open.find((r) => r.nodeId === nodeId)?.addrs() ?? [] })));
}

/** A member's diagnostics service whose wall clock runs `skewMs` ahead of the real one. */
function service(n: LoopbackRouter, name: string, skewMs: number, members: () => { nodeId: string; name: string }[], moments: NodeMoment[] = [], requestTimeoutMs?: number): ClusterDiagnosticsService {
  const nowMs = (): number => Date.now() + skewMs;
  return new ClusterDiagnosticsService({
    selfId: n.router.nodeId,
    net: n.router,
    local: () => nodeDiagnostics({ nodeId: n.router.nodeId, name, startedAtMs: nowMs(), nowMs, runners: () => [], moments: () => moments, router: n.router }),
    members,
    nowMs,
    log: pino({ level: 'silent' }),
    ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}),
  });
}

test('a viewer reads every member, estimates each clock from the round trip and says why one could not be read', async () => {
  const [a, b, c, d] = await Promise.all([node(), node(), node(), node()]);
  // a, b and c are members of each other; d is in a's roster, but a is not in d's, so d refuses it.
  for (const x of [a, b, c]) for (const y of [a, b, c]) if (x !== y) admit(x, y);
  admit(a, d);
  const members = (): { nodeId: string; name: string }[] => [
    { nodeId: a.router.nodeId, name: 'a' },
    { nodeId: b.router.nodeId, name: 'b' },
    { nodeId: c.router.nodeId, name: 'c' },
    { nodeId: d.router.nodeId, name: 'd' },
  ];
  const viewer = service(a, 'a', 0, members, [], 1500);
  // b's clock runs 5 s ahead of a's, and it has a moment to show on a's clock.
  const bMoment: NodeMoment = { atMs: Date.now() + 5000, kind: 'join', text: 'b joined', data: {} };
  const bService = service(b, 'b', 5000, members, [bMoment]);
  const dService = service(d, 'd', 0, members);
  await Promise.all([viewer.start(), bService.start(), dService.start()]);
  // c serves the protocol but never answers: the ask must end at the deadline, not hang.
  await c.router.handle(DIAGNOSTICS_PROTOCOL, () => new Promise<never>(() => undefined));
  await a.router.dial(`${b.router.addrs()[0]}/p2p/${b.router.nodeId}`);
  await a.router.dial(`${c.router.addrs()[0]}/p2p/${c.router.nodeId}`);

  const view = await viewer.cluster();
  assert.equal(view.viewerNodeId, a.router.nodeId);
  const byName = new Map(view.members.map((m) => [m.name, m]));
  const self = byName.get('a')!;
  assert.deepEqual([self.reachable, self.offsetMs, self.rttMs], [true, 0, 0]);
  const bView = byName.get('b')!;
  assert.equal(bView.reachable, true, bView.error ?? '');
  assert.ok(bView.rttMs !== null && bView.offsetMs !== null);
  // NTP-style: off by at most half the round trip (plus a millisecond of rounding).
  assert.ok(Math.abs(bView.offsetMs - 5000) <= bView.rttMs / 2 + 1, `offset ${bView.offsetMs} with rtt ${bView.rttMs}`);
  assert.equal(NodeDiagnostics.safeParse(bView.diagnostics).success, true);
  assert.equal(bView.diagnostics?.nodeId, b.router.nodeId);
  for (const name of ['c', 'd']) {
    const unread = byName.get(name)!;
    assert.equal(unread.reachable, false, name);
    assert.ok(unread.error !== null && unread.error.length > 0, name);
    assert.deepEqual([unread.offsetMs, unread.rttMs, unread.diagnostics], [null, null, null]);
  }
  assert.match(byName.get('c')!.error ?? '', /^no answer within 1500 ms$/);
  assert.doesNotMatch(byName.get('d')!.error ?? '', /no answer within/, 'd refused rather than kept silent');
  assert.equal(view.versionMismatch, null);

  // The timeline puts b's moment, stamped 5 s ahead on b's clock, at about now on a's.
  const timeline = await viewer.timeline({ sinceMs: null, limit: 100 });
  const onA = timeline.entries.find((e) => e.text === 'b joined');
  assert.ok(onA !== undefined);
  assert.equal(onA.localAtMs, bMoment.atMs);
  const bClock = timeline.clocks.find((clock) => clock.nodeId === b.router.nodeId)!;
  assert.ok(bClock.rttMs !== null && Math.abs(onA.atMs - (bMoment.atMs - 5000)) <= bClock.rttMs / 2 + 1, `at ${onA.atMs}, rtt ${bClock.rttMs}`);
  assert.deepEqual(timeline.clocks.map((clock) => clock.reachable), [true, true, false, false]);
});

test('a node alone asks only itself; a roster lists every member by nickname', () => {
  assert.deepEqual(diagnosticsMembers({ dissolved: false, members: {} }, 'n1', 'one'), [{ nodeId: 'n1', name: 'one' }]);
  const members = { n1: { nodeId: 'n1', name: 'one', nickname: null }, n2: { nodeId: 'n2', name: 'two', nickname: 'gpu box' } };
  assert.deepEqual(diagnosticsMembers({ dissolved: false, members }, 'n1', 'one'), [
    { nodeId: 'n1', name: 'one' },
    { nodeId: 'n2', name: 'gpu box' },
  ]);
  assert.deepEqual(diagnosticsMembers({ dissolved: true, members }, 'n1', 'one'), [{ nodeId: 'n1', name: 'one' }]);
});
