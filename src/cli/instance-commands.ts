import { parseArgs } from './args.js';
import { errorMessage } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';
import type { InstanceView, StatusView } from '../api/control/control.js';
import type { DownloadsPlan } from '../placement/downloads.js';
import type { Plan } from '../placement/planner.js';
import { parseCommand } from './args.js';
import { connectToNode } from './client.js';

/** `shoal models stop|approve`, the plan text `shoal launch` (launch.ts) prints, and the instances part of `shoal models ls`. */

const STOP_USAGE = 'shoal models stop <instance> [--json]';
const APPROVE_USAGE = `Usage: shoal models approve <instance> [--json] [--data-dir <dir>]

Approves the downloads a placed instance waits for: a placement that would download more than the
cluster's downloadApprovalBytes (default 4 GiB) onto a member waits until it is approved. See them
with 'shoal models ls'; 'shoal models launch --yes' approves them up front.`;

/** The downloads a plan would start, one line each (for the dry run and the launch that waits). */
export function formatDownloads(downloads: DownloadsPlan, names: (nodeId: string) => string): string[] {
  return downloads.downloads.map(
    (d) => `  download ${formatBytes(d.bytes)} onto ${d.name ?? names(d.nodeId)} from ${d.source === 'peer' ? 'a member' : 'the hub'}${d.needsApproval ? ` (over ${formatBytes(downloads.approvalBytes)}: needs approval)` : ''}`,
  );
}

export function formatPlan(plan: Plan, names: (nodeId: string) => string): string {
  const lines = [
    `${plan.modelId}: ${plan.shape}, ${plan.parallel} slot${plan.parallel === 1 ? '' : 's'} (${plan.sizing.parallel}) × ${plan.contextTokens} tokens (${plan.sizing.contextTokens}), KV ${plan.kvCacheType}, flash attention ${plan.flashAttention}, ${plan.predictedDecodeTokPerS !== null ? `~${plan.predictedDecodeTokPerS.toFixed(1)} tok/s predicted` : plan.decodeUpperBoundTokPerS !== null ? `speed not predicted (at most ~${plan.decodeUpperBoundTokPerS.toFixed(1)} tok/s: its measured CPU parts)` : 'speed not predicted'}`,
  ];
  for (const p of plan.placements) {
    const share = p.role === 'full' ? 'whole model' : `${p.layerShare.layerCount} layers (${(p.layerShare.fraction * 100).toFixed(0)}%)${p.tensorSplit !== undefined ? `, split weight ${p.tensorSplit}` : ''}`;
    const ram = p.gpuLayers === null ? 'needs' : `-ngl ${p.gpuLayers}${p.spilledLayers > 0 ? ` (${p.spilledLayers} layers spilled to RAM)` : ''}, RAM`;
    lines.push(`  ${names(p.nodeId)}  ${p.role.padEnd(6)} ${p.backend.padEnd(18)} ${share}, ${ram} ${formatBytes(p.ramBytes)} of ${formatBytes(p.freeBytes)} free`);
    for (const d of p.devices) {
      lines.push(`      GPU ${d.index} ${d.name}: ${d.layerCount} layers${d.holdsOutput ? ' + output' : ''}, split weight ${d.tensorSplit}, ${formatBytes(d.bytes)} of ${formatBytes(d.freeBytes)} VRAM free${d.fits ? '' : ' (does not fit)'}`);
    }
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
    for (const d of i.downloads) {
      const from = d.source === null ? '' : d.source.kind === 'peer' ? ` from ${d.source.name ?? d.source.nodeId.slice(-8)}` : ` from the ${d.source.kind}`;
      const rate = d.bytesPerSecond > 0 ? `, ${formatBytes(d.bytesPerSecond)}/s` : '';
      lines.push(`    ${names(d.nodeId)}  download ${d.state}: ${formatBytes(d.doneBytes)} of ${formatBytes(d.totalBytes)}${rate}${from}${d.error ? ` (${d.error.message})` : ''}`);
    }
    if (i.awaitingApproval !== null) {
      const total = i.awaitingApproval.reduce((sum, d) => sum + d.bytes, 0);
      lines.push(`    waits for approval: download ${formatBytes(total)} onto ${i.awaitingApproval.map((d) => d.name ?? names(d.nodeId)).join(', ')}? Approve with \`shoal models approve ${i.instanceId}\``);
    }
  }
  return lines.join('\n');
}

export function namer(status: StatusView): (nodeId: string) => string {
  const byId = new Map(status.members.map((m) => [m.nodeId, m.nickname ?? m.name]));
  return (nodeId) => byId.get(nodeId) ?? (nodeId === status.nodeId ? status.name : nodeId.slice(-8));
}

export async function instancesText(dataDir: string | undefined): Promise<string> {
  const status = await (await connectToNode(dataDir)).call<StatusView>('GET', '/state');
  return formatInstances(status.instances, namer(status));
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

export async function approveCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv, { allowPositionals: true, options: { json: { type: 'boolean' }, 'data-dir': { type: 'string' } } }, APPROVE_USAGE);
  if (typeof parsed === 'number') return parsed;
  if (parsed.positionals.length !== 1) {
    console.error(`name one instance to approve (see 'shoal models ls')\n\n${APPROVE_USAGE}`);
    return 2;
  }
  const id = parsed.positionals[0] as string;
  try {
    const result = await (await connectToNode(parsed.values['data-dir'])).call<{ instance: { instanceId: string; modelId: string } }>('POST', `/instance/${encodeURIComponent(id)}/approve`, {});
    console.log(parsed.values.json ? JSON.stringify(result, null, 2) : `Approved the downloads of ${result.instance.instanceId} (${result.instance.modelId}); its nodes start them now. Follow them with \`shoal models ls\`.`);
    return 0;
  } catch (error) {
    console.error(errorMessage(error));
    return 1;
  }
}
