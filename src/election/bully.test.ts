import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { NodeId } from '../common/ids.js';
import type { Snapshot } from '../master/state/record.js';
import { BullyElection, precedes, type ElectionHost, type Position, type Role, type StatusReply } from './bully.js';
import { nextTerm } from './election.js';
import type { Rankable } from './rank.js';

const A = 'node-a' as NodeId;
const B = 'node-b' as NodeId;
const C = 'node-c' as NodeId;

const TIMINGS = {
  masterTimeoutMs: 3_000,
  electionAnswerTimeoutMs: 1_000,
  coordinatorTimeoutMs: 5_000,
  reconcileWindowMs: 500,
  reconcileTimeoutMs: 2_000,
  takeoverBackoffMs: 5_000,
};

const ranked = (nodeId: NodeId, admittedIdx: number, termSlot: number) => ({ nodeId, admittedIdx, hostPreferred: false, termSlot });

/** A node as the election sees it; records what the election asked of it. */
class FakeNode implements ElectionHost {
  readonly selfId = A;
  readonly timings = TIMINGS;
  clock = 0;
  role: Role = 'follower';
  masterId: NodeId | null = B;
  lastHeardMasterMs = 0;
  term = 1;
  maxSeenTerm = 1;
  pos: Position = { lastTerm: 1, lastIdx: 10 };
  live: NodeId[] = [B, C];
  /** Replies whose log does not hold ours. */
  forked = new Set<NodeId>();
  members = new Map([A, B, C].map((id, i) => [id, ranked(id, i + 1, i)]));
  readonly asked: string[] = [];

  now = () => this.clock;
  leaving = () => false;
  catchingUp = () => false;
  member = (nodeId: NodeId) => this.members.get(nodeId);
  dissolved = () => false;
  liveOthers = () => this.live;
  position = () => this.pos;
  extendsMine = (reply: StatusReply) => !this.forked.has(this.replies.get(reply)!);
  changed = () => {};
  claimTerm = (term: number) => {
    this.term = term;
    this.asked.push(`claim ${term}`);
  };
  announceElection = (position: Position) => void this.asked.push(`election ${position.lastTerm}/${position.lastIdx}`);
  answerAlive = (to: NodeId) => void this.asked.push(`alive ${to}`);
  requestStatus = (term: number) => void this.asked.push(`status-request ${term}`);
  announceMaster = () => void this.asked.push('coordinator');
  fetchFrom = (nodeId: NodeId) => void this.asked.push(`fetch ${nodeId}`);
  installSnapshot = (snapshot: Snapshot) => void this.asked.push(`install ${snapshot.idx}`);
  acceptRecords = () => void this.asked.push('accept');
  becomeMaster = () => {
    this.role = 'master';
    this.masterId = A;
    this.asked.push('lead');
  };

  private replies = new Map<StatusReply, NodeId>();
  reply(from: NodeId, lastTerm: number, lastIdx: number): StatusReply {
    const reply = { to: A, term: this.term, lastTerm, lastIdx, terms: [{ term: lastTerm, firstIdx: 1 }] };
    this.replies.set(reply, from);
    return reply;
  }
}

describe('election order', () => {
  const member = (nodeId: string, admittedIdx: number): Rankable => ({ nodeId, admittedIdx, hostPreferred: false });
  test('a longer log first, then a later last term, then rank; nobody precedes an equal by rank without a roster entry', () => {
    const senior = member('a', 1);
    const junior = member('b', 2);
    // A fork with the later term but fewer records (a lone node that elected itself) comes second.
    assert.ok(precedes({ position: { lastTerm: 2, lastIdx: 9 }, member: junior }, { position: { lastTerm: 3, lastIdx: 5 }, member: senior }));
    assert.ok(!precedes({ position: { lastTerm: 3, lastIdx: 5 }, member: senior }, { position: { lastTerm: 2, lastIdx: 9 }, member: junior }));
    assert.ok(precedes({ position: { lastTerm: 3, lastIdx: 9 }, member: junior }, { position: { lastTerm: 2, lastIdx: 9 }, member: senior }));
    assert.ok(precedes({ position: { lastTerm: 2, lastIdx: 9 }, member: junior }, { position: { lastTerm: 2, lastIdx: 5 }, member: senior }));
    assert.ok(precedes({ position: { lastTerm: 2, lastIdx: 5 }, member: senior }, { position: { lastTerm: 2, lastIdx: 5 }, member: junior }));
    assert.ok(!precedes({ position: { lastTerm: 2, lastIdx: 5 }, member: junior }, { position: { lastTerm: 2, lastIdx: 5 }, member: senior }));
    assert.ok(!precedes({ position: { lastTerm: 2, lastIdx: 5 }, member: undefined }, { position: { lastTerm: 2, lastIdx: 5 }, member: junior }));
    assert.ok(!precedes({ position: { lastTerm: 2, lastIdx: 5 }, member: senior }, { position: { lastTerm: 2, lastIdx: 5 }, member: senior }));
  });
});

describe('bully election', () => {
  test('a member alone claims the next term of its slot at once, reconciles with nobody and leads', () => {
    const node = new FakeNode();
    node.live = [];
    node.maxSeenTerm = 40;
    new BullyElection(node).start();
    const term = nextTerm(40, 0);
    assert.deepEqual(node.asked, [`claim ${term}`, `status-request ${term}`, 'lead']);
    assert.equal(node.role, 'master');
  });

  test('asks first; an answer for it makes it wait for a coordinator instead of claiming, then ask again', () => {
    const node = new FakeNode();
    const election = new BullyElection(node);
    election.start();
    assert.deepEqual(node.asked, ['election 1/10']);
    assert.equal(node.role, 'candidate');
    assert.equal(node.masterId, null);
    election.onAlive(B);
    election.onAlive(A);
    node.clock = TIMINGS.electionAnswerTimeoutMs;
    election.tick(node.clock);
    assert.deepEqual(node.asked, ['election 1/10'], 'someone precedes us: no claim when the answer timeout runs out');
    node.clock = TIMINGS.coordinatorTimeoutMs - 1;
    election.tick(node.clock);
    assert.equal(node.asked.length, 1, 'still waiting for its coordinator');
    node.clock += 1;
    election.tick(node.clock);
    assert.deepEqual(node.asked, ['election 1/10', 'election 1/10']);
  });

  test('an alive meant for another node does not hold back its claim', () => {
    const node = new FakeNode();
    const election = new BullyElection(node);
    election.start();
    election.onAlive(B);
    node.clock = TIMINGS.electionAnswerTimeoutMs;
    election.tick(node.clock);
    assert.equal(node.asked[1], `claim ${nextTerm(1, 0)}`);
  });

  test('claims when nobody answers, fetches from the most advanced log that extends its own, then leads', () => {
    const node = new FakeNode();
    node.pos = { lastTerm: 2, lastIdx: 10 };
    const election = new BullyElection(node);
    election.start();
    node.clock = TIMINGS.electionAnswerTimeoutMs;
    election.tick(node.clock);
    const term = nextTerm(1, 0);
    assert.deepEqual(node.asked, ['election 2/10', `claim ${term}`, `status-request ${term}`]);
    assert.ok(election.reconciling());
    node.forked.add(C);
    election.onStatus(B, node.reply(B, 2, 12));
    assert.equal(node.asked.length, 3, 'waits for every live member (or the window)');
    election.onStatus(C, node.reply(C, 1, 11));
    assert.equal(node.asked.at(-1), `fetch ${B}`, 'C forks from our log: left to re-propose after the heal');
    node.acceptRecords = () => {
      node.asked.push('accept');
      node.pos = { lastTerm: 2, lastIdx: 12 };
    };
    election.onPage(B, { commonIdx: 10, snapshot: null, records: [], more: false });
    assert.deepEqual(node.asked.slice(-2), ['accept', 'lead'], 'equal to B now, and A outranks B');
    assert.ok(!election.reconciling());
  });

  test('a page that does not continue its log moves on to the next source', () => {
    const node = new FakeNode();
    node.live = [B, C];
    const election = new BullyElection(node);
    election.start();
    node.clock = TIMINGS.electionAnswerTimeoutMs;
    election.tick(node.clock);
    election.onStatus(B, node.reply(B, 1, 12));
    election.onStatus(C, node.reply(C, 1, 11));
    assert.equal(node.asked.at(-1), `fetch ${B}`);
    election.onPage(B, { commonIdx: 9, snapshot: null, records: [], more: false });
    assert.equal(node.asked.at(-1), `fetch ${C}`);
  });

  test('leads once the reconcile window has passed without answers', () => {
    const node = new FakeNode();
    node.live = [B];
    const election = new BullyElection(node);
    election.start();
    node.clock = TIMINGS.electionAnswerTimeoutMs;
    election.tick(node.clock);
    node.clock += TIMINGS.reconcileWindowMs - 1;
    election.tick(node.clock);
    assert.ok(!node.asked.includes('lead'));
    node.clock += 1;
    election.tick(node.clock);
    assert.equal(node.asked.at(-1), 'lead');
  });

  test('defers to a member that still precedes it after reconciling', () => {
    const node = new FakeNode();
    node.live = [B];
    const election = new BullyElection(node);
    election.start();
    node.clock = TIMINGS.electionAnswerTimeoutMs;
    election.tick(node.clock);
    node.forked.add(B);
    election.onStatus(B, node.reply(B, 1, 30));
    assert.equal(node.asked.at(-1), 'election 1/10', 'nothing to fetch from a fork, and B precedes us: ask again instead of leading');
    assert.equal(node.role, 'candidate');
    assert.ok(!node.asked.includes('lead'));
  });

  test('answers a node it precedes; a master also announces itself', () => {
    const node = new FakeNode();
    node.role = 'master';
    const election = new BullyElection(node);
    election.onElection(B, { lastTerm: 1, lastIdx: 11 });
    assert.deepEqual(node.asked, [], 'B is ahead of us');
    election.onElection(B, { lastTerm: 1, lastIdx: 10 });
    assert.deepEqual(node.asked, [`alive ${B}`, 'coordinator']);
  });

  test('a follower of a live master only answers; one without a master starts its own round', () => {
    const node = new FakeNode();
    const election = new BullyElection(node);
    node.clock = 100;
    election.onElection(C, { lastTerm: 1, lastIdx: 3 });
    assert.deepEqual(node.asked, [`alive ${C}`]);
    node.clock = TIMINGS.masterTimeoutMs;
    election.onElection(C, { lastTerm: 1, lastIdx: 3 });
    assert.deepEqual(node.asked, [`alive ${C}`, `alive ${C}`, 'election 1/10']);
  });

  test('takes over an outranked master at most once per backoff, and never while catching up', () => {
    const node = new FakeNode();
    node.members.set(B, ranked(B, 9, 1));
    const election = new BullyElection(node);
    node.catchingUp = () => true;
    election.maybeTakeover(B);
    assert.deepEqual(node.asked, []);
    node.catchingUp = () => false;
    election.maybeTakeover(B);
    assert.deepEqual(node.asked, ['election 1/10']);
    node.role = 'follower';
    node.clock = TIMINGS.takeoverBackoffMs - 1;
    election.maybeTakeover(B);
    assert.equal(node.asked.length, 1);
    node.clock += 1;
    election.maybeTakeover(B);
    assert.equal(node.asked.length, 2);
  });

  test('after a stall no election starts until the hold ends', () => {
    const node = new FakeNode();
    const election = new BullyElection(node);
    election.holdUntil(3_000);
    node.clock = 2_999;
    election.start();
    assert.deepEqual(node.asked, []);
    node.clock = 3_000;
    election.start();
    assert.deepEqual(node.asked, ['election 1/10']);
  });
});
