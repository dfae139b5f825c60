// Runs the real `shoal doctor` CLI (no --fix, so nothing is built) against a fresh data dir and an
// empty engine cache, and checks the JSON report: its shape, that this node advertises llama_cpp-cpu,
// the exit codes, the forced-GPU conflict, a configured backend list and the cached bandwidth figure.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { physicalCoreCount } from '../../src/common/cpu.js';
import { DoctorReport } from '../../src/doctor/report.js';
import { CLI_PATH } from '../support/node-process.js';

const run = promisify(execFile);

let work: string;
let dataDir: string;
let engineCache: string;

before(async () => {
  work = await mkdtemp(join(tmpdir(), 'shoal-doctor-'));
  dataDir = join(work, 'data');
  engineCache = join(work, 'engines');
});

after(async () => {
  await rm(work, { recursive: true, force: true });
});

async function doctor(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI_PATH, 'doctor', '--data-dir', dataDir, ...args], {
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, SHOAL_ENGINE_CACHE: engineCache, SHOAL_BACKENDS: '' },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

async function doctorJson(...args: string[]): Promise<{ code: number; report: DoctorReport }> {
  const result = await doctor('--json', ...args);
  let json: unknown;
  try {
    json = JSON.parse(result.stdout);
  } catch {
    assert.fail(`no JSON (exit ${result.code}): ${result.stdout.slice(0, 500)} ${result.stderr.slice(-2000)}`);
  }
  return { code: result.code, report: DoctorReport.parse(json) };
}

test('doctor --json reports hardware, backends, engines and storage, and advertises llama_cpp-cpu', async () => {
  const { code, report } = await doctorJson();
  assert.equal(code, 0, JSON.stringify(report.checks.filter((c) => c.level === 'error')));
  assert.equal(report.ok, true);
  assert.equal(report.fixes, undefined);
  assert.equal(report.counts.error, 0);
  assert.equal(report.counts.ok + report.counts.warn, report.checks.length);

  assert.equal(report.hardware.cpu.physicalCores, physicalCoreCount());
  assert.ok(report.hardware.memory.totalBytes > 0 && report.hardware.memory.freeBytes > 0);
  assert.equal(report.hardware.llamaCpp.loaded, true);
  assert.ok((report.hardware.memory.bandwidth?.gbPerSecond ?? 0) > 0, 'bandwidth measured');

  assert.ok(report.backends.tags.includes('llama_cpp-cpu'), report.backends.tags.join(','));
  assert.equal(report.backends.source, 'detected');
  assert.deepEqual(report.backends.tags, report.backends.detected);
  assert.ok(!report.backends.tags.some((tag) => tag.startsWith('llama_server-') || tag.startsWith('rpc-')), 'nothing is built in an empty cache');

  assert.equal(report.engines.cacheRoot, engineCache);
  assert.match(report.engines.source?.commit ?? '', /^[0-9a-f]{40}$/);
  assert.deepEqual(report.engines.binaries.map((b) => [b.name, b.built]), [
    ['llama-server', false],
    ['ggml-rpc-server', false],
  ]);
  assert.ok(report.engines.buildTools, 'build tools are checked when an engine is missing');

  const ids = report.checks.map((c) => c.id);
  for (const id of ['hardware.cpu', 'hardware.memory', 'hardware.bandwidth', 'hardware.gpu', 'backends.advertised', 'engines.llama-server', 'engines.ggml-rpc-server', 'storage.models_dir', 'storage.writable', 'storage.free_space']) {
    assert.ok(ids.includes(id), `missing check ${id}`);
  }
  const engine = report.checks.find((c) => c.id === 'engines.llama-server');
  assert.equal(engine?.level, 'warn');
  assert.match(engine?.remediation ?? '', /shoal doctor --fix/);
  assert.equal(report.checks.find((c) => c.id === 'storage.models_dir')?.level, 'warn');

  // A check creates nothing: not the data dir, not the engine cache.
  assert.equal(existsSync(dataDir), false);
  assert.equal(existsSync(engineCache), false);
});

test('the bandwidth figure is cached in the data dir for the next run', async () => {
  await import('node:fs/promises').then((fs) => fs.mkdir(dataDir, { recursive: true }));
  const first = await doctorJson();
  const second = await doctorJson();
  assert.ok(existsSync(join(dataDir, 'doctor', 'bandwidth.json')));
  assert.equal(second.report.hardware.memory.bandwidth?.cached, true);
  assert.equal(second.report.hardware.memory.bandwidth?.measuredAt, first.report.hardware.memory.bandwidth?.measuredAt);
});

test('a forced GPU this node cannot use is an error with a remediation, and exit code 1', async (t) => {
  const { report: plain } = await doctorJson();
  const missing = (['cuda', 'vulkan'] as const).find((type) => !plain.hardware.gpu.supportedTypes.includes(type));
  if (!missing) return t.skip('this machine can use both CUDA and Vulkan');
  const { code, report } = await doctorJson('--gpu', missing);
  assert.equal(code, 1);
  assert.equal(report.ok, false);
  const conflict = report.checks.find((c) => c.id === 'backends.gpu');
  assert.equal(conflict?.level, 'error');
  assert.match(conflict?.summary ?? '', new RegExp(`--gpu ${missing}`));
  assert.ok(conflict?.remediation);
  assert.ok(report.backends.tags.includes('llama_cpp-cpu'));
});

test('a configured backend list replaces detection and flags what is not there', async () => {
  const { code, report } = await doctorJson('--backends', 'llama_cpp-cpu,rpc-cpu');
  assert.equal(code, 0);
  assert.equal(report.backends.source, 'config');
  assert.deepEqual(report.backends.tags, ['llama_cpp-cpu', 'rpc-cpu']);
  assert.equal(report.checks.find((c) => c.id === 'backends.config.rpc-cpu')?.level, 'warn');
  const bad = await doctorJson('--backends', 'llama_cpp-cpu,turbo');
  assert.equal(bad.code, 1);
  assert.equal(bad.report.checks.find((c) => c.id === 'backends.config.turbo')?.level, 'error');
});

test('the readable report and the usage errors', async () => {
  const text = await doctor();
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /^Shoal doctor: /);
  assert.match(text.stdout, /Backends +.*llama_cpp-cpu/);
  assert.match(text.stdout, /\nChecks\n/);
  assert.match(text.stdout, /OK: 0 errors, \d+ warnings?, \d+ ok\n?$/);
  assert.equal((await doctor('--bogus')).code, 2);
  assert.equal((await doctor('--gpu', 'tpu')).code, 2);
  const help = await doctor('--help');
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--fix/);
});
