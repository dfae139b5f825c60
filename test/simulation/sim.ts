// A whole cluster of NodeCores in one process: an in-memory network with seeded faults, durable stores that
// survive crashes, a fake clock in 100 ms ticks, random client commands, and invariant checks. Everything
// random comes from one seed, so a failing run replays exactly.
import { DEFAULT_CORE_CONFIG, type CoreConfig } from '../../src/master/core/config.js';
import type { Effect } from '../../src/master/core/effects.js';
import { ReplicatedLog } from '../../src/master/core/log.js';
import { MAX_MESSAGE_BYTES, MESSAGE_SCHEMA, PLANE_OF_MESSAGE, type CoreMessage } from '../../src/master/core/messages.js';
import { NodeCore } from '../../src/master/core/node-core.js';
import type { Command, CommandResult } from '../../src/master/state/commands.js';
import type { MemberInfo } from '../../src/master/state/events.js';
import { GENESIS_HASH, recordHash, stateHash } from '../../src/master/state/hash.js';
import { clusterIdFrom, type CommandId, type Fingerprint, type NodeId } from '../../src/common/ids.js';
import type { LogRecord, Snapshot } from '../../src/master/state/record.js';

// ---------------------------------------------------------------- PRNG

/** mulberry32: tiny, fast, good enough for fault schedules; seeded through splitmix so nearby seeds differ. */
export class Prng {
  private state: number;
  constructor(seed: number) {
    let z = (seed + 0x9e3779b9) | 0;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    this.state = (z ^ (z >>> 16)) >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  between(lo: number, hi: number): number {
    return lo + this.next() * (hi - lo);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from nothing');
    return items[this.int(items.length)]!;
  }
  fork(): Prng {
    return new Prng(Math.floor(this.next() * 2 ** 31));
  }
}

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function fakeMember(rng: Prng, name: string): MemberInfo {
  let id = '12D3KooW';
  for (let i = 0; i < 44; i++) id += BASE58[rng.int(BASE58.length)];
  const groups: string[] = [];
  for (let g = 0; g < 4; g++) {
    let group = '';
    for (let i = 0; i < 4; i++) group += CROCKFORD[rng.int(CROCKFORD.length)];
    groups.push(group);
  }
  return { nodeId: id as NodeId, name, fingerprint: groups.join('-') as Fingerprint, addrs: [`/ip4/10.0.0.${rng.int(250) + 1}/tcp/52601`] };
}

// ---------------------------------------------------------------- durable store

export class InvariantError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvariantError';
  }
}

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new InvariantError(message);
}

/** What survives a crash: exactly what persistTerm/append/truncate/snapshot/installSnapshot/reset made durable. */
export class DurableStore {
  term = 0;
  snapshot: Snapshot | null = null;
  records: LogRecord[] = [];

  get baseIdx(): number {
    return this.snapshot?.idx ?? 0;
  }
  get lastIdx(): number {
    return this.records.length > 0 ? this.records[this.records.length - 1]!.idx : this.baseIdx;
  }
  get lastHash(): string {
    return this.records.length > 0 ? this.records[this.records.length - 1]!.hash : (this.snapshot?.hash ?? GENESIS_HASH);
  }

  apply(effect: Effect, who: string): void {
    switch (effect.type) {
      case 'persistTerm':
        check(effect.term > this.term, `${who}: persisted term ${effect.term} does not advance ${this.term}`);
        this.term = effect.term;
        return;
      case 'append': {
        let idx = this.lastIdx;
        for (const record of effect.records) {
          check(record.idx === idx + 1, `${who}: appended idx ${record.idx} after ${idx} (gap or reorder)`);
          check(record.term <= this.term, `${who}: appended a record of term ${record.term} with only term ${this.term} persisted`);
          idx = record.idx;
        }
        this.records.push(...effect.records);
        return;
      }
      case 'truncate':
        check(effect.afterIdx >= this.baseIdx, `${who}: truncate to ${effect.afterIdx} below its snapshot at ${this.baseIdx}`);
        check(effect.afterIdx < this.lastIdx, `${who}: truncate to ${effect.afterIdx} removes nothing (last ${this.lastIdx})`);
        this.records = this.records.filter((record) => record.idx <= effect.afterIdx);
        return;
      case 'snapshot': {
        const snapshot = effect.snapshot;
        check(snapshot.idx > this.baseIdx && snapshot.idx <= this.lastIdx, `${who}: checkpoint at ${snapshot.idx} outside (${this.baseIdx}, ${this.lastIdx}]`);
        const at = this.records.find((record) => record.idx === snapshot.idx);
        check(at !== undefined && at.hash === snapshot.hash, `${who}: checkpoint hash differs from the record at ${snapshot.idx}`);
        this.snapshot = snapshot;
        // The sim compacts eagerly so restarts exercise snapshot + tail.
        this.records = this.records.filter((record) => record.idx > snapshot.idx);
        return;
      }
      case 'installSnapshot':
        this.snapshot = effect.snapshot;
        this.records = [];
        return;
      case 'reset':
        this.term = 0;
        this.snapshot = null;
        this.records = [];
        return;
      default:
        return;
    }
  }

  copy(): { term: number; snapshot: Snapshot | null; records: LogRecord[] } {
    return structuredClone({ term: this.term, snapshot: this.snapshot, records: this.records });
  }
}

// ---------------------------------------------------------------- simulation

export interface SimOptions {
  nodes: number;
  bootstrapMs: number;
  chaosMs: number;
  quietMs: number;
  tickMs: number;
  /** Multiplies every fault probability (stress runs). */
  faultScale: number;
  /** Validate every message against its zod schema (slower; byte limits are always checked). */
  validateSchemas: boolean;
  config: Partial<CoreConfig>;
}

export const DEFAULT_SIM_OPTIONS: SimOptions = {
  nodes: 5,
  bootstrapMs: 5_000,
  chaosMs: 40_000,
  quietMs: 60_000,
  tickMs: 100,
  faultScale: 1,
  validateSchemas: true,
  // Small pages and frequent checkpoints so short runs cross every path (paging, snapshots, compaction).
  config: { syncPageRecords: 6, syncSnapshotLagRecords: 40, snapshotEveryRecords: 12, retainRecords: 6 },
};

interface SimNode {
  index: number;
  name: string;
  info: MemberInfo;
  core: NodeCore | null;
  store: DurableStore;
  clockOffset: number;
  incarnation: number;
  /** What this incarnation's core was last told about each peer's connection. */
  told: Map<number, boolean>;
  random: Prng;
}

type QueueItem =
  | { kind: 'deliver'; at: number; seq: number; from: number; to: number; wire: string; plane: 'control' | 'telemetry' | 'sync' }
  | { kind: 'link'; at: number; seq: number; a: number; b: number }
  | { kind: 'restart'; at: number; seq: number; node: number }
  | { kind: 'heal'; at: number; seq: number; partitionId: number };

/** Binary min-heap on (at, seq). */
class Queue {
  private heap: QueueItem[] = [];
  get size(): number {
    return this.heap.length;
  }
  peek(): QueueItem | undefined {
    return this.heap[0];
  }
  push(item: QueueItem): void {
    const heap = this.heap;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!Queue.less(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }
  pop(): QueueItem | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last !== undefined) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && Queue.less(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && Queue.less(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return top;
  }
  private static less(a: QueueItem, b: QueueItem): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }
}

interface Submission {
  commandId: CommandId;
  node: number;
  incarnation: number;
  atMs: number;
  command: Command;
}

export interface SimReport {
  seed: number;
  finalIdx: number;
  masterTerm: number;
  submitted: number;
  acked: number;
  decidedAcks: number;
  elections: number;
  truncations: number;
  reproposed: number;
  crashes: number;
  partitions: number;
  deliveries: number;
}

export class SimFailure extends Error {
  constructor(
    readonly seed: number,
    readonly reason: string,
    readonly trace: string[],
  ) {
    super(`seed ${seed}: ${reason}\nreplay with SHOAL_SIM_SEED=${seed}\n--- trace tail ---\n${trace.join('\n')}`);
    this.name = 'SimFailure';
  }
}

/** Trace lines printed with a failure; SHOAL_SIM_TRACE=<n> keeps more. */
const TRACE_LINES = Number(process.env.SHOAL_SIM_TRACE ?? '300');

export class Simulation {
  readonly opts: SimOptions;
  private readonly rng: Prng;
  private clock = 0;
  private seq = 0;
  private readonly queue = new Queue();
  private readonly nodes: SimNode[] = [];
  private readonly fakes: MemberInfo[] = [];
  private readonly unknownId: NodeId;
  /** Partition group per node; equal groups can talk. */
  private readonly group: number[];
  private partitionId = 0;
  private faults = { on: false, dropP: 0, dupP: 0, slowP: 0, midCrashP: 0, corruptP: 0 };
  private readonly trace: string[] = [];
  private readonly submissions: Submission[] = [];
  private readonly acks = new Map<string, CommandResult>();
  /** Every record any node ever appended, by idx then hash (to rebuild the converged chain). */
  private readonly recordsByIdx = new Map<number, Map<string, LogRecord>>();
  /** (term, idx) → hash: two different records at one (term, idx) break log matching. */
  private readonly recordAt = new Map<string, string>();
  /** term → the node that was master in it. */
  private readonly masterOfTerm = new Map<number, string>();
  private stats = { crashes: 0, partitions: 0, deliveries: 0 };

  constructor(
    readonly seed: number,
    options: Partial<SimOptions> = {},
  ) {
    this.opts = { ...DEFAULT_SIM_OPTIONS, ...options, config: { ...DEFAULT_SIM_OPTIONS.config, ...options.config } };
    this.rng = new Prng(seed);
    for (let i = 0; i < this.opts.nodes; i++) {
      const random = this.rng.fork();
      this.nodes.push({
        index: i,
        name: `n${i}`,
        info: fakeMember(random, `node-${i}`),
        core: null,
        store: new DurableStore(),
        clockOffset: 0,
        incarnation: 0,
        told: new Map(),
        random,
      });
    }
    for (let i = 0; i < 4; i++) this.fakes.push(fakeMember(this.rng, `fake-${i}`));
    this.unknownId = fakeMember(this.rng, 'stranger').nodeId;
    this.group = this.nodes.map(() => 0);
  }

  // ------------------------------------------------------------ driver

  run(): SimReport {
    try {
      for (const node of this.nodes) this.start(node);
      this.bootstrap();
      this.runFor(this.opts.bootstrapMs, () => undefined);
      for (const node of this.nodes) {
        const status = node.core!.status();
        check(status.role !== 'standalone', `${node.name} did not join during the fault-free bootstrap`);
      }
      const scale = this.opts.faultScale;
      const dropP = Math.min(0.9, scale * this.rng.between(0, 0.12));
      this.faults = {
        on: true,
        dropP,
        dupP: Math.min(0.9, scale * this.rng.between(0, 0.06)),
        slowP: Math.min(0.9, scale * this.rng.between(0, 0.12)),
        midCrashP: scale * this.rng.between(0, 0.004),
        corruptP: this.rng.chance(0.3) ? scale * this.rng.between(0, 0.01) : 0,
      };
      this.note(-1, `faults on: drop ${dropP.toFixed(3)} dup ${this.faults.dupP.toFixed(3)} slow ${this.faults.slowP.toFixed(3)}`);
      this.runFor(this.opts.chaosMs, () => this.chaosStep());
      this.calm();
      this.runFor(this.opts.quietMs, () => undefined);
      return this.finalChecks();
    } catch (error) {
      if (error instanceof SimFailure) throw error;
      // A broken invariant says all there is to say; anything else is a crash whose stack matters.
      const reason = error instanceof InvariantError ? `invariant: ${error.message}` : error instanceof Error ? (error.stack ?? error.message) : String(error);
      throw new SimFailure(this.seed, reason, this.trace.slice(-TRACE_LINES));
    }
  }

  private bootstrap(): void {
    const founder = this.nodes[0]!;
    this.submit(founder, { type: 'FoundCluster', clusterId: clusterIdFrom(() => this.rng.next()), founder: founder.info });
    for (const node of this.nodes.slice(1)) this.submit(founder, { type: 'AdmitMember', member: node.info });
  }

  private runFor(durationMs: number, step: () => void): void {
    const end = this.clock + durationMs;
    while (this.clock < end) {
      const tickAt = this.clock + this.opts.tickMs;
      for (let item = this.queue.peek(); item !== undefined && item.at <= tickAt; item = this.queue.peek()) {
        this.queue.pop();
        this.clock = Math.max(this.clock, item.at);
        this.handle(item);
      }
      this.clock = tickAt;
      step();
      for (const node of this.nodes) {
        if (node.core !== null) this.execute(node, node.core.tick());
      }
    }
  }

  private chaosStep(): void {
    const rng = this.rng;
    if (rng.chance(0.12)) this.randomCommand();
    const anyPartition = this.group.some((g) => g !== 0);
    const scale = this.opts.faultScale;
    if (!anyPartition && rng.chance(0.012 * scale)) this.partition();
    if (rng.chance(0.008 * scale)) {
      const up = this.nodes.filter((node) => node.core !== null);
      if (up.length > 0) {
        const node = rng.pick(up);
        this.crash(node, 'scheduled crash');
        const downMs = rng.chance(0.15) ? rng.between(31_000, 40_000) : rng.between(300, 12_000);
        this.schedule({ kind: 'restart', at: this.clock + downMs, seq: 0, node: node.index });
      }
    }
  }

  /** Heal everything, restart everyone, stop faults: the cluster must converge on its own from here. */
  private calm(): void {
    this.faults = { on: false, dropP: 0, dupP: 0, slowP: 0, midCrashP: 0, corruptP: 0 };
    this.note(-1, 'calm: faults off, partitions healed, crashed nodes restarted');
    for (let i = 0; i < this.group.length; i++) this.group[i] = 0;
    for (const node of this.nodes) if (node.core === null) this.start(node);
    this.relinkAll(100);
  }

  // ------------------------------------------------------------ nodes

  private start(node: SimNode): void {
    node.incarnation++;
    // A new process starts its monotonic clock anywhere: nothing may compare clocks across nodes.
    node.clockOffset = Math.floor(node.random.next() * 1e9);
    node.told = new Map();
    const persisted = node.store.copy();
    node.core = new NodeCore({
      self: node.info,
      clock: { nowMs: () => this.clock + node.clockOffset },
      random: () => node.random.next(),
      config: this.opts.config,
      persisted,
    });
    this.note(node.index, `start #${node.incarnation} (term ${persisted.term}, log ${persisted.snapshot?.idx ?? 0}+${persisted.records.length})`);
    for (const other of this.nodes) if (other !== node) this.scheduleLink(node.index, other.index, this.rng.between(50, 400));
  }

  private crash(node: SimNode, why: string): void {
    if (node.core === null) return;
    node.core = null;
    this.stats.crashes++;
    this.note(node.index, `CRASH (${why})`);
    for (const other of this.nodes) if (other !== node) this.scheduleLink(other.index, node.index, 5);
  }

  private partition(): void {
    const count = this.nodes.length;
    const groups = this.rng.chance(0.25) ? 3 : 2;
    const side = this.nodes.map(() => this.rng.int(groups));
    if (side.every((s) => s === side[0])) side[this.rng.int(count)] = (side[0]! + 1) % groups;
    this.partitionId++;
    for (let i = 0; i < count; i++) this.group[i] = side[i]! + 1;
    this.stats.partitions++;
    const durationMs = this.rng.chance(0.15) ? this.rng.between(31_000, 38_000) : this.rng.between(1_000, 20_000);
    this.note(-1, `PARTITION #${this.partitionId} ${side.map((s, i) => `n${i}:${s}`).join(' ')} for ${Math.round(durationMs)} ms`);
    this.schedule({ kind: 'heal', at: this.clock + durationMs, seq: 0, partitionId: this.partitionId });
    this.relinkAll(1_700);
  }

  private relinkAll(delayMs: number): void {
    for (const a of this.nodes) for (const b of this.nodes) if (a !== b) this.scheduleLink(a.index, b.index, delayMs * this.rng.between(0.5, 1.5));
  }

  private connected(a: number, b: number): boolean {
    return this.nodes[a]!.core !== null && this.nodes[b]!.core !== null && this.group[a] === this.group[b];
  }

  private scheduleLink(a: number, b: number, delayMs: number): void {
    this.schedule({ kind: 'link', at: this.clock + delayMs, seq: 0, a, b });
  }

  private schedule(item: QueueItem): void {
    item.seq = this.seq++;
    this.queue.push(item);
  }

  // ------------------------------------------------------------ network

  private handle(item: QueueItem): void {
    switch (item.kind) {
      case 'deliver': {
        const to = this.nodes[item.to]!;
        if (to.core === null || this.group[item.from] !== this.group[item.to]) return;
        const message = JSON.parse(item.wire) as CoreMessage;
        if (this.faults.on && this.faults.corruptP > 0 && this.rng.chance(this.faults.corruptP)) this.corrupt(message);
        this.stats.deliveries++;
        this.execute(to, to.core.receive(this.nodes[item.from]!.info.nodeId, message));
        return;
      }
      case 'link': {
        const node = this.nodes[item.a]!;
        if (node.core === null) return;
        const up = this.connected(item.a, item.b);
        if ((node.told.get(item.b) ?? false) === up) return;
        node.told.set(item.b, up);
        const peer = this.nodes[item.b]!.info.nodeId;
        this.execute(node, up ? node.core.peerUp(peer) : node.core.peerDown(peer));
        return;
      }
      case 'restart': {
        const node = this.nodes[item.node]!;
        if (node.core === null && this.faults.on) this.start(node);
        return;
      }
      case 'heal':
        if (item.partitionId !== this.partitionId) return;
        for (let i = 0; i < this.group.length; i++) this.group[i] = 0;
        this.note(-1, `HEAL #${item.partitionId}`);
        this.relinkAll(300);
        return;
    }
  }

  /**
   * Damage that passes the schema (which the router would catch otherwise): a changed event field or hash.
   * The chain check must refuse it.
   */
  private corrupt(message: CoreMessage): void {
    const records = message.type === 'event' || message.type === 'sync-page' ? message.records : [];
    const record = records.length > 0 ? records[this.rng.int(records.length)]! : undefined;
    if (record === undefined) return;
    if (record.event.type === 'NicknameSet' && record.event.nickname !== null) record.event.nickname = `${record.event.nickname}!`;
    else record.hash = record.hash.slice(1) + (record.hash[0] === '0' ? '1' : '0');
    this.note(-1, `corrupted a record at ${record.idx} in a ${message.type}`);
  }

  private transmit(from: number, to: number, wire: string, plane: 'control' | 'telemetry' | 'sync'): void {
    if (this.nodes[to]!.core === null || this.group[from] !== this.group[to]) return;
    const copies = this.faults.on && this.rng.chance(this.faults.dupP) ? 2 : 1;
    for (let c = 0; c < copies; c++) {
      if (this.faults.on && this.rng.chance(this.faults.dropP)) continue;
      let delayMs = this.rng.between(1, 15);
      if (this.faults.on && this.rng.chance(this.faults.slowP)) delayMs += this.rng.between(50, 1_500);
      this.schedule({ kind: 'deliver', at: this.clock + delayMs, seq: 0, from, to, wire, plane });
    }
  }

  private encode(node: SimNode, message: CoreMessage, plane: 'control' | 'telemetry' | 'sync'): string {
    check(PLANE_OF_MESSAGE[message.type] === plane, `${node.name}: ${message.type} sent on the ${plane} plane`);
    const wire = JSON.stringify(message);
    const bytes = Buffer.byteLength(wire);
    check(bytes <= MAX_MESSAGE_BYTES[plane], `${node.name}: ${message.type} of ${bytes} bytes over the ${plane} limit`);
    if (this.opts.validateSchemas) {
      const parsed = MESSAGE_SCHEMA[plane].safeParse(JSON.parse(wire));
      check(parsed.success, `${node.name}: ${message.type} fails its schema: ${parsed.success ? '' : parsed.error.message}`);
    }
    // Term persisted before any message of that term goes out.
    check('term' in message, `${node.name}: the core sent ${message.type}, a reading only the shell publishes`);
    const term = 'term' in message ? message.term : 0;
    check(term <= node.store.term, `${node.name}: sent ${message.type} of term ${term} with term ${node.store.term} persisted`);
    return wire;
  }

  // ------------------------------------------------------------ effects

  private execute(node: SimNode, effects: Effect[]): void {
    // A crash in the middle of a call: the effects before it happened, the rest never did.
    let crashAt = -1;
    if (this.faults.on && effects.length > 0 && this.rng.chance(this.faults.midCrashP)) crashAt = this.rng.int(effects.length);
    for (let i = 0; i < effects.length; i++) {
      if (i === crashAt) {
        this.crash(node, `mid-call before ${effects[i]!.type}`);
        this.schedule({ kind: 'restart', at: this.clock + this.rng.between(300, 5_000), seq: 0, node: node.index });
        return;
      }
      this.effect(node, effects[i]!);
    }
  }

  private effect(node: SimNode, effect: Effect): void {
    switch (effect.type) {
      case 'persistTerm':
        node.store.apply(effect, node.name);
        this.note(node.index, `term ${effect.term}`);
        return;
      case 'append':
        node.store.apply(effect, node.name);
        for (const record of effect.records) this.register(node, record);
        this.note(node.index, `append ${effect.records[0]!.idx}..${effect.records[effect.records.length - 1]!.idx} (${effect.records.map((r) => r.event.type).join(',')})`);
        return;
      case 'truncate':
        this.note(node.index, `TRUNCATE after ${effect.afterIdx} (had ${node.store.lastIdx})`);
        node.store.apply(effect, node.name);
        return;
      case 'snapshot':
        node.store.apply(effect, node.name);
        return;
      case 'installSnapshot':
        this.note(node.index, `install snapshot at ${effect.snapshot.idx} (had ${node.store.lastIdx})`);
        node.store.apply(effect, node.name);
        return;
      case 'reset':
        this.note(node.index, 'RESET');
        node.store.apply(effect, node.name);
        return;
      case 'publish': {
        const wire = this.encode(node, effect.message, effect.plane);
        if (effect.message.type !== 'heartbeat' && effect.message.type !== 'command' && effect.message.type !== 'event') {
          this.note(node.index, `publish ${effect.message.type} t${'term' in effect.message ? effect.message.term : '-'}${'to' in effect.message ? ` → ${this.nameOf(effect.message.to)}` : ''}`);
        }
        for (const other of this.nodes) if (other !== node) this.transmit(node.index, other.index, wire, effect.plane);
        return;
      }
      case 'send': {
        const to = this.nodes.findIndex((n) => n.info.nodeId === effect.to);
        const wire = this.encode(node, effect.message, 'sync');
        if (to >= 0) this.transmit(node.index, to, wire, 'sync');
        return;
      }
      case 'ack': {
        const key = effect.commandId;
        check(!this.acks.has(key), `${node.name}: second ack for command ${key}`);
        this.acks.set(key, effect.result);
        this.note(node.index, `ack ${key.slice(0, 8)} ${effect.result.ok ? `ok@${effect.result.idx}` : `${effect.result.code}${effect.result.idx !== undefined ? `@${effect.result.idx}` : ''}`}`);
        return;
      }
      case 'stateChanged':
        this.checkMasters(node);
        return;
    }
  }

  private register(node: SimNode, record: LogRecord): void {
    const key = `${record.term}:${record.idx}`;
    const known = this.recordAt.get(key);
    check(known === undefined || known === record.hash, `${node.name}: two different records at term ${record.term} idx ${record.idx}`);
    this.recordAt.set(key, record.hash);
    let atIdx = this.recordsByIdx.get(record.idx);
    if (atIdx === undefined) this.recordsByIdx.set(record.idx, (atIdx = new Map()));
    atIdx.set(record.hash, record);
    if (record.event.type === 'TermStarted') {
      check(record.event.term === record.term, `${node.name}: TermStarted for ${record.event.term} in a record of term ${record.term}`);
    }
  }

  /** At most one master per term, ever. */
  private checkMasters(node: SimNode): void {
    const status = node.core?.status();
    if (status?.role !== 'master') return;
    const holder = this.masterOfTerm.get(status.term);
    if (holder !== undefined && holder !== node.info.nodeId) throw new InvariantError(`term ${status.term} has two masters: ${this.nameOf(holder)} and ${node.name}`);
    this.masterOfTerm.set(status.term, node.info.nodeId);
  }

  // ------------------------------------------------------------ commands

  private submit(node: SimNode, command: Command): void {
    const core = node.core;
    if (core === null) return;
    const { commandId, effects } = core.submit(command);
    this.submissions.push({ commandId, node: node.index, incarnation: node.incarnation, atMs: this.clock, command });
    this.note(node.index, `submit ${commandId.slice(0, 8)} ${command.type}`);
    this.execute(node, effects);
  }

  private randomCommand(): void {
    const rng = this.rng;
    const up = this.nodes.filter((node) => node.core !== null && node.core.status().role !== 'standalone');
    if (up.length === 0) return;
    const node = rng.pick(up);
    const someone = (): NodeId => rng.pick([...this.nodes.map((n) => n.info.nodeId), ...this.fakes.map((f) => f.nodeId)]);
    const roll = rng.next();
    let command: Command;
    if (roll < 0.3) {
      const long = rng.chance(0.1);
      const nickname = rng.chance(0.1) ? null : `nick-${rng.int(1000)}${long ? 'x'.repeat(70) : ''}`;
      command = { type: 'SetNickname', nodeId: someone(), nickname };
    } else if (roll < 0.5) {
      command = { type: 'SetHostPreference', nodeId: rng.pick(this.nodes).info.nodeId, preferred: rng.chance(0.4) };
    } else if (roll < 0.7) {
      command = { type: 'AdmitMember', member: rng.pick(this.fakes) };
    } else if (roll < 0.85) {
      command = { type: 'RemoveMember', nodeId: rng.pick(this.fakes).nodeId };
    } else if (roll < 0.9) {
      command = { type: 'FoundCluster', clusterId: clusterIdFrom(() => rng.next()), founder: node.info };
    } else if (roll < 0.95) {
      const other = rng.pick(this.nodes.filter((n) => n !== node));
      command = { type: 'LeaveCluster', nodeId: other.info.nodeId };
    } else {
      command = { type: 'SetNickname', nodeId: this.unknownId, nickname: 'ghost' };
    }
    this.submit(node, command);
  }

  // ------------------------------------------------------------ final checks

  private finalChecks(): SimReport {
    const cores = this.nodes.map((node) => {
      check(node.core !== null, `${node.name} is down at the end`);
      return node.core;
    });
    const views = cores.map((core) => core.view());
    const masters = views.map((view, i) => ({ view, i })).filter(({ view }) => view.role === 'master');
    check(masters.length === 1, `expected exactly one master after the calm period, found ${masters.length}: ${views.map((v, i) => `n${i}:${v.role}/t${v.term}`).join(' ')}`);
    const master = masters[0]!;
    const masterNode = this.nodes[master.i]!;
    for (const [i, view] of views.entries()) {
      const node = this.nodes[i]!;
      if (i !== master.i) {
        check(view.role === 'follower' && view.masterId === masterNode.info.nodeId, `${node.name} is ${view.role} of ${view.masterId === null ? 'nobody' : this.nameOf(view.masterId)}, not a follower of ${masterNode.name}`);
        check(view.term === master.view.term, `${node.name} is at term ${view.term}, the master at ${master.view.term}`);
      }
      check(view.stateHash === master.view.stateHash, `${node.name} state hash differs from the master's`);
      check(view.lastIdx === master.view.lastIdx && view.lastHash === master.view.lastHash, `${node.name} log ends at ${view.lastIdx}, the master's at ${master.view.lastIdx} (or hashes differ)`);
      check(node.store.lastIdx === view.lastIdx && node.store.lastHash === view.lastHash, `${node.name}: durable log differs from the core's`);
      check(node.store.term === view.term, `${node.name}: durable term ${node.store.term} differs from the core's ${view.term}`);
      const replayed = new ReplicatedLog(node.store.snapshot, node.store.records);
      check(stateHash(replayed.state) === view.stateHash, `${node.name}: replaying the durable log gives another state`);
      check(!view.syncing && view.pendingCommands === 0, `${node.name} still syncing or has pending commands`);
    }
    check(masterNode.info.nodeId === this.expectedMaster(master.view.state), `master ${masterNode.name} is not the top-ranked node`);

    // The converged chain, rebuilt from every record ever appended anywhere.
    const chain = this.rebuildChain(master.view.lastIdx, master.view.lastHash);
    const seen = new Map<string, number>();
    for (const record of chain) if (record.origin !== null) seen.set(record.origin.commandId, (seen.get(record.origin.commandId) ?? 0) + 1);
    for (const [commandId, count] of seen) check(count === 1, `command ${commandId} is in the converged log ${count} times`);
    let decidedAcks = 0;
    for (const [commandId, result] of this.acks) {
      const decided = result.ok || result.idx !== undefined;
      if (!decided) continue;
      decidedAcks++;
      check(seen.get(commandId) === 1, `acknowledged command ${commandId} (${JSON.stringify(result)}) is not in the converged log`);
    }
    for (const submission of this.submissions) {
      const node = this.nodes[submission.node]!;
      if (node.incarnation === submission.incarnation) {
        check(this.acks.has(submission.commandId), `${node.name} never answered command ${submission.commandId} (${submission.command.type}) though it never crashed`);
      }
    }
    const counters = views.map((view) => view.counters);
    return {
      seed: this.seed,
      finalIdx: master.view.lastIdx,
      masterTerm: master.view.term,
      submitted: this.submissions.length,
      acked: this.acks.size,
      decidedAcks,
      elections: counters.reduce((sum, c) => sum + c.claims, 0),
      truncations: counters.reduce((sum, c) => sum + c.truncations, 0),
      reproposed: counters.reduce((sum, c) => sum + c.reproposed, 0),
      crashes: this.stats.crashes,
      partitions: this.stats.partitions,
      deliveries: this.stats.deliveries,
    };
  }

  private expectedMaster(state: import('../../src/master/state/state.js').ClusterState): NodeId {
    const real = new Set(this.nodes.map((node) => node.info.nodeId as string));
    const ranked = Object.values(state.members)
      .filter((member) => real.has(member.nodeId))
      .sort((a, b) => (a.hostPreferred !== b.hostPreferred ? (a.hostPreferred ? -1 : 1) : a.admittedIdx !== b.admittedIdx ? a.admittedIdx - b.admittedIdx : a.nodeId < b.nodeId ? -1 : 1));
    return ranked[0]!.nodeId;
  }

  private rebuildChain(lastIdx: number, lastHash: string): LogRecord[] {
    const out: LogRecord[] = [];
    let record = this.recordsByIdx.get(lastIdx)?.get(lastHash);
    check(record !== undefined, `the final record ${lastIdx} was never appended by anyone`);
    for (;;) {
      out.push(record);
      if (record.idx === 1) {
        check(recordHash(GENESIS_HASH, record) === record.hash, 'the converged chain does not start at genesis');
        break;
      }
      const current: LogRecord = record;
      const candidates = [...(this.recordsByIdx.get(current.idx - 1)?.values() ?? [])];
      const previous = candidates.find((candidate) => recordHash(candidate.hash, current) === current.hash);
      check(previous !== undefined, `no predecessor of record ${current.idx} was ever appended`);
      record = previous;
    }
    return out.reverse();
  }

  // ------------------------------------------------------------ trace

  private nameOf(nodeId: string): string {
    const node = this.nodes.find((n) => n.info.nodeId === nodeId);
    if (node !== undefined) return node.name;
    const fake = this.fakes.findIndex((f) => f.nodeId === nodeId);
    return fake >= 0 ? `fake${fake}` : nodeId.slice(0, 12);
  }

  private note(node: number, text: string): void {
    const status = node >= 0 ? this.nodes[node]?.core?.status() : undefined;
    const who = node >= 0 ? `n${node}${status === undefined ? '(down)' : `[${status.role[0]}${status.term}@${status.lastIdx}]`}` : 'sim';
    this.trace.push(`${(this.clock / 1000).toFixed(3).padStart(8)}s ${who} ${text}`);
    if (this.trace.length > TRACE_LINES * 2) this.trace.splice(0, this.trace.length - TRACE_LINES);
  }
}

/** For tests that want defaults: the core's own config merged with the sim's small sizes. */
export function simConfig(): CoreConfig {
  return { ...DEFAULT_CORE_CONFIG, ...DEFAULT_SIM_OPTIONS.config };
}
