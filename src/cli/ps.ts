import { formatBytes } from '../common/format-bytes.js';
import type { StatusView } from '../api/control/control.js';
import { parseCommand } from './args.js';
import { connectToNode } from './client.js';

const HELP = `Usage: shoal ps [--json] [--data-dir <dir>]

What runs where: one line per model part on a node, cluster-wide, with
  MEMORY   what the planner reserved for the part (weights, KV cache, overhead); for a node's
           default model, the size of its weights (its KV cache is not counted)
  SLOTS    requests in flight / concurrent requests the part takes (+ queued ones)
  CONTEXT  tokens per request

Options:
  --json             the rows as JSON
  --data-dir <dir>   the data dir of the local node to ask (default as for 'shoal run')
  -h, --help         show this help`;

export interface PsRow {
  model: string;
  instance: string;
  node: string;
  role: string;
  backend: string;
  memoryBytes: number | null;
  inFlight: number | null;
  queued: number;
  slots: number | null;
  contextTokens: number | null;
  state: string;
}

/** A member's nickname or name; a bare node id only for a node the status does not name. */
export function nodeNamer(status: Pick<StatusView, 'nodeId' | 'name' | 'members' | 'discovered'>): (nodeId: string) => string {
  const byId = new Map<string, string>([...status.discovered.map((d) => [d.nodeId, d.name] as const), ...status.members.map((m) => [m.nodeId, m.nickname ?? m.name] as const)]);
  byId.set(status.nodeId, byId.get(status.nodeId) ?? status.name);
  return (nodeId) => byId.get(nodeId) ?? nodeId;
}

/** The fields of a worker's instance status (`GET /state` `models`) that `ps` reads. */
interface LocalModel {
  instanceId: string;
  modelId: string;
  role: string;
  backend: string;
  local: boolean;
  state: string;
  inFlight: number;
  queued: number;
  contextSize: number | null;
  sequences: number | null;
  model: { sizeBytes: number } | null;
}

export function psRows(status: StatusView): PsRow[] {
  const name = nodeNamer(status);
  const rows: PsRow[] = [];
  // A node's own default model is not a cluster instance: it only shows in this node's runners.
  for (const m of status.models as LocalModel[]) {
    if (!m.local) continue;
    rows.push({
      model: m.modelId,
      instance: `${m.instanceId} (default model)`,
      node: status.name,
      role: m.role,
      backend: m.backend,
      memoryBytes: m.model?.sizeBytes ?? null,
      inFlight: m.inFlight,
      queued: m.queued,
      slots: m.sequences,
      contextTokens: m.contextSize,
      state: m.state,
    });
  }
  for (const i of status.instances) {
    i.placements.forEach((p, index) => {
      const runner = i.runners[index];
      const donor = p.role === 'donor';
      rows.push({
        model: i.modelId,
        instance: i.instanceId,
        node: name(p.nodeId),
        role: p.role,
        backend: p.backend,
        memoryBytes: p.estimatedBytes,
        // A donor holds layers for its driver and takes no requests of its own.
        inFlight: donor ? null : (runner?.inFlight ?? 0),
        queued: donor ? 0 : (runner?.queued ?? 0),
        slots: donor ? null : i.parallel,
        contextTokens: i.contextTokens,
        state: runner ? `${runner.state}${runner.reason && runner.state !== 'ready' ? ` (${runner.reason})` : ''}` : 'unknown',
      });
    });
  }
  return rows;
}

/** Columns padded to their widest cell; the last one is left ragged. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]): string => cells.map((cell, c) => (c === cells.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

export function formatPs(rows: readonly PsRow[]): string {
  if (rows.length === 0) return 'Nothing runs: no default model and no placed instance. Place one with `shoal launch <model>`.';
  return table(
    ['MODEL', 'INSTANCE', 'NODE', 'ROLE', 'BACKEND', 'MEMORY', 'SLOTS', 'CONTEXT', 'STATE'],
    rows.map((r) => [
      r.model,
      r.instance,
      r.node,
      r.role,
      r.backend,
      r.memoryBytes === null ? '-' : formatBytes(r.memoryBytes),
      r.slots === null ? '-' : `${r.inFlight ?? 0}/${r.slots}${r.queued > 0 ? ` +${r.queued}` : ''}`,
      r.contextTokens === null ? '-' : String(r.contextTokens),
      r.state,
    ]),
  );
}

export async function psCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv, { options: { json: { type: 'boolean' }, 'data-dir': { type: 'string' } }, allowPositionals: false }, HELP);
  if (typeof parsed === 'number') return parsed;
  const status = await (await connectToNode(parsed.values['data-dir'])).call<StatusView>('GET', '/state');
  const rows = psRows(status);
  console.log(parsed.values.json ? JSON.stringify(rows, null, 2) : formatPs(rows));
  return 0;
}
