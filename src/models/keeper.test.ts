import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { ggufFixture, HubServer } from '../../test/support/hub-server.js';
import type { NodeId } from '../common/ids.js';
import type { ClusterState } from '../master/state/state.js';
import { ModelStore } from './store/store.js';
import { defaultKeepBytes, keepBytesFromEnv, ModelKeeper, modelsPlacedOn, usageChanges } from './keeper.js';

const log = pino({ level: 'silent' });

test('SHOAL_MODEL_KEEP_BYTES: whole bytes, 0 allowed, anything else refused with the variable named', () => {
  assert.equal(keepBytesFromEnv({}), undefined);
  assert.equal(keepBytesFromEnv({ SHOAL_MODEL_KEEP_BYTES: ' ' }), undefined);
  assert.equal(keepBytesFromEnv({ SHOAL_MODEL_KEEP_BYTES: '0' }), 0);
  assert.equal(keepBytesFromEnv({ SHOAL_MODEL_KEEP_BYTES: '1073741824' }), 1073741824);
  for (const bad of ['-1', '1.5', '10GB', 'lots']) assert.throws(() => keepBytesFromEnv({ SHOAL_MODEL_KEEP_BYTES: bad }), /SHOAL_MODEL_KEEP_BYTES must be a whole number of bytes/);
});

test('modelsPlacedOn lists the models of instances with a part on the node; usageChanges the difference', () => {
  const part = (nodeId: string) => ({ nodeId, role: 'full' });
  const state = {
    instances: {
      i1: { modelId: 'o/a', placements: [part('n1')] },
      i2: { modelId: 'o/b', placements: [part('n2'), part('n1')] },
      i3: { modelId: 'o/c', placements: [part('n2')] },
      i4: { modelId: 'o/a', placements: [part('n1')] },
    },
  } as unknown as ClusterState;
  assert.deepEqual(modelsPlacedOn(state, 'n1' as NodeId).sort(), ['o/a', 'o/b']);
  assert.deepEqual(modelsPlacedOn(state, 'n3' as NodeId), []);
  assert.deepEqual(usageChanges(new Set(['a', 'b']), new Set(['b', 'c'])), { stopped: ['a'], started: ['c'] });
});

describe('the keep budget over a real store', () => {
  let dir: string;
  let hub: HubServer;
  const repos = ['acme/One-GGUF', 'acme/Two-GGUF', 'acme/Three-GGUF'];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-keeper-'));
    hub = await HubServer.start();
    for (const [i, repo] of repos.entries()) {
      const file = await ggufFixture(join(dir, `${i}.gguf`), { seed: 40 + i });
      await hub.addRepo({ repo, files: [{ path: `${repo.split('/')[1]}-Q4_K_M.gguf`, filePath: file }] });
    }
  });
  after(async () => {
    await hub.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('at start idle copies beyond the budget go, never one in use or placed; when models stop being used a pass runs and counts that use as their last', async () => {
    let clock = 1_000;
    const inUse = new Set<string>();
    const placed = new Set<string>();
    const store = await ModelStore.open({ dataDir: join(dir, 'data'), hub: { endpoint: hub.url }, reserveBytes: 0, now: () => clock, inUse: () => inUse });
    const pull = async (repo: string) => {
      clock += 1000;
      return store.pull({ repo });
    };
    const a = await pull(repos[0]!);
    const b = await pull(repos[1]!);
    const c = await pull(repos[2]!);
    const size = a.bytes;
    assert.ok(size > 0 && b.bytes === size && c.bytes === size, 'the fixtures are the same size');

    // a is loaded, b is placed here and not loaded yet, c is idle; the budget holds two models.
    inUse.add(a.modelId);
    placed.add(b.modelId);
    const keeper = new ModelKeeper({ store, inUse: () => [...inUse, ...placed], keepBytes: 2 * size, log });
    const atStart = await keeper.start();
    assert.deepEqual(atStart?.evicted, [c.modelId], 'b is older but placed: c goes');
    assert.equal(existsSync(c.path), false);
    assert.ok(existsSync(a.path) && existsSync(b.path));

    // A third copy arrives (the newest pull); nothing stops being used, so nothing is evicted yet.
    await store.pull({ repo: repos[2]! }).then(() => undefined);
    const d = store.get(c.modelId)!;
    keeper.check();
    await keeper.idle();
    assert.ok(existsSync(d.path));

    // a's instance ends and b is unplaced: both are used "now", later than d arrived, so d goes.
    clock = 100_000;
    inUse.delete(a.modelId);
    placed.delete(b.modelId);
    keeper.check();
    await keeper.idle();
    assert.equal(existsSync(d.path), false, 'the least recently used is the copy nobody used since it arrived');
    assert.ok(existsSync(a.path) && existsSync(b.path));
    assert.deepEqual(store.list().map((m) => m.lastUsedMs), [100_000, 100_000]);

    // With a budget of nothing: the idle copy goes at start, the one in use stays until it stops being used.
    const using = new Set([a.modelId]);
    const strict = new ModelKeeper({ store, inUse: () => using, keepBytes: 0, log });
    assert.deepEqual((await strict.start())?.evicted, [b.modelId]);
    assert.ok(existsSync(a.path));
    strict.check();
    await strict.idle();
    assert.ok(existsSync(a.path), 'no change, no pass');
    using.clear();
    strict.check();
    await strict.idle();
    assert.equal(existsSync(a.path), false);
    assert.deepEqual(store.list(), []);
    await keeper.stop();
    await strict.stop();
  });

  test('the default budget is half the store’s filesystem', async () => {
    const store = await ModelStore.open({ dataDir: join(dir, 'data-default'), hub: { endpoint: hub.url }, reserveBytes: 0 });
    const keeper = new ModelKeeper({ store, inUse: () => [], keepBytes: null, log });
    await keeper.start();
    assert.equal(keeper.keepBytes, await defaultKeepBytes(store.root));
    assert.ok((keeper.keepBytes ?? 0) > 0);
    await keeper.stop();
  });
});
