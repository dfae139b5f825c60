import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { countParams, generateRandomModel, GENERATOR_VERSION, parseModelSpec, speculativePairSpecs, type RandomModelSpec } from '../src/models/generate/random-model.js';
import { probeServerFeatures } from '../src/worker/engines/llama-server-args.js';
import { freePort } from '../test/support/node-process.js';
import { benchPrompt, ensureLlamaServer, intOption, liveGroups, log, machineInfo, printResult, sleep, versions } from './common.js';
import { alternation, ratio, summarize } from './stats.js';

/**
 * Speculative decoding against the same model without it: a generated target whose trailing blocks
 * write nothing (so it costs a deep model's decode but predicts exactly what its one-block draft
 * does) served by two hand-launched llama-servers, one with `--spec-draft-model`. Each repetition
 * sends one greedy completion to each, alternating which goes first; decode tok/s is llama-server's
 * own `timings.predicted_per_second`. Every draft token should be accepted: the result says how many
 * were. Prints one JSON object.
 */

const BENCHMARK = 'speculative';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    'inert-blocks': { type: 'string' },
    'draft-max': { type: 'string' },
    threads: { type: 'string' },
    reps: { type: 'string' },
    tokens: { type: 'string' },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});

const quick = values.quick === true;
// 1024 wide with a 2048-token vocab: each block is ~11.5M params (23 MB of f16) while the embeddings
// stay small, so the one-block draft costs a few percent of the target's decode.
const inertBlocks = intOption('inert-blocks', values['inert-blocks'], quick ? 15 : 23);
const draftMax = intOption('draft-max', values['draft-max'], 16);
const threads = intOption('threads', values.threads, 2);
const reps = intOption('reps', values.reps, quick ? 3 : 5);
const maxTokens = intOption('tokens', values.tokens, quick ? 64 : 128);
const contextTokens = 1024;

const DRAFT_SPEC: RandomModelSpec = parseModelSpec({
  name: 'bench-speculative-draft',
  seed: 7,
  vocabSize: 2048,
  embeddingLength: 1024,
  blockCount: 1,
  headCount: 16,
  headCountKv: 8,
  feedForwardLength: 2816,
  contextLength: 4096,
  ropeFreqBase: 10000,
  rmsEps: 1e-5,
  tensorType: 'f16',
});

async function ensureModel(spec: RandomModelSpec, dir: string): Promise<{ path: string; params: number; bytes: number }> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${spec.name}-${spec.blockCount}b-v${GENERATOR_VERSION}.gguf`);
  if (!existsSync(path)) {
    log(BENCHMARK, `generating ${path} (${countParams(spec)} params)`);
    await generateRandomModel(spec, path);
  }
  return { path, params: countParams(spec), bytes: (await stat(path)).size };
}

interface Hand {
  url: string;
  args: string[];
  stop: () => Promise<void>;
}

async function startServer(binary: string, args: string[]): Promise<Hand> {
  const port = await freePort();
  const full = [...args, '--host', '127.0.0.1', '--port', String(port)];
  const child = spawn(binary, full, { stdio: 'ignore', detached: true });
  liveGroups.add(child.pid!);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (!liveGroups.delete(child.pid!)) return;
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
  };
  const deadline = Date.now() + 180_000;
  while (!(await fetch(`${url}/health`).then((r) => r.ok, () => false))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`llama-server did not start: ${binary} ${full.join(' ')}`);
    }
    await sleep(200);
  }
  return { url, args, stop };
}

interface Sample {
  decodeTokPerS: number;
  tokens: number;
  draftTokens: number;
  acceptedTokens: number;
  content: string;
}

async function complete(server: Hand, prompt: string): Promise<Sample> {
  const response = await fetch(`${server.url}/completion`, {
    method: 'POST',
    body: JSON.stringify({ prompt, n_predict: maxTokens, temperature: 0, cache_prompt: false }),
  });
  if (!response.ok) throw new Error(`llama-server answered HTTP ${response.status}: ${await response.text()}`);
  const body = (await response.json()) as { content: string; timings: { predicted_n: number; predicted_per_second: number; draft_n?: number; draft_n_accepted?: number } };
  const t = body.timings;
  return { decodeTokPerS: t.predicted_per_second, tokens: t.predicted_n, draftTokens: t.draft_n ?? 0, acceptedTokens: t.draft_n_accepted ?? 0, content: body.content };
}

async function main(): Promise<void> {
  const binary = await ensureLlamaServer();
  const flags = (await probeServerFeatures(binary)).draft;
  if (flags === null) throw new Error(`${binary} has no draft-model flag: provision the pinned engine with \`shoal doctor --fix\``);
  const { target, draft } = speculativePairSpecs(DRAFT_SPEC, inertBlocks);
  const targetModel = await ensureModel(target, values['model-dir']);
  const draftModel = await ensureModel(draft, values['model-dir']);
  const common = ['-m', targetModel.path, '-t', String(threads), '-tb', String(threads), '-np', '1', '-c', String(contextTokens), '-ngl', '0', '--no-webui'];
  const draftArgs = [flags.model, draftModel.path, ...(flags.type ? [flags.type, 'draft-simple'] : [])];
  if (flags.maxTokens) draftArgs.push(flags.maxTokens, String(draftMax));
  if (flags.threads) draftArgs.push(flags.threads, String(threads));
  if (flags.gpuLayers) draftArgs.push(flags.gpuLayers, '0');
  const servers: Hand[] = [];
  try {
    log(BENCHMARK, `starting two llama-servers on ${targetModel.path} (${target.blockCount} blocks, ${inertBlocks} inert), ${threads} thread(s), one with the draft`);
    const plain = await startServer(binary, common);
    servers.push(plain);
    const drafted = await startServer(binary, [...common, ...draftArgs]);
    servers.push(drafted);
    const sides = [
      { name: 'plain', server: plain },
      { name: 'speculative', server: drafted },
    ] as const;
    let n = 0;
    // One unmeasured request each pages the weights in.
    for (const side of sides) await complete(side.server, benchPrompt(n++));
    const samples: Record<'plain' | 'speculative', Sample[]> = { plain: [], speculative: [] };
    let mismatches = 0;
    for (let rep = 0; rep < reps; rep++) {
      const prompt = benchPrompt(n++);
      for (const side of alternation(sides, rep)) samples[side.name].push(await complete(side.server, prompt));
      if (samples.plain.at(-1)!.content !== samples.speculative.at(-1)!.content) mismatches += 1;
    }
    const p = summarize(samples.plain.map((s) => s.decodeTokPerS));
    const s = summarize(samples.speculative.map((x) => x.decodeTokPerS));
    const draftTotal = samples.speculative.reduce((sum, x) => sum + x.draftTokens, 0);
    const accepted = samples.speculative.reduce((sum, x) => sum + x.acceptedTokens, 0);
    log(BENCHMARK, `decode ${s.median} tok/s with the draft vs ${p.median} without`);
    printResult({
      benchmark: BENCHMARK,
      quick,
      method:
        `one greedy /completion at a time (${maxTokens} tokens, the same new prompt to both servers per repetition), ` +
        `the two llama-servers alternating which goes first; decode tok/s = llama-server's timings.predicted_per_second`,
      target: { blocks: target.blockCount, inertBlocks, params: targetModel.params, bytes: targetModel.bytes, type: target.tensorType },
      draft: { blocks: draft.blockCount, params: draftModel.params, bytes: draftModel.bytes },
      threads,
      reps,
      maxTokens,
      draftMax,
      llamaServerCommand: { plain: `llama-server ${common.join(' ')}`, speculative: `llama-server ${[...common, ...draftArgs].join(' ')}` },
      plain: { decodeTokPerS: p },
      speculative: { decodeTokPerS: s, draftTokens: draftTotal, acceptedTokens: accepted, acceptance: draftTotal > 0 ? accepted / draftTotal : null },
      outputsDiffered: mismatches,
      decodeSpeedup: ratio(s.median, p.median),
      machine: machineInfo(),
      versions: await versions(),
    });
  } finally {
    for (const server of servers.reverse()) await server.stop();
  }
}

await main();
