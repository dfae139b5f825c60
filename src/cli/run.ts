import { parseArgs } from './args.js';
import { diskFullError, isShoalError } from '../common/errors.js';
import { physicalCoreCount } from '../common/cpu.js';
import { createLogger } from '../common/log.js';
import { logsDir, RotatingLogFile } from '../common/log-file.js';
import { resolveDataDir } from '../common/paths.js';
import { startNode } from '../node/node.js';
import { CORS_ORIGINS_ENV, parseCorsOrigins } from '../api/cors.js';
import { mergeConfig, readConfigFile } from './config-file.js';
import { parseEngineRequest } from '../worker/default-engine.js';
import { DEFAULT_STALL_TIMEOUT_MS } from '../worker/recorded-runner.js';
import { SPECULATIVE_ENV } from '../worker/engines/llama-server-args.js';
import { parseBackendList, parseBackendTag } from '../doctor/backends.js';
import { LogRing } from '../dashboard/log-ring.js';
import { GpuChoice, MAX_CONTEXT_TOKENS, MAX_SEQUENCES, MAX_THREADS } from '../worker/runner/protocol.js';

const HELP = `Usage: shoal run [options]

Starts a Shoal node: the HTTP API (OpenAI compatible) and the default model.

Options:
  --api-port <port>        HTTP port (default 52600)
  --host <addr>            address to bind (default 0.0.0.0, all interfaces)
  --data-dir <dir>         state and models (default $SHOAL_HOME, else $XDG_DATA_HOME/shoal,
                           else ~/.local/share/shoal)
  --name <name>            this node's name (default: the hostname)
  --threads <n>            engine threads per model instance (default: physical cores, here ${physicalCoreCount()})
  --default-model <id>     model to serve when nothing else is placed (default shoal/tiny);
                           a built-in id or the path of a .gguf file
  --gpu <auto|false|cuda|vulkan|metal>   compute backend (default auto)
  --backends <tags>        advertise exactly these backend tags (comma-separated, e.g.
                           llama_cpp-cuda,rpc-cuda; also SHOAL_BACKENDS) instead of the detected ones
  --engine <auto|llama_server|llama_cpp> what serves the default model (default auto, also SHOAL_ENGINE):
                           llama-server when \`shoal doctor --fix\` built it and no GPU is in use,
                           else node-llama-cpp in a runner child; llama_cpp forces the in-process engine
  --context-size <tokens>  the default model's context per concurrent request (default 4096, capped
                           at the model's); placed instances size theirs at launch
  --parallel <n>           the default model's concurrent requests, batched together (default 8);
                           placed instances size theirs at launch
  --memory-budget <size>   most memory placement may use on this node, e.g. 6GiB or 512MiB
                           (default: whatever is available); keeps room for other work
  --vram-budget <size>     most VRAM placement may use on each GPU of this node, e.g. 20GiB
                           (default: what each reports free); keeps room for a desktop or other work
  --stall-timeout <s>      seconds a generation may go without a token before the hang watchdog fails
                           it with RUNNER_STALLED and restarts its engine (default 60, also
                           SHOAL_STALL_TIMEOUT_S); before the first token 0.1 s per prompt token is added
  --no-provision           do not get llama-server / ggml-rpc-server in the background when they are
                           missing (also SHOAL_PROVISION=0); by default the node serves on node-llama-cpp
                           meanwhile and moves onto them once a prebuilt release or a low-priority build
                           has them (progress: the log, \`shoal status\`, \`shoal doctor\`, the dashboard)
  --no-speculative         start llama-server without the draft models cards name for speculative
                           decoding (also SHOAL_SPECULATIVE=0), to measure a model with and without one
  --p2p-port <port>        cluster (libp2p) port (default 52601)
  --no-mdns                do not look for other nodes on the LAN by mDNS
  --bootstrap <multiaddr>  dial this node at start (repeatable), for networks mDNS does not reach; the
                           multiaddr must end in /p2p/<peerId> (\`shoal status --json\` there lists them: addrs)
  --headless               serve the API only, without the dashboard web app at /
  --api-key <key>          require this key on every /v1 and /api route (repeatable; also SHOAL_API_KEYS,
                           comma-separated). Default: no key needed
  --cors-origin <origin>   let web pages from this origin call /v1 and /api (repeatable; also
                           SHOAL_CORS_ORIGINS, comma-separated; * for any). Default: loopback origins only
  -h, --help               show this help

Every option but --data-dir can also be set in shoal.toml in the data dir, under its flag's name
(api-port = 8080, api-key = ["k1"], no-mdns = true); a flag wins over the environment, the
environment over the file. Cluster-wide settings: 'shoal config'.`;

/** The longest `--stall-timeout`: a day, past which the watchdog would catch nothing anyone waits for. */
const MAX_STALL_TIMEOUT_S = 86_400;

/** Milliseconds a stop may take before the process exits anyway. */
const STOP_DEADLINE_MS = 4500;

function positiveInt(name: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || (n === 0 && !name.endsWith('port'))) throw new Error(`--${name} must be a positive integer, got '${value}'`);
  if (n > max) throw new Error(`--${name} can be at most ${max}, got ${n}`);
  return n;
}

const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, k: 1e3, kb: 1e3, kib: 2 ** 10, m: 1e6, mb: 1e6, mib: 2 ** 20, g: 1e9, gb: 1e9, gib: 2 ** 30, t: 1e12, tb: 1e12, tib: 2 ** 40 };

/** `6GiB`, `512MiB`, `2.5G`, `1000000`: decimal units are powers of 1000, binary ones of 1024. */
export function parseSize(name: string, value: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = match ? SIZE_UNITS[(match[2] ?? '').toLowerCase()] : undefined;
  if (!match || unit === undefined) throw new Error(`--${name} must be a size such as 6GiB, 512MiB or 2G, got '${value}'`);
  const bytes = Math.floor(Number(match[1]) * unit);
  if (bytes <= 0) throw new Error(`--${name} must be more than 0, got '${value}'`);
  return bytes;
}

/** `--backends` (or SHOAL_BACKENDS): null when not given; every entry must be a backend tag. */
export function backendsOption(value: string | undefined): string[] | null {
  if (value === undefined || value.trim() === '') return null;
  const tags = parseBackendList(value);
  const wrong = tags.find((tag) => parseBackendTag(tag) === null);
  if (wrong !== undefined) throw new Error(`--backends (or SHOAL_BACKENDS): '${wrong}' is not a backend tag: use <engine>-<compute>, engine llama_cpp, llama_server or rpc, compute cpu, cuda, vulkan or metal`);
  return tags;
}

/** `shoal run`'s flags; shoal.toml takes the same names as keys (config-file.ts). */
const RUN_FLAGS = {
  'api-port': { type: 'string' },
  host: { type: 'string' },
  'data-dir': { type: 'string' },
  name: { type: 'string' },
  threads: { type: 'string' },
  'default-model': { type: 'string' },
  gpu: { type: 'string' },
  backends: { type: 'string' },
  engine: { type: 'string' },
  'context-size': { type: 'string' },
  parallel: { type: 'string' },
  'api-key': { type: 'string', multiple: true },
  'p2p-port': { type: 'string' },
  'memory-budget': { type: 'string' },
  'vram-budget': { type: 'string' },
  'stall-timeout': { type: 'string' },
  'no-mdns': { type: 'boolean' },
  'no-provision': { type: 'boolean' },
  'no-speculative': { type: 'boolean' },
  bootstrap: { type: 'string', multiple: true },
  headless: { type: 'boolean' },
  'cors-origin': { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
} as const;
/** The variables that stand in for a flag: between the flag and shoal.toml in precedence. */
const RUN_ENV: Record<string, string> = { engine: 'SHOAL_ENGINE', backends: 'SHOAL_BACKENDS', 'api-key': 'SHOAL_API_KEYS', 'cors-origin': CORS_ORIGINS_ENV, 'stall-timeout': 'SHOAL_STALL_TIMEOUT_S' };

/**
 * The log file's sink: lines wait until the node holds the data dir's lock, so a second start on a
 * data dir in use (refused by the lock) leaves the running node's log alone; its lines reach stdout.
 */
class LockedFileSink {
  private held: string[] | null = [];

  constructor(private readonly file: RotatingLogFile) {}

  write(line: string): void {
    if (this.held === null) this.file.write(line);
    else this.held.push(line);
  }

  open(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const line of held) this.file.write(line);
  }
}

export async function runCommand(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: RUN_FLAGS,
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  try {
    values = mergeConfig(values, await readConfigFile(resolveDataDir(values['data-dir']), RUN_FLAGS), RUN_ENV) as typeof values;
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }

  let options;
  try {
    const gpuRaw = values.gpu ?? 'auto';
    const gpu = GpuChoice.safeParse(gpuRaw === 'false' ? false : gpuRaw);
    if (!gpu.success) throw new Error(`--gpu must be auto, false, cuda, vulkan or metal, got '${gpuRaw}'`);
    options = {
      apiPort: positiveInt('api-port', values['api-port'], 52600, 65535),
      host: values.host ?? '0.0.0.0',
      dataDir: resolveDataDir(values['data-dir']),
      name: values.name,
      threads: positiveInt('threads', values.threads, physicalCoreCount(), MAX_THREADS),
      defaultModel: values['default-model'] ?? 'shoal/tiny',
      gpu: gpu.data,
      backends: backendsOption(values.backends ?? process.env.SHOAL_BACKENDS),
      engine: parseEngineRequest(values.engine ?? process.env.SHOAL_ENGINE ?? 'auto'),
      contextSize: positiveInt('context-size', values['context-size'], 4096, MAX_CONTEXT_TOKENS),
      sequences: positiveInt('parallel', values.parallel, 8, MAX_SEQUENCES),
      p2pPort: positiveInt('p2p-port', values['p2p-port'], 52601, 65535),
      memoryBudgetBytes: values['memory-budget'] === undefined ? null : parseSize('memory-budget', values['memory-budget']),
      vramBudgetBytes: values['vram-budget'] === undefined ? null : parseSize('vram-budget', values['vram-budget']),
      stallTimeoutMs: positiveInt('stall-timeout', values['stall-timeout'] ?? process.env.SHOAL_STALL_TIMEOUT_S, DEFAULT_STALL_TIMEOUT_MS / 1000, MAX_STALL_TIMEOUT_S) * 1000,
      mdns: values['no-mdns'] !== true,
      provision: values['no-provision'] !== true && process.env.SHOAL_PROVISION !== '0',
      bootstrap: values.bootstrap ?? [],
      headless: values.headless === true,
      apiKeys: [...(values['api-key'] ?? []), ...(process.env.SHOAL_API_KEYS ?? '').split(',')].map((k) => k.trim()).filter((k) => k !== ''),
      corsOrigins: parseCorsOrigins([...(values['cors-origin'] ?? []), process.env[CORS_ORIGINS_ENV] ?? ''], `--cors-origin or ${CORS_ORIGINS_ENV}`),
    };
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }

  // The engines read the switch where they build llama-server's command line, in this process.
  if (values['no-speculative'] === true) process.env[SPECULATIVE_ENV] = '0';

  // The node's recent lines, for `GET /logs`, the dashboard and `shoal logs` (bounded: src/dashboard/log-ring.ts).
  const recentLogs = new LogRing();
  // And across restarts, for `shoal logs` of a stopped node and the dashboard's history (rotated: src/common/log-file.ts).
  let logFile: RotatingLogFile;
  try {
    logFile = await RotatingLogFile.open(logsDir(options.dataDir));
  } catch (error) {
    console.error(`cannot open the log file in ${logsDir(options.dataDir)}: ${(error as Error).message}. Check that the data dir is writable by this user, or pass another --data-dir.`);
    return 1;
  }
  // A process.exit (the stop deadline below) skips the awaited close: what is queued still lands.
  process.once('exit', () => logFile.flushSync());
  const fileGate = new LockedFileSink(logFile);
  const log = createLogger({ recent: recentLogs, file: fileGate });
  // Taken before the node starts: a signal during startup (the API may already answer) would otherwise
  // kill the process outright, engines and all, instead of stopping it once it is up.
  let signalled: NodeJS.Signals | null = null;
  let onSignal = (signal: NodeJS.Signals): void => {
    signalled = signal;
  };
  const handler = (signal: NodeJS.Signals): void => onSignal(signal);
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  let node;
  try {
    node = await startNode({ log, ...options, recentLogs, logFile, onDataDirLocked: () => fileGate.open() });
  } catch (error) {
    const known = isShoalError(error) ? error : diskFullError(error);
    log.fatal(known !== null ? known.message : { err: error }, 'could not start the node');
    await logFile.close();
    return 1;
  }

  const { promise: stopped, resolve } = Promise.withResolvers<number>();
  onSignal = (signal: NodeJS.Signals): void => {
    log.info({ signal }, 'stopping');
    setTimeout(() => {
      log.error(`did not stop within ${STOP_DEADLINE_MS} ms; exiting anyway`);
      process.exit(1);
    }, STOP_DEADLINE_MS).unref();
    node.stop().then(
      () => resolve(0),
      (error: unknown) => {
        log.error({ err: error }, 'error while stopping');
        resolve(1);
      },
    );
  };
  if (signalled !== null) onSignal(signalled);
  const code = await stopped;
  await logFile.close();
  return code;
}
