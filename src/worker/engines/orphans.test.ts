import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import type { Logger } from '../../common/log.js';
import { engineRecordDir, processArgv, reapOrphans, removeEngineRecord, writeEngineRecord } from './orphans.js';

const SLEEP = '/bin/sleep';

let dataDir: string;
const children: ChildProcess[] = [];

before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'shoal-orphans-'));
});

after(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  await rm(dataDir, { recursive: true, force: true });
});

function collectingLog(): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const log: Logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

/** A detached `sleep` in a process group of its own: what an engine left behind by a killed node looks like. */
function spawnSleeper(): ChildProcess {
  const child = spawn(SLEEP, ['1000'], { detached: true, stdio: 'ignore' });
  children.push(child);
  assert.ok(child.pid);
  return child;
}

test('a recorded engine that still runs its binary is killed with its group, logged, and its record deleted', async () => {
  const child = spawnSleeper();
  const exited = once(child, 'exit');
  await writeEngineRecord(dataDir, { pid: child.pid!, pgid: child.pid!, binary: SLEEP, startedAtMs: Date.now() });
  assert.deepEqual((await processArgv(child.pid!))?.[0], SLEEP);

  const { log, lines } = collectingLog();
  const result = await reapOrphans(dataDir, log);
  const [, signal] = (await exited) as [number | null, NodeJS.Signals | null];
  assert.equal(signal, 'SIGKILL');
  assert.deepEqual(result.reaped.map((r) => r.pid), [child.pid]);
  assert.deepEqual(await readdir(engineRecordDir(dataDir)), []);
  const warning = lines.find((line) => line.pid === child.pid);
  assert.ok(warning, 'no log line for the reaped process');
  assert.equal(warning.level, 40, 'reaped processes are logged at warn level');
});

test('a recorded pid that now runs another program is left alone; its record is deleted', async () => {
  const child = spawnSleeper();
  await writeEngineRecord(dataDir, { pid: child.pid!, pgid: child.pid!, binary: '/opt/engines/llama-server', startedAtMs: Date.now() });
  const result = await reapOrphans(dataDir, collectingLog().log);
  assert.deepEqual(result.reaped, []);
  assert.deepEqual(result.stale.map((r) => r.pid), [child.pid]);
  assert.deepEqual(await readdir(engineRecordDir(dataDir)), []);
  // Still running: signal 0 only checks that it exists.
  assert.doesNotThrow(() => process.kill(child.pid!, 0));
  child.kill('SIGKILL');
  await once(child, 'exit');
});

test('records of processes that are gone, unreadable records and interrupted writes are cleaned up', async () => {
  const child = spawnSleeper();
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
  await writeEngineRecord(dataDir, { pid: child.pid!, pgid: child.pid!, binary: SLEEP, startedAtMs: Date.now() });
  await writeFile(join(engineRecordDir(dataDir), '99999999.json'), '{not json');
  await writeFile(join(engineRecordDir(dataDir), '123.json.tmp-1-abcd'), '');
  const result = await reapOrphans(dataDir, collectingLog().log);
  assert.deepEqual(result.reaped, []);
  assert.deepEqual(result.stale.map((r) => r.pid), [child.pid]);
  assert.deepEqual(await readdir(engineRecordDir(dataDir)), []);
});

test('no record directory is nothing to reap; removing a missing record is fine', async () => {
  const empty = await mkdtemp(join(tmpdir(), 'shoal-orphans-empty-'));
  try {
    assert.deepEqual(await reapOrphans(empty, collectingLog().log), { reaped: [], stale: [] });
    await removeEngineRecord(empty, 12345);
  } finally {
    await rm(empty, { recursive: true, force: true });
  }
});
