// Speculative decoding with the real llama-server: a generated target whose extra blocks write
// nothing and its shallow draft (src/models/generate speculativePairSpecs) must answer greedy requests
// token for token like the target alone, with llama-server reporting every draft token accepted; and
// SHOAL_SPECULATIVE=0 must start the same runner without its draft.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import type { Logger } from '../../src/common/log.js';
import { TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel, speculativePairSpecs } from '../../src/models/generate/random-model.js';
import { TaskEvent, type InferenceTask } from '../../src/wire/task.js';
import { llamaServerArgs, probeServerFeatures, SPECULATIVE_ENV, type ServerArgsInput } from '../../src/worker/engines/llama-server-args.js';
import { LlamaServerRunner } from '../../src/worker/engines/llama-server.js';
import { builtEngines } from '../support/engines.js';

const found = await builtEngines();
const skip = typeof found === 'string' ? found : false;
const serverBinary = typeof found === 'string' ? '' : found.server;

let dir: string;
let targetPath: string;
let draftPath: string;

const logLines: Array<{ msg: string }> = [];
const log: Logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(JSON.parse(line) as { msg: string }) });

// llama-server's line when it loads a draft (common/speculative.cpp of the pinned build).
const DRAFT_LOADED = /loading draft model/;
const PROMPT = 'Once upon a time there was a';
const TOKENS = 48;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-speculative-'));
  const { target, draft } = speculativePairSpecs({ ...TINY_MODEL_SPEC, name: 'spec-test', tensorType: 'f16' }, 6);
  targetPath = join(dir, 'target.gguf');
  draftPath = join(dir, 'draft.gguf');
  await generateRandomModel(target, targetPath);
  await generateRandomModel(draft, draftPath);
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** llama-server started with the command line Shoal builds, plus `--metrics`; stopped by `close`. */
async function server(port: number, draft: ServerArgsInput['draft']): Promise<{ url: string; close: () => Promise<void> }> {
  const input: ServerArgsInput = {
    modelPath: targetPath, port, threads: 1, contextTokens: 256, parallel: 1, kvTokens: 256, httpThreads: 4,
    gpuLayers: 0, rpcServers: [], tensorSplit: null, devices: [], embeddings: false, kvCacheType: 'f16', flashAttention: 'auto', draft,
  };
  const args = llamaServerArgs(input, await probeServerFeatures(serverBinary));
  const child = spawn(serverBinary, [...args, '--metrics'], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
    if (ok) break;
    assert.ok(Date.now() < deadline && child.exitCode === null, `llama-server on ${port} did not become ready`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url, close: async () => void (child.kill('SIGTERM'), await exited) };
}

interface Completion {
  content: string;
  timings: { predicted_n: number; draft_n?: number; draft_n_accepted?: number };
}

async function complete(url: string): Promise<Completion> {
  const response = await fetch(`${url}/completion`, {
    method: 'POST',
    body: JSON.stringify({ prompt: PROMPT, n_predict: TOKENS, temperature: 0, cache_prompt: false }),
  });
  assert.equal(response.status, 200);
  return (await response.json()) as Completion;
}

function generate(): InferenceTask {
  return {
    kind: 'generate',
    model: 'spec-test',
    prompt: { kind: 'text', text: PROMPT },
    sampling: { maxTokens: TOKENS, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 },
    stop: [],
    tools: [],
    toolChoice: { mode: 'auto' },
    format: { kind: 'text' },
    logprobs: null,
  };
}

async function runnerText(options: { draft?: { modelPath: string; maxTokens?: number } }): Promise<string> {
  const runner = new LlamaServerRunner({ binaryPath: serverBinary, modelPath: targetPath, dataDir: join(dir, 'data'), log, threads: 1, contextTokens: 256, parallel: 1, ...options });
  try {
    await runner.whenReady();
    let text = '';
    for await (const event of runner.run(generate(), new AbortController().signal)) {
      const parsed = TaskEvent.parse(event);
      if (parsed.type === 'text') text += parsed.text;
    }
    return text;
  } finally {
    await runner.stop();
  }
}

describe('speculative decoding on llama-server', { skip, timeout: 300_000 }, () => {
  test('with the draft, a greedy completion is the target\'s own, and every draft token is accepted', async () => {
    const plain = await server(18931, undefined);
    const alone = await complete(plain.url).finally(() => plain.close());
    const drafted = await server(18932, { modelPath: draftPath, maxTokens: 8 });
    try {
      const withDraft = await complete(drafted.url);
      assert.equal(withDraft.content, alone.content);
      assert.equal(withDraft.timings.predicted_n, TOKENS);
      assert.equal(alone.timings.draft_n, undefined, 'no draft, no draft counters');
      // The draft is the target less blocks that write nothing, so it is never wrong.
      assert.ok((withDraft.timings.draft_n ?? 0) >= TOKENS / 2, JSON.stringify(withDraft.timings));
      assert.equal(withDraft.timings.draft_n_accepted, withDraft.timings.draft_n);
      const metrics = await (await fetch(`${drafted.url}/metrics`)).text();
      const accepted = /^llamacpp:spec_decode_num_accepted_tokens_total (\d+)/m.exec(metrics);
      assert.equal(Number(accepted?.[1]), withDraft.timings.draft_n_accepted);
    } finally {
      await drafted.close();
    }
  });

  test('the runner loads the card\'s draft, and SHOAL_SPECULATIVE=0 leaves it off with the same answer', async () => {
    logLines.length = 0;
    const withDraft = await runnerText({ draft: { modelPath: draftPath, maxTokens: 8 } });
    assert.ok(logLines.some((l) => DRAFT_LOADED.test(l.msg)), 'llama-server loaded the draft');
    logLines.length = 0;
    process.env[SPECULATIVE_ENV] = '0';
    let without: string;
    try {
      without = await runnerText({ draft: { modelPath: draftPath, maxTokens: 8 } });
    } finally {
      delete process.env[SPECULATIVE_ENV];
    }
    assert.ok(!logLines.some((l) => DRAFT_LOADED.test(l.msg)), 'no draft with the switch off');
    assert.equal(without, withDraft);
    assert.match(withDraft, /\S/);
  });
});
