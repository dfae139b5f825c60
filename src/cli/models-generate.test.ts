import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { gguf } from '@huggingface/gguf';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { modelsGenerateCommand, parseParamCount } from './models-generate.js';

/** Runs the command with stdout/stderr captured instead of printed. */
async function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const captured = { stdout: '', stderr: '' };
  const originalOut = process.stdout.write.bind(process.stdout);
  const originalErr = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((chunk: string) => ((captured.stdout += chunk), true)) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string) => ((captured.stderr += chunk), true)) as typeof process.stderr.write;
  try {
    return { code: await modelsGenerateCommand(args), ...captured };
  } finally {
    process.stdout.write = originalOut;
    process.stderr.write = originalErr;
  }
}

test('parameter counts accept k/M/B suffixes', () => {
  assert.equal(parseParamCount('200M'), 200_000_000);
  assert.equal(parseParamCount('1.5B'), 1_500_000_000);
  assert.equal(parseParamCount('50k'), 50_000);
  assert.equal(parseParamCount('123456'), 123_456);
  for (const bad of ['', '0', '-5M', '12X', 'M', '1e6']) assert.throws(() => parseParamCount(bad), /--params/);
});

test('bad arguments exit 2 with a message and usage', async () => {
  const cases = [
    [],
    ['--params', '1M'],
    ['--params', 'lots', '--out', 'x.gguf'],
    ['--params', '1M', '--out', 'x.gguf', '--type', 'q5_1'],
    ['--params', '1M', '--out', 'x.gguf', '--seed=-1'],
    ['--params', '1M', '--out', 'x.gguf', '--nope'],
    ['--params', '1M', '--out', 'x.gguf', '--inert-blocks', '0'],
    ['--params', '1M', '--out', 'x.gguf', '--inert-blocks', 'two'],
  ];
  for (const args of cases) {
    const result = await run(args);
    assert.equal(result.code, 2, args.join(' '));
    assert.match(result.stderr, /^shoal models generate: [\s\S]+\nusage:/);
  }
});

test('generates a model and reports path, params and size', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-cli-generate-'));
  try {
    const out = join(dir, 'sub', 'model.gguf');
    const result = await run(['--params', '1M', '--type', 'q4_0', '--seed', '3', '--name', 'cli-test', '--out', out]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, new RegExp(`^wrote ${out}: 1\\.1M params \\(\\d+\\), q4_0, \\d+\\.\\d MB\\n$`));
    assert.ok((await stat(out)).size > 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('--inert-blocks writes a speculative target: the draft command\'s file plus blocks that write nothing', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-cli-generate-'));
  try {
    const draft = join(dir, 'draft.gguf');
    const target = join(dir, 'target.gguf');
    assert.equal((await run(['--params', '1M', '--out', draft])).code, 0);
    const result = await run(['--params', '1M', '--out', target, '--inert-blocks', '3']);
    assert.equal(result.code, 0, result.stderr);
    const tensors = async (path: string): Promise<Map<string, number>> => {
      const parsed = await gguf(path, { allowLocalFile: true });
      return new Map(parsed.tensorInfos.map((info) => [info.name, Number(info.offset)]));
    };
    const [d, t] = [await tensors(draft), await tensors(target)];
    assert.equal(t.size, d.size + 3 * 9);
    // Same shape and the same tensors first: the draft's bytes are a prefix of the target's tensor data.
    for (const [name, offset] of d) assert.equal(t.get(name), offset, name);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
