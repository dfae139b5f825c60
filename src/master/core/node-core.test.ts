import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Command, CommandResult } from '../state/commands.js';
import { stateHash } from '../state/hash.js';
import type { CommandId, NodeId } from '../../common/ids.js';
import { makeRecord, type LogRecord, type Snapshot } from '../state/record.js';
import { CLUSTER_ID, clusterLog, member, nodeId } from '../state/fixtures.test-support.js';
import type { CoreConfig } from './config.js';
import type { Effect } from './effects.js';
import type { CoreMessage, EventMessage } from './messages.js';
import { NodeCore, type PersistedLog } from './node-core.js';

// A small deterministic network: FIFO delivery, a shared fake clock, durable stores, a drop filter.

interface Store {
  term: number;
  snapshot: Snapshot | null;
  records: LogRecord[];
}

interface Node {
  id: NodeId;
  core: NodeCore;
  store: Store;
  effects: Effect[];
  up: boolean;
}

class Net {
  now = 0;
  readonly nodes = new Map<NodeId, Node>();
  readonly acks = new Map<CommandId, CommandResult>();
  private queue: { from: NodeId; to: NodeId; message: CoreMessage }[] = [];
  /** Return false to drop a message. */
  link: (from: NodeId, to: NodeId, message: CoreMessage) => boolean = () => true;

  add(n: number, persisted: PersistedLog = { term: 0, snapshot: null, records: [] }, config: Partial<CoreConfig> = {}): Node {
    const id = nodeId(n);
    let seed = n + 1;
    const store: Store = structuredClone(persisted);
    const node: Node = {
      id,
      store,
      effects: [],
      up: true,
      core: new NodeCore({
        self: member(n),
        clock: { nowMs: () => this.now },
        random: () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31),
        config,
        persisted: structuredClone(persisted),
      }),
    };
    this.nodes.set(id, node);
    for (const other of this.nodes.values()) {
      if (other === node) continue;
      this.run(node, node.core.peerUp(other.id));
      this.run(other, other.core.peerUp(id));
    }
    return node;
  }

  /** A crash keeps only what the effects made durable. */
  restart(node: Node, config: Partial<CoreConfig> = {}): void {
    const n = [...this.nodes.keys()].indexOf(node.id);
    let seed = n + 101;
    node.core = new NodeCore({
      self: member(Number(n)),
      clock: { nowMs: () => this.now },
      random: () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31),
      config,
      persisted: structuredClone(node.store),
    });
    node.up = true;
  }

  node(n: number): Node {
    return this.nodes.get(nodeId(n))!;
  }

  run(node: Node, effects: Effect[]): void {
    for (const effect of effects) {
      node.effects.push(effect);
      const store = node.store;
      switch (effect.type) {
        case 'persistTerm':
          store.term = effect.term;
          break;
        case 'append':
          store.records.push(...effect.records);
          break;
        case 'truncate':
          store.records = store.records.filter((record) => record.idx <= effect.afterIdx);
          break;
        case 'snapshot':
          store.snapshot = effect.snapshot;
          store.records = store.records.filter((record) => record.idx > effect.snapshot.idx);
          break;
        case 'installSnapshot':
          store.snapshot = effect.snapshot;
          store.records = [];
          break;
        case 'reset':
          node.store = { term: 0, snapshot: null, records: [] };
          break;
        case 'publish':
          for (const other of this.nodes.values()) if (other !== node) this.queue.push({ from: node.id, to: other.id, message: structuredClone(effect.message) });
          break;
        case 'send':
          this.queue.push({ from: node.id, to: effect.to, message: structuredClone(effect.message) });
          break;
        case 'ack':
          assert.ok(!this.acks.has(effect.commandId), `second ack for ${effect.commandId}`);
          this.acks.set(effect.commandId, effect.result);
          break;
        case 'stateChanged':
          break;
      }
    }
  }

  deliver(): void {
    for (let guard = 0; this.queue.length > 0; guard++) {
      assert.ok(guard < 100_000, 'the network never went quiet');
      const { from, to, message } = this.queue.shift()!;
      const target = this.nodes.get(to);
      if (target === undefined || !target.up || !this.nodes.get(from)!.up || !this.link(from, to, message)) continue;
      this.run(target, target.core.receive(from, message));
    }
  }

  advance(ms: number): void {
    this.deliver();
    for (let t = 0; t < ms; t += 100) {
      this.now += 100;
      for (const node of this.nodes.values()) if (node.up) this.run(node, node.core.tick());
      this.deliver();
    }
  }

  submit(node: Node, command: Command): CommandId {
    const { commandId, effects } = node.core.submit(command);
    this.run(node, effects);
    this.deliver();
    return commandId;
  }

  masters(): Node[] {
    return [...this.nodes.values()].filter((node) => node.up && node.core.status().role === 'master');
  }

  converged(): boolean {
    const up = [...this.nodes.values()].filter((node) => node.up);
    const masters = this.masters();
    if (masters.length !== 1) return false;
    const master = masters[0]!.core.view();
    return up.every((node) => {
      const view = node.core.view();
      return view.stateHash === master.stateHash && view.lastIdx === master.lastIdx && view.lastHash === master.lastHash && view.term === master.term;
    });
  }

  /** Effects of one node of one type since `from`. */
  effectsOf<T extends Effect['type']>(node: Node, type: T, from = 0): Extract<Effect, { type: T }>[] {
    return node.effects.slice(from).filter((effect): effect is Extract<Effect, { type: T }> => effect.type === type);
  }
}

function persistedCluster(nodes: number, extra: (log: ReturnType<typeof clusterLog>) => void = () => undefined): PersistedLog {
  const log = clusterLog(nodes);
  extra(log);
  return { term: 1, snapshot: null, records: log.records };
}

/** A running cluster of `count` nodes, all restarted from the same log (node 0 founded it). */
function cluster(count: number, config: Partial<CoreConfig> = {}, extra?: (log: ReturnType<typeof clusterLog>) => void): Net {
  const net = new Net();
  const persisted = persistedCluster(count, extra);
  for (let n = 0; n < count; n++) net.add(n, persisted, config);
  net.advance(6_000);
  assert.ok(net.converged(), 'the cluster did not settle');
  return net;
}

describe('NodeCore', () => {
  test('a founder is a one-member cluster at once; admitted nodes join from the snapshot it pushes', () => {
    const net = new Net();
    const founder = net.add(0);
    const joiner = net.add(1);
    assert.equal(founder.core.status().role, 'standalone');
    const founded = net.submit(founder, { type: 'FoundCluster', clusterId: CLUSTER_ID, founder: member(0) });
    assert.deepEqual(net.acks.get(founded), { ok: true, idx: 1 });
    assert.equal(founder.core.status().role, 'master');
    assert.equal(founder.core.status().term, 1);
    const admitted = net.submit(founder, { type: 'AdmitMember', member: member(1) });
    assert.deepEqual(net.acks.get(admitted), { ok: true, idx: 3 });
    net.advance(300);
    assert.equal(joiner.core.status().role, 'follower');
    assert.equal(joiner.core.status().masterId, founder.id);
    assert.ok(net.converged());
    assert.equal(net.effectsOf(joiner, 'installSnapshot').length, 1);
    // A standalone node answers everything but FoundCluster at once, without a log.
    const lonely = net.add(2);
    const refused = net.submit(lonely, { type: 'SetNickname', nodeId: nodeId(2), nickname: 'x' });
    assert.equal(net.acks.get(refused)?.ok, false);
    assert.deepEqual(lonely.store, { term: 0, snapshot: null, records: [] });
  });

  test('restarted nodes elect exactly one master, the most senior, in a new term', () => {
    const net = new Net();
    const persisted = persistedCluster(3);
    for (let n = 0; n < 3; n++) net.add(n, persisted);
    net.advance(2_000);
    assert.equal(net.masters().length, 0, 'a follower waits masterTimeoutMs for an existing master first');
    net.advance(4_000);
    const masters = net.masters();
    assert.deepEqual(masters.map((node) => node.id), [nodeId(0)]);
    const term = masters[0]!.core.status().term;
    assert.ok(term > 1);
    assert.equal(net.node(0).store.term, term, 'the term was persisted');
    assert.ok(net.converged());
    const last = net.node(1).store.records.at(-1)!;
    assert.deepEqual(last.event, { type: 'TermStarted', term, masterId: nodeId(0) });
  });

  test('the operator preference moves the master (a follower in step that outranks it takes over)', () => {
    const net = cluster(3);
    net.submit(net.node(1), { type: 'SetHostPreference', nodeId: nodeId(2), preferred: true });
    net.advance(8_000);
    assert.deepEqual(net.masters().map((node) => node.id), [nodeId(2)]);
    assert.ok(net.converged());
  });

  test('a follower far behind catches up in pages', () => {
    const net = new Net();
    const full = persistedCluster(2, (log) => {
      for (let i = 0; i < 40; i++) log.add(1, { type: 'NicknameSet', nodeId: nodeId(1), nickname: `n${i}` });
    });
    const config = { syncPageRecords: 5, syncSnapshotLagRecords: 1_000 };
    net.add(0, full, config);
    const behind = net.add(1, { ...full, records: full.records.slice(0, 3) }, config);
    net.advance(6_000);
    assert.ok(net.converged());
    const pages = net.effectsOf(net.node(0), 'send').filter((effect) => effect.message.type === 'sync-page' && effect.message.records.length > 0);
    assert.ok(pages.length >= 8, `caught up in ${pages.length} pages`);
    assert.ok(pages.every((page) => page.message.type === 'sync-page' && page.message.records.length <= 5));
    assert.equal(net.effectsOf(behind, 'installSnapshot').length, 0);
  });

  test('a follower further behind than syncSnapshotLagRecords gets a snapshot and the tail', () => {
    const net = new Net();
    const full = persistedCluster(2, (log) => {
      for (let i = 0; i < 40; i++) log.add(1, { type: 'NicknameSet', nodeId: nodeId(1), nickname: `n${i}` });
    });
    net.add(0, full, { syncSnapshotLagRecords: 10 });
    const behind = net.add(1, { ...full, records: full.records.slice(0, 3) });
    net.advance(6_000);
    assert.ok(net.converged());
    assert.equal(net.effectsOf(behind, 'installSnapshot').length, 1);
  });

  test('a gap in live events triggers a sync request instead of an append', () => {
    const net = cluster(2);
    const master = net.node(0);
    const follower = net.node(1);
    const status = master.core.status();
    const skipped = makeRecord(status.lastHash, status.term, status.lastIdx + 1, { type: 'NicknameSet', nodeId: nodeId(1), nickname: 'a' }, null);
    const ahead = makeRecord(skipped.hash, status.term, status.lastIdx + 2, { type: 'NicknameSet', nodeId: nodeId(1), nickname: 'b' }, null);
    const message: EventMessage = { type: 'event', clusterId: CLUSTER_ID, term: status.term, masterId: master.id, records: [ahead] };
    const effects = follower.core.receive(master.id, message);
    assert.equal(effects.filter((effect) => effect.type === 'append').length, 0);
    const requests = effects.filter((effect) => effect.type === 'send' && effect.message.type === 'sync-request');
    assert.equal(requests.length, 1);
    assert.equal((requests[0] as Extract<Effect, { type: 'send' }>).to, master.id);
  });

  test('records and claims of a lower term are fenced off', () => {
    const net = cluster(2);
    const master = net.node(0);
    const follower = net.node(1);
    const { term, lastIdx, lastHash } = follower.core.status();
    const stale = makeRecord(lastHash, term - 1, lastIdx + 1, { type: 'NicknameSet', nodeId: nodeId(1), nickname: 'old' }, null);
    const effects = follower.core.receive(master.id, { type: 'event', clusterId: CLUSTER_ID, term: term - 1, masterId: master.id, records: [stale] });
    assert.deepEqual(effects, []);
    assert.equal(follower.core.view().counters.fenced, 1);
    const before = follower.core.status();
    follower.core.receive(nodeId(0), { type: 'coordinator', clusterId: CLUSTER_ID, term: term - 1, masterId: nodeId(0), lastIdx: 99, lastHash });
    assert.deepEqual(follower.core.status(), before);
  });

  test('after a partition heals, the losing side re-proposes its discarded commands and then truncates', () => {
    const net = cluster(3);
    const [a, b, c] = [net.node(0), net.node(1), net.node(2)];
    // c alone: it loses its master, elects itself and decides commands of its own.
    net.link = (from, to) => (from === c.id) === (to === c.id);
    for (const node of [a, b]) net.run(node, node.core.peerDown(c.id));
    net.run(c, c.core.peerDown(a.id));
    net.run(c, c.core.peerDown(b.id));
    net.advance(5_000);
    assert.equal(c.core.status().role, 'master');
    const onC = [
      net.submit(c, { type: 'SetNickname', nodeId: nodeId(2), nickname: 'island' }),
      net.submit(c, { type: 'SetNickname', nodeId: nodeId(0), nickname: 'far' }),
    ];
    const onA = [
      net.submit(a, { type: 'SetNickname', nodeId: nodeId(0), nickname: 'mainland' }),
      net.submit(b, { type: 'RemoveMember', nodeId: nodeId(40) }),
    ];
    net.advance(1_000);
    for (const id of [...onC, ...onA]) assert.ok(net.acks.has(id), 'every command was acknowledged on its side');
    const mark = new Map([a, b, c].map((node) => [node.id, node.effects.length]));
    net.link = () => true;
    net.advance(8_000);
    assert.ok(net.converged());
    // c claimed the later term, so a and b gave way: each re-proposed before it cut its log.
    const losers = [a, b].filter((node) => net.effectsOf(node, 'truncate', mark.get(node.id)).length > 0);
    assert.ok(losers.length > 0, 'someone truncated');
    for (const node of losers) {
      const since = node.effects.slice(mark.get(node.id));
      const firstTruncate = since.findIndex((effect) => effect.type === 'truncate');
      const reproposal = since.findIndex((effect) => effect.type === 'publish' && effect.message.type === 'command' && effect.message.reproposal);
      assert.ok(reproposal >= 0 && reproposal < firstTruncate, 're-proposals go out before the cut');
    }
    const finalLog = net.masters()[0]!.store.records;
    for (const id of [...onC, ...onA]) {
      assert.equal(finalLog.filter((record) => record.origin?.commandId === id).length, 1, `${id} is in the converged log exactly once`);
    }
    assert.equal(a.core.view().state.members[nodeId(0)]!.nickname !== null, true);
  });

  test('after a heal the longer log stays the master even when a lone node claimed a later term', () => {
    const net = cluster(3);
    const [a, b, c] = [net.node(0), net.node(1), net.node(2)];
    const mainMaster = net.masters()[0]!;
    assert.notEqual(mainMaster.id, c.id);
    net.link = (from, to) => (from === c.id) === (to === c.id);
    for (const node of [a, b]) net.run(node, node.core.peerDown(c.id));
    net.run(c, c.core.peerDown(a.id));
    net.run(c, c.core.peerDown(b.id));
    net.advance(5_000);
    assert.equal(c.core.status().role, 'master');
    assert.ok(c.core.status().term > mainMaster.core.status().term, 'the lone node claimed the later term');
    const onC = [net.submit(c, { type: 'SetNickname', nodeId: nodeId(2), nickname: 'island' })];
    const onMain = Array.from({ length: 12 }, (_, i) => net.submit(a, { type: 'SetNickname', nodeId: nodeId(0), nickname: `mainland-${i}` }));
    net.advance(1_000);
    for (const id of [...onC, ...onMain]) assert.ok(net.acks.has(id), 'every command was acknowledged on its side');
    assert.ok(mainMaster.core.status().lastIdx > c.core.status().lastIdx);
    const mainTruncatesBefore = net.effectsOf(mainMaster, 'truncate').length;
    const cMark = c.effects.length;
    net.link = () => true;
    net.advance(10_000);
    assert.ok(net.converged());
    assert.deepEqual(net.masters().map((node) => node.id), [mainMaster.id], 'the master of the longer log leads');
    assert.ok(mainMaster.core.view().counters.outbids >= 1);
    assert.equal(net.effectsOf(mainMaster, 'truncate').length, mainTruncatesBefore, 'the longer log was never cut');
    assert.ok(net.effectsOf(c, 'truncate', cMark).length > 0, 'the lone node gave way and cut its fork');
    const finalLog = mainMaster.store.records;
    for (const id of [...onC, ...onMain]) {
      assert.equal(finalLog.filter((record) => record.origin?.commandId === id).length, 1, `${id} is in the converged log exactly once`);
    }
  });

  test('a follower woken from a long stop follows the cluster instead of leading it with a stale log', () => {
    const net = cluster(2);
    const [a, b] = [net.node(0), net.node(1)];
    assert.equal(a.core.status().role, 'master');
    // b is frozen (SIGSTOP): no ticks, nothing heard, while a decides many commands.
    b.up = false;
    const decided = Array.from({ length: 40 }, (_, i) => net.submit(a, { type: 'SetNickname', nodeId: nodeId(0), nickname: `n${i}` }));
    net.advance(15_000);
    for (const id of decided) assert.equal(net.acks.get(id)?.ok, true, 'acknowledged while b was frozen');
    const before = a.core.status();
    const mark = a.effects.length;
    // b wakes: its connection to a closed meanwhile; the redial brings it back a second later.
    b.up = true;
    net.link = (from, to) => !(from === a.id && to === b.id) && !(from === b.id && to === a.id);
    net.run(b, b.core.peerDown(a.id));
    net.advance(1_000);
    assert.notEqual(b.core.status().role, 'master', 'b did not take over on waking');
    net.link = () => true;
    net.run(a, a.core.peerUp(b.id));
    net.run(b, b.core.peerUp(a.id));
    net.advance(6_000);
    assert.ok(net.converged());
    assert.equal(net.masters()[0]!.id, a.id);
    assert.equal(a.core.status().term, before.term, 'no election was needed');
    assert.deepEqual(net.effectsOf(a, 'truncate', mark), [], 'a kept its log');
    assert.ok(b.core.view().counters.stalls > 0);
  });

  test('a silent member is pruned at 30 s, not at 5 s, with the ages that decided it; it returns when heard again', () => {
    const net = cluster(3);
    const master = net.node(0);
    const silent = net.node(2);
    silent.up = false;
    net.run(master, master.core.peerDown(silent.id));
    const mark = master.effects.length;
    net.advance(5_000);
    const appendedEvents = (): string[] => net.effectsOf(master, 'append', mark).flatMap((effect) => effect.records.map((record) => record.event.type));
    assert.ok(!appendedEvents().includes('NodeTimedOut'));
    assert.equal(master.core.view().health[silent.id]!.level, 'ok');
    net.advance(7_000);
    assert.equal(master.core.view().health[silent.id]!.level, 'suspect');
    net.advance(20_000);
    const timedOut = net
      .effectsOf(master, 'append', mark)
      .flatMap((effect) => effect.records)
      .find((record) => record.event.type === 'NodeTimedOut');
    assert.ok(timedOut !== undefined, 'pruned by 32 s');
    assert.equal(timedOut.event.type === 'NodeTimedOut' && timedOut.event.nodeId, silent.id);
    if (timedOut.event.type === 'NodeTimedOut') {
      assert.ok(timedOut.event.lastSeenAgeMs >= 30_000 && timedOut.event.lastSeenAgeMs < 31_000, `${timedOut.event.lastSeenAgeMs}`);
      assert.ok(timedOut.event.heartbeatAgeMs >= timedOut.event.lastSeenAgeMs);
    }
    assert.equal(master.core.view().state.members[silent.id]!.status, 'pruned');
    assert.equal(master.core.view().health[silent.id]!.level, 'pruned');
    net.restart(silent);
    net.run(silent, silent.core.peerUp(master.id));
    net.advance(4_000);
    assert.ok(appendedEvents().includes('NodeReturned'));
    assert.equal(master.core.view().state.members[silent.id]!.status, 'active');
    assert.ok(net.converged());
  });

  test('a command submitted at a follower is forwarded, decided once and acknowledged; a retry is answered from memory', () => {
    const net = cluster(3);
    const follower = net.node(1);
    const id = net.submit(follower, { type: 'SetNickname', nodeId: nodeId(1), nickname: 'den' });
    net.advance(200);
    const result = net.acks.get(id);
    assert.equal(result?.ok, true);
    assert.equal(follower.core.view().state.members[nodeId(1)]!.nickname, 'den');
    // The same command arriving again (a retry, or a re-proposal) is answered, not applied twice.
    const master = net.node(0);
    const before = master.core.status().lastIdx;
    const origin = net.effectsOf(follower, 'publish').map((effect) => effect.message).find((message) => message.type === 'command')!;
    const effects = master.core.receive(follower.id, origin);
    assert.equal(master.core.status().lastIdx, before);
    assert.ok(effects.some((effect) => effect.type === 'publish' && effect.message.type === 'ack' && effect.message.commandId === id));
  });

  test('a rejected command is decided (logged as CommandRejected) and acknowledged with its idx', () => {
    const net = cluster(2);
    const id = net.submit(net.node(1), { type: 'RemoveMember', nodeId: nodeId(40) });
    net.advance(200);
    const result = net.acks.get(id);
    assert.ok(result !== undefined && !result.ok && result.code === 'MEMBER_NOT_FOUND' && result.idx !== undefined);
    const record = net.node(0).store.records.find((r) => r.idx === result.idx);
    assert.equal(record?.event.type, 'CommandRejected');
    assert.equal(record?.origin?.commandId, id);
  });

  test('a removed member returns to standalone; a master that leaves hands over', () => {
    const net = cluster(3);
    net.submit(net.node(0), { type: 'RemoveMember', nodeId: nodeId(2) });
    net.advance(500);
    assert.equal(net.node(2).core.status().role, 'standalone');
    assert.deepEqual(net.node(2).store, { term: 0, snapshot: null, records: [] });
    net.node(2).up = false;
    net.submit(net.node(0), { type: 'LeaveCluster', nodeId: nodeId(0) });
    net.advance(10_000);
    assert.equal(net.node(0).core.status().role, 'standalone');
    assert.equal(net.node(1).core.status().role, 'master');
    assert.deepEqual(Object.keys(net.node(1).core.view().state.members), [nodeId(1)]);
  });

  test('dissolving returns every member to standalone', () => {
    const net = cluster(3);
    net.submit(net.node(1), { type: 'DissolveCluster' });
    net.advance(7_000);
    for (let n = 0; n < 3; n++) assert.equal(net.node(n).core.status().role, 'standalone', `node ${n}`);
  });

  test('checkpoints bound the log; a restart from snapshot and tail rebuilds the same state', () => {
    const config = { snapshotEveryRecords: 10, retainRecords: 4 };
    const net = cluster(2, config);
    for (let i = 0; i < 30; i++) net.submit(net.node(i % 2), { type: 'SetNickname', nodeId: nodeId(1), nickname: `v${i}` });
    net.advance(500);
    const follower = net.node(1);
    assert.ok(net.effectsOf(follower, 'snapshot').length >= 1);
    const snapshot = follower.store.snapshot!;
    assert.equal(follower.core.compactable(), snapshot.idx);
    assert.ok(follower.store.records.length <= 14);
    const before = follower.core.view();
    net.restart(follower, config);
    const after = follower.core.view();
    assert.equal(after.stateHash, before.stateHash);
    assert.equal(after.lastIdx, before.lastIdx);
    assert.equal(stateHash(snapshot.state), snapshot.stateHash);
    net.advance(6_000);
    assert.ok(net.converged());
  });

  test('persisted logs that do not hold together refuse to load', () => {
    const persisted = persistedCluster(2);
    const broken = structuredClone(persisted);
    broken.records[1]!.event = { type: 'TermStarted', term: 1, masterId: nodeId(1) };
    assert.throws(
      () => new NodeCore({ self: member(0), clock: { nowMs: () => 0 }, random: () => 0.5, persisted: broken }),
      /corrupt at idx 2/,
    );
  });
});
