import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PerformanceEnvelope, PerformanceView } from '../../src/wire/diagnostics.js';
import { status } from '../support/cli.js';
import { api } from '../support/control-api.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Performance envelopes measured by a real node (tier 3): requests sent one at a time and four at
 * once to `shoal/tiny` show up in `GET /diagnostics/performance` as points at in-flight 1 and 4.
 * Speeds are not asserted (the machine's load decides them), only that the points exist and add up.
 */

const MODEL = 'shoal/tiny';
/** Rounds of four at once before giving up on seeing the fourth dispatched while three are open. */
const MAX_ROUNDS = 10;

let node: TestNode;

before(async () => {
  node = await startTestNode();
});

after(async () => {
  await node?.stop();
});

async function complete(): Promise<void> {
  const res = await fetch(`${node.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt: 'Once upon a time', max_tokens: 32, temperature: 0 }),
  });
  assert.equal(res.status, 200, await res.text());
}

async function envelope(): Promise<PerformanceEnvelope | undefined> {
  const { status: code, body } = await api<PerformanceView>(node, 'GET', '/diagnostics/performance');
  assert.equal(code, 200);
  return body.envelopes.find((e) => e.modelId === MODEL);
}

describe('performance envelopes of a real node', () => {
  test('requests at concurrency 1 and 4 give points at in-flight 1 and 4', async () => {
    assert.equal(await envelope(), undefined, 'no envelope before any request');
    for (let i = 0; i < 3; i++) await complete();
    let found = await envelope();
    assert.ok(found, 'an envelope after three requests');
    assert.deepEqual(found.points.map((p) => [p.inFlight, p.requests]), [[1, 3]], 'one at a time: in-flight 1 only');

    for (let round = 0; round < MAX_ROUNDS && !found?.points.some((p) => p.inFlight === 4); round++) {
      await Promise.all([complete(), complete(), complete(), complete()]);
      found = await envelope();
    }
    assert.ok(found);
    const four = found.points.find((p) => p.inFlight === 4);
    assert.ok(four, `a point at in-flight 4: ${JSON.stringify(found.points)}`);
    const self = await status(node);
    assert.equal(found.nodeId, self.nodeId, 'served by this node');
    assert.ok(found.backend.length > 0 && found.backend !== 'unknown', `the backend is known: ${found.backend}`);
    for (const point of found.points) {
      assert.ok(point.inFlight >= 1 && point.inFlight <= 4, `no level past what was sent: ${point.inFlight}`);
      assert.ok(point.p50TtftMs !== null && point.p50LatencyMs !== null && point.p50LatencyMs >= point.p50TtftMs);
      assert.ok(Math.abs(point.aggregateTokensPerS - point.meanTokensPerS * point.inFlight) < 1e-6);
    }
    assert.equal(found.points.find((p) => p.inFlight === 1)!.requests >= 3, true);
  });

  test('the route is a control route: a page of another origin is refused', async () => {
    const res = await fetch(`${node.url}/diagnostics/performance`, { headers: { origin: 'https://evil.example' } });
    assert.equal(res.status, 403);
  });
});
