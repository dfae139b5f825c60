import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { benchPrompt, defaultEngineThreads, ensureBenchModel, ensureLlamaServer, intListOption, intOption, log, machineInfo, printResult, startLlamaServer, startShoal, streamChat, versions, type Server, type StreamSample, type TensorType } from './common.js';
import { alternation, percentiles, ratio, summarize } from './stats.js';

/**
 * Concurrency curves: 1, 2, 4, 8, 16 clients at once against Shoal's API and against `llama-server`
 * launched by hand with the same model, threads and slots (as many slots as the largest level, so no
 * request queues). At each level and repetition both servers get the same burst, in alternating
 * order; a burst is N streaming chat completions sent together. Per level and server it reports the
 * aggregate decode rate (all tokens of the burst / first request sent → last stream closed) and the
 * time to first token over every request of every repetition (p50, p95). A small model keeps a burst
 * of 16 short on 2 cores. Prints one JSON object.
 */

const BENCHMARK = 'concurrency';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    params: { type: 'string', default: '20M' },
    type: { type: 'string', default: 'f16' },
    threads: { type: 'string' },
    levels: { type: 'string' },
    reps: { type: 'string' },
    tokens: { type: 'string' },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});

const quick = values.quick === true;
const threads = intOption('threads', values.threads, defaultEngineThreads(quick));
const levels = intListOption('levels', values.levels, [1, 2, 4, 8, 16]);
const reps = intOption('reps', values.reps, quick ? 2 : 3);
const maxTokens = intOption('tokens', values.tokens, quick ? 32 : 64);
const slots = Math.max(...levels);
const contextPerSlot = 512;

type SideName = 'shoal' | 'llamaServer';

interface Burst {
  samples: StreamSample[];
  aggregateTokPerS: number;
}

let promptNo = 0;

/**
 * CPU time (user + system, all threads) a process has used, from /proc: for the Shoal node that is
 * its own work per token (relaying the engine's stream, HTTP), which competes with the engine for
 * cores and is steadier than wall time on a busy machine. Null where /proc is missing.
 */
function processCpuMs(pid: number): number | null {
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th, in USER_HZ (100 per second).
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

async function burst(server: Server, clients: number): Promise<Burst> {
  const started = performance.now();
  const samples = await Promise.all(Array.from({ length: clients }, () => streamChat(server, benchPrompt(promptNo++), maxTokens)));
  const tokens = samples.reduce((sum, s) => sum + s.tokens, 0);
  const lastEnd = Math.max(...samples.map((s) => s.endedAt));
  return { samples, aggregateTokPerS: (tokens * 1000) / (lastEnd - started) };
}

async function main(): Promise<void> {
  const model = await ensureBenchModel(values.params!, values.type as TensorType, values['model-dir']);
  const binary = await ensureLlamaServer();
  const serving = { model, threads, parallel: slots, contextPerSlot };
  const servers: Server[] = [];
  try {
    log(BENCHMARK, `starting llama-server and a Shoal node on ${model.path}, ${threads} thread(s), ${slots} slots`);
    const llama = await startLlamaServer(binary, serving);
    servers.push(llama);
    const shoal = await startShoal(serving);
    servers.push(shoal);
    const sides: { name: SideName; server: Server }[] = [
      { name: 'shoal', server: shoal },
      { name: 'llamaServer', server: llama },
    ];
    // Unmeasured: one request and one full burst each, so weights are paged in and every slot has run once.
    for (const side of sides) {
      await burst(side.server, 1);
      await burst(side.server, slots);
    }

    const results = [];
    for (const [levelIndex, clients] of levels.entries()) {
      const bursts: Record<SideName, Burst[]> = { shoal: [], llamaServer: [] };
      let nodeCpuMs = 0;
      for (let rep = 0; rep < reps; rep++) {
        for (const side of alternation(sides, levelIndex + rep)) {
          const cpuBefore = side.name === 'shoal' ? processCpuMs(shoal.pid) : null;
          bursts[side.name].push(await burst(side.server, clients));
          const cpuAfter = side.name === 'shoal' ? processCpuMs(shoal.pid) : null;
          if (cpuBefore !== null && cpuAfter !== null) nodeCpuMs += cpuAfter - cpuBefore;
        }
      }
      const figures = (list: Burst[]) => {
        const all = list.flatMap((b) => b.samples);
        return {
          aggregateTokPerS: summarize(list.map((b) => b.aggregateTokPerS)),
          ttftMs: percentiles(all.map((s) => s.ttftMs)),
          perRequestDecodeTokPerS: summarize(all.map((s) => s.decodeTokPerS)),
          tokens: all.map((s) => s.tokens),
        };
      };
      const s = figures(bursts.shoal);
      const l = figures(bursts.llamaServer);
      log(BENCHMARK, `${clients} client(s): ${s.aggregateTokPerS.median} vs ${l.aggregateTokPerS.median} tok/s aggregate; TTFT p95 ${s.ttftMs.p95} vs ${l.ttftMs.p95} ms`);
      results.push({
        clients,
        shoal: s,
        llamaServer: l,
        aggregateRatio: ratio(s.aggregateTokPerS.median, l.aggregateTokPerS.median),
        ttftP50Ratio: ratio(s.ttftMs.p50, l.ttftMs.p50),
        ttftP95Ratio: ratio(s.ttftMs.p95, l.ttftMs.p95),
        shoalNodeCpuMsPerToken: Math.round((nodeCpuMs / s.tokens.reduce((sum, n) => sum + n, 0)) * 1000) / 1000,
      });
    }
    printResult({
      benchmark: BENCHMARK,
      quick,
      method:
        `bursts of N streaming chat completions sent at once (temperature 0, ${maxTokens} tokens each, prompts new to both servers); ` +
        `aggregate tok/s = tokens of the burst / (first request sent → last stream closed), median over ${reps} burst(s) per level; ` +
        `TTFT percentiles over every request of the level; Shoal and llama-server alternate which goes first; ` +
        `shoalNodeCpuMsPerToken = CPU time of the Shoal node process itself (not its engine) over the level's bursts / tokens streamed (/proc, 10 ms ticks)`,
      model: { name: model.name, params: model.params, type: model.type, bytes: model.bytes },
      shoalEngine: shoal.engine,
      threads,
      slots,
      contextPerSlot,
      reps,
      maxTokens,
      levels,
      llamaServerCommand: `llama-server -m ${model.path} -t ${threads} -tb ${threads} -np ${slots} -c ${slots * contextPerSlot} -ngl 0`,
      shoalCommand: `shoal run --default-model ${model.path} --threads ${threads} --parallel ${slots} --context-size ${contextPerSlot} --gpu false`,
      results,
      machine: machineInfo(),
      versions: await versions(),
    });
  } finally {
    for (const server of servers.reverse()) await server.stop();
  }
}

await main();
