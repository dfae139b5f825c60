import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBytes } from './format-bytes.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

test('bytes print whole, larger counts with three significant digits in binary units', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(1023), '1023 B');
  assert.equal(formatBytes(1536), '1.50 KiB');
  assert.equal(formatBytes(12.34 * MiB), '12.3 MiB');
  assert.equal(formatBytes(512 * MiB), '512 MiB');
  assert.equal(formatBytes(3 * GiB), '3.00 GiB');
  assert.equal(formatBytes(10 * GiB), '10.0 GiB');
  assert.equal(formatBytes(250 * GiB), '250 GiB');
  assert.equal(formatBytes(2048 * GiB), '2.00 TiB');
});

test('a shortfall keeps its sign and its unit', () => {
  assert.equal(formatBytes(-1536), '-1.50 KiB');
  assert.equal(formatBytes(-250 * GiB), '-250 GiB');
});

test('counts past the largest unit stay in it', () => {
  assert.equal(formatBytes(2048 * 1024 ** 5), '2048 PiB');
});
