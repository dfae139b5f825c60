import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import type { Attributes, MomentKind } from '../../wire/diagnostics.js';
import { ModelsService } from './service.js';
import { ggufFixture, HubServer } from '../../../test/support/hub-server.js';
import { until } from '../../../test/support/wait.js';

const log = pino({ level: process.env.SHOAL_LOG_LEVEL ?? 'silent' });
const REPO = 'acme/Moments-GGUF';

test('a download that fails is a node moment naming the model and the download', { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-download-moments-'));
  const hub = await HubServer.start([{ repo: REPO, files: [{ path: 'Moments-Q4_K_M.gguf', filePath: await ggufFixture(join(dir, 'q4.gguf'), { seed: 5 }) }] }]);
  const moments: { kind: MomentKind; text: string; data: Attributes }[] = [];
  const models = await ModelsService.open({ dataDir: join(dir, 'node'), log, endpoint: hub.url, reserveBytes: 0, moments: (kind, text, data = {}) => moments.push({ kind, text, data }) });
  try {
    const added = await models.add({ repo: REPO, quant: 'Q4_K_M' });
    // The hub goes away between the card and the pull: the download cannot get its bytes.
    await hub.close();
    const { download } = await models.pull(added.card.id);
    await until('the download to end', () => models.getDownload(download.id).finishedAt !== null, 90_000);
    const done = models.getDownload(download.id);
    assert.equal(done.state, 'failed');
    assert.equal(moments.length, 1, JSON.stringify(moments));
    const [moment] = moments;
    assert.equal(moment!.kind, 'download-failed');
    assert.equal(moment!.data.model, added.card.id);
    assert.equal(moment!.data.download, download.id);
    assert.equal(typeof moment!.data.code, 'string');
    assert.match(moment!.text, new RegExp(`^download of ${added.card.id} failed: `));
  } finally {
    await models.close();
    await hub.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
});
