import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { eventually } from '../support/cli.js';
import { CLI_PATH, startTestNode } from '../support/node-process.js';

/**
 * The README and docs/API.md tell the truth about `shoal run`: their options tables list exactly the
 * options the real binary's `--help` lists (an option added to the CLI without its row, or a row left
 * for an option that is gone, fails here), and a node warns, as they say, about a `--bootstrap`
 * address it would otherwise drop without a word.
 */

const run = promisify(execFile);
const REPO_ROOT = new URL('../../../', import.meta.url);

/** The long options `shoal run --help` lists, without --help itself. */
function helpOptions(help: string): string[] {
  const options = new Set<string>();
  for (const line of help.split('\n')) {
    const match = /^ {2}(?:-\w, )?(--[a-z0-9][a-z0-9-]*)/.exec(line);
    if (match && match[1] !== '--help') options.add(match[1]!);
  }
  return [...options].sort();
}

/** The options of the markdown table that has a `--api-port` row: the first cell's leading `--name`. */
function tableOptions(markdown: string): string[] {
  const tables: string[][] = [];
  let current: string[] | null = null;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('|')) {
      current ??= [];
      current.push(line);
    } else if (current) {
      tables.push(current);
      current = null;
    }
  }
  if (current) tables.push(current);
  const rowOption = (row: string): string | null => /^\|\s*`(--[a-z0-9][a-z0-9-]*)/.exec(row)?.[1] ?? null;
  const found = tables.filter((rows) => rows.some((row) => rowOption(row) === '--api-port'));
  assert.equal(found.length, 1, 'exactly one options table (the one with --api-port)');
  return [...new Set(found[0]!.map(rowOption).filter((o): o is string => o !== null && o !== '--help'))].sort();
}

describe('the documented `shoal run` options are the real ones', () => {
  test('the parsers read what they are meant to', () => {
    assert.deepEqual(helpOptions('Usage\n\nOptions:\n  --api-port <port>   HTTP port\n                      more text --not-this\n  --no-mdns           x\n  -h, --help          show\n'), ['--api-port', '--no-mdns']);
    assert.deepEqual(tableOptions('text\n\n| option | default |\n|---|---|\n| `--api-port <port>` | 1 |\n| `--no-mdns` | on |\n\nafter\n\n| `--other` | x |\n'), ['--api-port', '--no-mdns']);
  });

  test('README, docs/API.md and `shoal run --help` list the same options', async () => {
    const { stdout } = await run(process.execPath, [CLI_PATH, 'run', '--help'], { encoding: 'utf8', timeout: 60_000 });
    const help = helpOptions(stdout);
    assert.ok(help.length >= 10 && help.includes('--api-port') && help.includes('--bootstrap'), `the help was parsed: ${help.join(' ')}`);
    for (const doc of ['README.md', 'docs/API.md']) {
      const table = tableOptions(await readFile(new URL(doc, REPO_ROOT), 'utf8'));
      assert.deepEqual(
        { missingFromDoc: help.filter((o) => !table.includes(o)), notInHelp: table.filter((o) => !help.includes(o)) },
        { missingFromDoc: [], notInHelp: [] },
        `${doc}'s options table and \`shoal run --help\` must list the same options`,
      );
    }
  });

  test('--bootstrap, --context-size and --parallel say what they need and what they apply to', async () => {
    const { stdout } = await run(process.execPath, [CLI_PATH, 'run', '--help'], { encoding: 'utf8', timeout: 60_000 });
    const readme = await readFile(new URL('README.md', REPO_ROOT), 'utf8');
    const api = await readFile(new URL('docs/API.md', REPO_ROOT), 'utf8');
    // A help line goes on in lines indented under its text.
    for (const [where, text] of [['--help', stdout], ['README.md', readme], ['docs/API.md', api]] as const) {
      assert.match(text, /--bootstrap(?:[^\n]|\n {20,})*\/p2p\/<peerId>/, `${where}: --bootstrap needs /p2p/<peerId>`);
      assert.match(text, /--context-size[^\n]*default model/, `${where}: --context-size applies to the default model`);
      assert.match(text, /--parallel[^\n]*default model/, `${where}: --parallel applies to the default model`);
    }
  });
});

describe('a --bootstrap address without /p2p/<peerId>', { timeout: 120_000 }, () => {
  test('the node starts and warns that it ignores it, saying how to complete it', async () => {
    await using node = await startTestNode({ args: ['--bootstrap', '/ip4/127.0.0.1/tcp/9'] });
    const line = await eventually('the warning', 10_000, async () => node.output().split('\n').find((l) => l.includes('--bootstrap /ip4/127.0.0.1/tcp/9')));
    assert.match(line, /"level":40/, 'a warning');
    assert.match(line, /has no \/p2p\/<peerId> and is ignored/);
    assert.match(line, /shoal status/);
  });

  test('a complete address gets no warning', async () => {
    await using first = await startTestNode({});
    const addr = ((await (await fetch(`${first.url}/state`)).json()) as { addrs: string[] }).addrs[0]!;
    await using second = await startTestNode({ args: ['--bootstrap', addr] });
    // The warning is logged before the node serves, so a healthy node has printed it if it ever will.
    assert.doesNotMatch(second.output(), /--bootstrap .* is ignored/);
  });
});
