// The node-llama-cpp engine (RunnerSupervisor and its runner child) against the engine compliance
// suite, on a generated random-weight model (shoal/tiny's spec), one thread.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { pino } from 'pino';
import { TINY_MODEL_ID, TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel } from '../../src/models/generate/random-model.js';
import { RunnerSupervisor } from '../../src/worker/runner/supervisor.js';
import { runnerComplianceSuite } from '../support/runner-compliance.js';

const dir = await mkdtemp(join(tmpdir(), 'shoal-runner-llama-cpp-'));
const modelPath = join(dir, 'tiny.gguf');
await generateRandomModel(TINY_MODEL_SPEC, modelPath);

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

runnerComplianceSuite(
  'RunnerSupervisor (node-llama-cpp)',
  ({ slots, maxCrashes, initialBackoffMs }) =>
    new RunnerSupervisor({
      log: pino({ level: 'silent' }),
      // 1024 tokens per sequence: a request without a token limit runs long enough to be cancelled or crashed mid-stream.
      config: { modelPath, contextSize: 1024, sequences: slots, threads: 1, gpu: false },
      maxCrashes,
      initialBackoffMs,
    }),
  { skip: false, modelId: TINY_MODEL_ID },
);
