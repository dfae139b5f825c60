import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { AsyncQueue } from '../../common/async-queue.js';
import { ShoalError, errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { RunnerTask, type TaskEvent } from '../../wire/task.js';
import { formatPath } from '../../common/format-path.js';
import { forwardLines, LineTail, signalGroup } from '../child-output.js';
import { CrashLoop, DEFAULT_CRASH_LOOP, withOverrides, type RestartPolicy } from '../crash-loop.js';
import type { InstanceRunner, RunnerState, RunnerStatus } from '../runner-contract.js';
import { FromRunner, type ModelFacts, type RequestId, type RunnerConfig, type ToRunner } from './protocol.js';

/**
 * Spawn to `ready` for the node-llama-cpp child: it memory-maps a GGUF file already on this node's
 * disk and creates one context, so two minutes means hung. (llama-server gets longer: see
 * engines/llama-server.ts.)
 */
const RUNNER_LOAD_TIMEOUT_MS = 120_000;

export interface SupervisorOptions {
  config: RunnerConfig;
  log: Logger;
  /** How long a runner may take from spawn to `ready` before it is killed as hung. Default 120 000. */
  loadTimeoutMs?: number;
  /** Requests allowed to wait for a free sequence; more are refused with QUEUE_FULL. Default 256. */
  maxQueuedRequests?: number;
  /** First restart delay after a crash; doubles per consecutive crash up to `maxBackoffMs`. Default 1000. */
  initialBackoffMs?: number;
  /** Default 30 000. */
  maxBackoffMs?: number;
  /** Crashes within `crashWindowMs` that open the circuit breaker (no more restarts). Default 5. */
  maxCrashes?: number;
  /** Default 600 000 (10 minutes). */
  crashWindowMs?: number;
  /** How long `stop` waits for a clean exit before killing the process group. Default 3000. */
  stopGraceMs?: number;
  /** Called whenever status() may have changed (state, in flight, queued): telemetry republishes on it. */
  onChange?: () => void;
}

interface Request {
  id: RequestId;
  task: RunnerTask;
  events: AsyncQueue<TaskEvent>;
  /** Set once the request was sent to the runner and holds one of its sequences. */
  dispatched: boolean;
  /** The queue position last reported to it, so a report goes out only when it moved. */
  reportedPosition: number | null;
  detach: () => void;
}

const CHILD_PATH = fileURLToPath(new URL('./child.js', import.meta.url));

/**
 * Owns one runner child: spawns it, feeds it at most `sequences` requests at a time from a bounded
 * FIFO (each waiting request hears its position as `queued` events), restarts it with backoff when
 * it crashes, and gives up (circuit breaker) when it keeps crashing. A crash fails only the requests
 * the runner held; queued ones wait for the restart.
 */
export class RunnerSupervisor implements InstanceRunner, AsyncDisposable {
  private child: ChildProcess | null = null;
  private state: RunnerState = 'starting';
  private reason: string | null = 'loading the model';
  private readonly requests = new Map<RequestId, Request>();
  private readonly queue: Request[] = [];
  private active = 0;
  private slots = 0;
  private info: { contextSize: number; sequences: number; gpu: string | false; model: ModelFacts } | null = null;
  private readonly crashLoop: CrashLoop;
  private restarts = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  private loadTimer: NodeJS.Timeout | null = null;
  private readonly readyWaiters = new Set<() => void>();
  private readonly opts: { maxQueuedRequests: number; stopGraceMs: number };
  /** Why the current child is being killed by us (`kill`), for the crash reason. */
  private killReason: string | null = null;
  private readonly stderr = new LineTail();

  constructor(private readonly options: SupervisorOptions) {
    this.opts = {
      maxQueuedRequests: options.maxQueuedRequests ?? 256,
      stopGraceMs: options.stopGraceMs ?? 3000,
    };
    const policy: RestartPolicy = withOverrides({ ...DEFAULT_CRASH_LOOP, loadTimeoutMs: RUNNER_LOAD_TIMEOUT_MS }, options);
    this.crashLoop = new CrashLoop(policy, Date.now);
    this.spawn();
  }

  status(): RunnerStatus {
    return {
      state: this.state,
      reason: this.reason,
      pid: this.child?.pid ?? null,
      restarts: this.restarts,
      inFlight: this.active,
      queued: this.queue.length,
      contextSize: this.info?.contextSize ?? null,
      sequences: this.info?.sequences ?? null,
      gpu: this.info?.gpu ?? null,
      model: this.info?.model ?? null,
    };
  }

  /** Resolves once the runner is ready; rejects when it fails for good or `signal` aborts. */
  whenReady(signal?: AbortSignal): Promise<void> {
    if (this.state === 'ready') return Promise.resolve();
    if (this.state === 'failed' || this.state === 'stopped') return Promise.reject(this.unavailableError());
    // An aborted signal fires no 'abort' event any more: without this the wait would outlive it.
    if (signal?.aborted) return Promise.reject(new ShoalError('CANCELLED', 'stopped waiting for the runner'));
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.readyWaiters.delete(settle);
        reject(new ShoalError('CANCELLED', 'stopped waiting for the runner'));
      };
      const settle = (): void => {
        signal?.removeEventListener('abort', onAbort);
        if (this.state === 'ready') resolve();
        else reject(this.unavailableError());
      };
      this.readyWaiters.add(settle);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Queues a task and streams its events. Aborting `signal` cancels it: a queued task leaves the queue,
   * a running one is stopped in the runner, and the stream ends with CANCELLED.
   */
  run(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    if (this.state === 'failed' || this.state === 'stopped') throw this.unavailableError();
    // Adapters build tasks from their own schemas; anything the wire type refuses must fail here,
    // with the field named, rather than be dropped by the runner and leave the request hanging.
    const valid = RunnerTask.safeParse(task);
    if (!valid.success) {
      const issue = valid.error.issues[0]!;
      throw new ShoalError('BAD_REQUEST', `invalid request: ${formatPath(issue.path) || 'task'}: ${issue.message}`);
    }
    if (this.queue.length >= this.opts.maxQueuedRequests) {
      throw new ShoalError(
        'QUEUE_FULL',
        `${this.queue.length} requests are already waiting for this model (limit ${this.opts.maxQueuedRequests}): retry later or add replicas`,
      );
    }
    const id = randomUUID() as RequestId;
    const onAbort = (): void => this.cancel(id);
    const request: Request = {
      id,
      task,
      events: new AsyncQueue<TaskEvent>(() => this.cancel(id)),
      dispatched: false,
      reportedPosition: null,
      detach: () => signal.removeEventListener('abort', onAbort),
    };
    this.requests.set(id, request);
    this.queue.push(request);
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) this.cancel(id);
    else this.pump();
    return request.events;
  }

  private cancel(id: RequestId): void {
    const request = this.requests.get(id);
    if (!request) return;
    request.events.fail(new ShoalError('CANCELLED', 'the request was cancelled'));
    if (request.dispatched) {
      // The sequence stays held until the runner confirms with `failed`, so it is never double-booked.
      this.sendToChild({ type: 'cancel', id });
    } else {
      this.queue.splice(this.queue.indexOf(request), 1);
      this.forget(request);
      this.reportPositions();
      this.options.onChange?.();
    }
  }

  private pump(): void {
    while (this.state === 'ready' && this.active < this.slots && this.queue.length > 0) {
      const request = this.queue.shift()!;
      request.dispatched = true;
      this.active += 1;
      try {
        this.sendToChild({ type: 'run', id: request.id, task: request.task });
      } catch (error) {
        // The runner never saw the task, so no `failed` will come to give its sequence back.
        this.options.log.warn({ err: error }, 'could not send a task to the runner');
        request.events.fail(new ShoalError('BAD_REQUEST', `the request could not be sent to the model's runner: ${errorMessage(error)}`));
        this.forget(request);
        this.active -= 1;
      }
    }
    this.reportPositions();
    this.options.onChange?.();
  }

  /** Tells each waiting request its place (1 = admitted next) when it first waits and whenever it moved up. */
  private reportPositions(): void {
    this.queue.forEach((request, index) => {
      const position = index + 1;
      if (request.reportedPosition === position) return;
      request.reportedPosition = position;
      request.events.push({ type: 'queued', position });
    });
  }

  private forget(request: Request): void {
    request.detach();
    this.requests.delete(request.id);
  }

  private spawn(): void {
    this.state = this.restarts === 0 ? 'starting' : 'restarting';
    this.reason = 'loading the model';
    this.killReason = null;
    this.options.onChange?.();
    const child = fork(CHILD_PATH, [], {
      // Its own process group, so stopping the node can kill the engine and anything it started.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'json',
      // node-llama-cpp runs its decode and sampling jobs on libuv's pool, whose default 4 threads
      // fight the engine's own threads for the cores: with 1, a 16-sequence batch ran 2-2.3x faster.
      env: { ...process.env, UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? '1' },
    });
    this.child = child;
    const log = this.options.log.child({ runnerPid: child.pid });
    forwardLines(child.stdout, (line) => log.info({ stream: 'stdout' }, line));
    forwardLines(child.stderr, (line) => {
      this.stderr.push(line);
      log.warn({ stream: 'stderr' }, line);
    });
    child.on('message', (raw: unknown) => this.onMessage(child, raw));
    child.on('error', (error) => log.error({ err: error }, 'runner process error'));
    child.once('exit', (code, signal) => this.onExit(child, code, signal));
    const { loadTimeoutMs } = this.crashLoop.policy;
    this.loadTimer = setTimeout(() => {
      this.reason = `the model did not load within ${loadTimeoutMs} ms`;
      log.error(this.reason);
      killGroup(child, 'SIGKILL');
    }, loadTimeoutMs);
    this.sendToChild({ type: 'load', config: this.options.config });
  }

  private onMessage(child: ChildProcess, raw: unknown): void {
    if (child !== this.child) return;
    const parsed = FromRunner.safeParse(raw);
    if (!parsed.success) {
      this.options.log.error({ issues: parsed.error.issues }, 'runner broke the protocol; killing it');
      killGroup(child, 'SIGKILL');
      return;
    }
    const message = parsed.data;
    switch (message.type) {
      case 'ready': {
        this.clearLoadTimer();
        this.state = 'ready';
        this.reason = null;
        this.slots = message.sequences;
        this.info = { contextSize: message.contextSize, sequences: message.sequences, gpu: message.gpu, model: message.model };
        this.options.log.info({ contextSize: message.contextSize, sequences: message.sequences, gpu: message.gpu, pid: child.pid }, 'runner ready');
        this.notifyReadyWaiters();
        this.pump();
        break;
      }
      case 'fatal':
        this.reason = `the model failed to load: ${message.message}`;
        this.options.log.error(this.reason);
        break;
      case 'event': {
        const request = this.requests.get(message.id);
        if (!request) return;
        request.events.push(message.event);
        if (message.event.type === 'end') this.release(request, null);
        break;
      }
      case 'failed': {
        const request = this.requests.get(message.id);
        if (request) this.release(request, new ShoalError(message.code, message.message, { param: message.param ?? null }));
        break;
      }
      case 'log':
        this.options.log[message.level]({ runnerPid: child.pid }, message.message);
        break;
    }
  }

  private release(request: Request, error: ShoalError | null): void {
    if (error) request.events.fail(error);
    else request.events.end();
    this.forget(request);
    if (request.dispatched) this.active -= 1;
    this.pump();
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return;
    this.clearLoadTimer();
    this.child = null;
    this.active = 0;
    this.slots = 0;
    if (this.state === 'stopped') return;
    const how = signal ? `signal ${signal}` : `exit code ${code}`;
    const lastReason = this.killReason ?? (this.state === 'ready' ? null : this.reason);
    const reason = lastReason && lastReason !== 'loading the model' ? `${lastReason} (${how})` : `runner exited with ${how}`;
    this.options.log.error({ code, signal }, `runner crashed: ${reason}`);
    for (const request of [...this.requests.values()]) {
      if (!request.dispatched) continue;
      request.events.fail(new ShoalError('RUNNER_CRASHED', `the model's runner crashed mid-request (${reason}): retry the request`));
      this.forget(request);
    }
    const verdict = this.crashLoop.crashed();
    if (verdict.kind === 'give-up') {
      this.state = 'failed';
      this.reason = this.crashLoop.giveUpReason(verdict, reason);
      this.options.log.error(this.reason);
      this.failQueued();
      this.notifyReadyWaiters();
      this.options.onChange?.();
      return;
    }
    const { delayMs } = verdict;
    this.state = 'restarting';
    this.reason = `restarting in ${delayMs} ms after: ${reason}`;
    this.options.onChange?.();
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      this.restarts += 1;
      this.spawn();
    }, delayMs);
  }

  private failQueued(): void {
    for (const request of this.queue.splice(0)) {
      request.events.fail(this.unavailableError());
      this.forget(request);
    }
  }

  private unavailableError(): ShoalError {
    if (this.state === 'stopped') return new ShoalError('RUNNER_STOPPED', 'the model instance was stopped');
    return new ShoalError('MODEL_FAILED', this.reason ?? 'the model instance failed');
  }

  private notifyReadyWaiters(): void {
    for (const waiter of [...this.readyWaiters]) waiter();
    this.readyWaiters.clear();
  }

  private clearLoadTimer(): void {
    if (this.loadTimer) clearTimeout(this.loadTimer);
    this.loadTimer = null;
  }

  private sendToChild(message: ToRunner): void {
    const child = this.child;
    if (!child?.connected) return;
    child.send(message, (error) => {
      if (error) this.options.log.warn({ err: error }, 'could not send to runner');
    });
  }

  kill(reason: string): void {
    const child = this.child;
    if (!child || this.state === 'stopped') return;
    this.killReason = reason;
    this.options.log.error({ runnerPid: child.pid }, `killing the runner: ${reason}`);
    killGroup(child, 'SIGKILL');
  }

  stderrTail(): string[] {
    return this.stderr.snapshot();
  }

  /** Stops the runner: a clean shutdown first, then SIGKILL to its whole process group. */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.reason = 'stopped';
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.clearLoadTimer();
    for (const request of [...this.requests.values()]) {
      request.events.fail(new ShoalError('RUNNER_STOPPED', 'the model instance was stopped'));
      this.forget(request);
    }
    this.queue.length = 0;
    this.notifyReadyWaiters();
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.sendToChild({ type: 'shutdown' });
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), this.opts.stopGraceMs);
    await exited;
    clearTimeout(timer);
    // The engine may have started helpers of its own; none may outlive the instance.
    killGroup(child, 'SIGKILL');
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  signalGroup(child.pid, signal);
}

