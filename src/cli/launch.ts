import { existsSync } from 'node:fs';
import type { StatusView } from '../api/control/control.js';
import { errorMessage, ShoalError } from '../common/errors.js';
import { CARD_KV_CACHE_TYPES, FLASH_ATTENTION_MODES } from '../models/cards/card.js';
import { matchModelName } from '../models/model-name.js';
import type { AddFileResult, AddResult, DownloadView, ModelListView, ModelView } from '../models/views.js';
import type { Plan } from '../placement/planner.js';
import { parseCommand } from './args.js';
import { connectToNode, type NodeClient } from './client.js';
import { formatDownloads, formatPlan, namer } from './instance-commands.js';
import { formatBytes } from '../common/format-bytes.js';
import type { PendingDownload } from '../master/state/instances.js';
import type { DownloadsPlan } from '../placement/downloads.js';
import { follow, localFilePath, splitSpec } from './models-commands.js';

/**
 * `shoal launch <model>` (and `shoal models launch`): from what a person types to a placed model in
 * one step. A .gguf on this machine is added as a `local/<stem>` model, an unknown hub repo is added,
 * a model not on this node's disk is pulled (a bar on a terminal, a line per 10 % otherwise), then
 * it is placed. Placement reads the file's header on this node, so the pull comes first.
 */

const USAGE = `Usage: shoal launch <model> [options]     (also: shoal models launch <model>)

  <model>  a model id from 'shoal models ls'; a hub repo owner/name[:QUANT] (added and
           downloaded when this node does not have it; owner/name alone picks the quant
           already added, when there is one); or a .gguf file on this machine (./model.gguf),
           added as local/<file name> and copied to the members that serve it

Options:
  --replicas N                      copies to serve, on different nodes (default 1)
  --min-nodes N                     split one copy over at least N nodes
  --parallel N                      slots (requests at once) per copy (default: as many as fit, up to 16)
  --context N                       tokens of context per slot (default: the card's, else the planner's)
  --kv-cache-type f16|q8_0|q4_0     KV cache element type (default f16)
  --flash-attention auto|on|off     (default auto)
  --allow-spill                     layers that do not fit a node's GPUs may stay in system RAM
                                    (slower); without it such a node is short of VRAM
  --exclude <node>                  a node not to place on; repeat for more
  --dry-run                         show the plan and the downloads it would start; place nothing
  --yes                             approve up front the downloads onto other members above the
                                    cluster's downloadApprovalBytes (default 4 GiB); without it they
                                    wait for 'shoal models approve <instance>' or the dashboard
  --json                            print the instance (or plan) as JSON
  --data-dir <dir>                  the node's data dir (default $SHOAL_HOME, else
                                    $XDG_DATA_HOME/shoal, else ~/.local/share/shoal)`;

const NOT_DOWNLOADED: ReadonlySet<ModelView['state']> = new Set(['not-downloaded', 'partial', 'stale', 'downloading']);

interface Resolved {
  id: string;
  /** Set when the model must be pulled before placing. */
  pull: boolean;
}

/** The model id `spec` names on this node, adding a card when it names a file or an unknown hub repo. */
async function resolveModel(client: NodeClient, spec: string, say: (line: string) => void, dryRun: boolean): Promise<Resolved> {
  const path = localFilePath(spec);
  if (path !== null) {
    if (!existsSync(path)) throw new ShoalError('NOT_FOUND', `no file ${path}: give the path of a .gguf model file`);
    if (dryRun) throw new ShoalError('BAD_REQUEST', `a dry run adds nothing: add the file first (shoal models add ${spec}), then preview with shoal launch local/<name> --dry-run`);
    const added = await client.call<AddFileResult>('POST', '/models/add-file', { path });
    say(addFileText(added));
    return { id: added.card.id, pull: false };
  }
  const view = await client.call<ModelListView>('GET', '/models');
  const match = matchModelName(spec, view.models.map((m) => m.id));
  if (match.kind === 'ambiguous') {
    throw new ShoalError('BAD_REQUEST', `'${spec}' names ${match.choices.length} models on this node: ${match.choices.join(', ')}. Launch one of them by its id`);
  }
  if (match.kind === 'found') {
    const model = view.models.find((m) => m.id === match.id) as ModelView;
    return { id: match.id, pull: NOT_DOWNLOADED.has(model.state) };
  }
  const ref = splitSpec(spec);
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/.test(ref.repo)) {
    throw new ShoalError('NOT_FOUND', `no model '${spec}' on this node (see 'shoal models ls'): name a model id, a hub repo owner/name[:QUANT] (find one with 'shoal models search ${spec}'), or a .gguf file`);
  }
  if (dryRun) throw new ShoalError('BAD_REQUEST', `${spec} is not on this node yet and a dry run downloads nothing: launch it without --dry-run, or add and pull it first (shoal models add ${spec} --pull)`);
  const added = await client.call<AddResult>('POST', '/models/add', ref);
  say(`Added ${added.card.id} from ${added.hub.repo} at commit ${added.hub.revision.slice(0, 12)}${added.hub.chosen === 'default' ? ' (default quantization)' : ''}.`);
  return { id: added.card.id, pull: NOT_DOWNLOADED.has(added.model.state) };
}

function addFileText(r: AddFileResult): string {
  const how = r.file.stored === 'linked' ? 'hard-linked into the store, no second copy' : r.file.stored === 'copied' ? 'copied into the store from another filesystem' : 'already in the store';
  return `${r.created ? 'Added' : 'Updated'} ${r.card.id} from ${r.file.path} (${how}).`;
}

export async function launchCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(
    argv,
    {
      allowPositionals: true,
      options: {
        replicas: { type: 'string' },
        'min-nodes': { type: 'string' },
        parallel: { type: 'string' },
        context: { type: 'string' },
        'context-size': { type: 'string' },
        'kv-cache-type': { type: 'string' },
        'flash-attention': { type: 'string' },
        'allow-spill': { type: 'boolean' },
        exclude: { type: 'string', multiple: true },
        'dry-run': { type: 'boolean' },
        yes: { type: 'boolean', short: 'y' },
        json: { type: 'boolean' },
        'data-dir': { type: 'string' },
      },
    },
    USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  if (positionals.length !== 1) {
    console.error(`${positionals.length === 0 ? 'name the model to launch' : `one model at a time (got ${positionals.join(', ')})`}\n\n${USAGE}`);
    return 2;
  }
  const int = (name: string, text: string | undefined): number | undefined => {
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new ShoalError('BAD_REQUEST', `--${name} must be a positive integer, got '${text}'`);
    return n;
  };
  const oneOf = <T extends string>(name: string, text: string | undefined, allowed: readonly T[]): T | undefined => {
    if (text === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(text)) throw new ShoalError('BAD_REQUEST', `--${name} must be one of ${allowed.join(', ')}, got '${text}'`);
    return text as T;
  };
  const json = values.json === true;
  const dryRun = values['dry-run'] === true;
  // Progress goes to stderr, so --json output stays one object.
  const say = (line: string): void => void (json ? undefined : process.stderr.write(`${line}\n`));
  try {
    if (values.context !== undefined && values['context-size'] !== undefined) throw new ShoalError('BAD_REQUEST', 'give --context or --context-size (the same option), not both');
    const context = values.context ?? values['context-size'];
    const knobs = {
      ...(values.replicas !== undefined ? { replicas: int('replicas', values.replicas) } : {}),
      ...(values['min-nodes'] !== undefined ? { min_nodes: int('min-nodes', values['min-nodes']) } : {}),
      ...(context !== undefined ? { context_tokens: int('context', context) } : {}),
      ...(values.parallel !== undefined ? { parallel: int('parallel', values.parallel) } : {}),
      ...(values['kv-cache-type'] !== undefined ? { kv_cache_type: oneOf('kv-cache-type', values['kv-cache-type'], CARD_KV_CACHE_TYPES) } : {}),
      ...(values['flash-attention'] !== undefined ? { flash_attention: oneOf('flash-attention', values['flash-attention'], FLASH_ATTENTION_MODES) } : {}),
      ...(values.exclude !== undefined ? { exclude: values.exclude } : {}),
      ...(values['allow-spill'] === true ? { allow_spill: true } : {}),
    };
    const client = await connectToNode(values['data-dir']);
    const spec = positionals[0] as string;
    const model = await resolveModel(client, spec, say, dryRun);
    if (model.id !== spec) say(`${spec} -> ${model.id}`);
    if (model.pull && !dryRun) {
      const { download } = await client.call<{ download: DownloadView }>('POST', '/models/pull', { id: model.id });
      const code = await follow(client, download, json, !json);
      if (code !== 0) return code;
    }
    const body = { model: model.id, ...knobs, dry_run: dryRun, ...(values.yes === true ? { approve_downloads: true } : {}) };
    const status = await client.call<StatusView>('GET', '/state');
    if (dryRun) {
      const { plan, downloads } = await client.call<{ plan: Plan; downloads: DownloadsPlan }>('POST', '/place_instance', body);
      console.log(json ? JSON.stringify({ plan, downloads }, null, 2) : [formatPlan(plan, namer(status)), ...formatDownloads(downloads, namer(status))].join('\n'));
      return 0;
    }
    const { instance } = await client.call<{ instance: { instanceId: string; modelId: string; shape: string; awaitingApproval?: PendingDownload[] } }>('POST', '/place_instance', body);
    if (instance.awaitingApproval !== undefined && !json) {
      const names = namer(status);
      const total = instance.awaitingApproval.reduce((sum, d) => sum + d.bytes, 0);
      say(`Download ${formatBytes(total)} onto ${instance.awaitingApproval.map((d) => names(d.nodeId)).join(', ')}? ${instance.instanceId} waits until you approve: \`shoal models approve ${instance.instanceId}\` (or the dashboard; \`--yes\` approves up front).`);
    }
    console.log(
      json
        ? JSON.stringify({ instance }, null, 2)
        : `Placed ${instance.modelId} as ${instance.instanceId} (${instance.shape}). Follow it with \`shoal models ls\`; it answers as "model": "${instance.modelId}" at ${client.baseUrl}/v1.`,
    );
    return 0;
  } catch (error) {
    console.error(errorMessage(error));
    return 1;
  }
}
