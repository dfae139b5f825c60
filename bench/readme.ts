import { copyFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { renderPerfBlock, rewritePerfBlock } from './readme-block.js';
import { headlines, type ReportMeta } from './report.js';

/**
 * Refreshes the README's Performance section from a benchmark run (default: the latest complete one
 * under bench/results/): copies its REPORT.md, plots and JSON to bench/latest/ (which, unlike
 * bench/results/, is kept in the repository, so the README's link works), then rewrites the block
 * between the perf markers in README.md with the headline figures and that link.
 *
 * Usage: node dist/bench/readme.js [results-dir] [--readme README.md] [--publish bench/latest]
 */

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    readme: { type: 'string', default: 'README.md' },
    publish: { type: 'string', default: join('bench', 'latest') },
    results: { type: 'string', default: join('bench', 'results') },
  },
});

/** The newest run directory (timestamps sort as text) that finished: it has a REPORT.md and a meta.json. */
async function latestRun(root: string): Promise<string> {
  const names = existsSync(root) ? (await readdir(root)).sort().reverse() : [];
  const found = names.find((name) => existsSync(join(root, name, 'REPORT.md')) && existsSync(join(root, name, 'meta.json')));
  if (!found) throw new Error(`no finished benchmark run under ${root}: run \`npm run bench -- --quick\` first`);
  return join(root, found);
}

async function main(): Promise<void> {
  const source = positionals[0] ?? (await latestRun(values.results!));
  const meta = JSON.parse(await readFile(join(source, 'meta.json'), 'utf8')) as ReportMeta;
  const files = await readdir(source);
  const results: Record<string, unknown> = {};
  for (const file of files.filter((f) => f.endsWith('.json') && f !== 'meta.json').sort()) {
    results[file.slice(0, -'.json'.length)] = JSON.parse(await readFile(join(source, file), 'utf8')) as unknown;
  }

  const publish = values.publish!;
  await rm(publish, { recursive: true, force: true });
  await mkdir(publish, { recursive: true });
  for (const file of files.filter((f) => /\.(md|png|json)$/.test(f))) await copyFile(join(source, file), join(publish, file));

  const readmePath = values.readme!;
  const readme = await readFile(readmePath, 'utf8');
  const block = renderPerfBlock({ headlines: headlines(results), meta, reportLink: relative(join(readmePath, '..'), join(publish, 'REPORT.md')), sourceDir: source });
  await writeFile(readmePath, rewritePerfBlock(readme, block));
  process.stderr.write(`${readmePath}: Performance section rewritten from ${source}; report copied to ${publish}/\n`);
}

await main();
