import { parseArgs } from './args.js';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { isShoalError, ShoalError } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';
import { matchModelName } from '../models/model-name.js';
import { renderProgressLine } from '../models/store/progress.js';
import type { AddFileResult, AddResult, DownloadView, ModelListView, ModelView, PullView, RemoveResult, SearchView } from '../models/views.js';
import { connectToNode, type NodeClient } from './client.js';
import { instancesText } from './instance-commands.js';

/**
 * `shoal models search|add|pull|ls|rm`: thin calls to the /models routes of the node running from
 * the data dir. `pull` follows its download by polling /models/downloads; Ctrl-C cancels it.
 */

/** How often `pull` asks the node for its download's progress. */
export const PULL_POLL_MS = 200;

interface Parsed {
  positionals: string[];
  dataDir: string | undefined;
  json: boolean;
  revision: string | undefined;
  pull: boolean;
  limit: string | undefined;
  /** `--projector <file|precision>`; false with `--no-projector`. */
  projector: string | false | undefined;
}

interface Sub {
  usage: string;
  positionals: [number, number];
  options: Record<string, { type: 'string' | 'boolean' }>;
  run: (p: Parsed) => Promise<number>;
}

const COMMON = { 'data-dir': { type: 'string' }, json: { type: 'boolean' } } as const;

const SUBS: Record<string, Sub> = {
  search: {
    usage: 'shoal models search <query> [--limit <n>] [--json]',
    positionals: [1, 64],
    options: { ...COMMON, limit: { type: 'string' } },
    run: async (p) => {
      const q = p.positionals.join(' ');
      const params = new URLSearchParams({ q });
      if (p.limit !== undefined) params.set('limit', p.limit);
      const view = await (await connectToNode(p.dataDir)).call<SearchView>('GET', `/models/search?${params.toString()}`);
      print(p.json ? view : formatSearch(view));
      return 0;
    },
  },
  add: {
    usage: 'shoal models add <owner/repo>[:<file>|:<quant>] [--revision <sha|branch>] [--projector <file|F16> | --no-projector] [--pull] [--json] | <./file.gguf|./ggml-*.bin> [--projector <./mmproj.gguf>]',
    positionals: [1, 1],
    options: { ...COMMON, revision: { type: 'string' }, pull: { type: 'boolean' }, projector: { type: 'string' }, 'no-projector': { type: 'boolean' } },
    run: async (p) => {
      const client = await connectToNode(p.dataDir);
      const file = localFilePath(p.positionals[0] as string);
      if (file !== null) {
        if (p.revision !== undefined || p.pull) throw new ShoalError('BAD_REQUEST', '--revision and --pull are for hub repos: a local file is added as it is, nothing to download');
        if (p.projector === false) throw new ShoalError('BAD_REQUEST', '--no-projector is for hub repos: a local file is added without a projector unless --projector <mmproj.gguf> names one');
        // The projector of a local model is a file too, resolved against this shell's directory as the model is.
        const projector = p.projector === undefined ? {} : { projector: localFilePath(p.projector.startsWith('.') || p.projector.startsWith('/') || p.projector.startsWith('~') ? p.projector : `./${p.projector}`) };
        const added = await client.call<AddFileResult>('POST', '/models/add-file', { path: file, ...projector });
        print(p.json ? added : formatAddFile(added));
        return 0;
      }
      const body: Record<string, unknown> = { ...splitSpec(p.positionals[0] as string), ...(p.revision ? { revision: p.revision } : {}), ...(p.pull ? { pull: true } : {}), ...(p.projector !== undefined ? { projector: p.projector } : {}) };
      const result = await client.call<AddResult>('POST', '/models/add', body);
      if (!result.download) {
        print(p.json ? result : formatAdd(result, false));
        return 0;
      }
      if (!p.json) process.stdout.write(`${formatAdd(result, true)}\n`);
      return follow(client, result.download, p.json);
    },
  },
  pull: {
    usage: 'shoal models pull <model> [--json]   (a model id, a short name, or a hub repo owner/name[:QUANT], added first when new)',
    positionals: [1, 1],
    options: COMMON,
    run: async (p) => {
      const client = await connectToNode(p.dataDir);
      const spec = p.positionals[0] as string;
      const id = await knownModel(client, spec);
      if (id === null) {
        // No card here: a member that holds it gives its copy (the hub is not asked)...
        const fromMember = await client.call<{ download: DownloadView; joined: boolean }>('POST', '/models/pull', { id: spec }).catch((error: unknown) => {
          if (isShoalError(error) && error.code === 'NOT_FOUND') return null;
          throw error;
        });
        if (fromMember !== null) return follow(client, fromMember.download, p.json);
        // ...else, as Ollama's pull (and /api/pull): a hub repo this node has no card for is added, then pulled.
        const ref = splitSpec(spec);
        if (!HUB_REPO.test(ref.repo)) throw new ShoalError('NOT_FOUND', `no model '${spec}' on this node (see 'shoal models ls'): name a model id or a hub repo owner/name[:QUANT] (find one with 'shoal models search ${spec}')`);
        const result = await client.call<AddResult>('POST', '/models/add', { ...ref, pull: true });
        if (!result.download) {
          print(p.json ? result : formatAdd(result, false));
          return 0;
        }
        if (!p.json) process.stdout.write(`${formatAdd(result, true)}\n`);
        return follow(client, result.download, p.json);
      }
      const { download, joined, draft } = await client.call<PullView>('POST', '/models/pull', { id });
      if (joined && !p.json) process.stderr.write(`joining the download of ${download.modelId} already under way (${download.id})\n`);
      if (draft !== undefined && !p.json) process.stderr.write(`fetching its speculative draft ${draft.modelId} too (${draft.id}; follow it with 'shoal models pull ${draft.modelId}')\n`);
      return follow(client, download, p.json);
    },
  },
  ls: {
    usage: 'shoal models ls [--json]',
    positionals: [0, 0],
    options: COMMON,
    run: async (p) => {
      const view = await (await connectToNode(p.dataDir)).call<ModelListView>('GET', '/models');
      print(p.json ? view : `${formatList(view)}\n\n${await instancesText(p.dataDir)}`);
      return 0;
    },
  },
  rm: {
    usage: 'shoal models rm <model> [--json]   (a model id or a short name: owner/name, name)',
    positionals: [1, 1],
    options: COMMON,
    run: async (p) => {
      const client = await connectToNode(p.dataDir);
      const spec = p.positionals[0] as string;
      // An unknown name goes to the node as typed: its NOT_FOUND says what it knows.
      const id = (await knownModel(client, spec)) ?? spec;
      const result = await client.call<RemoveResult>('DELETE', `/models/${encodeURI(id)}`);
      const parts = [result.removedFiles ? `freed ${formatBytes(result.freedBytes)}` : 'no files were on disk', result.cardFile ? `deleted its card ${result.cardFile}` : ''];
      print(p.json ? result : `Removed ${result.id}: ${parts.filter(Boolean).join('; ')}.`);
      return 0;
    },
  },
};

export const MODELS_SUBCOMMANDS = Object.keys(SUBS);

/** `owner/name`, as the hub spells a repo. */
export const HUB_REPO = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * The id of the model `spec` names among this node's, with the short names 'shoal launch' takes
 * (owner/name for its one quant, the name without its owner); null when none; an error when several.
 */
async function knownModel(client: NodeClient, spec: string): Promise<string | null> {
  const view = await client.call<ModelListView>('GET', '/models');
  const match = matchModelName(spec, view.models.map((m) => m.id));
  if (match.kind === 'ambiguous') throw new ShoalError('BAD_REQUEST', `'${spec}' names ${match.choices.length} models on this node: ${match.choices.join(', ')}. Name one of them by its id`);
  return match.kind === 'found' ? match.id : null;
}

function print(out: unknown): void {
  console.log(typeof out === 'string' ? out : JSON.stringify(out, null, 2));
}

/**
 * The absolute path `spec` names when it names a file rather than a model id or hub repo: it starts
 * with `./`, `../`, `/` or `~/`, or it ends in .gguf (or a whisper model's .bin) and exists (`owner/name:file.gguf` is a hub file).
 */
export function localFilePath(spec: string): string | null {
  const home = /^~[\\/]/.test(spec);
  const path = home ? resolve(homedir(), spec.slice(2)) : resolve(spec);
  if (home || /^(\.{1,2}[\\/]|[\\/])/.test(spec)) return path;
  return /\.(gguf|bin)$/i.test(spec) && !/^[^\s:/]+\/[^\s:/]+:/.test(spec) && existsSync(path) ? path : null;
}

/** `owner/name:Q4_K_M` -> quant, `owner/name:x.gguf` (or `ggml-base.bin`) -> file; anything else (URLs, paths) goes to the node as it is. */
export function splitSpec(spec: string): { repo: string; file?: string; quant?: string } {
  const m = /^([^\s:/]+\/[^\s:/]+):([^\s:]+)$/.exec(spec.trim());
  if (!m) return { repo: spec.trim() };
  const [, repo, tail] = m as unknown as [string, string, string];
  return /\.(gguf|bin)$/i.test(tail) ? { repo, file: tail } : { repo, quant: tail };
}

/** `--projector` and `--no-projector` as AddRequest.projector; both at once is a usage error. */
function projectorOption(values: Record<string, string | boolean | undefined>): string | false | undefined {
  if (values['no-projector'] === true) {
    if (values.projector !== undefined) throw new ShoalError('BAD_REQUEST', 'give --projector or --no-projector, not both');
    return false;
  }
  return values.projector as string | undefined;
}

export async function modelsCommand(name: string, argv: string[]): Promise<number> {
  const sub = SUBS[name];
  if (!sub) {
    console.error(`unknown models command '${name}'. Commands: generate, ${MODELS_SUBCOMMANDS.join(', ')}`);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...sub.options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (error) {
    console.error(`${(error as Error).message}\nUsage: ${sub.usage} [--data-dir <dir>]`);
    return 2;
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help) {
    console.log(`Usage: ${sub.usage} [--data-dir <dir>]`);
    return 0;
  }
  const [min, max] = sub.positionals;
  if (parsed.positionals.length < min || parsed.positionals.length > max) {
    console.error(`Usage: ${sub.usage} [--data-dir <dir>]`);
    return 2;
  }
  try {
    return await sub.run({
      positionals: parsed.positionals,
      dataDir: values['data-dir'] as string | undefined,
      json: values.json === true,
      revision: values.revision as string | undefined,
      pull: values.pull === true,
      limit: values.limit as string | undefined,
      projector: projectorOption(values),
    });
  } catch (error) {
    console.error(isShoalError(error) ? error.message : (error as Error).message);
    return 1;
  }
}

// ---- following a download ------------------------------------------------------------------------

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function plainLine(d: DownloadView): string {
  if (d.state === 'resolving') return `${d.modelId}: resolving ${d.repo}@${d.revision.slice(0, 12)} on the hub`;
  const pct = d.totalBytes > 0 ? Math.floor((d.doneBytes / d.totalBytes) * 100) : d.done ? 100 : 0;
  const rate = d.bytesPerSecond > 0 ? `, ${formatBytes(d.bytesPerSecond)}/s` : '';
  const eta = d.etaSeconds !== null && !d.done && d.bytesPerSecond > 0 ? `, ETA ${Math.ceil(d.etaSeconds)}s` : '';
  return `${d.modelId}: ${d.state} ${pct}% (${formatBytes(d.doneBytes)} of ${formatBytes(d.totalBytes)}${rate}${eta})`;
}

/**
 * Polls the download until it ends: a redrawn bar on a terminal, a line per 10 % otherwise (both on
 * stderr, so --json output stays clean). Ctrl-C cancels the download on the node; a second one quits.
 * `summary` false: no closing line (nor the JSON of the download), for a command that goes on.
 */
export async function follow(client: NodeClient, start: DownloadView, json: boolean, summary = true): Promise<number> {
  const tty = process.stderr.isTTY === true;
  let current = start;
  let cancelling = false;
  let lastDecile = -1;
  let lastState = '';
  let drawn = false;
  const onSigint = (): void => {
    if (cancelling) process.exit(130);
    cancelling = true;
    if (drawn) process.stderr.write('\n');
    drawn = false;
    process.stderr.write(`cancelling the download of ${current.modelId}... (Ctrl-C again to quit now)\n`);
    client.call('DELETE', `/models/downloads/${encodeURIComponent(current.id)}`).catch((error: unknown) => {
      process.stderr.write(`could not cancel: ${(error as Error).message}\n`);
    });
  };
  process.on('SIGINT', onSigint);
  try {
    while (true) {
      if (!json) {
        if (tty) {
          if (current.state === 'downloading' || current.state === 'done') {
            process.stderr.write(`\r${renderProgressLine(current, Math.max(20, (process.stderr.columns || 80) - 1))}\x1b[K`);
            drawn = true;
          }
        } else {
          const decile = current.totalBytes > 0 ? Math.floor((current.doneBytes / current.totalBytes) * 10) : 0;
          if (current.state !== lastState || (current.state === 'downloading' && decile !== lastDecile)) {
            process.stderr.write(`${plainLine(current)}\n`);
            lastDecile = decile;
            lastState = current.state;
          }
        }
      }
      if (current.state === 'done' || current.state === 'failed' || current.state === 'cancelled') break;
      await sleep(PULL_POLL_MS);
      const { downloads } = await client.call<{ downloads: DownloadView[] }>('GET', '/models/downloads');
      const next = downloads.find((d) => d.id === current.id);
      current = next ?? (await client.call<{ download: DownloadView }>('GET', `/models/downloads/${encodeURIComponent(current.id)}`)).download;
    }
  } finally {
    process.off('SIGINT', onSigint);
    if (drawn) process.stderr.write('\n');
  }
  if (json && summary) print(current);
  if (current.state === 'done') {
    if (!json && summary) {
      const fetched = current.fetchedBytes > 0 ? `fetched ${formatBytes(current.fetchedBytes)}` : 'already on disk, nothing fetched';
      console.log(`Pulled ${current.modelId} (${formatBytes(current.totalBytes)}, ${current.files.length} file${current.files.length === 1 ? '' : 's'}, verified; ${fetched}).\nFile: ${current.path ?? '?'}`);
    }
    return 0;
  }
  if (current.state === 'cancelled') {
    if (!json) console.error(`Cancelled the download of ${current.modelId}; what arrived is kept and 'shoal models pull ${current.modelId}' resumes it.`);
    return 130;
  }
  if (!json) console.error(`The download of ${current.modelId} failed: ${current.error?.message ?? 'unknown error'}`);
  return 1;
}

// ---- text output ---------------------------------------------------------------------------------

function pad(text: string, width: number): string {
  return text.length >= width ? `${text} ` : text.padEnd(width);
}

function formatSearch(view: SearchView): string {
  if (view.results.length === 0) return `No GGUF models for "${view.query}" on ${view.endpoint}.`;
  const lines: string[] = [];
  for (const r of view.results) {
    const stats = [r.downloads > 0 ? `${r.downloads} downloads` : '', r.likes > 0 ? `${r.likes} likes` : '', r.updatedAt ? `updated ${r.updatedAt.slice(0, 10)}` : ''].filter(Boolean).join(', ');
    lines.push(`${r.repo}${stats ? `  (${stats})` : ''}`);
    for (const m of r.models) {
      const notes = [m.isDefault ? 'default' : '', m.projector ? 'projector' : '', !m.complete ? 'incomplete' : '', m.files.length > 1 ? `${m.files.length} shards` : '', r.matchedFile && m.files.some((f) => f.path === r.matchedFile) ? 'matches' : ''].filter(Boolean).join(', ');
      lines.push(`  ${pad(m.tag, 24)}${pad(formatBytes(m.bytes), 11)}${m.file}${notes ? `  [${notes}]` : ''}`);
    }
    lines.push(r.defaultQuant ? `  -> shoal models add ${r.repo}   (${r.defaultQuant}; or add ${r.repo}:<tag>)` : '  (no complete GGUF model to add)', '');
  }
  return lines.join('\n').trimEnd();
}

function formatAddFile(r: AddFileResult): string {
  const how = r.file.stored === 'linked' ? 'hard-linked into the store (same filesystem, no second copy)' : r.file.stored === 'copied' ? 'copied into the store (another filesystem)' : 'already in the store';
  return [
    `${r.created ? 'Added' : 'Updated'} ${r.card.id}: ${r.file.path}, ${formatBytes(r.file.bytes)}, ${how}.`,
    ...(r.projector ? [`With the projector ${r.projector.path}, ${formatBytes(r.projector.bytes)}: a vision card, served by llama-server.`] : []),
    `Card: ${r.cardFile}`,
    `Serve it with: shoal launch ${r.card.id}`,
  ].join('\n');
}

function formatAdd(r: AddResult, pulling: boolean): string {
  const shards = r.hub.files.filter((f) => f.path !== r.hub.projector?.path).length;
  const lines = [
    `${r.created ? 'Added' : 'Updated'} ${r.card.id}: ${r.hub.file}${shards > 1 ? ` (+${shards - 1} shards)` : ''}${r.hub.projector ? ` with projector ${r.hub.projector.path}` : ''}, ${formatBytes(r.hub.bytes)}, ${r.hub.repo} at commit ${r.hub.revision.slice(0, 12)}${r.hub.chosen === 'default' ? ' (default quantization)' : ''}.`,
    `Card: ${r.cardFile}`,
  ];
  if (r.hub.projector) lines.push('A vision card: it takes images and is served by llama-server (add with --no-projector for text only).');
  if (r.model.state === 'on-disk') lines.push('Already on disk.');
  else if (!pulling) lines.push(`Download it with: shoal models pull ${r.card.id}`);
  return lines.join('\n');
}

function sourceText(m: ModelView): string {
  const s = m.source;
  if (!s) return '-';
  if (s.kind === 'builtin') return 'built-in (generated on use)';
  if (s.kind === 'file') return s.path;
  if (s.kind === 'local') return `file ${s.imported_from}`;
  return `${s.repo}@${s.revision.slice(0, 12)} ${s.file}`;
}

function formatList(view: ModelListView): string {
  const rows = view.models.map((m) => {
    let state: string = m.state;
    if (m.state === 'downloading' && m.download && m.download.totalBytes > 0) state = `downloading ${Math.floor((m.download.doneBytes / m.download.totalBytes) * 100)}%`;
    if (m.state === 'partial') state = `partial (${formatBytes(m.partialBytes)})`;
    if (m.inUse) state += ', in use';
    const size = m.bytes > 0 ? formatBytes(m.bytes) : '-';
    return [m.id, state, size, sourceText(m)];
  });
  const widths = [0, 1, 2].map((i) => Math.max(...[['ID', 'STATE', 'SIZE'][i] as string, ...rows.map((r) => r[i] as string)].map((t) => t.length)) + 2);
  const line = (r: string[]): string => r.map((c, i) => (i < 3 ? c.padEnd(widths[i] as number) : c)).join('').trimEnd();
  const out = [line(['ID', 'STATE', 'SIZE', 'SOURCE']), ...rows.map(line)];
  if (view.errors.length > 0) out.push('', 'Cards that could not be read:', ...view.errors.map((e) => `  ${e.message}`));
  return out.join('\n');
}
