// ManagedProcess with real child processes: node itself, running small scripts that behave like an
// engine (listen, crash, hang, ignore SIGTERM).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import type { ShoalError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { DEFAULT_CRASH_LOOP } from '../crash-loop.js';
import { DEFAULT_STOP_GRACE_MS, ManagedProcess, pollUntil, type ManagedProcessPolicy } from './managed-process.js';
import { engineRecordDir, processArgv } from './orphans.js';
import { acceptsConnection } from './rpc-donor.js';

const log: Logger = pino({ level: 'silent' });
const POLICY: ManagedProcessPolicy = { ...DEFAULT_CRASH_LOOP, loadTimeoutMs: 10_000, stopGraceMs: DEFAULT_STOP_GRACE_MS };
const NODE = process.execPath;

/** An "engine" that listens on the port it is given. */
const LISTEN = `require('node:net').createServer(() => {}).listen(Number(process.argv[1]), '127.0.0.1')`;

let dataDir: string;

before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'shoal-managed-'));
});

after(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

function managed(script: string, policy: Partial<ManagedProcessPolicy> = {}, hooks: { crashes?: ShoalError[]; gaveUp?: ShoalError[] } = {}): ManagedProcess<number> {
  return new ManagedProcess<number>({
    name: 'test-engine',
    binaryPath: NODE,
    dataDir,
    log,
    policy: { ...POLICY, initialBackoffMs: 20, ...policy },
    args: (port) => ['-e', script, String(port)],
    probe: async (port, signal) => {
      await pollUntil(() => acceptsConnection(port), signal);
      return port;
    },
    onCrash: (error) => hooks.crashes?.push(error),
    onGiveUp: (error) => hooks.gaveUp?.push(error),
  });
}

async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test('it becomes ready, is recorded while it runs, and stop kills it and deletes the record', async () => {
  const engine = managed(LISTEN);
  await engine.whenReady();
  assert.equal(engine.state, 'ready');
  const pid = engine.pid!;
  assert.equal(engine.info, engine.port);
  assert.ok(await acceptsConnection(engine.port!));
  assert.ok((await readdir(engineRecordDir(dataDir))).includes(`${pid}.json`));
  await engine.stop();
  assert.equal(engine.state, 'stopped');
  assert.equal(engine.port, null);
  await eventually(async () => (await processArgv(pid)) === null, 'the process is gone');
  assert.ok(!(await readdir(engineRecordDir(dataDir))).includes(`${pid}.json`));
  await assert.rejects(engine.whenReady(), (e: ShoalError) => e.code === 'RUNNER_STOPPED');
});

test('a crash is reported, and it restarts on the same port', async () => {
  const crashes: ShoalError[] = [];
  const engine = managed(LISTEN, {}, { crashes });
  try {
    await engine.whenReady();
    const pid = engine.pid!;
    const port = engine.port;
    process.kill(pid, 'SIGKILL');
    await eventually(() => crashes.length === 1, 'the crash is reported');
    assert.equal(crashes[0]!.code, 'RUNNER_CRASHED');
    assert.match(crashes[0]!.message, /test-engine exited with signal SIGKILL/);
    await engine.whenReady();
    assert.equal(engine.restarts, 1);
    assert.notEqual(engine.pid, pid);
    assert.equal(engine.port, port);
  } finally {
    await engine.stop();
  }
});

test('after maxCrashes crashes in the window the breaker opens, with the last words of the process', async () => {
  const gaveUp: ShoalError[] = [];
  const engine = managed(`console.error('fatal error: the model is damaged'); process.exit(3)`, { maxCrashes: 3 }, { gaveUp });
  await assert.rejects(engine.whenReady(), (e: ShoalError) => e.code === 'MODEL_FAILED' && /gave up after 3 crashes/.test(e.message) && /exit code 3: fatal error: the model is damaged/.test(e.message));
  assert.equal(engine.state, 'failed');
  assert.equal(engine.restarts, 2);
  assert.equal(gaveUp.length, 1);
  await engine.stop();
  assert.equal(gaveUp.length, 1, 'stopping a failed process gives up nothing more');
});

test('a process that never becomes ready is killed at the load deadline', async () => {
  const engine = managed(`setInterval(() => {}, 1000)`, { loadTimeoutMs: 300, maxCrashes: 1 });
  await assert.rejects(engine.whenReady(), (e: ShoalError) => e.code === 'MODEL_FAILED' && /did not become ready within 300 ms/.test(e.message));
  await engine.stop();
});

test('stop escalates to SIGKILL when SIGTERM is ignored', async () => {
  const engine = managed(`process.on('SIGTERM', () => {}); ${LISTEN}`, { stopGraceMs: 200 });
  await engine.whenReady();
  const pid = engine.pid!;
  await engine.stop();
  await eventually(async () => (await processArgv(pid)) === null, 'the process is gone');
});

test('a missing binary fails at once, saying how to build it', async () => {
  const engine = new ManagedProcess<number>({
    name: 'test-engine',
    binaryPath: join(dataDir, 'nope'),
    dataDir,
    log,
    policy: POLICY,
    args: () => [],
    probe: async () => 0,
  });
  await assert.rejects(engine.whenReady(), (e: ShoalError) => e.code === 'MODEL_FAILED' && /shoal doctor --fix/.test(e.message));
  await engine.stop();
});

test('when the node process exits, its engines die with it', async () => {
  // A node that starts an engine and then exits (process.exit runs 'exit' handlers).
  const moduleUrl = new URL('./managed-process.js', import.meta.url).href;
  const pinoUrl = import.meta.resolve('pino');
  const script = `
    const { ManagedProcess, pollUntil } = await import(${JSON.stringify(moduleUrl)});
    const { acceptsConnection } = await import(${JSON.stringify(new URL('./rpc-donor.js', import.meta.url).href)});
    const { pino } = await import(${JSON.stringify(pinoUrl)});
    const engine = new ManagedProcess({
      name: 'test-engine', binaryPath: process.execPath, dataDir: ${JSON.stringify(dataDir)}, log: pino({ level: 'silent' }),
      policy: ${JSON.stringify(POLICY)},
      args: (port) => ['-e', ${JSON.stringify(LISTEN)}, String(port)],
      probe: async (port, signal) => { await pollUntil(() => acceptsConnection(port), signal); return port; },
    });
    await engine.whenReady();
    console.log(engine.pid);
    process.exit(0);
  `;
  const { stdout } = await promisify(execFile)(NODE, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
  const pid = Number(stdout.trim());
  assert.ok(pid > 0, stdout);
  await eventually(async () => (await processArgv(pid)) === null, 'the engine died with its node');
});
