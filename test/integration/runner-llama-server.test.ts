// The managed llama-server engine (LlamaServerRunner) against the engine compliance suite, on a
// generated random-weight model (shoal/tiny's spec), one thread. llama-server comes from the engine
// cache that `shoal doctor --fix` fills; without it the suite skips and says so.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { pino } from 'pino';
import { findEngine } from '../../src/doctor/engines.js';
import { TINY_MODEL_ID, TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel } from '../../src/models/generate/random-model.js';
import { LlamaServerRunner } from '../../src/worker/engines/llama-server.js';
import { runnerComplianceSuite } from '../support/runner-compliance.js';

const binaryPath = await findEngine('llama-server');
const dir = await mkdtemp(join(tmpdir(), 'shoal-runner-llama-server-'));
const modelPath = join(dir, 'tiny.gguf');
if (binaryPath !== null) await generateRandomModel(TINY_MODEL_SPEC, modelPath);

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

runnerComplianceSuite(
  'LlamaServerRunner (llama-server)',
  ({ slots, maxCrashes, initialBackoffMs }) =>
    new LlamaServerRunner({
      binaryPath: binaryPath ?? '',
      modelPath,
      dataDir: join(dir, 'data'),
      log: pino({ level: 'silent' }),
      threads: 1,
      // The full trained context per slot: a request without a token limit runs long enough to be cancelled or crashed mid-stream.
      contextTokens: 4096,
      parallel: slots,
      maxCrashes,
      initialBackoffMs,
    }),
  { skip: binaryPath === null ? 'llama-server is not built: run `shoal doctor --fix`' : false, modelId: TINY_MODEL_ID },
);
