import { join } from 'node:path';
import { ShoalError } from '../common/errors.js';

/**
 * The files `shoal service install` writes: a systemd unit (Linux, user or system manager) or a
 * launchd property list (macOS). Pure text from a spec, so tests check them without a service manager.
 */

export const SYSTEMD_UNIT_NAME = 'shoal.service';
export const LAUNCHD_LABEL = 'dev.shoal.node';
/** Seconds the service manager waits before starting a failed node again. */
export const SERVICE_RESTART_DELAY_S = 5;
/**
 * Seconds a stop may take before the manager kills what is left: above the node's own deadline
 * (STOP_DEADLINE_MS in src/cli/run.ts, 4.5 s), so the node stops its runners itself.
 */
export const SERVICE_STOP_TIMEOUT_S = 15;

export type ServiceScope = 'user' | 'system';

export interface ServiceSpec {
  scope: ServiceScope;
  /** The Node.js binary (an absolute path: `process.execPath`). */
  nodePath: string;
  /** The CLI's main.js (an absolute path). */
  scriptPath: string;
  /** The node's data dir (absolute); also the service's working directory. */
  dataDir: string;
  /** Arguments after `shoal run --data-dir <dataDir>`. */
  runArgs: string[];
  /**
   * Environment written into the unit itself, e.g. PATH (engines and GPU tools are found on it). A
   * systemd unit's Environment= is readable by every local user (`systemctl show`): no secrets here.
   */
  env: Record<string, string>;
  /**
   * systemd: a file (absolute path, mode 0600, text from `environmentFileText`) with the settings kept
   * out of the unit, such as SHOAL_API_KEYS; `systemctl show` lists only its path. Default: none.
   */
  environmentFile?: string;
  /** System scope: the account the node runs as (never root by default: see src/cli/service.ts). */
  runAs?: string;
}

function checkSpec(spec: ServiceSpec): void {
  for (const [what, path] of [
    ['the node binary', spec.nodePath],
    ['the CLI script', spec.scriptPath],
    ['the data dir', spec.dataDir],
    ['the environment file', spec.environmentFile ?? '/'],
  ] as const) {
    if (!path.startsWith('/')) throw new ShoalError('BAD_REQUEST', `${what} must be an absolute path for a service, got '${path}'`);
  }
  // systemd takes none of these in the executable's name, escaped or not.
  if (/[$"'\\]/.test(spec.nodePath)) throw new ShoalError('BAD_REQUEST', `the node binary's path cannot contain $, quotes or backslashes for a service: ${spec.nodePath}; link it from a plain path`);
  const values = [spec.nodePath, spec.scriptPath, spec.dataDir, spec.environmentFile ?? '', ...spec.runArgs, ...Object.entries(spec.env).flat(), spec.runAs ?? ''];
  // A line break would end the setting early and start another, written by whoever chose the value.
  // eslint-disable-next-line no-control-regex
  const bad = values.find((v) => /[\u0000-\u001f\u007f]/.test(v));
  if (bad !== undefined) throw new ShoalError('BAD_REQUEST', `service arguments cannot contain control characters (line breaks, tabs): ${JSON.stringify(bad)}`);
  checkEnv(spec.env);
  if (spec.runAs !== undefined && !/^[a-z_][a-z0-9_.-]*\$?$/i.test(spec.runAs)) throw new ShoalError('BAD_REQUEST', `'${spec.runAs}' is not a user name`);
}

function checkEnv(env: Record<string, string>): void {
  for (const key of Object.keys(env)) if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new ShoalError('BAD_REQUEST', `'${key}' is not an environment variable name`);
  // eslint-disable-next-line no-control-regex
  const bad = Object.values(env).find((v) => /[\u0000-\u001f\u007f]/.test(v));
  if (bad !== undefined) throw new ShoalError('BAD_REQUEST', `environment values cannot contain control characters (line breaks, tabs): ${JSON.stringify(bad)}`);
}

/**
 * A systemd EnvironmentFile=: `KEY="value"` lines, with `"`, `\`, `` ` `` and `$` escaped inside the
 * double quotes so the node gets the value as typed (no specifiers are expanded in this file).
 */
export function environmentFileText(env: Record<string, string>): string {
  checkEnv(env);
  const lines = Object.entries(env).map(([key, value]) => `${key}="${value.replace(/["\\`$]/g, (c) => `\\${c}`)}"`);
  return ['# Written by `shoal service install` (mode 0600: it may hold API keys); read by systemd at start.', ...lines, ''].join('\n');
}

export function commandLine(spec: ServiceSpec): string[] {
  return [spec.nodePath, spec.scriptPath, 'run', '--data-dir', spec.dataDir, ...spec.runArgs];
}

/**
 * A double-quoted systemd word, `\` and `"` escaped and `%` (specifiers) doubled, so the node gets
 * exactly the text given; ExecStart= also expands `$VAR`, so there `$` is doubled too.
 */
function systemdWord(text: string, expandsVariables: boolean): string {
  const quoted = text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%');
  return `"${expandsVariables ? quoted.replace(/\$/g, '$$$$') : quoted}"`;
}

/** A path setting (WorkingDirectory=): no quoting there, only specifiers escaped. */
function systemdPath(path: string): string {
  return path.replace(/%/g, '%%');
}

export function systemdUnit(spec: ServiceSpec): string {
  checkSpec(spec);
  const system = spec.scope === 'system';
  const lines = [
    '# Written by `shoal service install`; `shoal service uninstall` removes it.',
    '[Unit]',
    'Description=Shoal node (LLM inference cluster)',
    // The user manager has no network-online.target; a user node finds its peers when the network comes.
    ...(system ? ['After=network-online.target', 'Wants=network-online.target'] : []),
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${commandLine(spec).map((word) => systemdWord(word, true)).join(' ')}`,
    `WorkingDirectory=${systemdPath(spec.dataDir)}`,
    ...Object.entries(spec.env).map(([key, value]) => `Environment=${systemdWord(`${key}=${value}`, false)}`),
    ...(spec.environmentFile === undefined ? [] : [`EnvironmentFile=${systemdPath(spec.environmentFile)}`]),
    ...(system && spec.runAs !== undefined ? [`User=${spec.runAs}`] : []),
    'Restart=on-failure',
    `RestartSec=${SERVICE_RESTART_DELAY_S}`,
    // Model runners and engines are child processes in the node's cgroup: when the kernel's OOM killer
    // picks one, the node reports it and places the model again, instead of systemd stopping the unit.
    'OOMPolicy=continue',
    // SIGTERM to the node alone: it stops its runners in order; what is left at the timeout is killed.
    'KillMode=mixed',
    `TimeoutStopSec=${SERVICE_STOP_TIMEOUT_S}`,
    // The node logs to its data dir (logs/shoal.log, rotated); the journal gets the same lines.
    'StandardOutput=journal',
    'StandardError=journal',
    '',
    '[Install]',
    `WantedBy=${system ? 'multi-user.target' : 'default.target'}`,
    '',
  ];
  return lines.join('\n');
}

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

export function launchdPlist(spec: ServiceSpec): string {
  checkSpec(spec);
  const string = (s: string): string => `<string>${xml(s)}</string>`;
  const env = Object.entries(spec.env);
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<!-- Written by `shoal service install`; `shoal service uninstall` removes it. -->',
    '<plist version="1.0">',
    '<dict>',
    `  <key>Label</key>${string(LAUNCHD_LABEL)}`,
    '  <key>ProgramArguments</key>',
    '  <array>',
    ...commandLine(spec).map((arg) => `    ${string(arg)}`),
    '  </array>',
    `  <key>WorkingDirectory</key>${string(spec.dataDir)}`,
    ...(env.length === 0 ? [] : ['  <key>EnvironmentVariables</key>', '  <dict>', ...env.map(([k, v]) => `    <key>${xml(k)}</key>${string(v)}`), '  </dict>']),
    ...(spec.scope === 'system' && spec.runAs !== undefined ? [`  <key>UserName</key>${string(spec.runAs)}`] : []),
    '  <key>RunAtLoad</key><true/>',
    // Started again when it fails, not after a clean stop.
    '  <key>KeepAlive</key>',
    '  <dict><key>SuccessfulExit</key><false/></dict>',
    `  <key>ThrottleInterval</key><integer>${SERVICE_RESTART_DELAY_S}</integer>`,
    // The node keeps its own rotated log file; stderr catches what happens before its logger exists.
    `  <key>StandardOutPath</key>${string('/dev/null')}`,
    `  <key>StandardErrorPath</key>${string(join(spec.dataDir, 'logs', 'launchd-stderr.log'))}`,
    '</dict>',
    '</plist>',
    '',
  ].join('\n');
}

/** Where the file goes: the user's or the system's unit directory, or LaunchAgents / LaunchDaemons. */
export function serviceFilePath(platform: 'linux' | 'darwin', scope: ServiceScope, home: string, env: NodeJS.ProcessEnv = {}): string {
  if (platform === 'darwin') return scope === 'system' ? `/Library/LaunchDaemons/${LAUNCHD_LABEL}.plist` : join(home, 'Library', 'LaunchAgents', `${LAUNCHD_LABEL}.plist`);
  if (scope === 'system') return `/etc/systemd/system/${SYSTEMD_UNIT_NAME}`;
  const config = env.XDG_CONFIG_HOME !== undefined && env.XDG_CONFIG_HOME !== '' ? env.XDG_CONFIG_HOME : join(home, '.config');
  return join(config, 'systemd', 'user', SYSTEMD_UNIT_NAME);
}
