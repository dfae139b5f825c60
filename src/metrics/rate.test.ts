import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cpuBusyPercent, perSecond, sumCpuTimes } from './rate.js';

test('perSecond divides the counter delta by the interval', () => {
  assert.equal(perSecond(10, 30, 2000), 10);
  assert.equal(perSecond(0, 1, 500), 2);
  assert.equal(perSecond(5, 5, 2000), 0);
});

test('perSecond is 0, never negative or infinite, when there is nothing to divide', () => {
  assert.equal(perSecond(0, 10, 0), 0, 'no time passed');
  assert.equal(perSecond(0, 10, -5), 0, 'the clock went back');
  assert.equal(perSecond(30, 10, 2000), 0, 'the counter was reset');
  assert.equal(perSecond(0, 10, Number.NaN), 0);
  assert.equal(perSecond(0, Number.POSITIVE_INFINITY, 1000), 0);
});

const cpu = (user: number, idle: number, sys = 0) => ({ times: { user, nice: 0, sys, idle, irq: 0 } });

test('sumCpuTimes adds every core', () => {
  assert.deepEqual(sumCpuTimes([cpu(10, 90), cpu(30, 70, 5)]), { idle: 160, total: 205 });
  assert.deepEqual(sumCpuTimes([]), { idle: 0, total: 0 });
});

test('cpuBusyPercent is the busy share of the CPU time between two readings', () => {
  const before = sumCpuTimes([cpu(100, 100), cpu(100, 100)]);
  assert.equal(cpuBusyPercent(before, sumCpuTimes([cpu(150, 150), cpu(200, 100)])), 75);
  assert.equal(cpuBusyPercent(before, sumCpuTimes([cpu(100, 200), cpu(100, 200)])), 0);
  assert.equal(cpuBusyPercent(before, sumCpuTimes([cpu(200, 100), cpu(200, 100)])), 100);
});

test('cpuBusyPercent is null when no CPU time passed or the counters went back', () => {
  const t = { idle: 100, total: 200 };
  assert.equal(cpuBusyPercent(t, t), null);
  assert.equal(cpuBusyPercent(t, { idle: 50, total: 100 }), null);
  assert.equal(cpuBusyPercent(t, { idle: 90, total: 300 }), null, 'idle went back');
});
