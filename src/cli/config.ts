import { isShoalError, ShoalError } from '../common/errors.js';
import { parseCorsOrigins } from '../api/cors.js';
import { formatBytes } from '../common/format-bytes.js';
import { resolveDataDir } from '../common/paths.js';
import type { ClusterSettings } from '../master/state/settings.js';
import type { SettingsBody } from '../api/control/settings-routes.js';
import { loadAdminToken, rotateAdminTokenFile } from '../api/control/admin-token.js';
import { readRunFiles } from '../node/run-files.js';
import { parseCommand } from './args.js';
import { connectToNode } from './client.js';
import { parseSize } from './run.js';
import { nearest } from './suggest.js';

const CONFIG_HELP = `Usage: shoal config get [<key>] [--json] [--data-dir <dir>]
       shoal config set <key> <value> [--data-dir <dir>]

Cluster-wide settings, kept in cluster state and applied on every member (a node with no cluster
founds one of itself first). The node's own options are flags or shoal.toml (see 'shoal run --help').

Keys:
  api-keys                  API keys every member accepts on /v1 and /api, besides its own --api-key:
                            comma-separated, replacing the current ones ('none' clears them);
                            kept as SHA-256 digests, so 'get' shows only how many there are
  add-api-key, remove-api-key
                            add or remove one key, leaving the others (set only)
  cors-origins              web origins allowed to call /v1 and /api from a browser on every member,
                            comma-separated (scheme://host[:port], or *); 'none' clears them
  default-context-tokens    context per slot for a launch that sets none (and whose card sets none);
                            'none': the planner's default (4096, lowered to fit)
  default-parallel          slots for such a launch; 'none': as many as fit, up to 16
  download-approval-bytes   downloads a launch would start on other members above this size wait
                            for approval (e.g. 4GiB; 0 asks always). Default 4GiB
  tracing                   on or off: record per-request traces on every member (see 'shoal trace').
                            Default off`;

const TOKEN_HELP = `Usage: shoal token [--rotate] [--data-dir <dir>]

Prints the node's admin token: what the dashboard asks for when it is opened from another machine,
and what 'Authorization: Bearer <token>' carries to the control routes. It stays the same across
restarts. --rotate replaces it (at once on a running node): every browser and script that has the
old one must be given the new one.`;

type KeyName = 'api-keys' | 'add-api-key' | 'remove-api-key' | 'cors-origins' | 'default-context-tokens' | 'default-parallel' | 'download-approval-bytes' | 'tracing';
const SET_KEYS: readonly KeyName[] = ['api-keys', 'add-api-key', 'remove-api-key', 'cors-origins', 'default-context-tokens', 'default-parallel', 'download-approval-bytes', 'tracing'];
const GET_KEYS: readonly KeyName[] = ['api-keys', 'cors-origins', 'default-context-tokens', 'default-parallel', 'download-approval-bytes', 'tracing'];

/** The camelCase names GET /state uses are accepted too (`downloadApprovalBytes`). */
function keyOf(typed: string, known: readonly KeyName[]): KeyName {
  const kebab = typed.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  const key = kebab === 'api-key-digests' ? 'api-keys' : kebab;
  if ((known as readonly string[]).includes(key)) return key as KeyName;
  const guess = nearest(typed, known);
  throw new ShoalError('BAD_REQUEST', `unknown setting '${typed}'${guess ? `; did you mean '${guess}'?` : ''} (keys: ${known.join(', ')})`);
}

const list = (value: string): string[] => (value.trim().toLowerCase() === 'none' ? [] : value.split(',').map((v) => v.trim()).filter((v) => v !== ''));

function count(key: string, value: string): number | null {
  if (['none', 'default', 'null'].includes(value.trim().toLowerCase())) return null;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new ShoalError('BAD_REQUEST', `${key} must be a positive integer or 'none', got '${value}'`);
  return n;
}

/** `on`/`off` (or true/false, 1/0, yes/no) as a switch. */
export function onOff(key: string, value: string): boolean {
  const v = value.trim().toLowerCase();
  if (['on', 'true', '1', 'yes'].includes(v)) return true;
  if (['off', 'false', '0', 'no'].includes(v)) return false;
  throw new ShoalError('BAD_REQUEST', `${key} must be on or off, got '${value}'`);
}

/** The body of `PUT /settings` that `shoal config set key value` sends. */
export function settingsBody(typedKey: string, value: string): SettingsBody {
  const key = keyOf(typedKey, SET_KEYS);
  switch (key) {
    case 'api-keys':
      return { apiKeys: list(value) };
    case 'add-api-key':
      return { addApiKeys: [value.trim()] };
    case 'remove-api-key':
      return { removeApiKeys: [value.trim()] };
    case 'cors-origins':
      // Checked here too, so a typo is a usage error (exit 2) before any node is asked.
      parseCorsOrigins(list(value), key);
      return { corsOrigins: list(value) };
    case 'default-context-tokens':
      return { defaultContextTokens: count(key, value) };
    case 'default-parallel':
      return { defaultParallel: count(key, value) };
    case 'download-approval-bytes':
      return { downloadApprovalBytes: value.trim() === '0' ? 0 : parseSize(key, value) };
    case 'tracing':
      return { tracing: onOff(key, value) };
  }
}

function shown(settings: ClusterSettings, key: KeyName): string {
  switch (key) {
    case 'api-keys': {
      const n = settings.apiKeyDigests.length;
      return n === 0 ? 'none' : `${n} key${n === 1 ? '' : 's'}`;
    }
    case 'cors-origins':
      return settings.corsOrigins.length === 0 ? 'none (loopback origins only)' : settings.corsOrigins.join(', ');
    case 'default-context-tokens':
      return settings.defaultContextTokens === null ? 'none (the planner default)' : String(settings.defaultContextTokens);
    case 'default-parallel':
      return settings.defaultParallel === null ? 'none (as many as fit)' : String(settings.defaultParallel);
    case 'download-approval-bytes':
      return settings.downloadApprovalBytes === 0 ? '0 (always ask)' : `${settings.downloadApprovalBytes} (${formatBytes(settings.downloadApprovalBytes)})`;
    case 'tracing':
      return settings.tracing ? 'on' : 'off';
    default:
      return '';
  }
}

export function formatSettings(settings: ClusterSettings, only: KeyName | null): string {
  if (only !== null) return shown(settings, only);
  const width = Math.max(...GET_KEYS.map((k) => k.length));
  return GET_KEYS.map((k) => `${k.padEnd(width)}  ${shown(settings, k)}`).join('\n');
}

export async function configCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv, { options: { 'data-dir': { type: 'string' }, json: { type: 'boolean' } }, allowPositionals: true }, CONFIG_HELP);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const [verb, key, value, ...extra] = positionals;
  if ((verb !== 'get' && verb !== 'set') || (verb === 'get' && value !== undefined) || (verb === 'set' && (key === undefined || value === undefined)) || extra.length > 0) {
    console.error(CONFIG_HELP);
    return 2;
  }
  // What was typed is checked before any node is asked: a bad key or value is a usage error (exit 2).
  let only: KeyName | null = null;
  let body: SettingsBody | undefined;
  try {
    if (verb === 'get') only = key === undefined ? null : keyOf(key, GET_KEYS);
    else body = settingsBody(key!, value!);
  } catch (error) {
    if (!isShoalError(error) || error.code !== 'BAD_REQUEST') throw error;
    console.error(error.message);
    return 2;
  }
  const client = await connectToNode(values['data-dir']);
  if (verb === 'get') {
    const { settings } = await client.call<{ settings: ClusterSettings }>('GET', '/settings');
    console.log(values.json ? JSON.stringify(settings, null, 2) : formatSettings(settings, only));
    return 0;
  }
  const { settings } = await client.call<{ settings: ClusterSettings }>('PUT', '/settings', body);
  const name = keyOf(key!, SET_KEYS);
  const after = name === 'add-api-key' || name === 'remove-api-key' ? 'api-keys' : name;
  console.log(`${after} = ${shown(settings, after)} (on every member)`);
  return 0;
}

export async function tokenCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv, { options: { 'data-dir': { type: 'string' }, rotate: { type: 'boolean' } }, allowPositionals: false }, TOKEN_HELP);
  if (typeof parsed === 'number') return parsed;
  const dataDir = resolveDataDir(parsed.values['data-dir']);
  const running = await readRunFiles(dataDir).then(
    () => true,
    () => false,
  );
  if (!parsed.values.rotate) {
    // A stopped node's token is the one it will use at its next start.
    console.log(running ? (await readRunFiles(dataDir)).token : await loadAdminToken(dataDir));
    return 0;
  }
  if (running) {
    const { token } = await (await connectToNode(dataDir)).call<{ token: string }>('POST', '/token/rotate');
    console.log(token);
  } else {
    console.log(await rotateAdminTokenFile(dataDir));
  }
  console.error('The old admin token no longer works: give the new one to every dashboard and script that used it.');
  return 0;
}
