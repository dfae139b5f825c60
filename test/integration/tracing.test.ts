import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Span, Trace, TraceSummary } from '../../src/wire/diagnostics.js';
import { eventually, shoal, status } from '../support/cli.js';
import { api } from '../support/control-api.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Per-request traces across two real nodes (tier 3, issue #18): alpha takes a chat request for a model
 * only beta serves; with tracing on, alpha keeps one trace whose spans come from both nodes.
 */

const MODEL = 'shoal/tiny-eos';

function joinCodeOf(stdout: string): string {
  const code = /shoal1-\S+/.exec(stdout)?.[0];
  assert.ok(code, `no join code in: ${stdout}`);
  return code;
}

async function chat(node: TestNode): Promise<number> {
  const res = await fetch(`${node.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 40, temperature: 0 }),
  });
  await res.text();
  return res.status;
}

const traces = async (node: TestNode): Promise<TraceSummary[]> => (await api<{ traces: TraceSummary[] }>(node, 'GET', '/traces')).body.traces;

describe('per-request traces across two nodes', () => {
  let a: TestNode;
  let b: TestNode;
  let aId: string;
  let bId: string;
  before(async () => {
    [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'] }), startTestNode({ args: ['--name', 'beta'] })]);
    const joined = await shoal(b, 'join', joinCodeOf((await shoal(a, 'invite', '--code')).stdout));
    assert.equal(joined.code, 0, joined.stderr);
    [aId, bId] = [(await status(a)).nodeId, (await status(b)).nodeId];
    await eventually('resources from both nodes', 15_000, async () => (Object.keys((await status(a)).resources).length === 2 ? true : undefined));
    const placed = await api<{ instance: { instanceId: string; placements: { nodeId: string }[] } }>(a, 'POST', '/place_instance', { model: MODEL, exclude: [aId] });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    assert.deepEqual(placed.body.instance.placements.map((p) => p.nodeId), [bId]);
    await eventually('alpha to route to beta', 60_000, async () => ((await chat(a)) === 200 ? true : undefined));
  });
  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
  });

  test('tracing is off by default: requests leave no trace', async () => {
    assert.equal((await status(a)).settings.tracing, false);
    assert.equal(await chat(a), 200);
    assert.deepEqual(await traces(a), []);
    assert.deepEqual(await traces(b), []);
  });

  test('switched on, a request through alpha to beta has spans from both, in order, on alpha’s clock', async (t) => {
    const on = await shoal(a, 'trace', 'on');
    assert.equal(on.code, 0, on.stderr);
    await eventually('both nodes to see tracing on', 10_000, async () => ((await status(a)).settings.tracing && (await shoal(b, 'config', 'get', 'tracing')).stdout.trim() === 'on' ? true : undefined));
    const typo = await shoal(a, 'trace', 'of');
    assert.equal(typo.code, 2, 'a usage error');
    assert.match(typo.stderr, /unknown trace command 'of'; did you mean 'on'\?|did you mean 'off'\?/);
    assert.equal(await chat(a), 200);
    const listed = await eventually('the trace to be stored', 10_000, async () => {
      const found = await traces(a);
      return found.length > 0 ? found : undefined;
    });
    assert.equal(listed.length, 1, JSON.stringify(listed));
    const summary = listed[0]!;
    assert.equal(summary.route, 'POST /v1/chat/completions');
    assert.equal(summary.status, 200);
    assert.equal(summary.modelId, MODEL);
    assert.equal(summary.apiNodeId, aId);
    assert.deepEqual([...summary.nodes].sort(), [aId, bId].sort());
    assert.deepEqual(await traces(b), [], 'the API node keeps the trace, not the serving node');

    const got = await api<{ trace: Trace }>(a, 'GET', `/traces/${summary.traceId}`);
    assert.equal(got.status, 200);
    const trace = got.body.trace;
    const one = (name: string): Span => {
      const found = trace.spans.filter((s) => s.name === name);
      assert.equal(found.length, 1, `one ${name} span in ${trace.spans.map((s) => s.name).join(', ')}`);
      return found[0]!;
    };
    const [http, route, dataPlane, respond, queue, prefill] = ['http', 'route', 'data-plane', 'respond', 'queue', 'prefill'].map(one) as [Span, Span, Span, Span, Span, Span];
    const decode = trace.spans.filter((s) => s.name === 'decode');
    assert.ok(decode.length >= 1, 'at least one decode batch');
    for (const span of [http, route, dataPlane, respond]) assert.equal(span.nodeId, aId, `${span.name} on alpha`);
    for (const span of [queue, prefill, ...decode]) assert.equal(span.nodeId, bId, `${span.name} on beta`);
    assert.equal(http.attributes.status, 200);
    assert.equal(route.attributes.target, bId);
    assert.equal(queue.parentId, dataPlane.spanId, "beta's spans hang under alpha's data-plane span");
    assert.ok(Object.hasOwn(trace.offsets, bId), 'the offset applied to beta is recorded');
    // Sane order: the request holds everything; beta's phases follow one another inside the data-plane call.
    const eps = 0.01;
    for (const span of trace.spans) assert.ok(span.startMs >= http.startMs - eps && span.endMs <= http.endMs + eps, `${span.name} inside http`);
    assert.ok(route.endMs <= dataPlane.startMs + eps);
    assert.ok(queue.startMs >= dataPlane.startMs - eps && decode.at(-1)!.endMs <= dataPlane.endMs + eps, 'beta inside the data-plane span');
    assert.ok(queue.endMs <= prefill.startMs + eps && prefill.endMs <= decode[0]!.startMs + eps);
    assert.ok(respond.endMs >= dataPlane.endMs - eps, 'the last byte goes out after the last event arrived');
    const tokens = decode.reduce((sum, s) => sum + Number(s.attributes.tokens), 0);
    assert.equal(decode.at(-1)!.attributes.completionTokens, tokens, 'every token counted in one batch');

    const list = await shoal(a, 'trace', 'list');
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, new RegExp(summary.traceId));
    const show = await shoal(a, 'trace', 'show', summary.traceId);
    assert.equal(show.code, 0, show.stderr);
    assert.match(show.stdout, /data-plane[\s\S]*queue[\s\S]*prefill[\s\S]*decode/);
    t.diagnostic(`measured: ${show.stdout}`);
  });

  test('an unknown trace is a 404 in the control error shape', async () => {
    const res = await api<{ error: { code: string } }>(a, 'GET', `/traces/${'0'.repeat(32)}`);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'NOT_FOUND');
    assert.equal((await api(a, 'GET', '/traces?limit=0')).status, 400);
  });

  test('switched off again, new requests leave no trace', async () => {
    const before = (await traces(a)).length;
    const off = await shoal(a, 'trace', 'off');
    assert.equal(off.code, 0, off.stderr);
    await eventually('alpha to see tracing off', 10_000, async () => ((await status(a)).settings.tracing === false ? true : undefined));
    assert.equal(await chat(a), 200);
    assert.equal((await traces(a)).length, before);
  });
});
