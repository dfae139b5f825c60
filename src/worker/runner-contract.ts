// What every engine the worker holds promises, whatever runs underneath: the node-llama-cpp runner
// child (`RunnerSupervisor`), a managed `llama-server`, or a `ggml-rpc-server` donor. The engine
// compliance suite (test/support/runner-compliance.ts) checks the request-serving ones against it.

import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { ModelFacts } from './runner/protocol.js';

/**
 * `starting` until the first load succeeds; `restarting` after a crash, until the next one does;
 * `failed` once the circuit breaker opened (or the engine cannot start at all); `stopped` once
 * `stop` was called. The last two are final.
 */
export type RunnerState = 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped';

export interface RunnerStatus {
  state: RunnerState;
  /** Why the runner is not ready (load in progress, last crash, breaker open), for health and /state. */
  reason: string | null;
  pid: number | null;
  restarts: number;
  inFlight: number;
  queued: number;
  contextSize: number | null;
  sequences: number | null;
  gpu: string | false | null;
  model: ModelFacts | null;
}

/**
 * What the worker holds per instance part, whatever the engine: the node-llama-cpp runner child, a
 * managed llama-server, or an rpc donor (which serves no requests itself: `run` is absent).
 *
 * `whenReady` resolves once ready and rejects (MODEL_FAILED, RUNNER_STOPPED) once the state is final.
 * `run` throws at once when the state is final; a request the engine held when it crashed ends with
 * RUNNER_CRASHED, one still waiting for a slot waits for the restart; `stop` ends every open request
 * with RUNNER_STOPPED. Requests are admitted first in first out; one that waits for a slot first
 * streams `queued` events, its position (1 = next) when it starts waiting and each time it moves up.
 */
export interface InstanceRunner {
  status(): RunnerStatus;
  whenReady(signal?: AbortSignal): Promise<void>;
  run?(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent>;
  stop(): Promise<void>;
  /**
   * SIGKILLs the engine's process group now (the hang watchdog's remedy for a silent engine). The
   * engine then sees a crash like any other: the requests it held end with RUNNER_CRASHED and its
   * crash-loop policy restarts it, the kill counting toward the breaker. `reason` explains the crash
   * in status and the log. Nothing happens when no process runs.
   */
  kill?(reason: string): void;
  /** The engine process's last stderr lines (at most STDERR_TAIL_LINES, newest last), kept across restarts. */
  stderrTail?(): string[];
}
