import { generateTask } from '../../test/support/tasks.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Dispatcher } from '../api/dispatch.js';
import { ShoalError } from '../common/errors.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import { MeteredDispatcher } from './metered-dispatcher.js';
import { RequestTracker, type Outcome } from './tracker.js';

const task: RunnerTask = generateTask({ sampling: { maxTokens: 3, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 } });
const EVENTS: TaskEvent[] = [
  { type: 'start', promptTokens: 2 },
  { type: 'text', text: 'a' },
  { type: 'text', text: 'b' },
  { type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 2, completionTokens: 2 } },
];

/** A dispatcher whose stream is a list of events, with a hook before each one (to hold it or fail it). */
function listDispatcher(events: TaskEvent[], before: (i: number) => Promise<void> = async () => undefined, refuse = false): Dispatcher {
  return {
    models: () => [],
    run(_task, signal) {
      if (refuse) throw new ShoalError('MODEL_NOT_FOUND', 'no such model');
      return (async function* () {
        for (let i = 0; i < events.length; i += 1) {
          await before(i);
          signal.throwIfAborted();
          yield events[i]!;
        }
      })();
    },
  };
}

function setup(inner: Dispatcher, clock = { now: 0 }) {
  const ended: Outcome[] = [];
  const tracker = new RequestTracker({ maxTtftsPerTake: 10, random: Math.random, observer: { ended: (_k, o) => ended.push(o) } });
  return { metered: new MeteredDispatcher(inner, tracker, () => clock.now), tracker, ended, clock };
}

test('events pass through unchanged and the request is counted once, as ok', async () => {
  const clock = { now: 0 };
  const { metered, tracker, ended } = setup(listDispatcher(EVENTS, async (i) => void (clock.now = (i + 1) * 10)), clock);
  const seen: TaskEvent[] = [];
  for await (const e of metered.run(task, new AbortController().signal)) seen.push(e);
  assert.deepEqual(seen, EVENTS);
  assert.deepEqual(ended, ['ok']);
  assert.deepEqual(tracker.counters(), { inFlight: 0, waiting: 0, generatedTokens: 2, promptTokens: 2 });
  assert.deepEqual(tracker.takeTtfts(), [20], 'arrival at 0, first text pulled at 20');
});

test('a refusal is rethrown as is and counted as refused', () => {
  const { metered, tracker, ended } = setup(listDispatcher(EVENTS, undefined, true));
  assert.throws(() => metered.run(task, new AbortController().signal), /no such model/);
  assert.deepEqual(ended, ['refused']);
  assert.equal(tracker.counters().inFlight, 0);
});

test('an abort ends the request even when nobody pulls the stream again', async () => {
  const never = new Promise<void>(() => undefined);
  const { metered, tracker, ended } = setup(listDispatcher(EVENTS, async (i) => (i === 1 ? never : undefined)));
  const controller = new AbortController();
  const events = metered.run(task, controller.signal)[Symbol.asyncIterator]();
  await events.next();
  assert.deepEqual(tracker.counters().inFlight, 1);
  void events.next();
  controller.abort();
  assert.deepEqual(ended, ['cancelled']);
  assert.deepEqual(tracker.counters(), { inFlight: 0, waiting: 0, generatedTokens: 0, promptTokens: 2 });
});

test('an abort before iteration starts still ends the request', () => {
  const { metered, tracker, ended } = setup(listDispatcher(EVENTS));
  const controller = new AbortController();
  metered.run(task, controller.signal);
  assert.equal(tracker.counters().waiting, 1);
  controller.abort();
  assert.deepEqual(ended, ['cancelled']);
  assert.deepEqual(tracker.counters(), { inFlight: 0, waiting: 0, generatedTokens: 0, promptTokens: 0 });
});

test('return() before the end is a cancellation; a failing stream is an error', async () => {
  {
    const { metered, ended } = setup(listDispatcher(EVENTS));
    const events = metered.run(task, new AbortController().signal)[Symbol.asyncIterator]();
    await events.next();
    await events.return?.();
    assert.deepEqual(ended, ['cancelled']);
  }
  {
    const { metered, ended, tracker } = setup(listDispatcher(EVENTS, async (i) => { if (i === 2) throw new ShoalError('RUNNER_CRASHED', 'boom'); }));
    await assert.rejects(async () => {
      for await (const _ of metered.run(task, new AbortController().signal));
    }, /boom/);
    assert.deepEqual(ended, ['error']);
    assert.equal(tracker.counters().inFlight, 0);
  }
  {
    const { metered, ended } = setup(listDispatcher(EVENTS.slice(0, 2)));
    for await (const _ of metered.run(task, new AbortController().signal));
    assert.deepEqual(ended, ['error'], 'a stream without an end event is broken');
  }
});

test('an abort after the end changes nothing', async () => {
  const { metered, ended } = setup(listDispatcher(EVENTS));
  const controller = new AbortController();
  for await (const _ of metered.run(task, controller.signal));
  controller.abort();
  assert.deepEqual(ended, ['ok']);
});
