// The restart policy every engine process shares (the node-llama-cpp runner child, llama-server,
// ggml-rpc-server): after a crash, restart with exponential backoff; after too many crashes within a
// window, open the circuit breaker and stop restarting. Pure: the shells own the processes and the
// timers, and pass the clock in.

export interface RestartPolicy {
  /** Spawn to ready, before the process is killed as hung. Each engine sets its own (see its call site). */
  loadTimeoutMs: number;
  /** First restart delay after a crash; doubles per crash in the window up to `maxBackoffMs`. */
  initialBackoffMs: number;
  maxBackoffMs: number;
  /** Crashes within `crashWindowMs` that open the circuit breaker (no more restarts). */
  maxCrashes: number;
  crashWindowMs: number;
}

/**
 * Backoff 1 s, 2 s, 4 s ... 30 s; breaker after 5 crashes within 10 minutes. The same for every
 * engine; only the load timeout differs, since what "loading" means differs.
 */
export const DEFAULT_CRASH_LOOP: Omit<RestartPolicy, 'loadTimeoutMs'> = {
  initialBackoffMs: 1000,
  maxBackoffMs: 30_000,
  maxCrashes: 5,
  crashWindowMs: 600_000,
};

/** `base` with each override that is set (an engine's options leave unset what it does not override). */
export function withOverrides<T extends object>(base: T, overrides: { [K in keyof T]?: T[K] | undefined }): T {
  const out = { ...base };
  for (const key of Object.keys(base) as Array<keyof T>) {
    const value = overrides[key];
    if (value !== undefined) out[key] = value as T[keyof T];
  }
  return out;
}

export type CrashVerdict =
  /** Restart after `delayMs`. */
  | { kind: 'restart'; delayMs: number; crashesInWindow: number }
  /** The breaker opened: never restart again. */
  | { kind: 'give-up'; crashesInWindow: number };

/** The restart delay after the `crashesInWindow`-th crash of the window (1-based). */
export function backoffDelayMs(policy: Omit<RestartPolicy, 'loadTimeoutMs'>, crashesInWindow: number): number {
  return Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** (crashesInWindow - 1));
}

/** Counts one engine's crashes and says, per crash, whether to restart and when. */
export class CrashLoop {
  private crashTimesMs: number[] = [];

  constructor(
    readonly policy: RestartPolicy,
    private readonly nowMs: () => number,
  ) {}

  /** Records a crash now; crashes older than the window no longer count. */
  crashed(): CrashVerdict {
    const now = this.nowMs();
    this.crashTimesMs = [...this.crashTimesMs.filter((t) => now - t < this.policy.crashWindowMs), now];
    const crashesInWindow = this.crashTimesMs.length;
    if (crashesInWindow >= this.policy.maxCrashes) return { kind: 'give-up', crashesInWindow };
    return { kind: 'restart', delayMs: backoffDelayMs(this.policy, crashesInWindow), crashesInWindow };
  }

  /** The breaker's reason for health and /state, naming the last crash and what to do. */
  giveUpReason(verdict: { crashesInWindow: number }, lastCrash: string): string {
    return `gave up after ${verdict.crashesInWindow} crashes in ${Math.round(this.policy.crashWindowMs / 1000)} s; last: ${lastCrash}. Check the model file and the logs, then place the model again`;
  }
}
