import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { sseEvents } from '../../src/cli/logs.js';
import { DASHBOARD_CSP } from '../../src/dashboard/static.js';
import { parseExposition, type MetricFamily } from '../../src/metrics/prometheus-text.test-support.js';
import { Sample, SERIES_SAMPLES } from '../../src/metrics/series.js';
import { eventually } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * A real node (tier 3): `/metrics` parsed strictly and its counters moved by real completions,
 * `/metrics/series`, the `/events` push, and the dashboard's files (a stand-in build, so this test
 * does not depend on the web app being built) or their absence with `--headless`.
 */

const MODEL = 'shoal/tiny';

let node: TestNode;
let client: OpenAI;
let build: string;

before(async () => {
  build = await mkdtemp(join(tmpdir(), 'shoal-dashboard-build-'));
  await mkdir(join(build, 'assets'));
  await writeFile(join(build, 'index.html'), '<!doctype html><title>Shoal</title><script type="module" src="./assets/index-T3st.js"></script>');
  await writeFile(join(build, 'assets', 'index-T3st.js'), 'export {};');
  node = await startTestNode({ env: { SHOAL_DASHBOARD_DIR: build } });
  client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'not-needed', maxRetries: 0 });
});

after(async () => {
  await node?.stop();
  await rm(build, { recursive: true, force: true });
});

async function scrape(): Promise<Map<string, MetricFamily>> {
  const res = await fetch(`${node.url}/metrics`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  return parseExposition(await res.text());
}

function value(families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number {
  for (const family of families.values()) {
    const sample = family.samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    if (sample) return sample.value;
  }
  throw new Error(`no sample ${name} ${JSON.stringify(labels)}`);
}

describe('metrics of a real node', () => {
  test('/metrics is valid Prometheus text with every Shoal family typed', async () => {
    const families = await scrape();
    const types = Object.fromEntries([...families.values()].filter((f) => f.name.startsWith('shoal_') && !f.name.startsWith('shoal_process') && !f.name.startsWith('shoal_nodejs')).map((f) => [f.name, f.type]));
    assert.deepEqual(
      {
        info: types.shoal_node_info,
        requests: types.shoal_requests_total,
        generated: types.shoal_generated_tokens_total,
        ttft: types.shoal_time_to_first_token_seconds,
        inFlight: types.shoal_requests_in_flight,
        waiting: types.shoal_requests_waiting,
      },
      { info: 'gauge', requests: 'counter', generated: 'counter', ttft: 'histogram', inFlight: 'gauge', waiting: 'gauge' },
    );
    for (const family of families.values()) assert.ok(family.name.startsWith('shoal_'), `${family.name} has the shoal_ prefix`);
    const status = (await (await fetch(`${node.url}/state`)).json()) as { nodeId: string };
    assert.equal(value(families, 'shoal_node_info', { node_id: status.nodeId }), 1);
  });

  test('counters move with real completions, streamed and not; refusals and cancellations are counted', async () => {
    const before = await scrape();
    const ok = (f: Map<string, MetricFamily>): number => value(f, 'shoal_requests_total', { kind: 'generate', outcome: 'ok' });
    const plain = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'count to five' }], temperature: 0, max_tokens: 12 });
    let streamedTokens = 0;
    let streamedPrompt = 0;
    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], temperature: 0, max_tokens: 9, stream: true, stream_options: { include_usage: true } });
    for await (const chunk of stream) {
      if (chunk.usage) {
        streamedTokens = chunk.usage.completion_tokens;
        streamedPrompt = chunk.usage.prompt_tokens;
      }
    }
    assert.ok(plain.usage!.completion_tokens > 0 && streamedTokens > 0);
    await assert.rejects(client.chat.completions.create({ model: 'no/such-model', messages: [{ role: 'user', content: 'x' }] }));

    const afterTwo = await scrape();
    assert.equal(ok(afterTwo) - ok(before), 2);
    // No stop sequences: every content event carries at least one token, so the count is exactly the usage.
    assert.equal(value(afterTwo, 'shoal_generated_tokens_total') - value(before, 'shoal_generated_tokens_total'), plain.usage!.completion_tokens + streamedTokens);
    assert.equal(value(afterTwo, 'shoal_prompt_tokens_total') - value(before, 'shoal_prompt_tokens_total'), plain.usage!.prompt_tokens + streamedPrompt);
    assert.equal(value(afterTwo, 'shoal_time_to_first_token_seconds_count') - value(before, 'shoal_time_to_first_token_seconds_count'), 2);
    assert.ok(value(afterTwo, 'shoal_time_to_first_token_seconds_sum') > value(before, 'shoal_time_to_first_token_seconds_sum'));
    assert.equal(value(afterTwo, 'shoal_requests_total', { kind: 'generate', outcome: 'refused' }) - value(before, 'shoal_requests_total', { kind: 'generate', outcome: 'refused' }), 1);
    assert.equal(value(afterTwo, 'shoal_requests_in_flight'), 0);
    assert.equal(value(afterTwo, 'shoal_requests_waiting'), 0);

    // A client that goes away mid-stream: in flight while it runs, cancelled once it is gone.
    const controller = new AbortController();
    const long = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'a long story' }], max_tokens: 100_000, stream: true }, { signal: controller.signal });
    const iterator = long[Symbol.asyncIterator]();
    await iterator.next();
    assert.equal(value(await scrape(), 'shoal_requests_in_flight'), 1);
    controller.abort();
    try {
      for (let next = await iterator.next(); !next.done; next = await iterator.next());
    } catch {
      // the abort, surfacing (or not) as the SDK sees fit
    }
    const cancelled = (f: Map<string, MetricFamily>): number => value(f, 'shoal_requests_total', { kind: 'generate', outcome: 'cancelled' });
    await eventually('the cancellation to be counted', 10_000, async () => {
      const f = await scrape();
      return cancelled(f) - cancelled(afterTwo) === 1 && value(f, 'shoal_requests_in_flight') === 0 ? true : undefined;
    });
  });

  test('/metrics/series has samples every 2 s with the completions in them', async () => {
    const res = await fetch(`${node.url}/metrics/series`);
    assert.equal(res.status, 200);
    const first = (await res.json()) as { node: string; intervalMs: number; maxSamples: number; ttftWindowMs: number; samples: unknown[]; nodes: { ok: boolean }[] };
    assert.equal(first.intervalMs, 2000);
    assert.equal(first.maxSamples, SERIES_SAMPLES);
    assert.equal(first.ttftWindowMs, 300_000);
    assert.equal(first.nodes[0]!.ok, true);
    const series = await eventually('a sample with the earlier first tokens in its window', 10_000, async () => {
      const body = (await (await fetch(`${node.url}/metrics/series`)).json()) as { samples: unknown[] };
      const samples = body.samples.map((s) => Sample.parse(s));
      return samples.at(-1)!.ttftMs.count >= 2 ? samples : undefined;
    });
    const newest = series.at(-1)!;
    assert.ok(newest.ttftMs.p50! > 0 && newest.ttftMs.p50! <= newest.ttftMs.p95! && newest.ttftMs.p95! <= newest.ttftMs.p99!);
    assert.ok(series.some((s) => s.generatedTokens > 0 && s.tokensPerS > 0), 'the tokens show up as a rate');
    assert.ok(newest.memory.totalBytes > 0 && newest.cpu.cores >= 1);
    for (let i = 1; i < series.length; i += 1) assert.equal(series[i]!.seq, series[i - 1]!.seq + 1);
    // The same node by name; an unknown node is a 404 in the control API's shape.
    const status = (await (await fetch(`${node.url}/state`)).json()) as { name: string; nodeId: string };
    const byName = (await (await fetch(`${node.url}/metrics/series?node=${encodeURIComponent(status.name)}`)).json()) as { node: string };
    assert.equal(byName.node, status.nodeId);
    const unknown = await fetch(`${node.url}/metrics/series?node=nobody`);
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as { error: { code: string } }).error.code, 'NOT_FOUND');
    const all = (await (await fetch(`${node.url}/metrics/series?node=all`)).json()) as { node: string; samples: Sample[]; nodes: unknown[] };
    assert.equal(all.node, 'all');
    assert.equal(all.nodes.length, 1);
    assert.equal(all.samples.at(-1)!.ttftMs.count, (await (await fetch(`${node.url}/metrics/series`)).json() as { samples: Sample[] }).samples.at(-1)!.ttftMs.count, 'one node: the sum is the node');
  });

  test('/events pushes the state and the newest sample', async () => {
    const controller = new AbortController();
    const res = await fetch(`${node.url}/events`, { signal: controller.signal });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    const status = (await (await fetch(`${node.url}/state`)).json()) as { nodeId: string };
    const seen = new Map<string, unknown[]>();
    try {
      for await (const event of sseEvents(res.body!)) {
        seen.set(event.event, [...(seen.get(event.event) ?? []), JSON.parse(event.data)]);
        // The first state and metrics come on connect; a second metrics event proves the 2 s push.
        if ((seen.get('metrics')?.length ?? 0) >= 2 && seen.has('state')) break;
      }
    } finally {
      controller.abort();
    }
    const state = seen.get('state')![0] as { nodeId: string; members: unknown[] };
    assert.equal(state.nodeId, status.nodeId);
    assert.ok(Array.isArray(state.members));
    const [m1, m2] = seen.get('metrics') as { nodeId: string; sample: unknown }[];
    assert.equal(m1!.nodeId, status.nodeId);
    const s1 = Sample.parse(m1!.sample);
    const s2 = Sample.parse(m2!.sample);
    assert.ok(s2.seq > s1.seq);
  });

  test('the dashboard build is served at / with a strict policy', async () => {
    const index = await fetch(`${node.url}/`);
    assert.equal(index.status, 200);
    assert.equal(index.headers.get('content-security-policy'), DASHBOARD_CSP);
    assert.equal(index.headers.get('cache-control'), 'no-cache');
    assert.match(await index.text(), /index-T3st\.js/);
    const asset = await fetch(`${node.url}/assets/index-T3st.js`);
    assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(asset.headers.get('content-type'), 'text/javascript; charset=utf-8');
    const api404 = await fetch(`${node.url}/v1/nothing-here`);
    assert.equal(api404.status, 404);
    assert.equal(((await api404.json()) as { error: { code: string } }).error.code, 'not_found');
  });
});

test('--headless serves the API without the dashboard', async () => {
  await using headless = await startTestNode({ args: ['--headless'], env: { SHOAL_DASHBOARD_DIR: build } });
  const root = await fetch(`${headless.url}/`);
  assert.equal(root.status, 404);
  assert.match(((await root.json()) as { error: { message: string } }).error.message, /unknown endpoint GET \//);
  assert.equal((await fetch(`${headless.url}/assets/index-T3st.js`)).status, 404);
  assert.equal((await fetch(`${headless.url}/metrics`)).status, 200, 'metrics are API, not dashboard');
  // An open event stream does not hold the node's stop: the stream ends and the node exits cleanly.
  const events = await fetch(`${headless.url}/events`);
  const reader = events.body!.getReader();
  await reader.read();
  const ended = (async () => {
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read());
  })();
  const stopped = await headless.stop();
  assert.equal(stopped.code, 0, headless.output());
  await ended;
});

