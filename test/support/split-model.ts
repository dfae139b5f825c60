// A generated model for pooled-split tests, its card, and the budget that makes it fit no single node.

import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { readGgufFacts } from '../../src/models/cards/gguf-facts.js';
import { estimateMemory, FIT_MARGIN_BYTES, fullShare } from '../../src/placement/memory.js';
import { CLI_PATH } from './node-process.js';

const run = promisify(execFile);

export const SPLIT_MODEL_ID = 'test/split-50m';
/** ~98 MB of f16 weights: large enough that half of it is worth more than the per-part floor's rounding. */
const SPLIT_MODEL_PARAMS = '50M';

/** Generates the model (deterministic: same bytes every time) into `dir`. */
export async function generateSplitModel(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, 'split-50m.gguf');
  await run(process.execPath, [CLI_PATH, 'models', 'generate', '--params', SPLIT_MODEL_PARAMS, '--out', path, '--seed', '7'], { timeout: 120_000 });
  return path;
}

/** A card that only the managed engines can run, so the single-node copy and the split use one llama.cpp. */
export async function writeSplitCard(dataDir: string, modelPath: string): Promise<void> {
  await mkdir(join(dataDir, 'cards'), { recursive: true });
  const toml = [
    `id = "${SPLIT_MODEL_ID}"`,
    'name = "generated 50M model for split tests"',
    'tasks = ["completion", "chat"]',
    'compatible_backends = ["llama_server-cpu", "rpc-cpu"]',
    'backend_preference = ["llama_server-cpu"]',
    '',
    '[source]',
    'kind = "file"',
    `path = "${modelPath}"`,
    '',
    '[runtime]',
    'context_size = 512',
    'parallel = 1',
    '',
  ].join('\n');
  await writeFile(join(dataDir, 'cards', 'split.toml'), toml);
}

/**
 * A `--memory-budget` below what one full copy needs and above what half of it needs (the planner's own
 * estimate, context 512 × 1 as the card says): the model then fits no single budgeted node but fits a
 * two-node split.
 */
export async function splitBudgetBytes(modelPath: string): Promise<number> {
  const facts = await readGgufFacts(modelPath);
  const full = estimateMemory(facts, fullShare(facts), { contextTokens: 512, sequences: 1 });
  return Math.floor(full.totalBytes + FIT_MARGIN_BYTES - (full.weightsBytes + full.overheadBytes) / 4);
}
