import assert from 'node:assert/strict';
import { test } from 'node:test';
import { physicalCoreCount } from './cpu.js';

const cpu = (physical: number, core: number): string => `processor\t: x\nphysical id\t: ${physical}\ncore id\t\t: ${core}\n\n`;

test('counts hyper-threaded siblings once', () => {
  const text = [cpu(0, 0), cpu(0, 1), cpu(0, 0), cpu(0, 1)].join('');
  assert.equal(physicalCoreCount(text), 2);
});

test('counts the same core id on two sockets twice', () => {
  const text = [cpu(0, 0), cpu(1, 0)].join('');
  assert.equal(physicalCoreCount(text), 2);
});

test('falls back to logical CPUs when cpuinfo has no core ids', () => {
  assert.ok(physicalCoreCount('processor\t: 0\n') >= 1);
});
