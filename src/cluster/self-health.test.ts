import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InstanceId, ModelId, NodeId } from '../common/ids.js';
import { jsonBytes, MAX_TELEMETRY_MESSAGE_BYTES, TelemetryMessage } from '../master/core/messages.js';
import type { NodeMoment } from '../wire/diagnostics.js';
import { HEALTH_REMEDIATION_MAX_CHARS, HEALTH_TEXT_MAX_CHARS, MAX_REPORTED_HEALTH_REASONS, type DownloadReport, type RunnerReport } from '../wire/telemetry.js';
import { explainHealth, OTHER_BUILD_CODE, sameBuild, selfHealthReasons, WATCHDOG_REASON_WINDOW_MS, type ExplainedHealth, type SelfHealthInputs } from './self-health.js';

const NOW = Date.parse('2026-12-02T06:00:00Z');
const GIB = 1024 ** 3;

const healthy: SelfHealthInputs = {
  nowMs: NOW,
  persistence: [],
  downloads: [],
  runners: [],
  modelsDisk: { path: '/data/models', freeBytes: 200 * GIB, reserveBytes: 10 * GIB },
  engineCompute: 'cpu',
  gpuPresent: false,
  moments: [],
};

function download(overrides: Partial<DownloadReport> = {}): DownloadReport {
  return {
    id: 'dl-1',
    modelId: 'acme/m:Q4_K_M' as ModelId,
    state: 'downloading',
    doneBytes: 10,
    totalBytes: 100,
    bytesPerSecond: 5,
    source: { kind: 'hub' },
    error: null,
    agoMs: 1000,
    ...overrides,
  };
}

function runner(overrides: Partial<RunnerReport> = {}): RunnerReport {
  return { instanceId: 'inst-1' as InstanceId, modelId: 'acme/m:Q4_K_M' as ModelId, role: 'full', state: 'ready', reason: null, inFlight: 0, queued: 0, ...overrides };
}

const stall = (agoMs: number, text = 'no token for 60 s from acme/m: restarted'): NodeMoment => ({ atMs: NOW - agoMs, kind: 'runner-stall', text, data: {} });
const codes = (input: Partial<SelfHealthInputs>): string[] => selfHealthReasons({ ...healthy, ...input }).map((r) => r.code);

test('a healthy node has no reasons of its own', () => {
  assert.deepEqual(selfHealthReasons(healthy), []);
});

test('a failed download is a reason naming the model, why, and the command to retry; cancelled and running ones are not', () => {
  const [only, ...rest] = selfHealthReasons({ ...healthy, downloads: [download({ state: 'failed', error: { code: 'HUB_UNREACHABLE', message: 'the hub did not answer' } }), download({ id: 'dl-2', state: 'cancelled' }), download({ id: 'dl-3' })] });
  assert.deepEqual(rest, []);
  assert.equal(only?.code, 'download-failed');
  assert.match(only.text, /acme\/m:Q4_K_M failed: the hub did not answer/);
  assert.match(only.remediation, /shoal models pull acme\/m:Q4_K_M/);
  const two = selfHealthReasons({ ...healthy, downloads: [download({ state: 'failed', error: null }), download({ id: 'dl-2', modelId: 'other/x:Q8' as ModelId, state: 'failed', error: null })] });
  assert.equal(two.length, 1, 'one reason per kind');
  assert.match(two[0]!.text, /^2 downloads failed \(acme\/m:Q4_K_M and other\/x:Q8\)/);
  assert.deepEqual(codes({ downloads: [download({ state: 'cancelled' })] }), []);
});

test('the models disk is short of headroom exactly when its free space is under the store reserve (downloads are refused there)', () => {
  const reasons = selfHealthReasons({ ...healthy, modelsDisk: { path: '/data/models', freeBytes: 3 * GIB, reserveBytes: 10 * GIB } });
  assert.equal(reasons.length, 1);
  assert.equal(reasons[0]!.code, 'models-disk-low');
  assert.match(reasons[0]!.text, /3\.00 GiB free on the models disk, under the 10\.0 GiB reserve/);
  assert.match(reasons[0]!.remediation, /\/data\/models/);
  assert.deepEqual(codes({ modelsDisk: { path: '/d', freeBytes: 10 * GIB, reserveBytes: 10 * GIB } }), [], 'at the reserve downloads still go');
  assert.deepEqual(codes({ modelsDisk: null }), [], 'unreadable: no guess');
});

test('engines built for the CPU on a node with a GPU are a reason; GPU builds, no GPU or no build are not', () => {
  const [reason] = selfHealthReasons({ ...healthy, gpuPresent: true, engineCompute: 'cpu' });
  assert.equal(reason?.code, 'engines-cpu-only');
  assert.match(reason.remediation, /shoal doctor --fix --engine-compute cuda/);
  assert.deepEqual(codes({ gpuPresent: true, engineCompute: 'cuda' }), []);
  assert.deepEqual(codes({ gpuPresent: false, engineCompute: 'cpu' }), []);
  assert.deepEqual(codes({ gpuPresent: true, engineCompute: null }), []);
});

test('the hang watchdog firing is a reason for 10 minutes, counted, with the latest moment', () => {
  const [reason] = selfHealthReasons({ ...healthy, moments: [stall(8 * 60_000, 'older stall'), stall(2 * 60_000), { atMs: NOW, kind: 'election', text: 'elected', data: {} }] });
  assert.equal(reason?.code, 'watchdog-fired');
  assert.match(reason.text, /fired 2 times in the last 10 min \(latest 2 min ago\): no token for 60 s/);
  assert.deepEqual(codes({ moments: [stall(WATCHDOG_REASON_WINDOW_MS + 1)] }), [], 'older than the window');
  assert.deepEqual(codes({ moments: [stall(WATCHDOG_REASON_WINDOW_MS)] }), ['watchdog-fired']);
});

test("a runner whose breaker is open (state failed) is a reason naming it and how to start it again", () => {
  const [reason] = selfHealthReasons({ ...healthy, runners: [runner(), runner({ instanceId: 'inst-9' as InstanceId, state: 'failed', reason: 'crashed 5 times in 60 s' })] });
  assert.equal(reason?.code, 'runner-failed');
  assert.match(reason.text, /acme\/m:Q4_K_M was given up after repeated crashes: crashed 5 times in 60 s/);
  assert.match(reason.remediation, /shoal models stop inst-9/);
  assert.deepEqual(codes({ runners: [runner({ state: 'restarting' })] }), []);
});

test("the event log's degradation travels too, first", () => {
  assert.deepEqual(codes({ persistence: [{ text: 'the event log cannot be written: ENOSPC', remediation: 'free disk space' }], runners: [runner({ state: 'failed' })] }), ['log-not-persisted', 'runner-failed']);
});

test('every kind at once, at its longest in three-byte characters, stays one bounded telemetry message', () => {
  const long = '€'.repeat(400);
  const reasons = selfHealthReasons({
    nowMs: NOW,
    persistence: [{ text: long, remediation: long }],
    downloads: [download({ state: 'failed', modelId: `€/${'m'.repeat(195)}` as ModelId, error: { code: 'X', message: long } })],
    runners: [runner({ state: 'failed', reason: long, instanceId: 'i'.repeat(64) as InstanceId })],
    modelsDisk: { path: `/${long}`, freeBytes: 0, reserveBytes: 10 * GIB },
    engineCompute: 'cpu',
    gpuPresent: true,
    moments: [stall(0, long)],
  });
  assert.deepEqual(reasons.map((r) => r.code), ['log-not-persisted', 'download-failed', 'models-disk-low', 'engines-cpu-only', 'watchdog-fired', 'runner-failed']);
  assert.ok(reasons.length <= MAX_REPORTED_HEALTH_REASONS);
  for (const r of reasons) assert.ok(r.text.length <= HEALTH_TEXT_MAX_CHARS && r.remediation.length <= HEALTH_REMEDIATION_MAX_CHARS, r.code);
  const worst = reasons.map(() => ({ code: 'x'.repeat(24), text: '€'.repeat(HEALTH_TEXT_MAX_CHARS), remediation: '€'.repeat(HEALTH_REMEDIATION_MAX_CHARS) }));
  const message = {
    type: 'health',
    clusterId: 'c'.repeat(32),
    nodeId: `12D3KooW${'x'.repeat(44)}` as NodeId,
    seq: Number.MAX_SAFE_INTEGER,
    build: { version: 'v'.repeat(40), commit: 'f'.repeat(40) },
    reasons: worst,
  };
  assert.equal(TelemetryMessage.parse({ ...message, reasons }).type, 'health');
  assert.equal(TelemetryMessage.parse(message).type, 'health');
  assert.ok(jsonBytes(message) < MAX_TELEMETRY_MESSAGE_BYTES, `${jsonBytes(message)} bytes of JSON`);
  assert.equal(TelemetryMessage.safeParse({ ...message, reasons: [...worst, worst[0]] }).success, false, 'one more reason is refused');
});

// ---- the viewer's side: a fake `/state` member list, as ControlPlane.status gives it

const viewer = { version: '0.4.0', commit: 'abc123def456' };
const ok: ExplainedHealth = { level: 'ok', reasons: [] };
const members: { nodeId: string; health: ExplainedHealth }[] = [
  { nodeId: 'self', health: ok },
  { nodeId: 'same', health: { level: 'ok', reasons: [{ code: 'no-direct-connection', text: 'no direct connection', remediation: 'check its address' }] } },
  { nodeId: 'older', health: ok },
  { nodeId: 'gone', health: { level: 'pruned', reasons: [{ code: 'pruned', text: 'not heard from for 40 s: pruned from the cluster', remediation: 'start Shoal there' }] } },
  { nodeId: 'silent', health: ok },
];
const reported = {
  self: { build: viewer, reasons: [] },
  same: { build: viewer, reasons: [] },
  older: { build: { version: '0.3.9', commit: '0123456789ab' }, reasons: [{ code: 'models-disk-low', text: '1 GiB free', remediation: 'free space' }] },
  gone: { build: { version: '0.4.0', commit: 'fedcba987654' }, reasons: [] },
} as const;
const shown = Object.fromEntries(members.map((m) => [m.nodeId, explainHealth(m.health, reported[m.nodeId as keyof typeof reported] ?? null, viewer)]));

test('a member on another build gets the reason with both builds and the remediation, before what it says of itself', () => {
  const older = shown.older!;
  assert.equal(older.level, 'degraded');
  assert.deepEqual(older.reasons.map((r) => r.code), [OTHER_BUILD_CODE, 'models-disk-low']);
  assert.equal(older.reasons[0]!.text, 'runs Shoal 0.3.9 (0123456789ab); this node runs 0.4.0 (abc123def456)');
  assert.match(older.reasons[0]!.remediation, /same Shoal release/);
  // Another commit of the same version is another build too; the liveness reasons keep their place and level.
  assert.deepEqual(shown.gone, { level: 'pruned', reasons: [members[3]!.health.reasons[0], { ...shown.gone!.reasons[1]!, code: OTHER_BUILD_CODE }] });
  assert.match(shown.gone!.reasons[1]!.text, /0\.4\.0 \(fedcba987654\)/);
});

test('members on this build, this node itself and members not heard from yet get no build reason', () => {
  assert.deepEqual(shown.self, ok);
  assert.deepEqual(shown.same, members[1]!.health, 'its own reasons and level unchanged');
  assert.deepEqual(shown.silent, ok);
});

test("a reason the viewer already shows (this node's own event log) is not repeated from the report", () => {
  const log = { code: 'log-not-persisted', text: 'the event log cannot be written', remediation: 'free disk space' };
  const own = explainHealth({ level: 'degraded', reasons: [log] }, { build: viewer, reasons: [log, { code: 'models-disk-low', text: 'low', remediation: 'free space' }] }, viewer);
  assert.deepEqual(own.reasons.map((r) => r.code), ['log-not-persisted', 'models-disk-low']);
  assert.equal(own.level, 'degraded');
});

test('builds compare by version, and by commit where both know theirs', () => {
  assert.equal(sameBuild({ version: '1.0.0', commit: null }, { version: '1.0.0', commit: 'abcd1234' }), true);
  assert.equal(sameBuild({ version: '1.0.0', commit: 'abcd1234' }, { version: '1.0.0', commit: 'abcd5678' }), false);
  assert.equal(sameBuild({ version: '1.0.1', commit: null }, { version: '1.0.0', commit: null }), false);
});
