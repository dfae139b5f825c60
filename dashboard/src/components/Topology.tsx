// The cluster as a graph: members as boxes (this node and the master marked, memory, CPU and GPU use,
// a health ring and a badge per health reason, whose hover texts say what is wrong and what to do),
// lines for the links between them, and nodes seen on the network but not in the cluster as dashed
// boxes off to the side.

import { useEffect, useState, type ReactNode } from 'react';
import { circleLayout } from '../lib/chart.js';
import { formatBytes, formatPercent } from '../lib/format.js';
import type { NodeHealth, NodeResources, StateView } from '../lib/types.js';
import { HEALTH_WORDS } from '../lib/words.js';
import { healthTitle } from './Bits.js';
import { SvgReasonBadges } from './HealthReasons.js';

interface GraphNode {
  nodeId: string;
  name: string;
  isSelf: boolean;
  isMaster: boolean;
  health: NodeHealth;
  member: boolean;
  fingerprint: string;
}

const BOX_W = 176;
// The last row holds the health reason badges (HealthReasons.tsx).
const BOX_H = 120;
/** Below this width the boxes stack in a column drawn at full size: a circle scaled to a phone is unreadable. */
const NARROW_QUERY = '(max-width: 560px)';
const COLUMN_GAP = 28;

function useNarrow(): boolean {
  const [narrow, setNarrow] = useState(() => window.matchMedia?.(NARROW_QUERY).matches ?? false);
  useEffect(() => {
    const media = window.matchMedia?.(NARROW_QUERY);
    if (!media) return;
    const onChange = (): void => setNarrow(media.matches);
    media.addEventListener('change', onChange);
    return () => media.removeEventListener('change', onChange);
  }, []);
  return narrow;
}

export interface Usage {
  memory: number | null;
  cpu: number | null;
  gpu: number | null;
  text: { memory: string; cpu: string; gpu: string };
}

export function usageOf(resources: NodeResources | undefined): Usage {
  if (!resources) return { memory: null, cpu: null, gpu: null, text: { memory: 'not reported', cpu: 'not reported', gpu: 'not reported' } };
  const { memory, cpu, gpus } = resources;
  // Readings older than a few telemetry beats (2 s each) are shown with their age.
  const age = resources.ageMs > 10_000 ? ` (${Math.round(resources.ageMs / 1000)} s old)` : '';
  const usedMemory = memory.totalBytes - memory.availableBytes;
  // Per device: VRAM (system RAM on unified-memory machines), as the node last sampled it.
  const gpuTotal = gpus.reduce((s, g) => s + g.vramTotalBytes, 0);
  const gpuUsed = gpus.reduce((s, g) => s + Math.max(0, g.vramTotalBytes - g.vramFreeBytes), 0);
  return {
    memory: memory.totalBytes > 0 ? usedMemory / memory.totalBytes : null,
    cpu: cpu.loadPct / 100,
    gpu: gpuTotal > 0 ? gpuUsed / gpuTotal : null,
    text: {
      memory: `${formatBytes(usedMemory)} of ${formatBytes(memory.totalBytes)}${age}`,
      cpu: `${Math.round(cpu.loadPct)}% of ${cpu.cores} cores${age}`,
      gpu: gpus.length === 0 ? 'no GPU' : `${formatBytes(gpuUsed)} of ${formatBytes(gpuTotal)} VRAM (${gpus.map((g) => `${g.name}, ${g.compute}${g.unifiedMemory ? ', unified' : ''}`).join('; ')})${age}`,
    },
  };
}

function graphNodes(state: StateView): GraphNode[] {
  const members: GraphNode[] =
    state.members.length > 0
      ? state.members.map((m) => ({ nodeId: m.nodeId, name: m.nickname ?? m.name, isSelf: m.isSelf, isMaster: m.isMaster, health: m.health, member: true, fingerprint: m.fingerprint }))
      : [{ nodeId: state.nodeId, name: state.name, isSelf: true, isMaster: false, health: state.health, member: true, fingerprint: state.fingerprint }];
  // This node first, so it sits at the top of the circle.
  members.sort((a, b) => Number(b.isSelf) - Number(a.isSelf));
  return members;
}

/** Pairs of node ids joined by a line: the links the node reports between the nodes drawn. */
function edges(state: StateView, nodes: GraphNode[]): [string, string][] {
  const ids = new Set(nodes.map((n) => n.nodeId));
  return state.links.filter((link) => ids.has(link.from) && ids.has(link.to)).map((link) => [link.from, link.to]);
}

function Bar({ x, y, label, fraction, text }: { x: number; y: number; label: string; fraction: number | null; text: string }): ReactNode {
  const width = BOX_W - 80;
  const f = fraction === null ? 0 : Math.max(0, Math.min(1, fraction));
  const tone = f > 0.9 ? 'bad' : f > 0.75 ? 'warn' : 'ok';
  return (
    <g transform={`translate(${x},${y})`}>
      <title>{`${label}: ${text}`}</title>
      <text className="topo-small" x={0} y={7}>
        {label}
      </text>
      <rect className="topo-track" x={30} y={0} width={width} height={8} rx={3} />
      {fraction !== null && <rect className={`topo-fill tone-${tone}`} x={30} y={0} width={width * f} height={8} rx={3} />}
      <text className="topo-small" x={width + 33} y={7}>
        {fraction === null ? '–' : formatPercent(fraction)}
      </text>
    </g>
  );
}

interface Layout {
  width: number;
  height: number;
  positions: { x: number; y: number }[];
  /** Where the row (or, narrow, the column) of nodes seen on the network starts. */
  ghostsY: number;
  ghostsH: number;
}

function wideLayout(n: number, ghosts: number): Layout {
  const width = n <= 2 ? 520 : 640;
  const height = n <= 2 ? 150 : n <= 4 ? 400 : 480;
  const margin = BOX_H / 2 + 16;
  const positions = n === 2 ? [{ x: 120, y: height / 2 }, { x: width - 120, y: height / 2 }] : circleLayout(n, width, height, margin);
  return { width, height: height + (ghosts > 0 ? 80 : 0), positions, ghostsY: height + 14, ghostsH: 52 };
}

function columnLayout(n: number, ghosts: number): Layout {
  // Room on the right for the arcs that join boxes that are not next to each other.
  const width = BOX_W + 48;
  const step = BOX_H + COLUMN_GAP;
  const positions = Array.from({ length: n }, (_, i) => ({ x: BOX_W / 2 + 8, y: 8 + BOX_H / 2 + i * step }));
  const nodesH = 16 + n * BOX_H + (n - 1) * COLUMN_GAP;
  return { width, height: nodesH + ghosts * 62, positions, ghostsY: nodesH + 6, ghostsH: 52 };
}

/** A straight line between neighbours; in the column, an arc to the right around the boxes between. */
function edgePath(a: { x: number; y: number }, b: { x: number; y: number }, column: boolean): string {
  if (!column || Math.abs(a.y - b.y) <= BOX_H + COLUMN_GAP) return `M${a.x},${a.y} L${b.x},${b.y}`;
  const side = BOX_W / 2 + 8 + Math.min(32, Math.abs(a.y - b.y) / 12);
  return `M${a.x + BOX_W / 2},${a.y} C${a.x + side},${a.y} ${b.x + side},${b.y} ${b.x + BOX_W / 2},${b.y}`;
}

export function Topology({ state }: { state: StateView }): ReactNode {
  const narrow = useNarrow();
  const nodes = graphNodes(state);
  const ghosts = state.discovered;
  const n = nodes.length;
  const layout = narrow ? columnLayout(n, ghosts.length) : wideLayout(n, ghosts.length);
  const { width } = layout;
  const at = new Map(nodes.map((node, i) => [node.nodeId, layout.positions[i]!]));
  const health = new Map(nodes.map((node) => [node.nodeId, node.health.level]));

  return (
    <svg
      className="topology"
      style={{ maxWidth: width * 1.25 }}
      viewBox={`0 0 ${width} ${layout.height}`}
      role="img"
      aria-label={`Cluster topology: ${n} member${n === 1 ? '' : 's'}`}
      data-members={state.members.length}
      data-layout={narrow ? 'column' : 'circle'}
    >
      {edges(state, nodes).map(([a, b]) => {
        const down = [a, b].some((id) => health.get(id) === 'suspect' || health.get(id) === 'pruned');
        return <path key={`${a}-${b}`} className={down ? 'topo-edge down' : 'topo-edge'} d={edgePath(at.get(a)!, at.get(b)!, narrow)} data-edge={`${a} ${b}`} />;
      })}
      {nodes.map((node) => {
        const p = at.get(node.nodeId)!;
        const usage = usageOf(state.resources[node.nodeId]);
        const title = `${node.name}\nFingerprint ${node.fingerprint}\n${HEALTH_WORDS[node.health.level] ?? node.health.level}${node.health.reasons.length ? `\n\n${healthTitle(node.health)}` : ''}`;
        return (
          <g key={node.nodeId} transform={`translate(${p.x - BOX_W / 2},${p.y - BOX_H / 2})`} className={`topo-node health-${node.health.level}`} data-member={node.nodeId} data-self={node.isSelf || undefined} data-master={node.isMaster || undefined}>
            <title>{title}</title>
            <rect className="topo-box" width={BOX_W} height={BOX_H} rx={10} />
            <circle className={`topo-dot health-${node.health.level}`} cx={14} cy={16} r={6} />
            <text className="topo-name" x={26} y={21}>
              {node.name.length > 16 ? `${node.name.slice(0, 15)}…` : node.name}
            </text>
            <text className="topo-tags" x={12} y={40}>
              {[node.isSelf ? 'This node' : null, node.isMaster ? '★ Master' : null].filter(Boolean).join(' · ') || 'Member'}
            </text>
            <Bar x={12} y={52} label="MEM" fraction={usage.memory} text={usage.text.memory} />
            <Bar x={12} y={68} label="CPU" fraction={usage.cpu} text={usage.text.cpu} />
            <Bar x={12} y={84} label="GPU" fraction={usage.gpu} text={usage.text.gpu} />
            <SvgReasonBadges health={node.health} x={12} y={99} width={BOX_W - 24} />
          </g>
        );
      })}
      {ghosts.map((ghost, i) => {
        const w = narrow ? BOX_W : Math.min(150, (width - 20) / Math.max(1, ghosts.length) - 10);
        const x = narrow ? 8 : 10 + i * (w + 10);
        const y = narrow ? layout.ghostsY + i * 62 : layout.ghostsY;
        return (
          <g key={ghost.nodeId} transform={`translate(${x},${y})`} className="topo-ghost" data-discovered={ghost.nodeId}>
            <title>{`${ghost.name} is on this network but not in the cluster.\nFingerprint ${ghost.fingerprint}`}</title>
            <rect width={w} height={layout.ghostsH} rx={10} />
            <text className="topo-name" x={10} y={22}>
              {ghost.name.length > 14 ? `${ghost.name.slice(0, 13)}…` : ghost.name}
            </text>
            <text className="topo-small" x={10} y={40}>
              on the network
            </text>
          </g>
        );
      })}
    </svg>
  );
}
