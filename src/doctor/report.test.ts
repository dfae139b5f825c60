import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { HardwareInfo } from './hardware.js';
import { formatReport, plainProgress, renderProgressBar } from './format.js';
import {
  assembleReport,
  backendChecks,
  countLevels,
  DoctorReport,
  engineChecks,
  exitCodeFor,
  hardwareChecks,
  type BackendsStatus,
  type Check,
  type EnginesStatus,
  type ReportParts,
} from './report.js';

const COMMIT = '80fb11ac73e66d89eae2c6a91d8a77428fa733ed';
const GiB = 1024 ** 3;

const HARDWARE: HardwareInfo = {
  hostname: 'box',
  platform: 'linux',
  arch: 'x64',
  cpu: { model: 'AMD EPYC', physicalCores: 2, logicalCores: 2 },
  memory: {
    totalBytes: 24 * GiB,
    freeBytes: 20 * GiB,
    bandwidth: { gbPerSecond: 31.2, threads: 2, bufferBytes: 268435456, measuredAt: '2026-03-01T12:00:00.000Z', cached: true },
  },
  gpu: { supportedTypes: [], active: null, devices: [], vram: null, unifiedMemoryBytes: 0, nvidiaDevicePresent: false, renderNodePresent: false },
  llamaCpp: { loaded: true, error: null, systemInfo: 'CPU : AVX2 = 1' },
};

const ENGINES_MISSING: EnginesStatus = {
  source: { commit: COMMIT, tag: 'v0.4.0', bundlePath: '/nm/node-llama-cpp/llama/gitRelease.bundle' },
  cacheRoot: '/c',
  cacheDir: `/c/${COMMIT}`,
  compute: null,
  builtAt: null,
  buildSeconds: null,
  binaries: [
    { name: 'llama-server', path: `/c/${COMMIT}/bin/llama-server`, built: false, runs: false, version: null, error: null },
    { name: 'ggml-rpc-server', path: `/c/${COMMIT}/bin/ggml-rpc-server`, built: false, runs: false, version: null, error: null },
  ],
  buildTools: { ok: false, missing: ['cmake'], installHint: 'sudo apt-get install -y cmake' },
};

const ENGINES_BUILT: EnginesStatus = {
  ...ENGINES_MISSING,
  compute: 'cpu',
  builtAt: '2026-03-01T12:00:00.000Z',
  buildSeconds: 361.5,
  binaries: ENGINES_MISSING.binaries.map((b) => ({ ...b, built: true, runs: true, version: b.name === 'llama-server' ? 'version: 1 (80fb11ac)' : null })),
  buildTools: null,
};

const BACKENDS: BackendsStatus = { tags: ['llama_cpp-cpu'], detected: ['llama_cpp-cpu'], source: 'detected', gpuRequest: 'auto' };

const STORAGE: ReportParts['storage'] = {
  dataDir: '/d',
  modelsDir: '/d/models',
  dataDirExists: true,
  modelsDirExists: true,
  modelsDirNotDirectory: false,
  writable: true,
  writeError: null,
  freeBytes: 50 * GiB,
  totalBytes: 100 * GiB,
  probedPath: '/d/models',
};

function parts(checks: Check[], overrides: Partial<ReportParts> = {}): ReportParts {
  return { checks, hardware: HARDWARE, backends: BACKENDS, engines: ENGINES_MISSING, storage: STORAGE, ...overrides };
}

test('the report is ok, and exits 0, exactly when no check is an error', () => {
  const warnOnly = assembleReport(parts([{ id: 'a.b', level: 'ok', summary: 'fine' }, { id: 'a.c', level: 'warn', summary: 'hmm', remediation: 'do x' }]));
  assert.equal(warnOnly.ok, true);
  assert.deepEqual(warnOnly.counts, { ok: 1, warn: 1, error: 0 });
  assert.equal(exitCodeFor(warnOnly), 0);
  const withError = assembleReport(parts([...warnOnly.checks, { id: 'a.d', level: 'error', summary: 'broken' }]));
  assert.equal(withError.ok, false);
  assert.equal(exitCodeFor(withError), 1);
  assert.deepEqual(withError.checks.map((c) => c.id), ['a.b', 'a.c', 'a.d'], 'checks keep the order they were taken in');
  assert.equal('fixes' in withError, false, 'no fixes field without --fix');
});

test('the assembled report has the documented JSON shape', () => {
  const report = assembleReport(
    parts([...hardwareChecks(HARDWARE), ...backendChecks(BACKENDS), ...engineChecks(ENGINES_MISSING, 2)], {
      fixes: [{ id: 'storage', action: 'created', summary: 'created /d/models' }],
    }),
  );
  const roundTripped = DoctorReport.parse(JSON.parse(JSON.stringify(report)));
  assert.deepEqual(roundTripped, report);
  assert.deepEqual(Object.keys(report), ['ok', 'counts', 'checks', 'hardware', 'backends', 'engines', 'storage', 'fixes']);
  assert.throws(() => DoctorReport.parse({ ...report, checks: [{ id: 'x', level: 'fatal', summary: 's' }] }));
  assert.throws(() => DoctorReport.parse({ ...report, backends: { ...BACKENDS, tags: ['gpu'] } }));
});

test('hardware checks: CPU, memory, bandwidth and GPU, with warnings when short', () => {
  assert.deepEqual(hardwareChecks(HARDWARE).map((c) => [c.id, c.level]), [
    ['hardware.cpu', 'ok'],
    ['hardware.memory', 'ok'],
    ['hardware.bandwidth', 'ok'],
    ['hardware.gpu', 'ok'],
  ]);
  const starved = hardwareChecks({ ...HARDWARE, memory: { totalBytes: 2 * GiB, freeBytes: 100 * 1024 ** 2, bandwidth: null } });
  assert.equal(starved.find((c) => c.id === 'hardware.memory')?.level, 'warn');
  assert.equal(starved.find((c) => c.id === 'hardware.bandwidth')?.level, 'warn');
  const cuda = hardwareChecks({
    ...HARDWARE,
    gpu: { ...HARDWARE.gpu, supportedTypes: ['cuda'], active: 'cuda', devices: ['NVIDIA H200'], vram: { totalBytes: 140 * GiB, usedBytes: GiB, freeBytes: 139 * GiB } },
  });
  assert.match(cuda.find((c) => c.id === 'hardware.gpu')?.summary ?? '', /CUDA: NVIDIA H200, 140 GiB VRAM \(139 GiB free\)/);
});

test('engine checks: missing engines warn with the build command and the tools to install first', () => {
  const checks = engineChecks(ENGINES_MISSING, 2);
  assert.deepEqual(checks.map((c) => [c.id, c.level]), [
    ['engines.llama-server', 'warn'],
    ['engines.ggml-rpc-server', 'warn'],
  ]);
  assert.match(checks[0]?.remediation ?? '', /^first install cmake: sudo apt-get install -y cmake; then run shoal doctor --fix .*80fb11ac \(v0\.4\.0\) \(about 6 min on 2 cores\)/);
  const built = engineChecks(ENGINES_BUILT, 2);
  assert.deepEqual(built.map((c) => c.level), ['ok', 'ok']);
  assert.match(built[0]?.summary ?? '', /llama-server built from llama.cpp 80fb11ac \(v0.4.0\) for cpu, runs \(version: 1 \(80fb11ac\)\)/);
  const broken = engineChecks({ ...ENGINES_BUILT, binaries: [{ ...ENGINES_BUILT.binaries[0]!, runs: false, error: 'exited with code 127' }] }, 2);
  assert.equal(broken[0]?.level, 'warn');
  assert.equal(broken[0]?.detail, 'exited with code 127');
  assert.deepEqual(engineChecks({ ...ENGINES_MISSING, source: null }, 2).map((c) => c.id), ['engines.source']);
});

test('engine checks say a running node provisions missing engines itself, and where cached ones came from', () => {
  assert.match(engineChecks(ENGINES_MISSING, 2)[0]?.remediation ?? '', /a node started with `shoal run` builds it in the background by itself while it serves \(progress: shoal status\)/);
  assert.match(engineChecks({ ...ENGINES_MISSING, releaseAvailable: true }, 2)[0]?.remediation ?? '', /installs the prebuilt release of llama.cpp 80fb11ac/);
  assert.match(engineChecks({ ...ENGINES_BUILT, origin: 'release' }, 2)[0]?.summary ?? '', /llama-server installed from the prebuilt release of llama.cpp 80fb11ac/);
});

test('no advertised backend is an error', () => {
  assert.equal(backendChecks({ ...BACKENDS, tags: [] })[0]?.level, 'error');
  assert.match(backendChecks({ ...BACKENDS, source: 'config' })[0]?.summary ?? '', /from the configured list/);
});

test('level counts', () => {
  assert.deepEqual(countLevels([]), { ok: 0, warn: 0, error: 0 });
  assert.deepEqual(countLevels([{ id: 'a', level: 'error', summary: 's' }, { id: 'b', level: 'error', summary: 's' }]), { ok: 0, warn: 0, error: 2 });
});

test('the readable report shows facts, checks with remediations, and the verdict', () => {
  const report = assembleReport(
    parts([...hardwareChecks(HARDWARE), ...engineChecks(ENGINES_MISSING, 2)], { fixes: [{ id: 'engines', action: 'cached', summary: 'cached in /c' }] }),
  );
  const text = formatReport(report);
  assert.match(text, /CPU {8}AMD EPYC, 2 physical cores \(2 logical\)/);
  assert.match(text, /read 31.2 GB\/s with 2 threads \(cached\)/);
  assert.match(text, /Backends {5}llama_cpp-cpu/);
  assert.match(text, /llama-server {5}not built/);
  assert.match(text, /WARN {2}engines.llama-server/);
  assert.match(text, /fix: first install cmake/);
  assert.match(text, /cached {3}cached in \/c/);
  assert.match(text, /OK: 0 errors, 2 warnings, 4 ok$/);
});

test('the progress bar fits the terminal', () => {
  const line = renderProgressBar({ phase: 'build', percent: 42, message: 'Building CXX object tools/server/CMakeFiles/llama-server.dir/server.cpp.o' }, 80);
  assert.ok(line.length <= 80, `${line.length}: ${line}`);
  assert.match(line, /^\[#+-+\] {2}42% Building CXX/);
  assert.match(renderProgressBar({ phase: 'install', percent: 100, message: 'done' }, 80), /^\[#{30}\] 100% done$/);
  assert.ok(renderProgressBar({ phase: 'clone', percent: 0, message: 'x'.repeat(200) }, 20).length <= 25);
});

test('plain progress prints a line per phase and per 10%', () => {
  const plain = plainProgress();
  const lines = [
    { phase: 'clone', percent: 0, message: 'unpacking' },
    { phase: 'configure', percent: 3, message: 'configuring' },
    { phase: 'build', percent: 8, message: 'a' },
    { phase: 'build', percent: 9, message: 'b' },
    { phase: 'build', percent: 10, message: 'c' },
    { phase: 'build', percent: 15, message: 'd' },
    { phase: 'build', percent: 31, message: 'e' },
    { phase: 'install', percent: 100, message: 'built' },
  ].map((p) => plain(p as Parameters<typeof plain>[0]));
  assert.deepEqual(lines.filter((l) => l !== null), [
    'engines:   0% clone: unpacking',
    'engines:   3% configure: configuring',
    'engines:   8% build: a',
    'engines:  10% build: c',
    'engines:  31% build: e',
    'engines: 100% install: built',
  ]);
});
