import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffDelayMs, CrashLoop, DEFAULT_CRASH_LOOP, withOverrides, type RestartPolicy } from './crash-loop.js';

const POLICY: RestartPolicy = { ...DEFAULT_CRASH_LOOP, loadTimeoutMs: 120_000 };

function clocked(policy: RestartPolicy): { loop: CrashLoop; advance: (ms: number) => void } {
  let now = 1_000_000;
  return { loop: new CrashLoop(policy, () => now), advance: (ms) => (now += ms) };
}

test('the backoff doubles from 1 s and stays at 30 s', () => {
  const { loop } = clocked({ ...POLICY, maxCrashes: 100 });
  const delays = Array.from({ length: 8 }, () => {
    const verdict = loop.crashed();
    assert.equal(verdict.kind, 'restart');
    return verdict.kind === 'restart' ? verdict.delayMs : -1;
  });
  assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
  assert.equal(backoffDelayMs(POLICY, 1), 1000);
  assert.equal(backoffDelayMs({ ...POLICY, initialBackoffMs: 10, maxBackoffMs: 50 }, 4), 50);
});

test('the breaker opens at maxCrashes within the window, and says why', () => {
  const { loop, advance } = clocked(POLICY);
  for (let i = 1; i < POLICY.maxCrashes; i++) {
    assert.deepEqual(loop.crashed(), { kind: 'restart', delayMs: 1000 * 2 ** (i - 1), crashesInWindow: i });
    advance(60_000);
  }
  const verdict = loop.crashed();
  assert.deepEqual(verdict, { kind: 'give-up', crashesInWindow: 5 });
  assert.equal(
    loop.giveUpReason(verdict, 'runner exited with signal SIGKILL'),
    'gave up after 5 crashes in 600 s; last: runner exited with signal SIGKILL. Check the model file and the logs, then place the model again',
  );
});

test('crashes older than the window no longer count', () => {
  const { loop, advance } = clocked({ ...POLICY, maxCrashes: 3, crashWindowMs: 10_000 });
  assert.equal(loop.crashed().crashesInWindow, 1);
  advance(5000);
  assert.equal(loop.crashed().crashesInWindow, 2);
  // The first crash leaves the window (exactly windowMs old no longer counts); the second is 5 s old.
  advance(5000);
  const third = loop.crashed();
  assert.deepEqual(third, { kind: 'restart', delayMs: 2000, crashesInWindow: 2 });
  // Long quiet: the backoff starts over.
  advance(60_000);
  assert.deepEqual(loop.crashed(), { kind: 'restart', delayMs: 1000, crashesInWindow: 1 });
  advance(1);
  assert.equal(loop.crashed().kind, 'restart');
  advance(1);
  assert.equal(loop.crashed().kind, 'give-up');
});

test('withOverrides takes the overrides that are set and ignores other keys', () => {
  const options = { maxCrashes: 2, initialBackoffMs: undefined, log: 'not a policy key' };
  assert.deepEqual(withOverrides(POLICY, options), { ...POLICY, maxCrashes: 2 });
});
