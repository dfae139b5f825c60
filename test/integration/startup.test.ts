// What a node says and does at start, through the real binary: the banner, one node per data dir,
// and the one-line refusals (a bad --default-model, a taken cluster port).

import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { BUILTIN_MODEL_IDS } from '../../src/models/builtin-store.js';
import { readRunFiles } from '../../src/node/run-files.js';
import { CLI_PATH, freePort, startTestNode } from '../support/node-process.js';

const execFileAsync = promisify(execFile);

interface Exit {
  code: number | null;
  output: string;
}

/** Runs `shoal run` on loopback with its own ports until it exits (or `timeoutMs`, then kills it). */
async function runUntilExit(dataDir: string, args: string[], timeoutMs = 60_000): Promise<Exit> {
  const child = spawn(
    process.execPath,
    [CLI_PATH, 'run', '--no-mdns', '--host', '127.0.0.1', '--data-dir', dataDir, '--threads', '1', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SHOAL_LOG_LEVEL: 'info' } },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, output };
}

async function ports(): Promise<string[]> {
  return ['--api-port', String(await freePort()), '--p2p-port', String(await freePort())];
}

const messages = (output: string): { level: number; msg: string }[] =>
  output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string });

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-startup-'));
  dirs.push(dir);
  return dir;
}

test('the first lines give the dashboard, the API base URL, the model, and that a built-in model is random', async () => {
  const node = await startTestNode();
  await node.stop();
  const lines = messages(node.output());
  const serving = lines.findIndex((l) => l.msg.includes('serving on'));
  assert.ok(serving >= 0, node.output());
  // Only the API's own listening line and the engine's readiness may come before.
  for (const line of lines.slice(0, serving)) assert.match(line.msg, /^(Server listening at|llama-server ready|the dashboard is not built)/, node.output());
  const banner = lines.slice(serving + 1, serving + 5).map((l) => l.msg);
  assert.match(banner[0]!, new RegExp(`^dashboard: (${node.url}/|not built)`));
  assert.equal(banner[1], `API base URL: ${node.url}/v1 for OpenAI clients; ${node.url} for Anthropic and Ollama clients`);
  assert.match(banner[2]!, /^default model shoal\/tiny serves through (llama_server|llama_cpp): /);
  assert.match(banner[3]!, /^shoal\/tiny is a built-in model with random weights: its output is random by design/);
  // Internal figures are debug lines.
  assert.doesNotMatch(node.output(), /keepBytes/);
});

test('a second node on a data dir in use refuses with the first one\'s pid and URL, and leaves the first one findable', async () => {
  await using first = await startTestNode();
  const before = await readRunFiles(first.dataDir);
  const second = await runUntilExit(first.dataDir, await ports());
  assert.equal(second.code, 1, second.output);
  const fatal = messages(second.output).filter((l) => l.level >= 50);
  assert.equal(fatal.length, 1, second.output);
  assert.equal(fatal[0]!.msg, `a node (pid ${first.process.pid}, ${first.url}) already runs from this data dir (${first.dataDir}): stop it first, or pass another --data-dir`);
  // The second start touched nothing of the first: its run files are the same, and it still serves.
  assert.deepEqual(await readRunFiles(first.dataDir), before);
  assert.equal((await fetch(`${first.url}/healthz`)).status, 200);
  // Nor its log file: the refusal went to the second's output only.
  const firstLog = await readFile(join(first.dataDir, 'logs', 'shoal.log'), 'utf8');
  assert.match(firstLog, /"msg":"[^"]*http:\/\//, "the first node's own lines are there");
  assert.doesNotMatch(firstLog, /already runs from this data dir/);
  assert.ok(messages(firstLog).every((l) => !l.msg.includes('could not start')), firstLog);
});

test('the lock of a killed node is taken over by the next start, with a log line', async () => {
  const dataDir = await tempDir();
  const killed = await startTestNode({ dataDir });
  await killed.stop('SIGKILL');
  await using next = await startTestNode({ dataDir });
  assert.match(next.output(), new RegExp(`took over the data dir lock of pid ${killed.process.pid}, which is no longer running`));
});

test('a --default-model that is missing or not a GGUF file fails the start at once with one line', async () => {
  const dir = await tempDir();
  const missing = join(dir, 'nothing-here.gguf');
  const gone = await runUntilExit(await tempDir(), [...(await ports()), '--default-model', missing]);
  assert.equal(gone.code, 1, gone.output);
  assert.deepEqual(messages(gone.output).filter((l) => l.level >= 50).map((l) => l.msg), [`--default-model ${missing}: no such file: pass the path of a .gguf model file or a built-in id (${BUILTIN_MODEL_IDS.join(', ')})`]);

  const text = join(dir, 'notes.gguf');
  await writeFile(text, 'hello, not a model\n');
  const bad = await runUntilExit(await tempDir(), [...(await ports()), '--default-model', text]);
  assert.equal(bad.code, 1, bad.output);
  const fatal = messages(bad.output).filter((l) => l.level >= 50);
  assert.equal(fatal.length, 1, bad.output);
  assert.match(fatal[0]!.msg, new RegExp(`^--default-model ${text} is not a usable GGUF model \\(.+\\): pass a \\.gguf model file`));
  // Refused before any runner tried it.
  assert.doesNotMatch(bad.output, /engine crashed|gave up after/);
});

test('a cluster port in use gets the same one-line message as a taken API port', async () => {
  const taken: Server = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as { port: number }).port;
  try {
    const p2p = await runUntilExit(await tempDir(), ['--api-port', String(await freePort()), '--p2p-port', String(port)]);
    assert.equal(p2p.code, 1, p2p.output);
    assert.deepEqual(messages(p2p.output).filter((l) => l.level >= 50).map((l) => l.msg), [`cluster port ${port} is already in use: stop the other process or pass --p2p-port`]);
    assert.doesNotMatch(p2p.output, /transportManager|faultTolerance|\n\s+at /);

    const api = await runUntilExit(await tempDir(), ['--api-port', String(port), '--p2p-port', String(await freePort())]);
    assert.equal(api.code, 1, api.output);
    assert.deepEqual(messages(api.output).filter((l) => l.level >= 50).map((l) => l.msg), [`port ${port} is already in use: stop the other process or pass --api-port`]);
  } finally {
    taken.close();
  }
});

test('npm start builds when a source changed and not otherwise, and says which', async () => {
  // A checkout in miniature: the real start script, with compilers that only record that they ran and
  // write what the real ones would (the real build takes a minute; what is tested is when it runs).
  const root = await tempDir();
  const write = async (path: string, text: string): Promise<void> => {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  };
  await mkdir(join(root, 'scripts'));
  // From dist/test/integration, the script in the checkout.
  await copyFile(fileURLToPath(new URL('../../../scripts/start.mjs', import.meta.url)), join(root, 'scripts', 'start.mjs'));
  const compiler = (output: string, content: string): string =>
    `import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';\nappendFileSync('builds.log', ${JSON.stringify(output)} + '\\n');\nmkdirSync(${JSON.stringify(dirname(output))}, { recursive: true });\nwriteFileSync(${JSON.stringify(output)}, ${JSON.stringify(content)});\n`;
  await write('node_modules/typescript/bin/tsc', compiler('dist/src/cli/main.js', "console.log('node started with ' + JSON.stringify(process.argv.slice(2)));\n"));
  await write('node_modules/vite/bin/vite.js', compiler('dashboard/dist/index.html', '<!doctype html>'));
  await write('package.json', '{"type":"module"}');
  await write('src/a.ts', 'export const a = 1;\n');

  const start = async (): Promise<{ stderr: string; stdout: string; builds: number }> => {
    const { stdout, stderr } = await execFileAsync(process.execPath, [join(root, 'scripts', 'start.mjs'), '--api-port', '1234'], { cwd: root, encoding: 'utf8' });
    const log = await readFile(join(root, 'builds.log'), 'utf8').catch(() => '');
    return { stdout, stderr, builds: log.split('\n').filter((l) => l === 'dist/src/cli/main.js').length };
  };

  const first = await start();
  assert.match(first.stderr, /^building Shoal \(no build yet\)… this takes about a minute$/m);
  assert.equal(first.builds, 1);
  assert.equal(first.stdout.trim(), 'node started with ["run","--api-port","1234"]');

  const unchanged = await start();
  assert.match(unchanged.stderr, /^Shoal is built and no source changed since: starting the node$/m);
  assert.equal(unchanged.builds, 1, 'no second build');
  assert.equal(unchanged.stdout.trim(), 'node started with ["run","--api-port","1234"]');

  // A file touched but not changed is no reason to build.
  const later = new Date(Date.now() + 60_000);
  await utimes(join(root, 'src', 'a.ts'), later, later);
  assert.equal((await start()).builds, 1);

  await write('src/a.ts', 'export const a = 2;\n');
  const changed = await start();
  assert.match(changed.stderr, /^building Shoal \(sources changed\)…/m);
  assert.equal(changed.builds, 2);
});

test('npm ci warns of no engine mismatch on this Node and leaves no install script unreviewed', { skip: spawnSync('npm', ['--version']).status !== 0 ? 'npm is not on PATH' : false }, async () => {
  // A dry run of the lockfile in an empty directory: what a fresh checkout's `npm ci` would print.
  const dir = await tempDir();
  for (const file of ['package.json', 'package-lock.json']) await copyFile(fileURLToPath(new URL(`../../../${file}`, import.meta.url)), join(dir, file));
  const result = spawnSync('npm', ['ci', '--dry-run', '--offline', '--no-audit', '--no-fund'], { cwd: dir, encoding: 'utf8' });
  const output = `${result.stdout}${result.stderr}`;
  assert.equal(result.status, 0, output);
  assert.doesNotMatch(output, /EBADENGINE/, output);
  assert.doesNotMatch(output, /not yet covered by allowScripts/, output);
});
