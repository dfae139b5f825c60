import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../../common/errors.js';
import { TokenReservations, type ReservationLimits } from './token-reservations.js';

const LIMITS: ReservationLimits = { budgetTokens: 4, maxActive: 2, maxQueued: 3, maxRequestTokens: 3 };

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (error) {
    assert.ok(error instanceof ShoalError, `expected a ShoalError, got ${String(error)}`);
    return error.code;
  }
}

test('a request that fits starts at once; one that does not waits for a release', () => {
  const r = new TokenReservations({ budgetTokens: 10, maxActive: 4, maxQueued: 8, maxRequestTokens: 10 });
  assert.deepEqual(r.enqueue('a', 6), ['a']);
  assert.deepEqual(r.enqueue('b', 6), []);
  assert.deepEqual(r.snapshot(), { active: 1, queued: 1, reservedTokens: 6 });
  assert.deepEqual(r.release('a'), ['b']);
  assert.deepEqual(r.snapshot(), { active: 1, queued: 0, reservedTokens: 6 });
});

test('a small request never overtakes a large one waiting ahead of it', () => {
  const r = new TokenReservations({ budgetTokens: 10, maxActive: 4, maxQueued: 8, maxRequestTokens: 10 });
  r.enqueue('a', 8);
  assert.deepEqual(r.enqueue('big', 5), []);
  // 2 tokens would fit beside `a`, but `big` is first.
  assert.deepEqual(r.enqueue('small', 2), []);
  assert.deepEqual(r.release('a'), ['big', 'small']);
});

test('the slot count caps running requests whatever the budget', () => {
  const r = new TokenReservations({ budgetTokens: 100, maxActive: 2, maxQueued: 8, maxRequestTokens: 10 });
  assert.deepEqual(r.enqueue('a', 1), ['a']);
  assert.deepEqual(r.enqueue('b', 1), ['b']);
  assert.deepEqual(r.enqueue('c', 1), []);
  assert.deepEqual(r.release('b'), ['c']);
});

test('a request of unknown size holds its place and blocks those behind it until sized', () => {
  const r = new TokenReservations({ budgetTokens: 10, maxActive: 4, maxQueued: 8, maxRequestTokens: 10 });
  assert.deepEqual(r.enqueue('a', null), []);
  assert.deepEqual(r.enqueue('b', 1), []);
  assert.deepEqual(r.setSize('a', 3), ['a', 'b']);
});

test('sizing a request too large says the limit; releasing it lets the queue behind it move', () => {
  const r = new TokenReservations({ budgetTokens: 10, maxActive: 4, maxQueued: 8, maxRequestTokens: 5 });
  r.enqueue('a', null);
  r.enqueue('b', 2);
  assert.throws(() => r.setSize('a', 6), (e: unknown) => e instanceof ShoalError && e.code === 'CONTEXT_OVERFLOW' && /at most 5/.test(e.message));
  assert.equal(r.isActive('b'), false);
  assert.deepEqual(r.release('a'), ['b']);
  assert.equal(r.has('a'), false);
});

test('a request larger than one slot is refused at once with the limit in the message', () => {
  const r = new TokenReservations({ budgetTokens: 10, maxActive: 4, maxQueued: 8, maxRequestTokens: 5 });
  assert.throws(() => r.enqueue('a', 6), (e: unknown) => e instanceof ShoalError && e.code === 'CONTEXT_OVERFLOW' && /6 tokens/.test(e.message));
  assert.equal(r.has('a'), false);
});

test('the queue is bounded: one more waiting request is QUEUE_FULL, running ones do not count', () => {
  const r = new TokenReservations({ budgetTokens: 2, maxActive: 1, maxQueued: 2, maxRequestTokens: 2 });
  r.enqueue('run', 2);
  r.enqueue('w1', 1);
  r.enqueue('w2', 1);
  assert.equal(codeOf(() => r.enqueue('w3', 1)), 'QUEUE_FULL');
  assert.deepEqual(r.snapshot(), { active: 1, queued: 2, reservedTokens: 2 });
});

test('releasing a waiting request that is not the head grants nothing; releasing the head may', () => {
  const r = new TokenReservations({ budgetTokens: 4, maxActive: 4, maxQueued: 8, maxRequestTokens: 4 });
  r.enqueue('a', 3);
  r.enqueue('b', 3);
  r.enqueue('c', 1);
  assert.deepEqual(r.release('c'), []);
  r.enqueue('d', 1);
  assert.deepEqual(r.release('b'), ['d']);
});

test('an upper bound that fits at once is granted and shrunk to the exact size, which lets the next start', () => {
  const r = new TokenReservations({ budgetTokens: 10, maxActive: 4, maxQueued: 8, maxRequestTokens: 10 });
  r.enqueue('a', null);
  r.enqueue('b', null);
  assert.equal(r.fitsNow('b', 10), false, 'only the head may skip measuring');
  assert.equal(r.fitsNow('a', 10), true);
  assert.deepEqual(r.setSize('a', 10), ['a']);
  assert.deepEqual(r.setSize('b', 4), []);
  assert.deepEqual(r.shrink('a', 6), ['b']);
  assert.deepEqual(r.snapshot(), { active: 2, queued: 0, reservedTokens: 10 });
  r.enqueue('c', null);
  assert.equal(r.fitsNow('c', 1), false, 'no tokens are left');
  assert.throws(() => r.shrink('a', 7), RangeError);
  assert.throws(() => r.shrink('c', 1), /not active/);
});

test('no upper bound fits at once while every slot runs', () => {
  const r = new TokenReservations({ budgetTokens: 10, maxActive: 1, maxQueued: 8, maxRequestTokens: 10 });
  r.enqueue('a', 1);
  r.enqueue('b', null);
  assert.equal(r.fitsNow('b', 1), false);
  r.release('a');
  assert.equal(r.fitsNow('b', 10), true);
});

test('limits are checked', () => {
  assert.throws(() => new TokenReservations({ ...LIMITS, budgetTokens: 0 }), RangeError);
  assert.throws(() => new TokenReservations({ ...LIMITS, maxRequestTokens: 5 }), RangeError);
  assert.throws(() => new TokenReservations({ ...LIMITS, maxActive: 1.5 }), RangeError);
  assert.doesNotThrow(() => new TokenReservations({ ...LIMITS, maxQueued: 0 }));
});

// ---------------------------------------------------------------------------------------------
// Exhaustive: every sequence of operations up to a length, over small sizes, checked against the
// invariants that define the queue (bounded, within budget, FIFO, work-conserving).

type Op =
  | { kind: 'enqueue'; tokens: number | null }
  | { kind: 'size'; tokens: number }
  | { kind: 'releaseActive'; nth: number }
  | { kind: 'releaseWaiting'; nth: number };

const SIZES = [1, 2, 3, 4];
const OPS: Op[] = [
  ...SIZES.map((tokens): Op => ({ kind: 'enqueue', tokens })),
  { kind: 'enqueue', tokens: null },
  ...SIZES.map((tokens): Op => ({ kind: 'size', tokens })),
  { kind: 'releaseActive', nth: 0 },
  { kind: 'releaseActive', nth: 1 },
  { kind: 'releaseWaiting', nth: 0 },
  { kind: 'releaseWaiting', nth: 1 },
];

/** A plain model of what the queue holds, kept beside the real one to check it. */
interface Model {
  order: number;
  waiting: Array<{ id: string; tokens: number | null; seq: number }>;
  active: Map<string, { tokens: number; seq: number }>;
  grantedSeqs: number[];
}

function checkInvariants(r: TokenReservations, model: Model, where: string): void {
  const snap = r.snapshot();
  const sum = [...model.active.values()].reduce((s, a) => s + a.tokens, 0);
  assert.equal(snap.reservedTokens, sum, `${where}: reserved`);
  assert.equal(snap.active, model.active.size, `${where}: active`);
  assert.equal(snap.queued, model.waiting.length, `${where}: queued`);
  assert.ok(sum <= LIMITS.budgetTokens, `${where}: over budget`);
  assert.ok(model.active.size <= LIMITS.maxActive, `${where}: too many active`);
  assert.ok(model.waiting.length <= LIMITS.maxQueued, `${where}: too many waiting`);
  // FIFO: everything ever granted arrived before everything still waiting.
  const firstWaiting = model.waiting[0]?.seq ?? Infinity;
  assert.ok(model.grantedSeqs.every((seq) => seq < firstWaiting), `${where}: a later request overtook a waiting one`);
  // Grants happen in arrival order.
  for (let i = 1; i < model.grantedSeqs.length; i++) assert.ok(model.grantedSeqs[i - 1]! < model.grantedSeqs[i]!, `${where}: grant order`);
  // Work-conserving: nothing that could run is left waiting.
  const head = model.waiting[0];
  if (head && head.tokens !== null) {
    assert.ok(model.active.size === LIMITS.maxActive || sum + head.tokens > LIMITS.budgetTokens, `${where}: the head fits but waits`);
  }
}

function apply(r: TokenReservations, model: Model, op: Op): void {
  const where = JSON.stringify(op);
  let granted: string[] = [];
  switch (op.kind) {
    case 'enqueue': {
      const id = `r${model.order}`;
      const seq = model.order++;
      const code = codeOf(() => (granted = r.enqueue(id, op.tokens)));
      const full = model.waiting.length >= LIMITS.maxQueued;
      const tooBig = op.tokens !== null && op.tokens > LIMITS.maxRequestTokens;
      assert.equal(code, full ? 'QUEUE_FULL' : tooBig ? 'CONTEXT_OVERFLOW' : null, where);
      if (code === null) model.waiting.push({ id, tokens: op.tokens, seq });
      break;
    }
    case 'size': {
      const entry = model.waiting.find((w) => w.tokens === null);
      if (!entry) return;
      const code = codeOf(() => (granted = r.setSize(entry.id, op.tokens)));
      assert.equal(code, op.tokens > LIMITS.maxRequestTokens ? 'CONTEXT_OVERFLOW' : null, where);
      if (code === null) {
        entry.tokens = op.tokens;
      } else {
        // The caller's part: a request that can never fit is failed and released.
        const index = model.waiting.indexOf(entry);
        granted = r.release(entry.id);
        assert.ok(index === 0 || granted.length === 0, `${where}: a release behind the head granted`);
        model.waiting.splice(index, 1);
      }
      break;
    }
    case 'releaseActive': {
      const id = [...model.active.keys()][op.nth];
      if (id === undefined) return;
      granted = r.release(id);
      model.active.delete(id);
      break;
    }
    case 'releaseWaiting': {
      const entry = model.waiting[op.nth];
      if (!entry) return;
      granted = r.release(entry.id);
      model.waiting.splice(op.nth, 1);
      break;
    }
  }
  // What was granted left the head of the queue, in order.
  for (const id of granted) {
    const head = model.waiting.shift();
    assert.equal(head?.id, id, `${where}: granted ${id} but the head was ${head?.id}`);
    model.active.set(id, { tokens: head.tokens!, seq: head.seq });
    model.grantedSeqs.push(head.seq);
  }
  checkInvariants(r, model, where);
}

test('every sequence of 5 operations keeps the queue bounded, within budget, FIFO and work-conserving', () => {
  const LENGTH = 5;
  let sequences = 0;
  const walk = (prefix: Op[]): void => {
    if (prefix.length === LENGTH) {
      sequences++;
      const r = new TokenReservations(LIMITS);
      const model: Model = { order: 0, waiting: [], active: new Map(), grantedSeqs: [] };
      for (const op of prefix) apply(r, model, op);
      return;
    }
    for (const op of OPS) walk([...prefix, op]);
  };
  walk([]);
  assert.equal(sequences, OPS.length ** LENGTH);
});

test('long random sequences keep the same invariants', () => {
  let seed = 12345;
  const next = (): number => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  for (let run = 0; run < 200; run++) {
    const r = new TokenReservations(LIMITS);
    const model: Model = { order: 0, waiting: [], active: new Map(), grantedSeqs: [] };
    for (let i = 0; i < 200; i++) apply(r, model, OPS[Math.floor(next() * OPS.length)]!);
    // Draining everything leaves nothing reserved.
    while (model.active.size > 0 || model.waiting.length > 0) {
      if (model.waiting.some((w) => w.tokens === null)) apply(r, model, { kind: 'size', tokens: 1 });
      else if (model.active.size > 0) apply(r, model, { kind: 'releaseActive', nth: 0 });
      else apply(r, model, { kind: 'releaseWaiting', nth: 0 });
    }
    assert.deepEqual(r.snapshot(), { active: 0, queued: 0, reservedTokens: 0 });
  }
});

test('waiting ids come in arrival order, unsized ones keeping their place, and close up when one leaves', () => {
  const r = new TokenReservations({ budgetTokens: 10, maxActive: 1, maxQueued: 8, maxRequestTokens: 10 });
  r.enqueue('running', 2);
  r.enqueue('b', 2);
  r.enqueue('c', null);
  r.enqueue('d', 2);
  assert.deepEqual(r.waitingIds(), ['b', 'c', 'd']);
  r.release('c');
  assert.deepEqual(r.waitingIds(), ['b', 'd']);
  assert.deepEqual(r.release('running'), ['b']);
  assert.deepEqual(r.waitingIds(), ['d']);
});
