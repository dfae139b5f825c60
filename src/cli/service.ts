import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isShoalError, ShoalError } from '../common/errors.js';
import { logsDir } from '../common/log-file.js';
import { resolveDataDir } from '../common/paths.js';
import { parseCommand } from './args.js';
import { environmentFileText, LAUNCHD_LABEL, launchdPlist, serviceFilePath, SYSTEMD_UNIT_NAME, systemdUnit, type ServiceScope, type ServiceSpec } from './service-unit.js';

const USAGE = `Usage: shoal service install [--user|--system] [--data-dir <dir>] [--run-as <user>] [--dry-run] [-- <shoal run options>]
       shoal service uninstall [--user|--system]
       shoal service status [--user|--system]

Runs the node as a service that starts at boot (or login) and restarts when it fails: a systemd unit
on Linux (restart on failure; OOMPolicy=continue, so a runner the kernel kills never stops the node),
a launchd agent on macOS. The node logs to <data-dir>/logs/shoal.log; read it with 'shoal logs'.
The SHOAL_* settings of this shell (SHOAL_API_KEYS too) go to the service: on Linux in shoal.env
beside the unit (mode 0600), never in the unit, which every local user can read ('systemctl show').

Options:
  --user             this user's service manager (default, unless run as root)
  --system           the system's (needs root: sudo); the node runs as --run-as
  --run-as <user>    system services: the account the node runs as (default: the user who ran sudo,
                     else the current one)
  --data-dir <dir>   the node's data dir (default as for 'shoal run', for the --run-as user)
  --dry-run          print the file that install would write, and change nothing
  -- <options>       options for 'shoal run', e.g. -- --api-port 8080 --name box1

Exit codes: 0 done (status: installed and running), 1 failed, 2 bad arguments, 3 (status) not
installed or not running.`;

type Platform = 'linux' | 'darwin';

interface Target {
  platform: Platform;
  scope: ServiceScope;
  path: string;
}

function platform(): Platform {
  if (process.platform === 'linux' || process.platform === 'darwin') return process.platform;
  throw new ShoalError('UNSUPPORTED_PARAMETER', `'shoal service' knows systemd (Linux) and launchd (macOS), not ${process.platform}: start 'shoal run' with your system's service tool`);
}

const isRoot = (): boolean => process.getuid?.() === 0;

/** The home of a user, from the password database: `sudo` leaves HOME at root's. */
function homeOf(user: string): string {
  if (user === userInfo().username) return homedir();
  const entry = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .find((fields) => fields[0] === user);
  if (entry?.[5] === undefined) throw new ShoalError('NOT_FOUND', `no user '${user}' in /etc/passwd: pass --run-as with an existing account, or --data-dir`);
  return entry[5];
}

function target(values: { user?: boolean; system?: boolean }): Target {
  if (values.user === true && values.system === true) throw new ShoalError('BAD_REQUEST', 'pass --user or --system, not both');
  const p = platform();
  const scope: ServiceScope = values.system === true || (values.user !== true && isRoot()) ? 'system' : 'user';
  return { platform: p, scope, path: serviceFilePath(p, scope, homedir(), process.env) };
}

/** The service manager's command line for this target. */
function managerCommand(t: Target, args: string[]): string[] {
  if (t.platform === 'darwin') return ['launchctl', ...args];
  return ['systemctl', ...(t.scope === 'user' ? ['--user'] : []), ...args];
}

function shellLine(words: string[]): string {
  return words.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}

/** Why the manager cannot be driven from here, or null when it can. */
function managerMissing(t: Target): string | null {
  if (t.platform === 'darwin') return spawnSync('launchctl', ['version'], { stdio: 'ignore' }).error ? 'launchctl is not on PATH' : null;
  if (spawnSync('systemctl', ['--version'], { stdio: 'ignore' }).error) return 'systemctl is not on PATH (this system does not use systemd?)';
  // What sd_booted() checks: the machine (or container) was started by systemd.
  if (!existsSync('/run/systemd/system')) return 'systemd is not running here (no /run/systemd/system: a container, or another init)';
  if (t.scope === 'user' && spawnSync('systemctl', ['--user', 'show-environment'], { stdio: 'ignore' }).status !== 0) return 'there is no systemd user manager for this session (no login session, or no D-Bus user bus)';
  return null;
}

function run(words: string[]): { ok: boolean; output: string } {
  const result = spawnSync(words[0]!, words.slice(1), { encoding: 'utf8' });
  return { ok: result.status === 0, output: `${result.stdout ?? ''}${result.stderr ?? ''}`.trim() || (result.error?.message ?? '') };
}

const launchdDomain = (t: Target): string => (t.scope === 'system' ? 'system' : `gui/${process.getuid?.() ?? 0}`);

/**
 * The manager commands that load and start the service; a restart (not `enable --now`), so that
 * installing again over a running node applies the new unit.
 */
function enableCommands(t: Target): string[][] {
  if (t.platform === 'darwin') return [managerCommand(t, ['bootstrap', launchdDomain(t), t.path]), managerCommand(t, ['enable', `${launchdDomain(t)}/${LAUNCHD_LABEL}`])];
  return [managerCommand(t, ['daemon-reload']), managerCommand(t, ['enable', SYSTEMD_UNIT_NAME]), managerCommand(t, ['restart', SYSTEMD_UNIT_NAME])];
}

function disableCommands(t: Target): string[][] {
  if (t.platform === 'darwin') return [managerCommand(t, ['bootout', `${launchdDomain(t)}/${LAUNCHD_LABEL}`])];
  return [managerCommand(t, ['disable', '--now', SYSTEMD_UNIT_NAME]), managerCommand(t, ['daemon-reload'])];
}

/** PATH for the service: engines and GPU tools are found on it. Not secret, so it may go in the unit. */
function publicEnv(): Record<string, string> {
  return process.env.PATH ? { PATH: process.env.PATH } : {};
}

/**
 * The SHOAL_* settings of this shell, for the service; they may hold API keys (SHOAL_API_KEYS), so
 * a systemd service gets them from a 0600 file, never from Environment= (readable by every local
 * user through `systemctl show`). The data dir is passed as --data-dir.
 */
function settingsEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (key.startsWith('SHOAL_') && key !== 'SHOAL_HOME' && value !== undefined) env[key] = value;
  return env;
}

/** systemd: the file with the service's SHOAL_* settings, beside its unit. */
const environmentFilePath = (t: Target): string => join(dirname(t.path), 'shoal.env');

export async function serviceCommand(argv: string[]): Promise<number> {
  const split = argv.indexOf('--');
  const own = split === -1 ? argv : argv.slice(0, split);
  const runArgs = split === -1 ? [] : argv.slice(split + 1);
  const parsed = parseCommand(
    own,
    {
      options: {
        user: { type: 'boolean' },
        system: { type: 'boolean' },
        'run-as': { type: 'string' },
        'data-dir': { type: 'string' },
        'dry-run': { type: 'boolean' },
      },
      allowPositionals: true,
    },
    USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const [sub, ...extra] = positionals;
  if (sub === undefined || extra.length > 0 || !['install', 'uninstall', 'status'].includes(sub)) {
    console.error(`${sub === undefined ? 'which service command?' : extra.length > 0 ? `unexpected argument '${extra[0]}'` : `unknown service command '${sub}'`}\n\n${USAGE}`);
    return 2;
  }
  if (sub !== 'install' && (runArgs.length > 0 || values['run-as'] !== undefined || values['data-dir'] !== undefined || values['dry-run'] === true)) {
    console.error(`'shoal service ${sub}' takes only --user or --system\n\n${USAGE}`);
    return 2;
  }
  try {
    const t = target(values);
    if (sub === 'install') return await install(t, { runAs: values['run-as'], dataDir: values['data-dir'], dryRun: values['dry-run'] === true, runArgs });
    if (sub === 'uninstall') return await uninstall(t);
    return await status(t);
  } catch (error) {
    console.error(isShoalError(error) ? error.message : (error as Error).message);
    return isShoalError(error) && error.code === 'BAD_REQUEST' ? 2 : 1;
  }
}

async function writePrivate(path: string, text: string): Promise<void> {
  await writeFile(path, text, { mode: 0o600 });
  // writeFile's mode applies only to a new file.
  await chmod(path, 0o600);
}

async function install(t: Target, options: { runAs: string | undefined; dataDir: string | undefined; dryRun: boolean; runArgs: string[] }): Promise<number> {
  if (options.runArgs.some((a) => a === '--data-dir' || a.startsWith('--data-dir='))) throw new ShoalError('BAD_REQUEST', "pass --data-dir to 'shoal service install' itself (before --): the service and 'shoal logs' both need it");
  // ExecStart= is as public as Environment= (`systemctl show`, `ps`): keys go in the 0600 file or shoal.toml.
  if (options.runArgs.some((a) => a === '--api-key' || a.startsWith('--api-key='))) throw new ShoalError('BAD_REQUEST', "a service's command line is readable by every local user: set the keys in SHOAL_API_KEYS (install writes it to a file only you can read), or as api-key in <data-dir>/shoal.toml, instead of --api-key");
  if (options.runAs !== undefined && t.scope === 'user') throw new ShoalError('BAD_REQUEST', '--run-as is for --system services: a user service runs as its user');
  // Under sudo, the node runs as the person who asked, never as root unless they say so.
  const runAs = t.scope === 'system' ? (options.runAs ?? process.env.SUDO_USER ?? userInfo().username) : undefined;
  const home = runAs === undefined ? homedir() : homeOf(runAs);
  const settings = settingsEnv();
  const envFile = t.platform === 'linux' && Object.keys(settings).length > 0 ? environmentFilePath(t) : undefined;
  // Another account's default data dir (under sudo our SHOAL_HOME and XDG_DATA_HOME are not its).
  const dataDir = options.dataDir !== undefined ? resolveDataDir(options.dataDir) : home !== homedir() ? join(home, '.local', 'share', 'shoal') : resolveDataDir(undefined);
  const spec: ServiceSpec = {
    scope: t.scope,
    nodePath: process.execPath,
    scriptPath: fileURLToPath(new URL('./main.js', import.meta.url)),
    dataDir,
    runArgs: options.runArgs,
    // launchd has no environment file: the settings stay in the plist, which is written 0600.
    env: t.platform === 'darwin' ? { ...publicEnv(), ...settings } : publicEnv(),
    ...(envFile === undefined ? {} : { environmentFile: envFile }),
    ...(runAs === undefined ? {} : { runAs }),
  };
  const text = t.platform === 'darwin' ? launchdPlist(spec) : systemdUnit(spec);
  const envText = envFile === undefined ? undefined : environmentFileText(settings);
  if (options.dryRun) {
    // A dry run's output ends up in terminals, logs and bug reports: the names, never the values.
    const shown = t.platform === 'darwin' ? text.replace(/(<key>SHOAL_\w+<\/key><string>)[^<]*(<\/string>)/g, '$1(not shown)$2') : text;
    console.log(`# ${t.path}\n${shown}`);
    if (envFile !== undefined) console.log(`# ${envFile} (mode 0600; values not shown)\n${Object.keys(settings).map((k) => `${k}=(not shown)`).join('\n')}`);
    return 0;
  }
  await mkdir(dirname(t.path), { recursive: true });
  try {
    // 0600: a launchd plist carries the SHOAL_* settings, API keys included; so does the environment file.
    if (envFile !== undefined && envText !== undefined) await writePrivate(envFile, envText);
    else if (t.platform === 'linux') await rm(environmentFilePath(t), { force: true });
    await writePrivate(t.path, text);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') throw new ShoalError('UNAUTHORIZED', `cannot write ${t.path}: a --system service needs root (sudo shoal service install --system ...), or install a --user one`, { cause: error });
    throw error;
  }
  console.log(`wrote ${t.path} (${t.scope} service; the node runs from ${dataDir}${runAs === undefined ? '' : ` as ${runAs}`})`);
  const missing = managerMissing(t);
  const commands = enableCommands(t);
  if (missing !== null) {
    console.error(`${missing}: the service is written but not enabled. On a machine whose ${t.platform === 'darwin' ? 'launchd' : 'systemd'} runs, enable it with:\n  ${commands.map(shellLine).join(' && ')}`);
    return 1;
  }
  // launchd refuses to bootstrap a label it has loaded: unload the old one first (not loaded is fine).
  if (t.platform === 'darwin') run(disableCommands(t)[0]!);
  for (const words of commands) {
    const result = run(words);
    if (!result.ok) {
      console.error(`'${shellLine(words)}' failed: ${result.output}\nFix what it says, then run it again (or 'shoal service status').`);
      return 1;
    }
  }
  console.log(`enabled and started: 'shoal service status' shows it, 'shoal logs${options.dataDir === undefined ? '' : ` --data-dir ${shellLine([dataDir])}`}' its log`);
  if (t.platform === 'linux' && t.scope === 'user') console.log(`to start it at boot without a login, too: loginctl enable-linger ${userInfo().username}`);
  return 0;
}

async function uninstall(t: Target): Promise<number> {
  if (!existsSync(t.path)) {
    console.log(`no ${t.scope} Shoal service is installed (${t.path} does not exist)${t.scope === 'user' ? "; a system one is removed with 'sudo shoal service uninstall --system'" : ''}`);
    return 0;
  }
  const missing = managerMissing(t);
  const commands = disableCommands(t);
  if (missing === null) {
    // Stop and unload before removing the file: systemd forgets a unit whose file is gone only at a reload.
    const stop = run(commands[0]!);
    if (!stop.ok) console.error(`'${shellLine(commands[0]!)}': ${stop.output} (removing the file anyway)`);
  }
  try {
    await rm(t.path);
    if (t.platform === 'linux') await rm(environmentFilePath(t), { force: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') throw new ShoalError('UNAUTHORIZED', `cannot remove ${t.path}: a --system service needs root (sudo shoal service uninstall --system)`, { cause: error });
    throw error;
  }
  if (missing === null) for (const words of commands.slice(1)) run(words);
  console.log(`removed ${t.path}${missing === null ? '' : ` (${missing}: nothing was running it)`}; the data dir and its logs stay`);
  return 0;
}

async function status(t: Target): Promise<number> {
  if (!existsSync(t.path)) {
    console.log(`not installed: no ${t.scope} service at ${t.path} (install one with 'shoal service install${t.scope === 'system' ? ' --system' : ''}')`);
    return 3;
  }
  const text = await readFile(t.path, 'utf8').catch(() => null);
  const dataDir = text === null ? null : t.platform === 'darwin' ? /<key>WorkingDirectory<\/key><string>([^<]*)<\/string>/.exec(text)?.[1] : /^WorkingDirectory=(.*)$/m.exec(text)?.[1]?.replace(/%%/g, '%');
  console.log(`installed: ${t.path} (${t.scope} service)`);
  if (dataDir) console.log(`data dir:  ${dataDir}\nlog file:  ${logsDir(dataDir)}/shoal.log (shoal logs --data-dir ${shellLine([dataDir])})`);
  const missing = managerMissing(t);
  if (missing !== null) {
    console.log(`state:     unknown: ${missing}`);
    return 3;
  }
  if (t.platform === 'darwin') {
    const result = run(managerCommand(t, ['print', `${launchdDomain(t)}/${LAUNCHD_LABEL}`]));
    const state = /^\s*state = (.*)$/m.exec(result.output)?.[1] ?? (result.ok ? 'loaded' : 'not loaded');
    console.log(`state:     ${state}`);
    return state === 'running' ? 0 : 3;
  }
  const enabled = run(managerCommand(t, ['is-enabled', SYSTEMD_UNIT_NAME])).output;
  const active = run(managerCommand(t, ['is-active', SYSTEMD_UNIT_NAME])).output;
  console.log(`state:     ${active}, ${enabled} at ${t.scope === 'user' ? 'login' : 'boot'}  (${shellLine(managerCommand(t, ['status', SYSTEMD_UNIT_NAME]))} for more)`);
  return active === 'active' ? 0 : 3;
}
