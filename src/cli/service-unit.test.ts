import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { environmentFileText, launchdPlist, serviceFilePath, systemdUnit, type ServiceSpec } from './service-unit.js';

const spec: ServiceSpec = {
  scope: 'user',
  nodePath: '/usr/bin/node',
  scriptPath: '/opt/shoal/dist/src/cli/main.js',
  dataDir: '/home/ada/.local/share/shoal',
  runArgs: ['--api-port', '52600', '--name', 'ada box'],
  env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
};

function settings(unit: string, key: string): string[] {
  return unit
    .split('\n')
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) => l.slice(key.length + 1));
}

test('a user unit: the node command, restart on failure, OOMPolicy=continue, default.target', () => {
  const unit = systemdUnit(spec);
  assert.deepEqual(settings(unit, 'ExecStart'), ['"/usr/bin/node" "/opt/shoal/dist/src/cli/main.js" "run" "--data-dir" "/home/ada/.local/share/shoal" "--api-port" "52600" "--name" "ada box"']);
  assert.deepEqual(settings(unit, 'Restart'), ['on-failure']);
  assert.deepEqual(settings(unit, 'OOMPolicy'), ['continue']);
  assert.deepEqual(settings(unit, 'KillMode'), ['mixed']);
  assert.deepEqual(settings(unit, 'WorkingDirectory'), ['/home/ada/.local/share/shoal']);
  assert.deepEqual(settings(unit, 'Environment'), ['"PATH=/usr/local/bin:/usr/bin:/bin"']);
  assert.deepEqual(settings(unit, 'WantedBy'), ['default.target']);
  assert.deepEqual(settings(unit, 'User'), [], 'a user unit runs as its user');
  assert.deepEqual(settings(unit, 'After'), [], 'the user manager has no network-online.target');
});

test('a system unit runs as the given account after the network is up', () => {
  const unit = systemdUnit({ ...spec, scope: 'system', runAs: 'ada' });
  assert.deepEqual(settings(unit, 'User'), ['ada']);
  assert.deepEqual(settings(unit, 'After'), ['network-online.target']);
  assert.deepEqual(settings(unit, 'WantedBy'), ['multi-user.target']);
});

test('quotes, backslashes, specifiers and $ reach the node as typed; control characters are refused', () => {
  const unit = systemdUnit({ ...spec, runArgs: ['--name', 'a "b" \\ 50% $HOME'], env: { SHOAL_X: '5% $y "z"' } });
  assert.ok(settings(unit, 'ExecStart')[0]!.endsWith(' "--name" "a \\"b\\" \\\\ 50%% $$HOME"'));
  // Environment= expands no variables: `$` stays single there.
  assert.deepEqual(settings(unit, 'Environment'), ['"SHOAL_X=5%% $y \\"z\\""']);
  assert.throws(() => systemdUnit({ ...spec, runArgs: ['--name', 'x\nExecStartPre=/bin/evil'] }), { code: 'BAD_REQUEST', message: /control characters/ });
  assert.throws(() => systemdUnit({ ...spec, env: { 'A B': '1' } }), { code: 'BAD_REQUEST' });
  assert.throws(() => systemdUnit({ ...spec, nodePath: '/opt/$node/bin/node' }), { code: 'BAD_REQUEST', message: /cannot contain \$, quotes/ });
  assert.throws(() => systemdUnit({ ...spec, dataDir: 'relative/dir' }), { code: 'BAD_REQUEST', message: /absolute path/ });
  assert.throws(() => systemdUnit({ ...spec, scope: 'system', runAs: 'root; rm' }), { code: 'BAD_REQUEST' });
});

test('a launchd agent: the same command, kept alive after failures, XML escaped', () => {
  const plist = launchdPlist({ ...spec, runArgs: ['--name', 'R&D <lab>'] });
  assert.match(plist, /<key>Label<\/key><string>dev\.shoal\.node<\/string>/);
  const args = [...plist.matchAll(/^ {4}<string>(.*)<\/string>$/gm)].map((m) => m[1]);
  assert.deepEqual(args, ['/usr/bin/node', '/opt/shoal/dist/src/cli/main.js', 'run', '--data-dir', '/home/ada/.local/share/shoal', '--name', 'R&amp;D &lt;lab&gt;']);
  assert.match(plist, /<key>KeepAlive<\/key>\n {2}<dict><key>SuccessfulExit<\/key><false\/><\/dict>/);
  assert.match(plist, /<key>PATH<\/key><string>\/usr\/local\/bin:\/usr\/bin:\/bin<\/string>/);
  assert.match(plist, /<key>StandardErrorPath<\/key><string>\/home\/ada\/\.local\/share\/shoal\/logs\/launchd-stderr\.log<\/string>/);
  assert.doesNotMatch(plist, /UserName/);
  assert.match(launchdPlist({ ...spec, scope: 'system', runAs: 'ada' }), /<key>UserName<\/key><string>ada<\/string>/);
});

test('unit file locations', () => {
  assert.equal(serviceFilePath('linux', 'user', '/home/ada'), '/home/ada/.config/systemd/user/shoal.service');
  assert.equal(serviceFilePath('linux', 'user', '/home/ada', { XDG_CONFIG_HOME: '/cfg' }), '/cfg/systemd/user/shoal.service');
  assert.equal(serviceFilePath('linux', 'system', '/home/ada'), '/etc/systemd/system/shoal.service');
  assert.equal(serviceFilePath('darwin', 'user', '/Users/ada'), '/Users/ada/Library/LaunchAgents/dev.shoal.node.plist');
  assert.equal(serviceFilePath('darwin', 'system', '/Users/ada'), '/Library/LaunchDaemons/dev.shoal.node.plist');
});

const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
const skipVerify = analyze.error === undefined && analyze.status === 0 ? false : 'systemd-analyze is not installed here (Debian: apt-get install systemd)';

test('systemd-analyze verify accepts the units, with a node path and data dir that need quoting', { skip: skipVerify }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-unit-'));
  try {
    // Paths with a space and a % (and quotes and a $ in the data dir; systemd takes none in the
    // executable): verify resolves ExecStart's first word, so a quoting mistake shows as "not executable".
    const odd = join(dir, 'a dir %');
    await mkdir(join(odd, 'data $x "q"'), { recursive: true });
    await symlink(process.execPath, join(odd, 'node'));
    await writeFile(join(odd, 'main.js'), '');
    for (const scope of ['user', 'system'] as const) {
      const unit = systemdUnit({ ...spec, scope, nodePath: join(odd, 'node'), scriptPath: join(odd, 'main.js'), dataDir: join(odd, 'data $x "q"'), environmentFile: join(odd, 'shoal.env'), ...(scope === 'system' ? { runAs: 'root' } : {}) });
      const path = join(dir, 'shoal.service');
      await writeFile(path, unit);
      // The system manager's rules (a user manager needs a session bus); they are the same for these settings.
      const verify = spawnSync('systemd-analyze', ['verify', path], { encoding: 'utf8' });
      // Unknown or misspelt settings are only warnings (exit 0): any output about the unit counts.
      assert.equal(verify.status, 0, `${scope}: ${verify.stderr}`);
      assert.equal(verify.stderr.split('\n').filter((l) => l.includes('shoal.service')).join('\n'), '', `${scope} unit:\n${unit}`);
    }
    // The check itself catches a bad unit.
    await writeFile(join(dir, 'shoal.service'), systemdUnit(spec).replace('OOMPolicy=continue', 'OOMPolicy=sometimes'));
    const bad = spawnSync('systemd-analyze', ['verify', join(dir, 'shoal.service')], { encoding: 'utf8' });
    assert.match(bad.stderr, /OOM policy/i);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('settings kept out of the unit go to an environment file, which it names; values reach the node as typed', () => {
  const unit = systemdUnit({ ...spec, environmentFile: '/home/ada/.config/systemd/user/shoal.env' });
  assert.deepEqual(settings(unit, 'EnvironmentFile'), ['/home/ada/.config/systemd/user/shoal.env']);
  assert.deepEqual(settings(unit, 'Environment'), ['"PATH=/usr/local/bin:/usr/bin:/bin"'], 'only what the spec puts in the unit');
  assert.deepEqual(settings(systemdUnit(spec), 'EnvironmentFile'), [], 'no file, no setting');
  assert.throws(() => systemdUnit({ ...spec, environmentFile: 'shoal.env' }), { code: 'BAD_REQUEST', message: /absolute path/ });
  const text = environmentFileText({ SHOAL_API_KEYS: 'k1,k"2\\$x`y', SHOAL_API_PORT: '8080' });
  assert.deepEqual(text.split('\n').filter((l) => !l.startsWith('#')), ['SHOAL_API_KEYS="k1,k\\"2\\\\\\$x\\`y"', 'SHOAL_API_PORT="8080"', '']);
  assert.throws(() => environmentFileText({ SHOAL_API_KEYS: 'a\nLD_PRELOAD=/x' }), { code: 'BAD_REQUEST', message: /control characters/ });
  assert.throws(() => environmentFileText({ 'A=B': '1' }), { code: 'BAD_REQUEST' });
});
