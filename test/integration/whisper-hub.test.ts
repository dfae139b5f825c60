// Whisper models from the hub and from disk between the members of a real two-node cluster on
// loopback: `add` of a repo of whisper.cpp ggml files writes a speech-to-text card (the whisper engine,
// one transcription at a time) for the default or the named file; the pull fetches and verifies it,
// the other member copies it (the hub serves nothing), the card's facts come from the ggml header,
// the model placed transcribes through either node with the official `openai` client, and a
// cluster-wide remove evicts it everywhere. A ggml file imported from disk is a speech-to-text card too.
// The models are generated whisper models (random weights: their words are noise).

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { TINY_WHISPER_SPEC, generateWhisperModel } from '../../src/models/generate/whisper-model.js';
import { filePathFor, hubStoreRoot } from '../../src/models/store/layout.js';
import type { AddFileResult, AddResult, ClusterRemoveResult, DownloadView } from '../../src/models/views.js';
import { api, downloaded, listedModel } from '../support/control-api.js';
import { eventually, hubNodeEnv, shoal, startJoinedPair, status } from '../support/cli.js';
import { HubServer } from '../support/hub-server.js';
import type { TestNode } from '../support/node-process.js';
import { toneWav } from '../support/audio.js';

const REPO = 'shoal-test/whisper.cpp';
const BASE = 'ggml-base.bin';
const TINY = 'ggml-tiny.bin';
const ID = `${REPO}:base`;

describe('whisper models from the hub and from disk: added, fetched, copied, placed and evicted like text models', { timeout: 300_000 }, () => {
  let dir: string;
  let hub: HubServer;
  let a: TestNode;
  let b: TestNode;
  let head: string;
  let tinyPath: string;
  const storePath = (node: TestNode, file: string): string => filePathFor(hubStoreRoot(node.dataDir), REPO, head, file);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-whisper-hub-'));
    const base = join(dir, 'base.bin');
    tinyPath = join(dir, 'ggml-tiny.bin');
    await generateWhisperModel({ ...TINY_WHISPER_SPEC, name: 'hub whisper base' }, base);
    await generateWhisperModel({ ...TINY_WHISPER_SPEC, name: 'hub whisper tiny', seed: 7, nTextLayer: 2 }, tinyPath);
    const encoder = join(dir, 'encoder.zip');
    await writeFile(encoder, Buffer.alloc(1024, 1));
    hub = await HubServer.start([
      {
        repo: REPO,
        files: [
          { path: BASE, filePath: base },
          { path: TINY, filePath: tinyPath },
          // Beside the models in whisper.cpp's own repo: Core ML encoders and a README, not models.
          { path: 'ggml-base-encoder.mlmodelc.zip', filePath: encoder },
          { path: 'README.md', bytes: Buffer.from('# whisper models\n'), lfs: false },
        ],
      },
    ]);
    head = hub.head(REPO);
    [a, b] = await startJoinedPair(hubNodeEnv(hub.url));
  });

  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('add picks the base model by default and writes a speech-to-text card; the pull verifies it and its facts come from the ggml header', async () => {
    const added = await api<AddResult>(a, 'POST', '/models/add', { repo: REPO, pull: true });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    assert.equal(added.body.card.id, ID);
    assert.deepEqual(added.body.card.tasks, ['transcription']);
    assert.deepEqual(added.body.card.compatible_backends, ['whisper-cpu']);
    assert.equal(added.body.card.runtime.parallel, 1);
    assert.equal(added.body.card.projector, undefined);
    assert.deepEqual(added.body.card.source, { kind: 'huggingface', repo: REPO, file: BASE, revision: head });
    assert.deepEqual(added.body.hub.files.map((f) => f.path), [BASE], 'only the model file, not the encoder or the README');
    const done = await downloaded(a, (added.body.download as DownloadView).id);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.equal(hub.transfers(BASE).length, 1);
    assert.equal(hub.transfers(TINY).length, 0);
    const view = await listedModel(a, ID);
    assert.equal(view.state, 'on-disk');
    assert.equal(view.facts?.architecture, 'whisper');
    assert.equal(view.facts?.trainedContext, TINY_WHISPER_SPEC.nTextCtx);
    assert.equal(view.facts?.vocabSize, 51_865);
    assert.equal(view.facts?.fileBytes, hub.file(REPO, BASE).size);

    const named = await api<AddResult>(a, 'POST', '/models/add', { repo: `${REPO}/${TINY}` });
    assert.equal(named.status, 201, JSON.stringify(named.body));
    assert.equal(named.body.card.id, `${REPO}:tiny`);
    assert.deepEqual(named.body.card.tasks, ['transcription']);
    const withProjector = await api<{ error: { message: string } }>(a, 'POST', '/models/add', { repo: REPO, projector: 'F16' });
    assert.equal(withProjector.status, 400, JSON.stringify(withProjector.body));
    assert.match(withProjector.body.error.message, /speech-to-text model, which takes no projector/);
  });

  test('the other member copies the model from the holder; the hub serves nothing', async () => {
    const added = await api<AddResult>(b, 'POST', '/models/add', { repo: REPO });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    await eventually('beta to see alpha’s copy', 20_000, async () => {
      const s = await status(b);
      return Object.values(s.artifacts).some((held) => held.models.some((m) => m.modelId === ID)) ? true : undefined;
    });
    hub.resetCounters();
    const pull = await api<{ download: DownloadView }>(b, 'POST', '/models/pull', { id: ID });
    assert.equal(pull.status, 202, JSON.stringify(pull.body));
    const done = await downloaded(b, pull.body.download.id);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.equal(done.source?.kind, 'peer');
    assert.equal(hub.served(BASE), 0);
    assert.equal((await listedModel(b, ID)).state, 'on-disk');
  });

  test('placed, the hub model transcribes through either node', async () => {
    const placed = await api<{ instance: { instanceId: string } }>(a, 'POST', '/place_instance', { model: ID });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    for (const node of [a, b]) {
      await eventually(`the whisper instance to be ready as ${node.url} sees it`, 60_000, async () => {
        const s = await status(node);
        const instance = s.instances.find((i) => i.instanceId === placed.body.instance.instanceId);
        return instance?.runners.some((r) => r.state === 'ready') ? true : undefined;
      });
    }
    for (const node of [a, b]) {
      const openai = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'x', maxRetries: 0 });
      const result = await openai.audio.transcriptions.create({ model: ID, file: await toFile(toneWav(2), 'speech.wav', { type: 'audio/wav' }), response_format: 'verbose_json' });
      assert.equal(typeof result.text, 'string');
      assert.ok(Math.abs(result.duration - 2) < 0.05, `the 2 s upload was heard as ${result.duration} s`);
    }
    const stopped = await fetch(`${a.url}/instance/${placed.body.instance.instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } });
    assert.equal(stopped.status, 200);
    await eventually('the instance to be gone', 20_000, async () => ((await status(a)).instances.length === 0 ? true : undefined));
  });

  test('a ggml file imported from disk is a speech-to-text card; a cluster-wide remove evicts the hub model everywhere', async () => {
    const added = await shoal(a, 'models', 'add', tinyPath, '--json');
    assert.equal(added.code, 0, added.stderr);
    const result = JSON.parse(added.stdout) as AddFileResult;
    assert.equal(result.card.id, 'local/ggml-tiny');
    assert.deepEqual(result.card.tasks, ['transcription']);
    assert.deepEqual(result.card.compatible_backends, ['whisper-cpu']);
    assert.equal(result.card.source.kind === 'local' ? result.card.source.file : null, 'ggml-tiny.bin');
    assert.equal((await listedModel(a, 'local/ggml-tiny')).facts?.architecture, 'whisper');

    const removed = await api<ClusterRemoveResult>(b, 'DELETE', `/models/${ID}`);
    assert.equal(removed.status, 200, JSON.stringify(removed.body));
    assert.deepEqual(removed.body.nodes.map((n) => n.outcome).sort(), ['removed', 'removed']);
    for (const node of [a, b]) assert.equal(existsSync(storePath(node, BASE)), false, `evicted on ${node.url}`);
  });
});
