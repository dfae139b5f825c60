import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Timeline, type MemberDiagnostics, type NodeDiagnostics, type NodeMoment, type RunnerEntry } from '../wire/diagnostics.js';
import { buildTimeline, estimateClock, TIMELINE_MAX_LIMIT, versionMismatch } from './timeline.js';
import { planeMoments, type PlaneGlance } from './plane-moments.js';

function moment(atMs: number, text: string): NodeMoment {
  return { atMs, kind: 'join', text, data: {} };
}

function entry(atMs: number, phase: RunnerEntry['phase'], detail: string | null = null): RunnerEntry {
  return { atMs, phase, requestId: phase === 'prefill' ? 'r1' : null, promptTokens: phase === 'prefill' ? 7 : null, completionTokens: null, rssBytes: null, detail };
}

function diagnostics(nodeId: string, moments: NodeMoment[], recorder: RunnerEntry[] = [], build: Partial<Pick<NodeDiagnostics, 'version' | 'commit' | 'wireVersion'>> = {}): NodeDiagnostics {
  return {
    nodeId,
    name: nodeId,
    version: build.version ?? '0.1.0',
    commit: build.commit === undefined ? 'abc123' : build.commit,
    wireVersion: build.wireVersion ?? 3,
    pid: 1,
    nowMs: 0,
    uptimeMs: 0,
    runners:
      recorder.length === 0
        ? []
        : [{ instanceId: `${nodeId}-i1`, modelId: 'shoal/tiny', backend: 'llama_cpp-cpu', role: 'full', state: 'ready', reason: null, pid: 2, restarts: 0, inFlight: 0, queued: 0, recorder, stderrTail: [] }],
    moments,
    telemetry: {},
    dataPlane: {},
  };
}

function member(d: NodeDiagnostics | null, offsetMs: number | null, nodeId = d?.nodeId ?? 'x'): MemberDiagnostics {
  return { nodeId, name: nodeId, reachable: d !== null, error: d === null ? 'timed out' : null, offsetMs, rttMs: offsetMs === null ? null : 4, diagnostics: d };
}

test('the clock estimate takes the member clock against the midpoint of the round trip', () => {
  assert.deepEqual(estimateClock(1000, 1010, 6005), { offsetMs: 5000, rttMs: 10 });
  assert.deepEqual(estimateClock(1000, 1010, 1005), { offsetMs: 0, rttMs: 10 });
  assert.deepEqual(estimateClock(2000, 2020, 1010), { offsetMs: -1000, rttMs: 20 });
});

test('the timeline moves each member onto the viewer clock and merges in time order', () => {
  // b's clock runs 5 s ahead, c's 2 s behind: on their own clocks the order would be wrong.
  const a = diagnostics('a', [moment(1000, 'a first'), moment(1300, 'a third')]);
  const b = diagnostics('b', [moment(6200, 'b second')], [entry(6400, 'prefill', 'took it'), entry(6600, 'done')]);
  const c = diagnostics('c', [moment(-1000 + 1350, 'c fourth')]);
  const timeline = buildTimeline('a', [member(a, 0), member(b, 5000), member(c, -2000), member(null, null, 'd')], { sinceMs: null, limit: 100 });
  assert.equal(Timeline.safeParse(timeline).success, true);
  assert.deepEqual(
    timeline.entries.map((e) => [e.atMs, e.nodeId, e.kind]),
    [
      [1000, 'a', 'join'],
      [1200, 'b', 'join'],
      [1300, 'a', 'join'],
      [1400, 'b', 'prefill'],
      [1600, 'b', 'done'],
      [2350, 'c', 'join'],
    ],
  );
  const prefill = timeline.entries[3]!;
  assert.equal(prefill.localAtMs, 6400);
  assert.equal(prefill.source, 'runner');
  assert.equal(prefill.instanceId, 'b-i1');
  assert.equal(prefill.modelId, 'shoal/tiny');
  assert.match(prefill.text, /prefill, request r1, 7 prompt tokens, took it/);
  assert.deepEqual(
    timeline.clocks.map((c) => [c.nodeId, c.offsetMs, c.reachable]),
    [
      ['a', 0, true],
      ['b', 5000, true],
      ['c', -2000, true],
      ['d', null, false],
    ],
  );
});

test('the timeline keeps only entries after sinceMs, and the newest limit of them', () => {
  const a = diagnostics('a', [100, 200, 300, 400, 500].map((t) => moment(t, `at ${t}`)));
  const b = diagnostics('b', [moment(1250, 'b at 250')]);
  const members = [member(a, 0), member(b, 1000)];
  assert.deepEqual(buildTimeline('a', members, { sinceMs: 250, limit: 100 }).entries.map((e) => e.atMs), [300, 400, 500]);
  assert.deepEqual(buildTimeline('a', members, { sinceMs: 200, limit: 100 }).entries.map((e) => e.atMs), [250, 300, 400, 500]);
  assert.deepEqual(buildTimeline('a', members, { sinceMs: null, limit: 2 }).entries.map((e) => e.atMs), [400, 500]);
  // Out-of-range limits are held to 1..TIMELINE_MAX_LIMIT.
  assert.deepEqual(buildTimeline('a', members, { sinceMs: null, limit: 0 }).entries.map((e) => e.atMs), [500]);
  assert.equal(buildTimeline('a', members, { sinceMs: null, limit: TIMELINE_MAX_LIMIT * 10 }).entries.length, 6);
});

test('a version mismatch names who runs which build; one build, or members not read, is none', () => {
  const same = [member(diagnostics('a', []), 0), member(diagnostics('b', []), 1), member(null, null, 'c')];
  assert.equal(versionMismatch(same), null);
  const commit = versionMismatch([member(diagnostics('a', []), 0), member(diagnostics('b', [], [], { commit: 'def456' }), 1), member(diagnostics('c', []), 2)]);
  assert.ok(commit !== null);
  assert.match(commit, /commit abc123, wire 3\) on a, c/);
  assert.match(commit, /commit def456, wire 3\) on b/);
  assert.match(versionMismatch([member(diagnostics('a', []), 0), member(diagnostics('b', [], [], { wireVersion: 4 }), 1)]) ?? '', /wire 4\) on b/);
  assert.match(versionMismatch([member(diagnostics('a', []), 0), member(diagnostics('b', [], [], { version: '0.2.0' }), 1)]) ?? '', /0\.2\.0 .* on b/);
  assert.match(versionMismatch([member(diagnostics('a', []), 0), member(diagnostics('b', [], [], { commit: null }), 1)]) ?? '', /commit unknown, wire 3\) on b/);
});

test('plane moments: an election, mastership, joins, a prune, a return and a leave', () => {
  const none: PlaneGlance = { role: 'standalone', term: 0, masterId: null, members: {} };
  const founded: PlaneGlance = { role: 'master', term: 1, masterId: 'a', members: { a: { name: 'alpha', status: 'active' } } };
  assert.deepEqual(
    planeMoments('a', none, founded).map((m) => [m.kind, m.text]),
    [
      ['election', 'term 1: alpha is master'],
      ['master', 'this node became master (term 1)'],
      ['join', 'this node joined the cluster (1 member(s))'],
    ],
  );
  const three: PlaneGlance = { ...founded, members: { ...founded.members, b: { name: 'beta', status: 'active' }, c: { name: 'gamma', status: 'active' } } };
  assert.deepEqual(planeMoments('a', founded, three).map((m) => [m.kind, m.data.nodeId, m.data.members]), [
    ['join', 'b', 3],
    ['join', 'c', 3],
  ]);
  const pruned: PlaneGlance = { ...three, members: { ...three.members, b: { name: 'beta', status: 'pruned' } } };
  assert.deepEqual(planeMoments('a', three, pruned).map((m) => [m.kind, m.text]), [['prune', 'beta was pruned: no heartbeat']]);
  assert.deepEqual(planeMoments('a', pruned, three).map((m) => [m.kind, m.data.returned]), [['join', true]]);
  const { c: _gone, ...two } = three.members;
  assert.deepEqual(planeMoments('a', three, { ...three, members: two }).map((m) => [m.kind, m.text]), [['leave', 'gamma left (2 member(s))']]);
  // Losing the mastership to another node in a new term.
  const lost: PlaneGlance = { ...three, role: 'follower', term: 2, masterId: 'b' };
  assert.deepEqual(planeMoments('a', three, lost).map((m) => [m.kind, m.data.term, m.data.master ?? m.data.masterId]), [
    ['election', 2, 'b'],
    ['master', 2, false],
  ]);
  // A term without a master yet is no election result; nothing else changed, nothing is recorded.
  assert.deepEqual(planeMoments('a', three, { ...three, role: 'candidate', term: 2, masterId: null }).map((m) => m.kind), ['master']);
  assert.deepEqual(planeMoments('a', three, three), []);
});
