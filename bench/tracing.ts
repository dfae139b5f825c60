import { parseArgs } from 'node:util';
import { api } from '../test/support/control-api.js';
import { startTestNode } from '../test/support/node-process.js';
import { benchPrompt, intOption, liveNodes, log, machineInfo, printResult, streamChat, versions, type Server, type StreamSample } from './common.js';
import { alternation, summarize } from './stats.js';

/**
 * What per-request tracing (issue #18) costs: one node serving the built-in `shoal/tiny`, the same
 * sequential streaming requests with the cluster's `tracing` setting off and on, in rounds that
 * alternate which goes first so drift hits both alike. Off must cost nothing (target: no measurable
 * change from a node without tracing); on is reported. Prints one JSON object.
 */

const BENCHMARK = 'tracing';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    requests: { type: 'string' },
    rounds: { type: 'string' },
    tokens: { type: 'string' },
    threads: { type: 'string' },
  },
});

const quick = values.quick === true;
const requests = intOption('requests', values.requests, quick ? 10 : 30);
const rounds = intOption('rounds', values.rounds, quick ? 2 : 4);
// Enough tokens that decode lasts long enough to time: shoal/tiny makes thousands a second.
const maxTokens = intOption('tokens', values.tokens, quick ? 256 : 512);
const threads = intOption('threads', values.threads, quick ? 1 : 2);

type Side = 'off' | 'on';

async function main(): Promise<void> {
  const node = await startTestNode({ args: ['--default-model', 'shoal/tiny', '--threads', String(threads), '--parallel', '1', '--gpu', 'false'], readyTimeoutMs: 180_000 });
  liveNodes.add(node);
  const server: Server = { url: node.url, modelId: 'shoal/tiny', pid: node.process.pid!, engine: 'shoal', stop: async () => void (await node.stop()) };
  const samples: Record<Side, StreamSample[]> = { off: [], on: [] };
  let stored: number;
  try {
    const setTracing = async (on: boolean): Promise<void> => {
      const res = await api<{ settings: { tracing: boolean } }>(node, 'PUT', '/settings', { tracing: on });
      if (res.status !== 200 || res.body.settings.tracing !== on) throw new Error(`PUT /settings answered ${res.status}: ${JSON.stringify(res.body)}`);
    };
    let n = 0;
    // Unmeasured requests warm the runner and page the weights in.
    for (let i = 0; i < 3; i++) await streamChat(server, benchPrompt(n++), maxTokens);
    for (let round = 0; round < rounds; round++) {
      for (const side of alternation<Side>(['off', 'on'], round)) {
        await setTracing(side === 'on');
        for (let i = 0; i < requests; i++) samples[side].push(await streamChat(server, benchPrompt(n++), maxTokens));
      }
    }
    await setTracing(false);
    stored = (await api<{ traces: unknown[] }>(node, 'GET', '/traces?limit=1000')).body.traces.length;
  } finally {
    liveNodes.delete(node);
    await node.stop();
  }

  const figures = (list: StreamSample[]) => ({ decodeTokPerS: summarize(list.map((x) => x.decodeTokPerS)), ttftMs: summarize(list.map((x) => x.ttftMs)), totalMs: summarize(list.map((x) => x.totalMs)), tokens: summarize(list.map((x) => x.tokens)) });
  const off = figures(samples.off);
  const on = figures(samples.on);
  const decodeRatio = Math.round((on.decodeTokPerS.median / off.decodeTokPerS.median) * 1000) / 1000;
  log(BENCHMARK, `decode ${off.decodeTokPerS.median} tok/s with tracing off, ${on.decodeTokPerS.median} on (ratio ${decodeRatio}); ${stored} traces stored`);
  printResult({
    benchmark: BENCHMARK,
    quick,
    method:
      `one node serving shoal/tiny (threads ${threads}, one slot), ${rounds} rounds of ${requests} sequential streaming chat completions (temperature 0, ` +
      `${maxTokens} tokens) with the cluster's tracing setting off and then on, alternating which goes first per round`,
    requestsPerSide: samples.off.length,
    maxTokens,
    off,
    on,
    decodeRatio,
    tracesStored: stored,
    targets: { decodeRatio: 'reported (tracing on); off is the baseline a node without tracing has' },
    machine: machineInfo(),
    versions: await versions(),
  });
}

await main();
