// One engine binary (llama-server, ggml-rpc-server) kept running: spawned in a process group of its
// own on a loopback port it picks, probed until it serves, restarted with backoff when it dies, and
// given up (circuit breaker) when it keeps dying. The owner layers requests on top.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { access, constants } from 'node:fs/promises';
import { createServer } from 'node:net';
import { ShoalError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { CrashLoop, type RestartPolicy } from '../crash-loop.js';
import type { RunnerState } from '../runner-contract.js';
import { forwardLines, LineTail, signalGroup } from '../child-output.js';
import { removeEngineRecord, trackLiveGroup, untrackLiveGroup, writeEngineRecord } from './orphans.js';

export interface ManagedProcessPolicy extends RestartPolicy {
  /** How long `stop` waits after SIGTERM before SIGKILL to the process group. */
  stopGraceMs: number;
}

/**
 * util-linux's `setpriv`, which execs the engine with a parent-death signal: a node killed outright
 * (SIGKILL, OOM) then takes its engines with it instead of leaving them holding memory until the
 * next start reaps them. Elsewhere only that reaping applies.
 */
const PARENT_DEATH_WRAPPER = process.platform === 'linux' ? (['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path)) ?? null) : null;

/** The default for `stopGraceMs`. */
export const DEFAULT_STOP_GRACE_MS = 3000;

export interface ManagedProcessOptions<Info> {
  /** For messages: `llama-server`, `ggml-rpc-server`. */
  name: string;
  binaryPath: string;
  /** The node's data directory: the child is recorded under `<dataDir>/run/engines` while it runs. */
  dataDir: string;
  log: Logger;
  policy: ManagedProcessPolicy;
  /** Command line for one spawn listening on `port`. */
  args: (port: number) => Promise<string[]> | string[];
  /** Extra environment (secrets go here, never on the command line, which every local user can read). */
  env?: Record<string, string>;
  /** Resolves once the fresh process on `port` serves, with what the owner wants to know about it. */
  probe: (port: number, signal: AbortSignal) => Promise<Info>;
  onReady?: (info: Info) => void;
  /** The process died (crash, kill, failed load). `error` is what in-flight work should fail with. */
  onCrash?: (error: ShoalError) => void;
  /** The breaker opened or the process was stopped: nothing will run again. */
  onGiveUp?: (error: ShoalError) => void;
  /** The state changed (starting, ready, restarting, failed, stopped). */
  onChange?: () => void;
}

/** Lines of the child's output kept to explain a crash. */
const TAIL_LINES = 12;
/** Between readiness probes. */
export const PROBE_INTERVAL_MS = 100;

export class ManagedProcess<Info> {
  private child: ChildProcess | null = null;
  private stateValue: RunnerState = 'starting';
  private reasonValue: string | null;
  private infoValue: Info | null = null;
  private portValue: number | null = null;
  private lastPort: number | null = null;
  private readonly crashLoop: CrashLoop;
  private restartsValue = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  private loadTimer: NodeJS.Timeout | null = null;
  private probeAbort: AbortController | null = null;
  /** Why the current child is being killed by us (load timeout), for the crash reason. */
  private killReason: string | null = null;
  private tail: string[] = [];
  /** The last stderr lines for diagnostics, across restarts (`tail` only explains the current child). */
  private readonly stderr = new LineTail();
  private readonly readyWaiters = new Set<() => void>();
  private stopped: Promise<void> | null = null;
  /** The deletion of the last exited child's orphan record, awaited by stop(). */
  private recordRemoval: Promise<void> = Promise.resolve();
  /** Record writes by pid: a removal waits for its write, or a fast exit would leave the record behind. */
  private readonly recordWrites = new Map<number, Promise<void>>();
  private readonly exited = new WeakSet<ChildProcess>();

  constructor(private readonly options: ManagedProcessOptions<Info>) {
    this.reasonValue = `starting ${options.name}`;
    this.crashLoop = new CrashLoop(options.policy, Date.now);
    this.startChild();
  }

  private startChild(): void {
    this.spawnChild().catch((error: unknown) => {
      if (!this.isStopped()) this.giveUp(`${this.options.name} could not be started: ${(error as Error).message}`);
    });
  }

  get state(): RunnerState {
    return this.stateValue;
  }

  get reason(): string | null {
    return this.reasonValue;
  }

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  get restarts(): number {
    return this.restartsValue;
  }

  /** The port of the current process; null while none listens. */
  get port(): number | null {
    return this.stateValue === 'ready' ? this.portValue : null;
  }

  /** What the probe learned about the current process; null until it is ready. */
  get info(): Info | null {
    return this.infoValue;
  }

  /** Resolves once ready; rejects when it fails for good, is stopped, or `signal` aborts. */
  whenReady(signal?: AbortSignal): Promise<void> {
    if (this.stateValue === 'ready') return Promise.resolve();
    if (this.stateValue === 'failed' || this.stateValue === 'stopped') return Promise.reject(this.unavailableError());
    if (signal?.aborted) return Promise.reject(new ShoalError('CANCELLED', `stopped waiting for ${this.options.name}`));
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.readyWaiters.delete(settle);
        reject(new ShoalError('CANCELLED', `stopped waiting for ${this.options.name}`));
      };
      const settle = (): void => {
        signal?.removeEventListener('abort', onAbort);
        if (this.stateValue === 'ready') resolve();
        else if (this.stateValue === 'failed' || this.stateValue === 'stopped') reject(this.unavailableError());
        else this.readyWaiters.add(settle); // woken by a crash: wait for the restart
      };
      this.readyWaiters.add(settle);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  unavailableError(): ShoalError {
    if (this.stateValue === 'stopped') return new ShoalError('RUNNER_STOPPED', 'the model instance was stopped');
    if (this.stateValue === 'failed') return new ShoalError('MODEL_FAILED', this.reasonValue ?? `${this.options.name} failed`);
    return new ShoalError('MODEL_LOADING', this.reasonValue ?? `${this.options.name} is starting`);
  }

  /** Read through a method so the compiler does not narrow it across awaits (stop() may change it). */
  private isStopped(): boolean {
    return this.stateValue === 'stopped';
  }

  private async spawnChild(): Promise<void> {
    const { name, binaryPath, log } = this.options;
    this.stateValue = this.restartsValue === 0 ? 'starting' : 'restarting';
    this.reasonValue = `starting ${name}`;
    this.killReason = null;
    this.tail = [];
    this.options.onChange?.();
    let args: string[];
    let port: number;
    try {
      await access(binaryPath, constants.X_OK);
      // The same port as before when it is free: whatever points at this engine (a tunnel to a
      // donor, a driver's --rpc list) keeps working across a restart.
      port = await freeLoopbackPort(this.lastPort);
      this.lastPort = port;
      args = await this.options.args(port);
    } catch (error) {
      if (this.isStopped()) return;
      const missing = (error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'EACCES';
      this.giveUp(
        missing
          ? `${name} is not built or not executable at ${binaryPath}: run \`shoal doctor --fix\``
          : `${name} could not be started: ${(error as Error).message}`,
      );
      return;
    }
    if (this.isStopped()) return;
    const [program, argv] = PARENT_DEATH_WRAPPER ? [PARENT_DEATH_WRAPPER, ['--pdeathsig', 'SIGKILL', '--', binaryPath, ...args]] : [binaryPath, args];
    const child = spawn(program, argv, {
      // Its own process group, so stopping kills the engine and anything it started.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...this.options.env },
    });
    this.child = child;
    this.portValue = port;
    const childLog = log.child({ engine: name, enginePid: child.pid });
    const onLine = (line: string): void => {
      this.tail.push(line);
      if (this.tail.length > TAIL_LINES) this.tail.shift();
      // llama.cpp's log lines carry a level letter after the timestamp; only errors are worth a
      // warning in the node's log, the rest (a line per request) is debug.
      if (/^\s*[\d.]+ E /.test(line)) childLog.warn(line);
      else childLog.debug(line);
    };
    forwardLines(child.stdout, onLine);
    forwardLines(child.stderr, (line) => {
      this.stderr.push(line);
      onLine(line);
    });
    child.once('exit', (code, signal) => this.onExit(child, code, signal));
    child.on('error', (error) => {
      childLog.error({ err: error }, `${name} process error`);
      if (child.pid === undefined) {
        // It never started, and no 'exit' may follow: count it as a crash now.
        this.killReason = `${name} could not be spawned: ${error.message}`;
        this.onExit(child, null, null);
      }
    });
    if (child.pid === undefined) return;
    trackLiveGroup(child.pid);
    this.recordWrites.set(
      child.pid,
      writeEngineRecord(this.options.dataDir, { pid: child.pid, pgid: child.pid, binary: binaryPath, startedAtMs: Date.now() }).catch((error: unknown) =>
        childLog.warn({ err: error }, 'could not record the engine process for orphan reaping'),
      ),
    );
    this.loadTimer = setTimeout(() => {
      this.killReason = `${name} did not become ready within ${this.options.policy.loadTimeoutMs} ms`;
      childLog.error(this.killReason);
      killGroup(child.pid!, 'SIGKILL');
    }, this.options.policy.loadTimeoutMs);
    const probeAbort = new AbortController();
    this.probeAbort = probeAbort;
    this.options.probe(port, probeAbort.signal).then(
      (info) => {
        if (child !== this.child || probeAbort.signal.aborted || this.stateValue === 'stopped') return;
        this.clearLoadTimer();
        this.probeAbort = null;
        this.infoValue = info;
        this.stateValue = 'ready';
        this.reasonValue = null;
        childLog.info({ port }, `${name} ready`);
        this.options.onReady?.(info);
        this.notifyReadyWaiters();
        this.options.onChange?.();
      },
      (error: unknown) => {
        if (child !== this.child || probeAbort.signal.aborted || this.stateValue === 'stopped') return;
        // The process runs but refuses to serve (bad model file, unsupported flags): kill it, and the
        // exit counts as a crash with this reason.
        this.killReason = `${name} started but failed its readiness check: ${(error as Error).message}`;
        childLog.error(this.killReason);
        killGroup(child.pid!, 'SIGKILL');
      },
    );
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exited.has(child)) return;
    this.exited.add(child);
    if (child.pid !== undefined) {
      // Whatever it started must not outlive it.
      killGroup(child.pid, 'SIGKILL');
      untrackLiveGroup(child.pid);
      const pid = child.pid;
      const written = this.recordWrites.get(pid) ?? Promise.resolve();
      this.recordWrites.delete(pid);
      this.recordRemoval = written.then(() => removeEngineRecord(this.options.dataDir, pid)).catch(() => undefined);
    }
    if (child !== this.child) return;
    this.child = null;
    this.portValue = null;
    this.infoValue = null;
    this.clearLoadTimer();
    this.probeAbort?.abort();
    this.probeAbort = null;
    if (this.stateValue === 'stopped' || this.stateValue === 'failed') return;
    const how = signal ? `signal ${signal}` : code !== null ? `exit code ${code}` : 'no exit status';
    const detail = this.killReason ?? lastWords(this.tail);
    const reason = `${this.options.name} exited with ${how}${detail ? `: ${detail}` : ''}`;
    this.options.log.error({ code, signal, engine: this.options.name }, `engine crashed: ${reason}`);
    this.options.onCrash?.(new ShoalError('RUNNER_CRASHED', `the model's engine crashed mid-request (${reason}): retry the request`));
    const verdict = this.crashLoop.crashed();
    if (verdict.kind === 'give-up') {
      this.giveUp(this.crashLoop.giveUpReason(verdict, reason));
      return;
    }
    const { delayMs } = verdict;
    this.stateValue = 'restarting';
    this.reasonValue = `restarting in ${delayMs} ms after: ${reason}`;
    this.notifyReadyWaiters();
    this.options.onChange?.();
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      this.restartsValue += 1;
      this.startChild();
    }, delayMs);
  }

  private giveUp(reason: string): void {
    this.stateValue = 'failed';
    this.reasonValue = reason;
    this.options.log.error({ engine: this.options.name }, reason);
    this.options.onGiveUp?.(this.unavailableError());
    this.notifyReadyWaiters();
    this.options.onChange?.();
  }

  private notifyReadyWaiters(): void {
    const waiters = [...this.readyWaiters];
    this.readyWaiters.clear();
    for (const waiter of waiters) waiter();
  }

  private clearLoadTimer(): void {
    if (this.loadTimer) clearTimeout(this.loadTimer);
    this.loadTimer = null;
  }

  /** SIGKILL to the current process group; its exit then counts as a crash with `reason`. */
  kill(reason: string): void {
    const pid = this.child?.pid;
    if (pid === undefined || this.isStopped()) return;
    this.killReason = reason;
    this.options.log.error({ engine: this.options.name, enginePid: pid }, `killing ${this.options.name}: ${reason}`);
    killGroup(pid, 'SIGKILL');
  }

  stderrTail(): string[] {
    return this.stderr.snapshot();
  }

  /** SIGTERM to the process group, SIGKILL after the grace period; resolves once it has exited. */
  stop(): Promise<void> {
    this.stopped ??= this.stopOnce();
    return this.stopped;
  }

  private async stopOnce(): Promise<void> {
    const wasFailed = this.stateValue === 'failed';
    this.stateValue = 'stopped';
    this.reasonValue = 'stopped';
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.clearLoadTimer();
    this.probeAbort?.abort();
    if (!wasFailed) this.options.onGiveUp?.(this.unavailableError());
    this.notifyReadyWaiters();
    this.options.onChange?.();
    const child = this.child;
    if (!child || child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    killGroup(child.pid, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child.pid!, 'SIGKILL'), this.options.policy.stopGraceMs);
    await exited;
    clearTimeout(timer);
    await this.recordRemoval;
  }
}

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  signalGroup(pgid, signal);
}

/** The lines that explain a death: the last error lines, else the last line. */
function lastWords(tail: readonly string[]): string | null {
  const errors = tail.filter((line) => /error|failed|abort|exception|what\(\)/i.test(line));
  const pick = errors.length > 0 ? errors.slice(-2) : tail.slice(-1);
  const text = pick.map((line) => line.replace(/^\s*[\d.]+ [IWED] /, '').trim()).join(' | ');
  return text === '' ? null : text.slice(0, 600);
}

/**
 * A TCP port free on 127.0.0.1 right now: `preferred` when it is free, else any. Another process
 * could take it before the engine binds it; the engine then fails to start, which counts as a
 * crash, and the restart picks a port again.
 */
export async function freeLoopbackPort(preferred?: number | null): Promise<number> {
  if (preferred) {
    try {
      return await listenOnce(preferred);
    } catch {
      // Taken: any port will do.
    }
  }
  return listenOnce(0);
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no port assigned'))));
    });
  });
}


/** Polls `check` every PROBE_INTERVAL_MS until it resolves true, or `signal` aborts. */
export async function pollUntil(check: (signal: AbortSignal) => Promise<boolean>, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      if (await check(signal)) return;
    } catch {
      // Not up yet.
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, PROBE_INTERVAL_MS);
      function done(): void {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }
  throw new ShoalError('CANCELLED', 'stopped probing');
}
