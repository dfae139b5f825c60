import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { readGgufFacts } from '../src/models/cards/gguf-facts.js';
import { fullShare } from '../src/placement/memory.js';
import { bytesReadPerToken } from '../src/placement/speed.js';
import { benchPrompt, defaultEngineThreads, ensureBenchModel, ensureLlamaServer, intOption, log, machineInfo, printResult, startLlamaServer, streamChat, versions, type TensorType } from './common.js';
import { alternation, ratio, summarize, type Summary } from './stats.js';

/**
 * The physical limit of decode on this machine. Generating a token reads every weight it passes
 * through once (src/placement/speed.ts), so a CPU can decode at most
 *
 *   bound tok/s = memory read bandwidth / bytes read per token
 *
 * Bandwidth comes from bench/membw.c, compiled here with `cc -O3 -march=native`: threads summing
 * slices of a buffer far larger than the caches, with wide vector loads as llama.cpp's kernels use.
 * Not Node: a Float64Array summed in worker_threads reached 4–8 GB/s on the 2-core development machine
 * where the C loop reads 33–55 GB/s (scalar loads, no vectorization), so it would understate the bound
 * several times over. A C compiler is there wherever the engines can be built (`shoal doctor --fix`).
 *
 * Bytes per token are bytesReadPerToken over the model's GGUF facts (its weights; the embedding table
 * only when the output head is tied to it). The measured rate next to it is llama-server launched by
 * hand with the same model and threads, one request at a time; the report adds the rates the other
 * benchmarks measured on the same model. Prints one JSON object.
 */

const BENCHMARK = 'physical-limit';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    params: { type: 'string' },
    type: { type: 'string', default: 'f16' },
    threads: { type: 'string' },
    reps: { type: 'string' },
    tokens: { type: 'string' },
    'buffer-mib': { type: 'string' },
    passes: { type: 'string' },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});

const quick = values.quick === true;
// The same model as llama-server-baseline and serve-overhead, so their decode rates compare with the bound.
const params = values.params ?? (quick ? '100M' : '200M');
const threads = intOption('threads', values.threads, defaultEngineThreads(quick));
const reps = intOption('reps', values.reps, quick ? 3 : 5);
const maxTokens = intOption('tokens', values.tokens, quick ? 64 : 128);
const bufferBytes = intOption('buffer-mib', values['buffer-mib'], quick ? 512 : 1024) * 1024 * 1024;
const passes = intOption('passes', values.passes, quick ? 5 : 10);

const SOURCE = fileURLToPath(new URL('../../bench/membw.c', import.meta.url));

/** Compiles membw.c; without -march=native when the compiler does not know it (some non-x86 ones). */
function compile(dir: string): { binary: string; command: string } {
  const binary = join(dir, 'membw');
  const attempts = [
    ['-O3', '-march=native', '-pthread', SOURCE, '-o', binary],
    ['-O3', '-pthread', SOURCE, '-o', binary],
  ];
  const errors: string[] = [];
  for (const args of attempts) {
    const out = spawnSync('cc', args, { encoding: 'utf8' });
    if (out.status === 0) return { binary, command: `cc ${args.join(' ')}` };
    errors.push(out.error ? out.error.message : out.stderr.trim());
  }
  throw new Error(`cannot compile ${SOURCE} with cc (a C compiler is needed to measure memory bandwidth; install gcc): ${errors.join(' | ')}`);
}

interface Bandwidth {
  threads: number;
  gbPerS: Summary;
}

function measureBandwidth(binary: string, t: number): Bandwidth {
  const out = spawnSync(binary, [String(bufferBytes), String(t), String(passes)], { encoding: 'utf8', timeout: 300_000 });
  if (out.status !== 0) throw new Error(`membw with ${t} thread(s) failed: ${out.error?.message ?? out.stderr}`);
  const parsed = JSON.parse(out.stdout) as { passesGBps: number[] };
  return { threads: t, gbPerS: summarize(parsed.passesGBps) };
}

async function main(): Promise<void> {
  const model = await ensureBenchModel(params, values.type as TensorType, values['model-dir']);
  const facts = await readGgufFacts(model.path);
  const bytesPerToken = bytesReadPerToken(facts, fullShare(facts));

  const dir = await mkdtemp(join(tmpdir(), 'shoal-membw-'));
  let compiled: { binary: string; command: string };
  const bandwidth: Bandwidth[] = [];
  try {
    compiled = compile(dir);
    const counts = [...new Set([1, threads, availableParallelism()])].sort((a, b) => a - b);
    // Rotated like an A/B comparison so drift does not favour one thread count.
    for (let rep = 0; rep < 2; rep++) {
      for (const t of alternation(counts, rep)) {
        const m = measureBandwidth(compiled.binary, t);
        const seen = bandwidth.find((b) => b.threads === t);
        if (seen) seen.gbPerS = summarize([...seen.gbPerS.samples, ...m.gbPerS.samples]);
        else bandwidth.push(m);
      }
    }
    bandwidth.sort((a, b) => a.threads - b.threads);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  for (const b of bandwidth) log(BENCHMARK, `${b.threads} thread(s): ${b.gbPerS.median} GB/s`);
  const atEngineThreads = bandwidth.find((b) => b.threads === threads)!.gbPerS.median;
  const boundTokPerS = (atEngineThreads * 1e9) / bytesPerToken;

  const server = await startLlamaServer(await ensureLlamaServer(), { model, threads, parallel: 1, contextPerSlot: 1024 });
  const decode: number[] = [];
  try {
    await streamChat(server, benchPrompt(0), maxTokens);
    for (let rep = 0; rep < reps; rep++) decode.push((await streamChat(server, benchPrompt(rep + 1), maxTokens)).decodeTokPerS);
  } finally {
    await server.stop();
  }
  const measured = summarize(decode);
  log(BENCHMARK, `bound ${Math.round(boundTokPerS)} tok/s; llama-server measured ${measured.median} tok/s (${ratio(measured.median, boundTokPerS)} of the bound)`);
  printResult({
    benchmark: BENCHMARK,
    quick,
    method:
      `memory read bandwidth: ${compiled.command}; ${bufferBytes / 1024 ** 2} MiB buffer, ${passes} timed passes per run, 2 runs per thread count; ` +
      `bound = bandwidth at the engine thread count / bytesReadPerToken (src/placement/speed.ts) of the model; ` +
      `measured = llama-server launched by hand, same model and threads, 1 slot, ${maxTokens} tokens per request`,
    bandwidth,
    engineThreads: threads,
    bandwidthGBPerS: atEngineThreads,
    model: { name: model.name, params: model.params, type: model.type, bytes: model.bytes, bytesReadPerToken: bytesPerToken, outputTied: facts.outputTied },
    decodeBoundTokPerS: Math.round(boundTokPerS * 10) / 10,
    llamaServerDecodeTokPerS: measured,
    fractionOfBound: ratio(measured.median, boundTokPerS),
    reps,
    maxTokens,
    machine: machineInfo(),
    versions: await versions(),
  });
}

await main();
