// The `rpc` engine: one `ggml-rpc-server` lending this node's compute and memory to a pooled split
// driven by a llama-server on another node. It listens on loopback only; the driver reaches it
// through the data-plane tunnel, never directly, because the RPC protocol has no authentication.

import { connect } from 'node:net';
import type { Logger } from '../../common/log.js';
import { DEFAULT_CRASH_LOOP, withOverrides } from '../crash-loop.js';
import type { InstanceRunner, RunnerStatus } from '../runner-contract.js';
import { partOffload, type GpuCompute } from './llama-server-args.js';
import { DEFAULT_STOP_GRACE_MS, ManagedProcess, pollUntil, type ManagedProcessPolicy } from './managed-process.js';

export interface RpcDonorOptions {
  /** The `ggml-rpc-server` binary (`findEngine('ggml-rpc-server')`). */
  binaryPath: string;
  /** The node's data directory, for the orphan record under `<dataDir>/run/engines`. */
  dataDir: string;
  /** CPU threads of the donor's CPU device (`-t`); always explicit. */
  threads: number;
  /**
   * Devices to serve (`-d`, e.g. `['CUDA0']`); default: the binary's choice (every GPU it was built
   * for, else the CPU).
   */
  devices?: string[];
  /**
   * Keep tensors the driver sends in llama.cpp's local file cache (`-c`, under $LLAMA_CACHE or
   * ~/.cache/llama.cpp/rpc), so a re-placed split loads from disk instead of over the network.
   * Default false: the cache is never evicted by llama.cpp.
   */
  fileCache?: boolean;
  log: Logger;
  /** Spawn to listening, before it is killed as hung. Default 30 000. */
  loadTimeoutMs?: number;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  maxCrashes?: number;
  crashWindowMs?: number;
  stopGraceMs?: number;
  /** Called whenever status() may have changed: telemetry republishes on it. */
  onChange?: () => void;
}

/** Spawn to listening: a donor loads nothing until a driver connects, so 30 s means hung. */
const DEFAULT_DONOR_LOAD_TIMEOUT_MS = 30_000;
const CONNECT_TIMEOUT_MS = 1000;

/**
 * Keeps one `ggml-rpc-server` running on 127.0.0.1, restarted with backoff when it dies, given up
 * after repeated crashes. Ready means its port accepts a TCP connection. ggml-rpc-server serves one
 * client at a time and has no memory cap of its own: admission is the planner's job.
 */
export class RpcDonor implements InstanceRunner, AsyncDisposable {
  private readonly process: ManagedProcess<{ port: number }>;

  constructor(private readonly options: RpcDonorOptions) {
    if (!Number.isInteger(options.threads) || options.threads < 1) throw new RangeError(`threads must be a positive integer, got ${options.threads}`);
    const policy: ManagedProcessPolicy = withOverrides(
      { ...DEFAULT_CRASH_LOOP, loadTimeoutMs: DEFAULT_DONOR_LOAD_TIMEOUT_MS, stopGraceMs: DEFAULT_STOP_GRACE_MS },
      options,
    );
    this.process = new ManagedProcess({
      name: 'ggml-rpc-server',
      binaryPath: options.binaryPath,
      dataDir: options.dataDir,
      log: options.log,
      policy,
      args: (port) => rpcServerArgs({ port, threads: options.threads, devices: options.devices, fileCache: options.fileCache ?? false }),
      ...(options.onChange ? { onChange: options.onChange } : {}),
      probe: async (port, signal) => {
        await pollUntil(() => acceptsConnection(port), signal);
        return { port };
      },
    });
  }

  /** The loopback port the donor listens on; null while it is not ready. */
  get port(): number | null {
    return this.process.port;
  }

  status(): RunnerStatus {
    return {
      state: this.process.state,
      reason: this.process.reason,
      pid: this.process.pid,
      restarts: this.process.restarts,
      inFlight: 0,
      queued: 0,
      contextSize: null,
      sequences: null,
      gpu: null,
      model: null,
    };
  }

  whenReady(signal?: AbortSignal): Promise<void> {
    return this.process.whenReady(signal);
  }

  /** The last lines ggml-rpc-server wrote to stderr, for diagnostics. */
  stderrTail(): string[] {
    return this.process.stderrTail();
  }


  stop(): Promise<void> {
    return this.process.stop();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/**
 * The devices (`-d`) a donor serves for its part: a part on a GPU backend its planned GPUs (none named:
 * the binary's choice, every GPU it was built for); a CPU part on a GPU build the CPU alone, where the
 * planner counted it; a CPU part on a CPU build nothing, as always.
 */
export function donorDevices(part: { backend: string; devices?: readonly { index: number; tensorSplit: number }[] | undefined }, engineCompute: 'cpu' | GpuCompute): string[] {
  const offload = partOffload(part);
  if (offload !== null) return offload.devices;
  return engineCompute === 'cpu' ? [] : ['CPU'];
}

export function rpcServerArgs(options: { port: number; threads: number; devices?: string[] | undefined; fileCache: boolean }): string[] {
  // Never anything but loopback: the RPC protocol lets any client allocate memory and run graphs.
  const args = ['-H', '127.0.0.1', '-p', String(options.port), '-t', String(options.threads)];
  if (options.devices && options.devices.length > 0) args.push('-d', options.devices.join(','));
  if (options.fileCache) args.push('-c');
  return args;
}

/**
 * Whether something accepts TCP connections on 127.0.0.1:port. The probe connects and closes at
 * once; ggml-rpc-server reads the missing hello, drops the connection and accepts the next client.
 */
export function acceptsConnection(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(CONNECT_TIMEOUT_MS, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
