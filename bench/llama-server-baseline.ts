import { parseArgs } from 'node:util';
import { benchPrompt, defaultEngineThreads, ensureBenchModel, ensureLlamaServer, intOption, log, machineInfo, printResult, startLlamaServer, startShoal, streamChat, versions, type Server, type StreamSample, type TensorType } from './common.js';
import { alternation, ratio, summarize } from './stats.js';

/**
 * Shoal's API against `llama-server` launched by hand with the same model, threads and slots (one
 * request at a time here; bench/concurrency.ts loads both with concurrent clients). Both servers run
 * the whole time; each repetition streams one chat completion from each, in alternating order, and
 * times the first token and the decode rate after it. Prints one JSON object.
 *
 * The result names the engine Shoal's node ran (its runner process): when it is node-llama-cpp, the
 * sides differ in engine build as well as in Shoal's layers, since node-llama-cpp ships prebuilt
 * llama.cpp binaries while llama-server is compiled here from the same llama.cpp source
 * (`shoal doctor --fix`) with the CPU features the compiler finds.
 */

const BENCHMARK = 'llama-server-baseline';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    params: { type: 'string' },
    type: { type: 'string', default: 'f16' },
    threads: { type: 'string' },
    reps: { type: 'string' },
    tokens: { type: 'string' },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});

const quick = values.quick === true;
const params = values.params ?? (quick ? '100M' : '200M');
const threads = intOption('threads', values.threads, defaultEngineThreads(quick));
const reps = intOption('reps', values.reps, quick ? 5 : 7);
const maxTokens = intOption('tokens', values.tokens, quick ? 64 : 128);
const contextPerSlot = 1024;

async function main(): Promise<void> {
  const model = await ensureBenchModel(params, values.type as TensorType, values['model-dir']);
  const binary = await ensureLlamaServer();
  const serving = { model, threads, parallel: 1, contextPerSlot };
  const servers: Server[] = [];
  try {
    log(BENCHMARK, `starting llama-server and a Shoal node on ${model.path}, ${threads} thread(s), 1 slot`);
    const llama = await startLlamaServer(binary, serving);
    servers.push(llama);
    const shoal = await startShoal(serving);
    servers.push(shoal);
    const sides = [
      { name: 'shoal', server: shoal },
      { name: 'llamaServer', server: llama },
    ] as const;

    let n = 0;
    // One unmeasured request each pages the weights in and warms both processes.
    for (const side of sides) await streamChat(side.server, benchPrompt(n++), maxTokens);
    const samples: Record<'shoal' | 'llamaServer', StreamSample[]> = { shoal: [], llamaServer: [] };
    for (let rep = 0; rep < reps; rep++) {
      for (const side of alternation(sides, rep)) samples[side.name].push(await streamChat(side.server, benchPrompt(n++), maxTokens));
    }
    const figures = (list: StreamSample[]) => ({ decodeTokPerS: summarize(list.map((s) => s.decodeTokPerS)), ttftMs: summarize(list.map((s) => s.ttftMs)) });
    const s = figures(samples.shoal);
    const l = figures(samples.llamaServer);
    log(BENCHMARK, `decode ${s.decodeTokPerS.median} vs ${l.decodeTokPerS.median} tok/s; TTFT ${s.ttftMs.median} vs ${l.ttftMs.median} ms`);
    printResult({
      benchmark: BENCHMARK,
      quick,
      method:
        `one streaming chat completion at a time (temperature 0, ${maxTokens} tokens, a prompt new to both servers each time), ` +
        `Shoal and llama-server alternating which goes first; decode tok/s = (tokens − 1) / (end − first token)`,
      model: { name: model.name, params: model.params, type: model.type, bytes: model.bytes },
      shoalEngine: shoal.engine,
      threads,
      slots: 1,
      contextPerSlot,
      reps,
      maxTokens,
      llamaServerCommand: `llama-server -m ${model.path} -t ${threads} -tb ${threads} -np 1 -c ${contextPerSlot} -ngl 0`,
      tokensPerRun: { shoal: samples.shoal.map((x) => x.tokens), llamaServer: samples.llamaServer.map((x) => x.tokens) },
      shoal: s,
      llamaServer: l,
      decodeRatio: ratio(s.decodeTokPerS.median, l.decodeTokPerS.median),
      ttftRatio: ratio(s.ttftMs.median, l.ttftMs.median),
      ttftOverheadMs: Math.round((s.ttftMs.median - l.ttftMs.median) * 100) / 100,
      machine: machineInfo(),
      versions: await versions(),
    });
  } finally {
    for (const server of servers.reverse()) await server.stop();
  }
}

await main();
