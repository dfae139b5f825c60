import { parseArgs } from 'node:util';
import { errorMessage } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';
import type { InstanceView, StatusView } from '../api/control/control.js';
import { CARD_KV_CACHE_TYPES, FLASH_ATTENTION_MODES } from '../models/cards/card.js';
import type { Plan } from '../placement/planner.js';
import { connectToNode } from './client.js';

/** `shoal models launch|stop` and the instances part of `shoal models ls`: calls to the placement routes. */

const LAUNCH_USAGE =
  'shoal models launch <model> [--replicas N] [--min-nodes N] [--parallel N] [--context N] [--kv-cache-type f16|q8_0|q4_0] [--flash-attention auto|on|off] [--exclude <node>]... [--dry-run] [--json]';
const STOP_USAGE = 'shoal models stop <instance> [--json]';

export function formatPlan(plan: Plan, names: (nodeId: string) => string): string {
  const lines = [
    `${plan.modelId}: ${plan.shape}, ${plan.parallel} slot${plan.parallel === 1 ? '' : 's'} (${plan.sizing.parallel}) × ${plan.contextTokens} tokens (${plan.sizing.contextTokens}), KV ${plan.kvCacheType}, flash attention ${plan.flashAttention}, ${plan.predictedDecodeTokPerS === null ? 'speed not predicted' : `~${plan.predictedDecodeTokPerS.toFixed(1)} tok/s predicted`}`,
  ];
  for (const p of plan.placements) {
    const share = p.role === 'full' ? 'whole model' : `${p.layerShare.layerCount} layers (${(p.layerShare.fraction * 100).toFixed(0)}%)${p.tensorSplit !== undefined ? `, split weight ${p.tensorSplit}` : ''}`;
    lines.push(`  ${names(p.nodeId)}  ${p.role.padEnd(6)} ${p.backend.padEnd(18)} ${share}, needs ${formatBytes(p.estimate.totalBytes)} of ${formatBytes(p.freeBytes)} free`);
  }
  for (const warning of plan.warnings) lines.push(`  warning: ${warning}`);
  return lines.join('\n');
}

export function formatInstances(instances: readonly InstanceView[], names: (nodeId: string) => string): string {
  if (instances.length === 0) return 'No instances placed (every node still serves its default model). Place one with `shoal models launch <model>`.';
  const lines = ['Instances:'];
  for (const i of instances) {
    lines.push(`  ${i.instanceId}  ${i.modelId}  ${i.shape}, ${i.contextTokens} tokens × ${i.parallel}`);
    for (const r of i.runners) lines.push(`    ${names(r.nodeId)}  ${r.role.padEnd(6)} ${r.state}${r.reason && r.state !== 'ready' ? ` (${r.reason})` : ''}${r.inFlight > 0 ? `, ${r.inFlight} in flight` : ''}`);
  }
  return lines.join('\n');
}

function namer(status: StatusView): (nodeId: string) => string {
  const byId = new Map(status.members.map((m) => [m.nodeId, m.nickname ?? m.name]));
  return (nodeId) => byId.get(nodeId) ?? (nodeId === status.nodeId ? status.name : nodeId.slice(-8));
}

export async function instancesText(dataDir: string | undefined): Promise<string> {
  const status = await (await connectToNode(dataDir)).call<StatusView>('GET', '/state');
  return formatInstances(status.instances, namer(status));
}

export async function launchCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        replicas: { type: 'string' },
        'min-nodes': { type: 'string' },
        parallel: { type: 'string' },
        context: { type: 'string' },
        'context-size': { type: 'string' },
        'kv-cache-type': { type: 'string' },
        'flash-attention': { type: 'string' },
        exclude: { type: 'string', multiple: true },
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        'data-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    console.error(`${(error as Error).message}\nUsage: ${LAUNCH_USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(`Usage: ${LAUNCH_USAGE}`);
    return 0;
  }
  if (positionals.length !== 1) {
    console.error(`Usage: ${LAUNCH_USAGE}`);
    return 2;
  }
  const int = (name: string, text: string | undefined): number | undefined => {
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got '${text}'`);
    return n;
  };
  const oneOf = <T extends string>(name: string, text: string | undefined, allowed: readonly T[]): T | undefined => {
    if (text === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(text)) throw new Error(`--${name} must be one of ${allowed.join(', ')}, got '${text}'`);
    return text as T;
  };
  try {
    if (values.context !== undefined && values['context-size'] !== undefined) throw new Error('give --context or --context-size (the same option), not both');
    const context = values.context ?? values['context-size'];
    const body = {
      model: positionals[0],
      ...(values.replicas !== undefined ? { replicas: int('replicas', values.replicas) } : {}),
      ...(values['min-nodes'] !== undefined ? { min_nodes: int('min-nodes', values['min-nodes']) } : {}),
      ...(context !== undefined ? { context_tokens: int('context', context) } : {}),
      ...(values.parallel !== undefined ? { parallel: int('parallel', values.parallel) } : {}),
      ...(values['kv-cache-type'] !== undefined ? { kv_cache_type: oneOf('kv-cache-type', values['kv-cache-type'], CARD_KV_CACHE_TYPES) } : {}),
      ...(values['flash-attention'] !== undefined ? { flash_attention: oneOf('flash-attention', values['flash-attention'], FLASH_ATTENTION_MODES) } : {}),
      ...(values.exclude !== undefined ? { exclude: values.exclude } : {}),
      dry_run: values['dry-run'] === true,
    };
    const client = await connectToNode(values['data-dir']);
    const status = await client.call<StatusView>('GET', '/state');
    if (body.dry_run) {
      const { plan } = await client.call<{ plan: Plan }>('POST', '/place_instance', body);
      console.log(values.json ? JSON.stringify({ plan }, null, 2) : formatPlan(plan, namer(status)));
      return 0;
    }
    const { instance } = await client.call<{ instance: { instanceId: string; modelId: string; shape: string } }>('POST', '/place_instance', body);
    console.log(values.json ? JSON.stringify({ instance }, null, 2) : `Placed ${instance.modelId} as ${instance.instanceId} (${instance.shape}). Follow it with \`shoal models ls\`.`);
    return 0;
  } catch (error) {
    console.error(errorMessage(error));
    return 1;
  }
}

export async function stopCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, strict: true, options: { json: { type: 'boolean' }, 'data-dir': { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  } catch (error) {
    console.error(`${(error as Error).message}\nUsage: ${STOP_USAGE}`);
    return 2;
  }
  if (parsed.values.help) {
    console.log(`Usage: ${STOP_USAGE}`);
    return 0;
  }
  if (parsed.positionals.length !== 1) {
    console.error(`Usage: ${STOP_USAGE}`);
    return 2;
  }
  const id = parsed.positionals[0] as string;
  try {
    const result = await (await connectToNode(parsed.values['data-dir'])).call<{ deleted: string }>('DELETE', `/instance/${encodeURIComponent(id)}`);
    console.log(parsed.values.json ? JSON.stringify(result, null, 2) : `Stopped ${result.deleted}.`);
    return 0;
  } catch (error) {
    console.error(errorMessage(error));
    return 1;
  }
}
