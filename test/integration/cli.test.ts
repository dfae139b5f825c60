import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { StatusView } from '../../src/api/control/control.js';
import { CLI_PATH, freePort, startTestNode, type TestNode } from '../support/node-process.js';
import { eventually } from '../support/cli.js';

/**
 * The CLI through its real binary (`node dist/src/cli/main.js`): help on every command, suggestions
 * for typos, the version; then `status`, `ps`, `chat` (stdin piped in) and the `pull`/`rm` aliases
 * against a real node process.
 */

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function shoal(args: string[], input = ''): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI_PATH, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    // A command that exits without reading its input closes the pipe first: EPIPE is no failure.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input);
  });
}

const packageVersion = (JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8')) as { version: string }).version;

describe('without a node', () => {
  test('--version prints the package version and the commit of this checkout', async () => {
    const commit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: fileURLToPath(new URL('.', import.meta.url)), encoding: 'utf8' }).trim();
    for (const flag of ['--version', '-v', 'version']) {
      const r = await shoal([flag]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.trim(), `shoal ${packageVersion} (commit ${commit})`);
    }
  });

  test('--help works on every command and subcommand, and help <command> is the same', async () => {
    const commands = [
      [], ['run'], ['launch'], ['ps'], ['chat'], ['pull'], ['rm'], ['models'], ['doctor'], ['diagnose'], ['trace'], ['logs'], ['service'], ['config'], ['version'],
      ...['search', 'add', 'pull', 'ls', 'rm', 'launch', 'stop', 'approve', 'generate'].map((sub) => ['models', sub]),
      ...['status', 'token', 'invite', 'join', 'approve', 'decline', 'remove', 'leave', 'dissolve', 'nickname', 'make-host'].map((c) => [c]),
    ];
    const results = await Promise.all(commands.flatMap((c) => [shoal([...c, '--help']), shoal([...c, '-h'])]));
    results.forEach((r, i) => {
      const command = `shoal ${commands[Math.floor(i / 2)]!.join(' ')} ${i % 2 === 0 ? '--help' : '-h'}`;
      assert.equal(r.code, 0, `${command}: ${r.stderr}`);
      assert.match(r.stdout, /usage: shoal/i, command);
      assert.equal(r.stderr, '', command);
    });
    const models = await shoal(['models', '--help']);
    assert.match(models.stdout, /^ {2}search <query> /m);
    assert.deepEqual(await shoal(['help', 'models', 'pull']), await shoal(['models', 'pull', '--help']));
    assert.deepEqual(await shoal(['help', 'ps']), await shoal(['ps', '--help']));
  });

  test('an unknown command, subcommand or option names the nearest one and exits 2', async () => {
    const cases: [string[], string][] = [
      [['modles'], "unknown command 'modles'; did you mean 'models'?"],
      [['stauts'], "unknown command 'stauts'; did you mean 'status'?"],
      [['models', 'pul'], "unknown models command 'pul'; did you mean 'pull'?"],
      [['--verison'], 'unknown option --verison; did you mean --version?'],
      [['run', '--apiport', '0'], 'unknown option --apiport; did you mean --api-port?'],
      [['ps', '--jsno'], 'unknown option --jsno; did you mean --json?'],
      [['status', '--data-dri', '/tmp'], 'unknown option --data-dri; did you mean --data-dir?'],
      [['models', 'ls', '--jsn'], 'unknown option --jsn; did you mean --json?'],
      [['logs', '--folow'], 'unknown option --folow; did you mean --follow?'],
      [['doctor', '--fixx'], 'unknown option --fixx; did you mean --fix?'],
      [['models', 'generate', '--parms', '1M'], 'unknown option --parms; did you mean --params?'],
      [['models', 'launch', 'x', '--replica', '2'], 'unknown option --replica; did you mean --replicas?'],
      [['chat', '--max-token', '3'], 'unknown option --max-token; did you mean --max-tokens?'],
    ];
    for (const [args, message] of cases) {
      const r = await shoal(args);
      assert.equal(r.code, 2, `shoal ${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.ok(r.stderr.split('\n')[0]!.endsWith(message), `shoal ${args.join(' ')}: ${r.stderr}`);
    }
    const unrelated = await shoal(['frobnicate']);
    assert.equal(unrelated.code, 2);
    assert.equal(unrelated.stderr.split('\n')[0], "unknown command 'frobnicate'");
  });

  test('chat with a --url where no node listens says so and exits 1', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const r = await shoal(['chat', '--url', url], 'hi\n');
    assert.equal(r.code, 1);
    assert.equal(r.stderr.trim(), `the node at ${url} does not answer: is it running, and is that its API address?`);
  });

  test('shoal alone prints the usage and exits 2', async () => {
    const r = await shoal([]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^Usage: shoal <command>/);
  });
});

describe('against a node', () => {
  let node: TestNode;
  let state: StatusView;

  before(async () => {
    node = await startTestNode({ args: ['--name', 'alpha'] });
    state = (await (await fetch(`${node.url}/state`)).json()) as StatusView;
  });
  after(async () => {
    await node?.stop();
  });

  test('status names the node, its URLs, cluster and models, without ids or internal labels', async () => {
    const r = await shoal(['status', '--data-dir', node.dataDir]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Node +alpha, fingerprint [0-9A-Z-]+, Shoal ${packageVersion.replaceAll('.', '\\.')}$`, 'm'));
    assert.ok(r.stdout.includes(`API          ${node.url}/v1 (OpenAI, Anthropic), ${node.url}/api (Ollama)`), r.stdout);
    assert.ok(r.stdout.includes(`Dashboard    ${node.url}/`), r.stdout);
    assert.match(r.stdout, /^Cluster +none: this node is standalone$/m);
    assert.match(r.stdout, /^ {2}shoal\/tiny {2}inst-\S+ \(default model\) on alpha: ready$/m);
    assert.ok(!r.stdout.includes(state.nodeId), r.stdout);
    assert.doesNotMatch(r.stdout, /^Print|term \d|state [0-9a-f]{6}/m);
  });

  test('ps prints what runs where with memory, slots and context; --json gives the rows', async () => {
    const r = await shoal(['ps', '--data-dir', node.dataDir]);
    assert.equal(r.code, 0, r.stderr);
    const [header, row, ...rest] = r.stdout.trim().split('\n');
    assert.match(header!, /^MODEL +INSTANCE +NODE +ROLE +BACKEND +MEMORY +SLOTS +CONTEXT +STATE$/);
    assert.match(row!, /^shoal\/tiny +inst-\S+ \(default model\) +alpha +full +\S+ +\d+(\.\d+)? [KMG]iB +0\/8 +4096 +ready$/);
    assert.deepEqual(rest, []);
    const json = await shoal(['ps', '--json', '--data-dir', node.dataDir]);
    const rows = JSON.parse(json.stdout) as { model: string; node: string; slots: number; contextTokens: number; memoryBytes: number }[];
    assert.equal(rows.length, 1);
    const [only] = rows;
    assert.deepEqual([only!.model, only!.node, only!.slots, only!.contextTokens], ['shoal/tiny', 'alpha', 8, 4096]);
    assert.ok(only!.memoryBytes > 0);
  });

  test('chat streams answers to piped lines, keeps the history, forgets it on /clear and stops at /exit', async () => {
    const r = await shoal(['chat', 'shoal/tiny', '--max-tokens', '4', '--verbose', '--data-dir', node.dataDir], 'hello there\nand again\n/clear\nhello there\n/exit\nnot sent\n');
    assert.equal(r.code, 0, r.stderr);
    const answers = r.stdout.split('\n').filter((l) => l !== '' && l !== '(conversation cleared)');
    assert.equal(answers.length, 3, r.stdout);
    assert.ok(r.stdout.includes('(conversation cleared)'));
    const prompts = [...r.stderr.matchAll(/^\((\d+) prompt tokens, (\d+) answer tokens, [\d.]+ tok\/s\)$/gm)].map((m) => Number(m[1]));
    assert.equal(prompts.length, 3, r.stderr);
    // The second turn carries the first question and answer; after /clear the prompt is the first one again.
    assert.ok(prompts[1]! > prompts[0]!, r.stderr);
    assert.equal(prompts[2], prompts[0], r.stderr);
  });

  test('chat without a model picks the only one served; a mistyped one names the nearest and exits 1', async () => {
    const only = await shoal(['chat', '--max-tokens', '2', '--data-dir', node.dataDir], 'hi\n');
    assert.equal(only.code, 0, only.stderr);
    assert.notEqual(only.stdout.trim(), '');
    const typo = await shoal(['chat', 'shoal/tinyy', '--data-dir', node.dataDir], 'hi\n');
    assert.equal(typo.code, 1);
    assert.match(typo.stderr, /no model 'shoal\/tinyy'; did you mean 'shoal\/tiny'\?/);
  });

  test('chat through --url talks to that node', async () => {
    const r = await shoal(['chat', 'shoal/tiny', '--max-tokens', '2', '--url', `${node.url}/`, '--data-dir', '/nonexistent'], 'hi\n');
    assert.equal(r.code, 0, r.stderr);
    assert.notEqual(r.stdout.trim(), '');
  });

  test('pull and rm are the models pull and models rm commands', async () => {
    for (const verb of ['pull', 'rm']) {
      // Not a hub repo, so pull asks no hub (an owner/name would be added from one first).
      const alias = await shoal([verb, 'not-added', '--data-dir', node.dataDir]);
      const full = await shoal(['models', verb, 'not-added', '--data-dir', node.dataDir]);
      assert.deepEqual(alias, full);
      assert.equal(alias.code, 1, `${verb}: ${alias.stdout}`);
      assert.match(alias.stderr, /no model 'not-added' on this node/);
    }
  });

  test('after the first launch (a cluster of one) status says the node is alone and ps lists the instance too', async () => {
    const placed = await fetch(`${node.url}/place_instance`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'shoal/tiny-eos' }) });
    assert.equal(placed.status, 201, await placed.clone().text());
    const { instance } = (await placed.json()) as { instance: { instanceId: string } };
    await eventually('the instance ready', 30_000, async () => {
      const s = (await (await fetch(`${node.url}/state`)).json()) as StatusView;
      return s.instances.find((i) => i.instanceId === instance.instanceId)?.runners.every((r) => r.state === 'ready') ? true : undefined;
    });
    const status = await shoal(['status', '--data-dir', node.dataDir]);
    assert.match(status.stdout, /^Cluster +this node alone \(a cluster of one\)$/m);
    assert.doesNotMatch(status.stdout, /^Members:/m);
    const ps = await shoal(['ps', '--data-dir', node.dataDir]);
    const rows = ps.stdout.trim().split('\n').slice(1);
    assert.equal(rows.length, 2, ps.stdout);
    assert.match(rows[1]!, new RegExp(`^shoal/tiny-eos +${instance.instanceId} +alpha +full +\\S+ +\\d+(\\.\\d+)? [KMG]iB +0/\\d+ +\\d+ +ready$`));
  });
});

describe('against a two-node cluster', () => {
  let a: TestNode;
  let b: TestNode;

  before(async () => {
    [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'] }), startTestNode({ args: ['--name', 'beta'] })]);
    const invite = await shoal(['invite', '--code', '--data-dir', a.dataDir]);
    const code = /shoal1-\S+/.exec(invite.stdout)?.[0];
    assert.ok(code, invite.stdout + invite.stderr);
    const joined = await shoal(['join', code, '--data-dir', b.dataDir]);
    assert.equal(joined.code, 0, joined.stderr);
  });
  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
  });

  test('status and ps name the members and show an instance on both of them, with no node ids', async () => {
    const stateOf = async (node: TestNode): Promise<StatusView> => (await (await fetch(`${node.url}/state`)).json()) as StatusView;
    await eventually('both nodes report resources', 15_000, async () => (Object.keys((await stateOf(a)).resources).length === 2 ? true : undefined));
    const placed = await fetch(`${a.url}/place_instance`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'shoal/tiny-eos', replicas: 2 }) });
    assert.equal(placed.status, 201, await placed.clone().text());
    const { instance } = (await placed.json()) as { instance: { instanceId: string } };
    const ready = await eventually('both replicas ready', 30_000, async () => {
      const s = await stateOf(a);
      return s.instances.find((i) => i.instanceId === instance.instanceId)?.runners.every((r) => r.state === 'ready') ? s : undefined;
    });
    const ids = ready.members.map((m) => m.nodeId);

    const status = await shoal(['status', '--data-dir', a.dataDir]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^Cluster +2 members, master (alpha|beta)$/m);
    assert.match(status.stdout, /^ {2}alpha +ok +this node/m);
    assert.match(status.stdout, /^ {2}beta +ok/m);
    assert.match(status.stdout, new RegExp(`^ {2}shoal/tiny-eos {2}${instance.instanceId} on alpha: ready$`, 'm'));
    assert.match(status.stdout, new RegExp(`^ {2}shoal/tiny-eos {2}${instance.instanceId} on beta: ready$`, 'm'));

    const ps = await shoal(['ps', '--data-dir', a.dataDir]);
    assert.equal(ps.code, 0, ps.stderr);
    for (const name of ['alpha', 'beta']) {
      assert.match(ps.stdout, new RegExp(`^shoal/tiny-eos +${instance.instanceId} +${name} +full +\\S+ +\\d+(\\.\\d+)? [KMG]iB +0/\\d+ +\\d+ +ready$`, 'm'), ps.stdout);
    }
    for (const id of ids) {
      assert.ok(!status.stdout.includes(id), status.stdout);
      assert.ok(!ps.stdout.includes(id), ps.stdout);
    }
  });
});
