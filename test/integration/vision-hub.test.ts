// A vision model from the hub between the members of a real two-node cluster on loopback: `add` of a
// repo with a projector writes a vision card naming it; the pull fetches and verifies the projector
// with the model; a copy made before the card named a projector is completed from the hub with only
// the projector's bytes; the other member copies both files (the hub serves none); the model, placed,
// takes an image on llama-server through either node; a cluster-wide remove evicts both files
// everywhere. A model file imported from disk with its projector is a vision card whose copy carries
// the projector too. The serving step needs llama-server from the engine cache (`shoal doctor --fix`).

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { findEngine } from '../../src/doctor/engines.js';
import { TINY_VISION_MODEL_SPEC, TINY_VISION_PROJECTOR_SPEC } from '../../src/models/generate/builtin.js';
import { generateProjector, imageTokens } from '../../src/models/generate/projector.js';
import { generateRandomModel } from '../../src/models/generate/random-model.js';
import { filePathFor, hubStoreRoot } from '../../src/models/store/layout.js';
import { localRevision } from '../../src/models/cards/card.js';
import type { AddFileResult, AddResult, ClusterRemoveResult, DownloadView } from '../../src/models/views.js';
import { api, downloaded, listedModel } from '../support/control-api.js';
import { eventually, hubNodeEnv, shoal, startJoinedPair, status } from '../support/cli.js';
import { HubServer } from '../support/hub-server.js';
import type { TestNode } from '../support/node-process.js';
import { png } from '../support/images.js';

const REPO = 'shoal-test/Vision-GGUF';
const MODEL_FILE = 'Vision-Q8_0.gguf';
const PROJECTOR = 'mmproj-Vision-F16.gguf';
const OTHER_PROJECTOR = 'mmproj-Vision-F32.gguf';
const ID = `${REPO}:Q8_0`;
const serverBinary = await findEngine('llama-server');


describe('a vision model from the hub: its projector is fetched, verified, copied and evicted with it', { timeout: 300_000 }, () => {
  let dir: string;
  let hub: HubServer;
  let a: TestNode;
  let b: TestNode;
  let head: string;
  let files: { model: string; projector: string };
  const storePath = (node: TestNode, file: string): string => filePathFor(hubStoreRoot(node.dataDir), REPO, head, file);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-vision-hub-'));
    const model = join(dir, 'model.gguf');
    const projector = join(dir, 'mmproj.gguf');
    const other = join(dir, 'mmproj-f32.gguf');
    await generateRandomModel({ ...TINY_VISION_MODEL_SPEC, name: 'hub vision' }, model);
    await generateProjector(TINY_VISION_PROJECTOR_SPEC, projector);
    await generateProjector({ ...TINY_VISION_PROJECTOR_SPEC, seed: 2 }, other);
    files = { model, projector };
    hub = await HubServer.start([
      { repo: REPO, files: [{ path: MODEL_FILE, filePath: model }, { path: PROJECTOR, filePath: projector }, { path: OTHER_PROJECTOR, filePath: other }] },
    ]);
    head = hub.head(REPO);
    [a, b] = await startJoinedPair(hubNodeEnv(hub.url));
  });

  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('a text-only add fetches the model alone; the vision add then names the F16 projector and a pull fetches only its bytes', async () => {
    const text = await api<AddResult>(a, 'POST', '/models/add', { repo: REPO, projector: false, pull: true });
    assert.equal(text.status, 201, JSON.stringify(text.body));
    assert.equal(text.body.card.projector, undefined);
    assert.equal(text.body.card.capabilities.vision, false);
    assert.equal(text.body.hub.projector, null);
    assert.equal((await downloaded(a, (text.body.download as DownloadView).id)).state, 'done');
    assert.ok(existsSync(storePath(a, MODEL_FILE)));
    assert.equal(existsSync(storePath(a, PROJECTOR)), false, 'a text card fetches no projector');

    const missing = await api<{ error: { code: string; message: string } }>(a, 'POST', '/models/add', { repo: REPO, projector: 'Q4_0' });
    assert.equal(missing.status, 404, JSON.stringify(missing.body));
    assert.match(missing.body.error.message, /has no projector "Q4_0": it has mmproj-Vision-F16\.gguf, mmproj-Vision-F32\.gguf/);

    hub.resetCounters();
    const vision = await api<AddResult>(a, 'POST', '/models/add', { repo: REPO });
    assert.equal(vision.status, 200, JSON.stringify(vision.body));
    assert.deepEqual(vision.body.card.projector, { kind: 'huggingface', file: PROJECTOR });
    assert.equal(vision.body.card.capabilities.vision, true);
    assert.ok(vision.body.card.compatible_backends.every((tag) => !tag.startsWith('llama_cpp-')), 'the in-process engine loads no projector');
    assert.deepEqual(vision.body.hub.projector, { path: PROJECTOR, size: hub.file(REPO, PROJECTOR).size });
    assert.equal(vision.body.hub.bytes, hub.file(REPO, MODEL_FILE).size + hub.file(REPO, PROJECTOR).size);
    assert.equal((await listedModel(a, ID)).state, 'stale', 'the copy on disk lacks the projector the card now names');

    const pulled = await shoal(a, 'models', 'pull', ID, '--json');
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.equal((await listedModel(a, ID)).state, 'on-disk');
    assert.equal((await stat(storePath(a, PROJECTOR))).size, hub.file(REPO, PROJECTOR).size);
    assert.equal(hub.transfers(MODEL_FILE).length, 0, 'the model file already on disk is not fetched again');
    assert.equal(hub.transfers(PROJECTOR).length, 1);
    assert.equal(hub.transfers(OTHER_PROJECTOR).length, 0, 'only the projector the card names');
  });

  test('the other member copies the model and its projector from the holder; the hub serves neither', async () => {
    const vision = await api<AddResult>(b, 'POST', '/models/add', { repo: REPO });
    assert.equal(vision.status, 201, JSON.stringify(vision.body));
    await eventually('beta to see alpha’s complete copy', 20_000, async () => {
      const s = await status(b);
      return Object.values(s.artifacts).some((held) => held.models.some((m) => m.modelId === ID && m.bytes === vision.body.hub.bytes)) ? true : undefined;
    });
    hub.resetCounters();
    const pull = await api<{ download: DownloadView }>(b, 'POST', '/models/pull', { id: ID });
    assert.equal(pull.status, 202, JSON.stringify(pull.body));
    const done = await downloaded(b, pull.body.download.id);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.equal(done.source?.kind, 'peer');
    assert.equal(hub.served(MODEL_FILE) + hub.served(PROJECTOR), 0);
    assert.equal((await stat(storePath(b, PROJECTOR))).size, hub.file(REPO, PROJECTOR).size);
    assert.equal((await listedModel(b, ID)).state, 'on-disk');
  });

  test('placed, the model takes an image through either node, with the image counted in its prompt', { skip: serverBinary === null ? 'llama-server is not built: run `shoal doctor --fix`' : false }, async () => {
    const placed = await api<{ instance: { instanceId: string } }>(a, 'POST', '/place_instance', { model: ID });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    // Both nodes route: each must see the runner ready (the other's view follows its telemetry).
    for (const node of [a, b]) {
      await eventually(`the vision instance to be ready as ${node.url} sees it`, 60_000, async () => {
        const s = await status(node);
        const instance = s.instances.find((i) => i.instanceId === placed.body.instance.instanceId);
        return instance?.runners.some((r) => r.state === 'ready') ? true : undefined;
      });
    }
    const image = `data:image/png;base64,${png(48).toString('base64')}`;
    for (const node of [a, b]) {
      const openai = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'x', maxRetries: 0 });
      const withImage = await openai.chat.completions.create({
        model: ID,
        max_tokens: 4,
        temperature: 0,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: image } }] }],
      });
      const textOnly = await openai.chat.completions.create({ model: ID, max_tokens: 4, temperature: 0, messages: [{ role: 'user', content: 'what is this?' }] });
      assert.ok(
        (withImage.usage?.prompt_tokens ?? 0) >= (textOnly.usage?.prompt_tokens ?? 0) + imageTokens(TINY_VISION_PROJECTOR_SPEC),
        `the image's ${imageTokens(TINY_VISION_PROJECTOR_SPEC)} tokens reach the model: ${withImage.usage?.prompt_tokens} vs ${textOnly.usage?.prompt_tokens} without it`,
      );
    }
    const stopped = await fetch(`${a.url}/instance/${placed.body.instance.instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } });
    assert.equal(stopped.status, 200);
    await eventually('the instance to be gone', 20_000, async () => ((await status(a)).instances.length === 0 ? true : undefined));
  });

  test('a model file imported with its projector is a vision card; a member copies both; a file that is no projector is refused', async () => {
    const notProjector = await api<{ error: { message: string } }>(a, 'POST', '/models/add-file', { path: files.model, projector: files.model });
    assert.equal(notProjector.status, 400, JSON.stringify(notProjector.body));
    assert.match(notProjector.body.error.message, /is not a multimodal projector \(its GGUF architecture is llama, a projector's is clip\)/);

    const added = await shoal(a, 'models', 'add', files.model, '--projector', files.projector, '--json');
    assert.equal(added.code, 0, added.stderr);
    const result = JSON.parse(added.stdout) as AddFileResult;
    assert.equal(result.card.id, 'local/model');
    assert.equal(result.card.capabilities.vision, true);
    assert.equal(result.card.projector?.kind, 'local');
    assert.ok(result.projector);
    assert.equal(result.projector.sha256, hub.file(REPO, PROJECTOR).sha256);
    const revision = localRevision(hub.file(REPO, MODEL_FILE).sha256, result.projector.sha256);
    const local = (node: TestNode, file: string): string => filePathFor(hubStoreRoot(node.dataDir), 'local/model', revision, file);
    assert.equal(result.projector.storedPath, local(a, 'mmproj.gguf'));
    assert.equal((await stat(result.projector.storedPath)).size, result.projector.bytes);

    await eventually('beta to see alpha’s imported copy', 20_000, async () => {
      const s = await status(b);
      return Object.values(s.artifacts).some((held) => held.models.some((m) => m.modelId === 'local/model')) ? true : undefined;
    });
    const pull = await api<{ download: DownloadView }>(b, 'POST', '/models/pull', { id: 'local/model' });
    assert.equal(pull.status, 202, JSON.stringify(pull.body));
    const done = await downloaded(b, pull.body.download.id);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.equal(done.source?.kind, 'peer');
    assert.equal((await stat(local(b, 'mmproj.gguf'))).size, result.projector.bytes, 'the projector travels with the imported model');
    const removed = await api<ClusterRemoveResult>(a, 'DELETE', '/models/local/model');
    assert.equal(removed.status, 200, JSON.stringify(removed.body));
    for (const node of [a, b]) assert.equal(existsSync(local(node, 'mmproj.gguf')), false);
  });

  test('removing the model evicts its projector with it on every member', async () => {
    const res = await api<ClusterRemoveResult>(b, 'DELETE', `/models/${ID}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.nodes.map((n) => n.outcome).sort(), ['removed', 'removed']);
    for (const node of [a, b]) {
      assert.equal(existsSync(storePath(node, MODEL_FILE)), false);
      assert.equal(existsSync(storePath(node, PROJECTOR)), false, `the projector is evicted on ${node.url}`);
    }
  });
});
