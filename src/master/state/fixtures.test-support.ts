// Deterministic members and logs for the state and core unit tests (not a test file itself).
import type { InstanceId, ModelId, ClusterId, CommandId, Fingerprint, NodeId } from '../../common/ids.js';
import type { InstanceSpec } from './instances.js';
import type { Command, Origin } from './commands.js';
import type { Event, MemberInfo } from './events.js';
import { GENESIS_HASH } from './hash.js';
import { makeRecord, type LogRecord } from './record.js';

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** node(0) < node(1) < ... in id order. */
export function nodeId(n: number): NodeId {
  const high = BASE58[Math.floor(n / BASE58.length) % BASE58.length]!;
  const low = BASE58[n % BASE58.length]!;
  return `12D3KooW${'A'.repeat(42)}${high}${low}` as NodeId;
}

export function member(n: number, name = `node-${n}`): MemberInfo {
  const digit = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'[n % 32]!;
  return { nodeId: nodeId(n), name, fingerprint: `${digit.repeat(4)}-AAAA-BBBB-CCCC` as Fingerprint, addrs: [`/ip4/10.0.0.${n + 1}/tcp/52601`] };
}

export const CLUSTER_ID = '0123456789abcdef0123456789abcdef' as ClusterId;

let counter = 0;
export function commandId(): CommandId {
  counter++;
  return `00000000-0000-4000-8000-${counter.toString(16).padStart(12, '0')}` as CommandId;
}

export function origin(from: number, command: Command): Origin {
  return { commandId: commandId(), from: nodeId(from), command };
}

/** A log builder: appends events with chained hashes. */
export class LogBuilder {
  readonly records: LogRecord[] = [];
  get lastHash(): string {
    return this.records.length > 0 ? this.records[this.records.length - 1]!.hash : GENESIS_HASH;
  }
  get lastIdx(): number {
    return this.records.length;
  }
  add(term: number, event: Event, from: Origin | null = null): LogRecord {
    const record = makeRecord(this.lastHash, term, this.lastIdx + 1, event, from);
    this.records.push(record);
    return record;
  }
  /** A copy (branches share the prefix). */
  fork(): LogBuilder {
    const copy = new LogBuilder();
    copy.records.push(...this.records);
    return copy;
  }
}

/** Founded by node 0 at term 1, nodes 1..n-1 admitted (in order). */
export function clusterLog(nodes: number): LogBuilder {
  const log = new LogBuilder();
  log.add(1, { type: 'ClusterFounded', clusterId: CLUSTER_ID, founder: member(0) }, origin(0, { type: 'FoundCluster', clusterId: CLUSTER_ID, founder: member(0) }));
  log.add(1, { type: 'TermStarted', term: 1, masterId: nodeId(0) });
  for (let n = 1; n < nodes; n++) log.add(1, { type: 'MemberAdmitted', member: member(n) }, origin(0, { type: 'AdmitMember', member: member(n) }));
  return log;
}

/** A valid instance spec over the given member numbers (pooled when more than one and `shape` says so). */
export function instanceSpec(id: string, nodes: number[], shape: InstanceSpec['shape'] = nodes.length > 1 ? 'replicas' : 'single'): InstanceSpec {
  return {
    instanceId: id as InstanceId,
    modelId: 'shoal/tiny' as ModelId,
    shape,
    placements: nodes.map((n, i) => ({
      nodeId: nodeId(n),
      role: shape === 'pooled' ? (i === nodes.length - 1 ? 'driver' : 'donor') : 'full',
      backend: shape === 'pooled' ? (i === nodes.length - 1 ? 'llama_server-cpu' : 'rpc-cpu') : 'llama_cpp-cpu',
      firstLayer: 0,
      layerCount: 2,
      holdsOutput: true,
      tensorSplit: shape === 'pooled' ? 1 : null,
      estimatedBytes: 1000,
    })),
    contextTokens: 512,
    parallel: 2,
    kvCacheType: 'f16',
    capabilities: ['chat', 'completion'],
    exclusions: [],
    replicas: shape === 'replicas' ? nodes.length : 1,
    minNodes: shape === 'pooled' ? nodes.length : 1,
    refusal: { hops: 0, fellBack: false },
    predictedDecodeTokPerS: 10,
    warnings: [],
    createdAtMs: 0,
  };
}
