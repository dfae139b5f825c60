import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { CLI_PATH } from '../support/node-process.js';

/**
 * `shoal service` through the real binary, with the unit directory in a temporary XDG_CONFIG_HOME:
 * the unit it would install verifies with systemd-analyze, and on a machine without a running
 * systemd (a container) install writes the unit, says what to run and exits 1. Nothing here enables
 * a service on the machine running the tests.
 */

const exec = promisify(execFile);
let config: string;
let dataDir: string;

const SECRET = 'sk-service-secret-123';

async function service(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [CLI_PATH, 'service', ...args], { encoding: 'utf8', env: { ...process.env, XDG_CONFIG_HOME: config, SHOAL_API_KEYS: SECRET } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

before(async () => {
  config = await mkdtemp(join(tmpdir(), 'shoal-service-cfg-'));
  dataDir = await mkdtemp(join(tmpdir(), 'shoal-service-data-'));
});
after(async () => {
  await rm(config, { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
});

const hasAnalyze = spawnSync('systemd-analyze', ['--version'], { stdio: 'ignore' }).status === 0;

test('install --dry-run prints the unit, which systemd-analyze verify accepts', { skip: process.platform !== 'linux' ? 'systemd units are for Linux' : false }, async () => {
  const res = await service('install', '--user', '--dry-run', '--data-dir', dataDir, '--', '--api-port', '8123', '--name', 'svc box');
  assert.equal(res.code, 0, res.stderr);
  assert.ok(res.stdout.startsWith(`# ${join(config, 'systemd', 'user', 'shoal.service')}\n`), res.stdout);
  assert.match(res.stdout, new RegExp(`^ExecStart="${process.execPath}" "${CLI_PATH}" "run" "--data-dir" "${dataDir}" "--api-port" "8123" "--name" "svc box"$`, 'm'));
  assert.match(res.stdout, /^OOMPolicy=continue$/m);
  assert.match(res.stdout, /^Restart=on-failure$/m);
  assert.equal(existsSync(join(config, 'systemd')), false, 'a dry run writes nothing');
  // Settings reach the service through a file only its owner reads; a dry run shows their names only.
  const envFile = join(config, 'systemd', 'user', 'shoal.env');
  assert.match(res.stdout, new RegExp(`^EnvironmentFile=${envFile}$`, 'm'));
  assert.doesNotMatch(res.stdout, /^Environment=.*SHOAL_/m);
  assert.ok(!res.stdout.includes(SECRET), res.stdout);
  assert.match(res.stdout, new RegExp(`^# ${envFile} \\(mode 0600; values not shown\\)$`, 'm'));
  assert.match(res.stdout, /^SHOAL_API_KEYS=\(not shown\)$/m);
  if (!hasAnalyze) return;
  const unit = join(config, 'shoal.service');
  await writeFile(unit, res.stdout.slice(0, res.stdout.indexOf(`# ${envFile}`)));
  const verify = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
  assert.equal(verify.status, 0, verify.stderr);
  assert.equal(verify.stderr.split('\n').filter((l) => l.includes('shoal.service')).join('\n'), '');
  await rm(unit);
});

test('bad arguments exit 2 and say why', async () => {
  const cases: [string[], RegExp][] = [
    [['install', '--user', '--', '--data-dir', '/x'], /pass --data-dir to 'shoal service install' itself/],
    [['install', '--user', '--system'], /not both/],
    [['status', '--', '--name', 'x'], /takes only --user or --system/],
    [['restart'], /unknown service command 'restart'/],
    [['install', '--usr'], /unknown option --usr; did you mean --user\?/],
    [['install', '--user', '--dry-run', '--', '--api-key', 'k'], /readable by every local user: set the keys in SHOAL_API_KEYS/],
  ];
  for (const [args, message] of cases) {
    const res = await service(...args);
    assert.equal(res.code, 2, `${args.join(' ')}: ${res.stdout}${res.stderr}`);
    assert.match(res.stderr, message, args.join(' '));
  }
});

const systemdRuns = existsSync('/run/systemd/system');

test('without a running systemd: install writes the unit and says what to run; status and uninstall follow it', { skip: process.platform !== 'linux' ? 'systemd units are for Linux' : systemdRuns ? 'systemd runs here: install would really enable a service' : false }, async () => {
  const path = join(config, 'systemd', 'user', 'shoal.service');
  const none = await service('status', '--user');
  assert.equal(none.code, 3);
  assert.match(none.stdout, /not installed/);
  const res = await service('install', '--user', '--data-dir', dataDir);
  assert.equal(res.code, 1, res.stdout + res.stderr);
  assert.match(res.stdout, new RegExp(`wrote ${path}`));
  assert.match(res.stderr, /systemd is not running here.*written but not enabled.*\n {2}systemctl --user daemon-reload && systemctl --user enable shoal\.service && systemctl --user restart shoal\.service/);
  assert.equal((await stat(path)).mode & 0o777, 0o600, 'the unit may carry API keys');
  const unitText = await readFile(path, 'utf8');
  assert.match(unitText, /^OOMPolicy=continue$/m);
  assert.ok(!unitText.includes(SECRET), 'keys stay out of the unit');
  const envFile = join(config, 'systemd', 'user', 'shoal.env');
  assert.equal((await stat(envFile)).mode & 0o777, 0o600, 'the environment file holds API keys');
  assert.match(await readFile(envFile, 'utf8'), new RegExp(`^SHOAL_API_KEYS="${SECRET}"$`, 'm'));
  const status = await service('status', '--user');
  assert.equal(status.code, 3);
  assert.match(status.stdout, new RegExp(`installed: ${path}`));
  assert.match(status.stdout, new RegExp(`log file: +${join(dataDir, 'logs', 'shoal.log')}`));
  const removed = await service('uninstall', '--user');
  assert.equal(removed.code, 0, removed.stderr);
  assert.equal(existsSync(path), false);
  assert.equal(existsSync(envFile), false, 'uninstall removes the environment file too');
  assert.equal((await service('uninstall', '--user')).code, 0, 'uninstalling twice is fine');
});
