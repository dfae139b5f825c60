import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StatusView } from '../../src/api/control/control.js';
import { findEngineBuild } from '../../src/doctor/engines.js';
import { eventually } from '../support/cli.js';
import { api } from '../support/control-api.js';
import { startTestNode } from '../support/node-process.js';

/**
 * A real node's own health reasons in its `/state` (issue #18): its managed engines built for the CPU
 * while a GPU is present (injected with SHOAL_TEST_GPUS, CONTRIBUTING.md) and its models disk under the
 * store's reserve (SHOAL_DISK_RESERVE_BYTES larger than any disk). What other members show of them is
 * the browser tier's test/browser/health-reasons.test.ts.
 */

const GPU = { name: 'Test GPU 24G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 25769803776, vramFreeBytes: 24696061952 };
const reasonsOf = async (node: { url: string }): Promise<StatusView['health']> => (await api<StatusView>(node, 'GET', '/state')).body.health;

describe("a node's own health reasons", () => {
  test('engines built for the CPU on a node with a GPU, and a models disk under its reserve', async (t) => {
    // Needs the managed engines built for the CPU here (`shoal doctor --fix`); no build is started for it.
    const build = await findEngineBuild();
    if (build === null) return t.skip('llama-server is not built here (shoal doctor --fix builds it)');
    if (build.manifest.compute !== 'cpu') return t.skip(`the engines here were built for ${build.manifest.compute}, not the CPU`);
    await using node = await startTestNode({ env: { SHOAL_TEST_GPUS: JSON.stringify([GPU]), SHOAL_DISK_RESERVE_BYTES: String(2 ** 52) } });
    const health = await eventually('both reasons in /state', 30_000, async () => {
      const now = await reasonsOf(node);
      return ['engines-cpu-only', 'models-disk-low'].every((code) => now.reasons.some((r) => r.code === code)) ? now : undefined;
    });
    assert.equal(health.level, 'degraded');
    assert.deepEqual(health.reasons.map((r) => r.code), ['models-disk-low', 'engines-cpu-only'], 'in their documented order');
    const cpuOnly = health.reasons.find((r) => r.code === 'engines-cpu-only')!;
    assert.match(cpuOnly.text, /built for the CPU, but this node has a GPU/);
    assert.match(cpuOnly.remediation, /shoal doctor --fix --engine-compute cuda/);
    // /healthz stays about serving: these reasons degrade nothing there.
    const healthz = (await (await fetch(`${node.url}/healthz`)).json()) as { status: string };
    assert.equal(healthz.status, 'ok');
  });

  test('without a GPU the engines are no reason, whatever they were built for', async () => {
    await using node = await startTestNode({ env: { SHOAL_TEST_GPUS: '[]', SHOAL_DISK_RESERVE_BYTES: String(2 ** 52) } });
    // The disk reason shows that the node has read its health; the engines give none beside it.
    const health = await eventually('the disk reason in /state', 30_000, async () => {
      const now = await reasonsOf(node);
      return now.reasons.length > 0 ? now : undefined;
    });
    assert.deepEqual(health.reasons.map((r) => r.code), ['models-disk-low']);
  });
});
