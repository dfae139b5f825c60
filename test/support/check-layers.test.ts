import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

// The layer check (scripts/check-layers.mjs, a plain script that tsc does not compile) run over small
// trees written to a temp dir; this file runs from dist/test/support/.
const CHECKER = fileURLToPath(new URL('../../../scripts/check-layers.mjs', import.meta.url));

const roots: string[] = [];
after(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'shoal-layers-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

function check(root: string): { status: number | null; lines: string[] } {
  const result = spawnSync(process.execPath, [CHECKER, root], { encoding: 'utf8' });
  return { status: result.status, lines: result.stdout.trim().split('\n') };
}

const base = {
  'src/common/errors.ts': 'export class ShoalError extends Error {}\n',
  'src/wire/task.ts': "import { ShoalError } from '../common/errors.js';\nexport const task = ShoalError;\n",
  'src/master/state/state.ts': "import type { task } from '../../wire/task.js';\nexport type State = typeof task;\n",
  'src/api/dispatch.ts': "import type { State } from '../master/state/state.js';\nexport interface Dispatcher { state: State }\n",
  'src/worker/worker.ts': "import type { State } from '../master/state/state.js';\nexport type Worker = State;\n",
};

test('a tree that keeps the layers passes and says how much it read', () => {
  const root = tree({
    ...base,
    // a shell fills a port: it may know the port's types
    'src/inference/dispatcher.ts': "import type { Dispatcher } from '../api/dispatch.js';\nimport type { Worker } from '../worker/worker.js';\nexport type D = Dispatcher | Worker;\n",
    'src/api/server.ts': "export { type Dispatcher } from './dispatch.js';\n",
    'src/node/node.ts': "import '../inference/dispatcher.js';\nimport '../api/server.js';\n",
    'src/cli/main.ts': "await import('../node/node.js');\n",
    'src/placement/plan.test.ts': "import '../../test/support/fixture.js';\n",
    'test/support/fixture.ts': 'export {};\n',
  });
  assert.deepEqual(check(root), { status: 0, lines: ['layers ok: 10 files, 11 imports'] });
});

test('every upward import, import of the root, test-only import, missing file and cycle is one line', () => {
  const root = tree({
    ...base,
    'src/master/state/replay.ts': "import type { Worker } from '../../worker/worker.js';\nexport type R = Worker;\n",
    'src/api/server.ts': "import '../worker/worker.js';\n",
    'src/inference/dispatcher.ts': "import { Dispatcher } from '../api/dispatch.js';\nexport const d: Dispatcher | null = null;\n",
    'src/node/node.ts': 'export {};\n',
    'src/worker/start.ts': "import '../node/node.js';\n",
    'src/election/a.ts': "import './b.js';\n",
    'src/election/b.ts': "import './a.js';\n",
    'src/placement/plan.ts': "import '../../test/support/fixture.js';\n",
    'src/common/paths.ts': "import './missing.js';\n",
    'test/support/fixture.ts': 'export {};\n',
  });
  const { status, lines } = check(root);
  assert.equal(status, 1);
  const expected = [
    'src/api/server.ts -> src/worker/worker.ts: api may not import shell:',
    'src/common/paths.ts -> src/common/missing.ts: does not resolve to a file',
    'src/election/a.ts -> src/election/b.ts: import cycle src/election/a.ts -> src/election/b.ts -> src/election/a.ts',
    'src/inference/dispatcher.ts -> src/api/dispatch.ts: shell may not import port (only its types):',
    'src/master/state/replay.ts -> src/worker/worker.ts: state may not import shell:',
    'src/placement/plan.ts -> test/support/fixture.ts: only test files import test/support',
    'src/worker/start.ts -> src/node/node.ts: shell may not import node: the composition root builds every part; only the CLI starts it',
    '7 layer violation(s): see "Layers" in CONTRIBUTING.md',
  ];
  assert.equal(lines.length, expected.length, lines.join('\n'));
  for (const [i, line] of lines.entries()) assert.ok(line.startsWith(expected[i] ?? ''), `line ${i}: ${line}`);
});
