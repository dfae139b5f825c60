import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PERF_END, PERF_START, renderPerfBlock, rewritePerfBlock } from './readme-block.js';
import type { ReportMeta } from './report.js';

const README = `# Shoal\n\nIntro.\n\n## Performance\n\n${PERF_START}\nold figures\n${PERF_END}\n\n## Documentation\n\nDocs.\n`;

const meta: ReportMeta = {
  startedAt: '2025-01-02T03:04:05.000Z',
  durationS: 250,
  quick: true,
  machine: { cpuModel: 'Test CPU', cores: 2, memoryBytes: 24 * 1024 ** 3, gpu: null },
  versions: { shoal: '0.1.0', node: 'v20.0.0', nodeLlamaCpp: '3.21.1', llamaCppCommit: '80fb11ac73e66d89' },
  loadAverage: { start: 1.5, end: 3.25 },
};

describe('rewritePerfBlock', () => {
  it('replaces only what lies between the markers', () => {
    const out = rewritePerfBlock(README, 'new figures');
    assert.equal(out, `# Shoal\n\nIntro.\n\n## Performance\n\n${PERF_START}\nnew figures\n${PERF_END}\n\n## Documentation\n\nDocs.\n`);
  });

  it('is idempotent: rewriting with the same block changes nothing', () => {
    const once = rewritePerfBlock(README, 'x\n');
    assert.equal(rewritePerfBlock(once, 'x\n'), once);
  });

  it('refuses a README without both markers, with them reversed, or with two pairs', () => {
    assert.throws(() => rewritePerfBlock('# Shoal\n', 'x'), /no <!-- perf:start --> marker/);
    assert.throws(() => rewritePerfBlock(`${PERF_START}\n`, 'x'), /no <!-- perf:end --> marker/);
    assert.throws(() => rewritePerfBlock(`${PERF_END}\n${PERF_START}\n`, 'x'), /comes before/);
    assert.throws(() => rewritePerfBlock(`${README}${README}`, 'x'), /more than one pair/);
  });
});

describe('renderPerfBlock', () => {
  const block = renderPerfBlock({
    headlines: [{ key: 'decodeVsLlamaServer', label: "Decode, Shoal's API vs llama-server", value: '0.93×', detail: '93 vs 100 tok/s' }],
    meta,
    reportLink: 'bench/latest/REPORT.md',
    sourceDir: 'bench/results/2025-01-02T03-04-05-000Z',
  });

  it('says how, when and where the figures were measured, and that a quick run is one', () => {
    assert.match(block, /Measured with `npm run bench -- --quick` on 2025-01-02: Test CPU, 2 cores, 24 GiB, GPU: none/);
    assert.match(block, /Shoal 0\.1\.0, node-llama-cpp 3\.21\.1, llama\.cpp 80fb11ac;/);
    assert.match(block, /load average 1\.5 at the start and 3\.25 at the end on 2 cores \(other work was running, so the figures are noisy\)/);
    assert.match(block, /a quick run: fewer repetitions/);
    assert.match(block, /from bench\/results\/2025-01-02T03-04-05-000Z/);
  });

  it('has the headline table and links the full report', () => {
    assert.match(block, /\| Decode, Shoal's API vs llama-server \| 0\.93× \| 93 vs 100 tok\/s \|/);
    assert.match(block, /\[bench\/latest\/REPORT\.md\]\(bench\/latest\/REPORT\.md\)/);
  });

  it('fits back between the markers', () => {
    const out = rewritePerfBlock(README, block);
    assert.ok(out.includes(block));
    assert.ok(out.endsWith('## Documentation\n\nDocs.\n'));
  });
});
