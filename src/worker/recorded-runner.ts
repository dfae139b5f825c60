// The flight recorder and hang watchdog every engine gets (issue #18). The worker wraps each runner it
// attaches in a RecordedRunner, so the node-llama-cpp child, llama-server and rpc donors are all
// recorded the same way and no engine carries code for either: the wrapper sees only the runner
// contract (status, the task event stream, and `kill`).

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ShoalError, errorMessage } from '../common/errors.js';
import { AsyncQueue } from '../common/async-queue.js';
import type { Logger } from '../common/log.js';
import { RunnerRecorder, type RecordMoment } from '../diagnostics/recorder.js';
import { RUNNER_RECORDER_ENTRIES, type RunnerEntry, type RunnerPhase } from '../wire/diagnostics.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { InstanceRunner, RunnerState, RunnerStatus } from './runner-contract.js';

/**
 * Silence that ends a generation as stalled (`shoal run --stall-timeout`, SHOAL_STALL_TIMEOUT_S). A
 * healthy engine emits a token event every few hundred milliseconds even for a large model on a
 * slow CPU; a minute without one is a hang (a wedged kernel, a deadlock, a stopped process).
 */
export const DEFAULT_STALL_TIMEOUT_MS = 60_000;

/**
 * Extra allowance per prompt token before the first token: prefill reads the whole prompt before
 * any token comes out. 100 ms per token is 10 tokens/s, below the prefill rate of a 7-8B Q4 model on
 * a 4-core laptop CPU sharing its batch with other sequences (20-60 tokens/s), so an 8k-token prompt
 * gets 60 s + 819 s before it counts as stalled, while a chat prompt of a few hundred tokens is still
 * caught within about two minutes.
 */
export const PREFILL_ALLOWANCE_MS_PER_TOKEN = 100;

/**
 * How often the wrapper reads its runner's status for process transitions, besides the worker's
 * change notifications (cluster-placed engines do not notify the worker of every transition).
 */
export const RUNNER_OBSERVE_INTERVAL_MS = 1000;

/**
 * Most process entries (loading, ready, crashed, ...) a runner keeps, in a ring of their own: busy
 * traffic fills the request ring within seconds, and the crash an operator asks about must outlive it.
 */
export const RUNNER_PROCESS_ENTRIES = 64;

/**
 * A runner's flight recorder: process phases and request phases in two rings, so requests cannot push
 * the process history out, read as one list in the order they were recorded.
 */
export class RunnerFlightRecorder {
  readonly process: RunnerRecorder;
  readonly requests: RunnerRecorder;
  /** Recording order of each kept entry, to merge the rings (times can tie within a millisecond). */
  private readonly order = new WeakMap<RunnerEntry, number>();
  private recorded = 0;

  constructor(nowMs: () => number) {
    this.process = new RunnerRecorder(nowMs, RUNNER_PROCESS_ENTRIES);
    this.requests = new RunnerRecorder(nowMs, RUNNER_RECORDER_ENTRIES);
  }

  record(entry: Parameters<RunnerRecorder['record']>[0]): RunnerEntry {
    const ring = entry.requestId === undefined || entry.requestId === null ? this.process : this.requests;
    const full = ring.record(entry);
    this.order.set(full, this.recorded++);
    return full;
  }

  /**
   * Oldest first, at most RUNNER_RECORDER_ENTRIES (the wire's cap): every process entry kept, and
   * the newest request entries in the room left.
   */
  entries(): RunnerEntry[] {
    const process = this.process.entries();
    const requests = this.requests.entries().slice(-(RUNNER_RECORDER_ENTRIES - process.length));
    const seq = (entry: RunnerEntry): number => this.order.get(entry)!;
    return [...process, ...requests].sort((a, b) => seq(a) - seq(b));
  }
}

export interface RecordedRunnerOptions {
  /** Names the runner in node moments and the log. */
  instanceId: string;
  modelId: string;
  log: Logger;
  /** Default DEFAULT_STALL_TIMEOUT_MS. */
  stallTimeoutMs?: number;
  /** Where `runner-crash`, `runner-stall` and `breaker-open` moments go. */
  recordMoment?: RecordMoment;
  /** Default Date.now. */
  nowMs?: () => number;
  /** Resident memory of a process; default reads VmRSS from /proc (null where there is none). */
  rssBytes?: (pid: number) => number | null;
  /** Default RUNNER_OBSERVE_INTERVAL_MS. */
  observeIntervalMs?: number;
}

type Phase = { phase: RunnerPhase; detail: string | null };

interface Seen {
  state: RunnerState;
  restarts: number;
  reason: string | null;
}

/**
 * The process phases between two status readings. `crashNoted` says a crash was already recorded
 * for the current process (a load failure changes the reason before the exit); returns it updated.
 */
export function processPhases(prev: Seen | null, next: Seen, crashNoted: boolean): { phases: Phase[]; crashNoted: boolean } {
  const phases: Phase[] = [];
  const crashed = (detail: string | null): void => {
    if (!crashNoted) phases.push({ phase: 'crashed', detail });
    crashNoted = true;
  };
  if (prev === null) {
    const first: Record<RunnerState, RunnerPhase> = { starting: 'loading', restarting: 'restarting', ready: 'ready', failed: 'breaker-open', stopped: 'stopped' };
    return { phases: [{ phase: first[next.state], detail: next.reason }], crashNoted };
  }
  const respawned = next.restarts > prev.restarts;
  if (respawned) {
    // A crash the readings missed (it restarted between two of them) is still one.
    crashed(prev.reason);
    phases.push({ phase: 'restarting', detail: `restart ${next.restarts}` });
    crashNoted = false;
  }
  switch (next.state) {
    case 'ready':
      if (prev.state !== 'ready' || respawned) phases.push({ phase: 'ready', detail: null });
      crashNoted = false;
      break;
    case 'restarting':
      if (!respawned && (prev.state !== 'restarting' || prev.reason !== next.reason)) crashed(next.reason);
      break;
    case 'failed':
      if (prev.state === 'failed') break;
      if (prev.state !== 'starting') crashed(next.reason);
      phases.push({ phase: 'breaker-open', detail: next.reason });
      break;
    case 'stopped':
      if (prev.state !== 'stopped') phases.push({ phase: 'stopped', detail: null });
      break;
    case 'starting':
      break;
  }
  return { phases, crashNoted };
}

/** Resident memory of `pid` from /proc/<pid>/status; null off Linux or once the process is gone. */
export function procRssBytes(pid: number): number | null {
  try {
    // Synchronous on purpose: a procfs read is a few microseconds, and the entry keeps its order.
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** One runner as the worker holds it: the runner's contract, recorded and watched. */
export class RecordedRunner implements InstanceRunner {
  readonly recorder: RunnerFlightRecorder;
  /** Present exactly when the wrapped runner serves requests (rpc donors do not). */
  readonly run?: (task: RunnerTask, signal: AbortSignal) => AsyncIterable<TaskEvent>;
  private readonly stallTimeoutMs: number;
  private readonly rssBytes: (pid: number) => number | null;
  private readonly observer: NodeJS.Timeout;
  private seen: Seen | null = null;
  private crashNoted = false;
  /** `stop` records stopping and stopped itself. */
  private stopping = false;
  /**
   * When this runner last showed progress: an event of any of its requests, a stall's kill, or a
   * reading with nothing in flight (an engine that holds nothing is not silent). Queued requests are
   * watched against it, since their own silence says nothing until the engine takes them.
   */
  private lastProgressAtMs: number;
  /**
   * Prompt tokens of this runner's generations in prefill, and an upper estimate for those still
   * queued: their allowance holds for the queue too, since an engine may take a request and read its
   * prompt before it says `start` (llama-server's chat path says it with its first progress chunk).
   */
  private readonly prefilling = new Map<string, number>();
  private readonly nowMs: () => number;

  constructor(
    readonly inner: InstanceRunner,
    private readonly options: RecordedRunnerOptions,
  ) {
    this.nowMs = options.nowMs ?? Date.now;
    this.recorder = new RunnerFlightRecorder(this.nowMs);
    this.lastProgressAtMs = this.nowMs();
    this.stallTimeoutMs = options.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
    if (!(this.stallTimeoutMs > 0)) throw new RangeError(`stallTimeoutMs must be positive, got ${this.stallTimeoutMs}`);
    this.rssBytes = options.rssBytes ?? procRssBytes;
    const run = inner.run?.bind(inner);
    if (run) this.run = (task, signal) => this.recordRun(run, task, signal);
    this.observe();
    this.observer = setInterval(() => this.observe(), options.observeIntervalMs ?? RUNNER_OBSERVE_INTERVAL_MS);
    this.observer.unref();
  }

  status(): RunnerStatus {
    return this.inner.status();
  }

  whenReady(signal?: AbortSignal): Promise<void> {
    // Readiness recorded when it is learnt, not at the next reading.
    return this.inner.whenReady(signal).finally(() => this.observe());
  }

  kill(reason: string): void {
    this.inner.kill?.(reason);
  }

  stderrTail(): string[] {
    return this.inner.stderrTail?.() ?? [];
  }

  async stop(): Promise<void> {
    if (this.stopping) return this.inner.stop();
    this.stopping = true;
    clearInterval(this.observer);
    this.recordProcess('stopping', null);
    try {
      await this.inner.stop();
    } finally {
      this.recordProcess('stopped', null);
    }
  }

  /** Records the process transitions since the last reading; the worker calls it on every change. */
  observe(): void {
    if (this.stopping) return;
    const status = this.inner.status();
    const next: Seen = { state: status.state, restarts: status.restarts, reason: status.reason };
    const prev = this.seen;
    if (prev && prev.state === next.state && prev.restarts === next.restarts && prev.reason === next.reason) return;
    this.seen = next;
    const { phases, crashNoted } = processPhases(prev, next, this.crashNoted);
    this.crashNoted = crashNoted;
    for (const { phase, detail } of phases) this.recordProcess(phase, detail, status.pid);
  }

  private recordProcess(phase: RunnerPhase, detail: string | null, pid = this.inner.status().pid): void {
    this.recorder.record({ phase, detail, rssBytes: pid === null ? null : this.rssBytes(pid) });
    const data = { instanceId: this.options.instanceId, modelId: this.options.modelId, ...(detail === null ? {} : { reason: detail }) };
    if (phase === 'crashed') this.options.recordMoment?.('runner-crash', `runner of ${this.options.modelId} crashed: ${detail ?? 'no reason given'}`, data);
    if (phase === 'breaker-open') this.options.recordMoment?.('breaker-open', `runner of ${this.options.modelId} gave up: ${detail ?? 'no reason given'}`, data);
  }

  private recordRun(run: NonNullable<InstanceRunner['run']>, task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    const requestId = randomBytes(4).toString('hex');
    // A transition not yet read goes before the request it affects.
    this.observe();
    this.recorder.record({ phase: 'queued', requestId });
    // Our own abort, for a consumer that stops reading; the engine cancels through its usual path.
    const abandoned = new AbortController();
    let inner: AsyncIterable<TaskEvent>;
    try {
      inner = run(task, AbortSignal.any([signal, abandoned.signal]));
    } catch (error) {
      this.recorder.record({ phase: 'failed', requestId, detail: describe(error) });
      throw error;
    }
    const out = new AsyncQueue<TaskEvent>(() => abandoned.abort());
    void this.pump(requestId, task, inner, out, abandoned);
    return out;
  }

  /**
   * Moves the engine's events to `out` as they come, independent of how fast the consumer reads, so
   * the watchdog times the engine and not the client.
   */
  private async pump(requestId: string, task: RunnerTask, inner: AsyncIterable<TaskEvent>, out: AsyncQueue<TaskEvent>, abandoned: AbortController): Promise<void> {
    // Only generations are watched: a count ends at once, and an embedding's later input groups
    // queue again behind other requests, so its silence is not a hang.
    const watched = task.kind === 'generate';
    const admittedAtMs = this.nowMs();
    let phase: 'queued' | 'prefill' | 'decode' | 'ended' = 'queued';
    let promptTokens: number | null = null;
    let stalled = false;
    let timer: NodeJS.Timeout | null = null;
    // What the armed timer allows, so a token event only refreshes it (one timer per request).
    let armedFor: { phase: 'queued' | 'prefill' | 'decode'; silentMs: number } | null = null;
    const disarm = (): void => {
      if (timer) clearTimeout(timer);
      timer = null;
      armedFor = null;
    };
    const stall = (stalledIn: 'queued' | 'prefill' | 'decode', silentMs: number): void => {
      timer = null;
      armedFor = null;
      stalled = true;
      this.prefilling.delete(requestId);
      this.stalled(requestId, stalledIn, promptTokens, silentMs, out, abandoned);
    };
    // A queued request cannot be silent itself: it checks the runner's progress and waits again
    // while the engine holds nothing or some request on it still speaks.
    const watchQueue = (delayMs: number): void => {
      armedFor = { phase: 'queued', silentMs: delayMs };
      timer = setTimeout(() => {
        const verdict = this.queueVerdict(admittedAtMs);
        if (verdict.stalledForMs !== null) stall('queued', verdict.stalledForMs);
        else watchQueue(verdict.recheckInMs);
      }, delayMs);
    };
    const arm = (): void => {
      if (!watched || phase === 'ended') return disarm();
      // Still queued (an event before `start`): the queue watch already runs.
      if (phase === 'queued') return;
      const silentMs = phase === 'prefill' ? this.stallTimeoutMs + (promptTokens ?? 0) * PREFILL_ALLOWANCE_MS_PER_TOKEN : this.stallTimeoutMs;
      if (timer && armedFor?.phase === phase && armedFor.silentMs === silentMs) {
        timer.refresh();
        return;
      }
      disarm();
      const stalledIn = phase;
      armedFor = { phase, silentMs };
      timer = setTimeout(() => stall(stalledIn, silentMs), silentMs);
    };
    if (watched) {
      this.prefilling.set(requestId, promptTokensAtMost(task));
      watchQueue(this.stallTimeoutMs);
    }
    try {
      for await (const event of inner) {
        // After a stall the request is over for its consumer; what the engine still says is dropped
        // until its crash path (or the cancel) ends the stream.
        if (stalled) continue;
        // A queue report is the adapter's bookkeeping, not the engine working: new arrivals must not
        // keep a wedged engine looking alive.
        if (event.type !== 'queued') this.lastProgressAtMs = this.nowMs();
        if (event.type === 'start') {
          phase = 'prefill';
          promptTokens = event.promptTokens;
          this.prefilling.set(requestId, promptTokens);
          this.recorder.record({ phase: 'prefill', requestId, promptTokens });
        } else if (event.type === 'end') {
          phase = 'ended';
          this.prefilling.delete(requestId);
          this.recorder.record({ phase: 'done', requestId, promptTokens: event.usage.promptTokens, completionTokens: event.usage.completionTokens });
        } else if (phase === 'prefill' && event.type !== 'embeddings') {
          phase = 'decode';
          this.prefilling.delete(requestId);
          this.recorder.record({ phase: 'decode', requestId, promptTokens });
        }
        out.push(event);
        arm();
      }
      disarm();
      out.end();
    } catch (error) {
      disarm();
      if (stalled) return;
      this.recorder.record({ phase: 'failed', requestId, promptTokens, detail: out.ended && abandoned.signal.aborted ? 'CANCELLED: the consumer stopped reading' : describe(error) });
      out.fail(error);
    } finally {
      this.prefilling.delete(requestId);
    }
  }

  /**
   * Whether a queued request's wait is a hang: the engine holds requests and none of this runner's
   * requests said anything for the stall timeout plus the largest prefill allowance among those in
   * prefill, counted from the latest of the runner's last progress and this request's admission.
   */
  private queueVerdict(admittedAtMs: number): { stalledForMs: number; recheckInMs: 0 } | { stalledForMs: null; recheckInMs: number } {
    const nowMs = this.nowMs();
    if (this.inner.status().inFlight === 0) {
      this.lastProgressAtMs = nowMs;
      return { stalledForMs: null, recheckInMs: this.stallTimeoutMs };
    }
    let allowanceMs = this.stallTimeoutMs;
    for (const tokens of this.prefilling.values()) allowanceMs = Math.max(allowanceMs, this.stallTimeoutMs + tokens * PREFILL_ALLOWANCE_MS_PER_TOKEN);
    const silentMs = nowMs - Math.max(this.lastProgressAtMs, admittedAtMs);
    if (silentMs < allowanceMs) return { stalledForMs: null, recheckInMs: allowanceMs - silentMs };
    return { stalledForMs: silentMs, recheckInMs: 0 };
  }

  private stalled(requestId: string, phase: 'queued' | 'prefill' | 'decode', promptTokens: number | null, silentMs: number, out: AsyncQueue<TaskEvent>, abandoned: AbortController): void {
    // The kill starts a new spell: the other queued requests wait for the restarted engine.
    this.lastProgressAtMs = this.nowMs();
    const where = phase === 'queued' ? 'while this request queued' : phase === 'prefill' ? 'before its first token' : 'mid-answer';
    const detail = `no event for ${silentMs} ms ${where}`;
    this.recorder.record({ phase: 'stalled', requestId, promptTokens, detail });
    this.options.recordMoment?.('runner-stall', `a request to ${this.options.modelId} stalled: ${detail}; restarting its runner`, {
      instanceId: this.options.instanceId,
      modelId: this.options.modelId,
      requestId,
      phase,
      silentMs,
    });
    this.options.log.error({ requestId, phase, silentMs }, `hang watchdog: ${detail}; killing the engine so that it restarts`);
    out.fail(
      new ShoalError(
        'RUNNER_STALLED',
        `the model's engine produced nothing for ${Math.round(silentMs / 1000)} s ${where} and is being restarted: retry the request (if the model is merely this slow, raise the node's --stall-timeout)`,
      ),
    );
    this.inner.kill?.(`hang watchdog: request ${requestId} got no event for ${silentMs} ms ${where}`);
    // Cancelled in the engine as well, so its slot is given back even where the kill is slow to land.
    abandoned.abort();
  }
}

/**
 * More tokens than the prompt of `task` can have, from its size alone (tokenizing here would cost what
 * the engine does): no tokenizer makes a token of less than half a UTF-8 byte on average.
 */
export function promptTokensAtMost(task: RunnerTask): number {
  if (task.kind !== 'generate') return 0;
  return Math.ceil((Buffer.byteLength(JSON.stringify(task.prompt)) + (task.tools.length === 0 ? 0 : Buffer.byteLength(JSON.stringify(task.tools)))) / 2);
}

function describe(error: unknown): string {
  return error instanceof ShoalError ? `${error.code}: ${error.message}` : errorMessage(error);
}
