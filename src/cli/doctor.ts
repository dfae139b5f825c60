// `shoal doctor [--fix] [--json]`: checks this machine for running a Shoal node (hardware, backends,
// engines, model storage) and, with --fix, creates missing directories and builds missing engines.

import { parseArgs } from './args.js';
import { physicalCoreCount } from '../common/cpu.js';
import { isShoalError } from '../common/errors.js';
import { resolveDataDir } from '../common/paths.js';
import { parseBackendList } from '../doctor/backends.js';
import { runDoctor } from '../doctor/doctor.js';
import { ENGINE_COMPUTES, type BuildProgress, type EngineCompute } from '../doctor/engines.js';
import { formatReport, plainProgress, renderProgressBar } from '../doctor/format.js';
import type { GpuRequest } from '../doctor/hardware.js';
import { exitCodeFor } from '../doctor/report.js';

const HELP = `Usage: shoal doctor [options]

Checks this machine for running a Shoal node: CPU, memory and its read bandwidth, GPUs, the backend
tags the node advertises, the llama-server and ggml-rpc-server engines, and model storage.
Exits 0 when no check is an error, 1 otherwise.

Options:
  --fix                    create missing directories and build missing engines (llama-server,
                           ggml-rpc-server) from the llama.cpp source node-llama-cpp ships, then check again
  --json                   print the report as JSON
  --data-dir <dir>         the node's data dir (default $SHOAL_HOME, else $XDG_DATA_HOME/shoal,
                           else ~/.local/share/shoal)
  --gpu <auto|false|cuda|vulkan|metal>   the compute the node will be started with (default auto)
  --backends <tags>        advertise exactly these backend tags (comma-separated, e.g.
                           llama_cpp-cpu,rpc-cpu; also SHOAL_BACKENDS) instead of the detected ones
  --threads <n>            threads for probing node-llama-cpp (default: physical cores, here ${physicalCoreCount()})
  --jobs <n>               compiler jobs for an engine build (default: CPUs, fewer when memory is short)
  --compute <cpu|cuda|vulkan|metal>   what --fix builds the engines for (also --engine-compute); default:
                           CUDA with an NVIDIA GPU and nvcc, Vulkan with a GPU, glslc and the Vulkan
                           headers, Metal on macOS, else CPU
  -h, --help               show this help

Engines are cached in $SHOAL_ENGINE_CACHE, else $XDG_CACHE_HOME/shoal/engines, else ~/.cache/shoal/engines.
A node started with \`shoal run\` gets missing engines itself, in the background while it serves: a
prebuilt release where one is recorded for this machine (SHA-256 checked), else the same build as --fix
at low priority (\`shoal status\` shows its progress; \`shoal run --no-provision\` turns it off).`;

function positiveInt(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0 || n > 1024) throw new Error(`--${name} must be an integer from 1 to 1024, got '${value}'`);
  return n;
}

function parseGpu(value: string | undefined): GpuRequest {
  switch (value ?? 'auto') {
    case 'auto':
      return 'auto';
    case 'false':
    case 'cpu':
      return false;
    case 'cuda':
    case 'vulkan':
    case 'metal':
      return value as GpuRequest;
    default:
      throw new Error(`--gpu must be auto, false, cuda, vulkan or metal, got '${value}'`);
  }
}

/** Writes build progress to stderr: a redrawn bar on a terminal, a line per step otherwise. */
function progressReporter(): { onProgress: (progress: BuildProgress) => void; done: () => void } {
  const stream = process.stderr;
  if (stream.isTTY) {
    let drawn = false;
    return {
      onProgress: (progress) => {
        stream.write(`\r\x1b[K${renderProgressBar(progress, stream.columns || 80)}`);
        drawn = true;
      },
      done: () => {
        if (drawn) stream.write('\n');
        drawn = false;
      },
    };
  }
  const plain = plainProgress();
  return {
    onProgress: (progress) => {
      const line = plain(progress);
      if (line !== null) stream.write(`${line}\n`);
    },
    done: () => undefined,
  };
}

export async function doctorCommand(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        fix: { type: 'boolean' },
        json: { type: 'boolean' },
        'data-dir': { type: 'string' },
        gpu: { type: 'string' },
        backends: { type: 'string' },
        threads: { type: 'string' },
        jobs: { type: 'string' },
        compute: { type: 'string' },
        'engine-compute': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
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

  let gpu: GpuRequest;
  let threads: number | undefined;
  let jobs: number | undefined;
  let engineCompute: EngineCompute | undefined;
  try {
    gpu = parseGpu(values.gpu);
    threads = positiveInt('threads', values.threads);
    jobs = positiveInt('jobs', values.jobs);
    const computeText = values.compute ?? values['engine-compute'];
    if (computeText !== undefined) {
      engineCompute = ENGINE_COMPUTES.find((c) => c === computeText);
      if (!engineCompute) throw new Error(`--compute must be one of ${ENGINE_COMPUTES.join(', ')}, got '${computeText}'`);
    }
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  const backendsText = values.backends ?? process.env.SHOAL_BACKENDS;
  const backends = backendsText !== undefined && backendsText.trim() !== '' ? parseBackendList(backendsText) : null;

  const controller = new AbortController();
  const onSignal = (): void => controller.abort(new Error('interrupted'));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const progress = progressReporter();
  try {
    const report = await runDoctor({
      dataDir: resolveDataDir(values['data-dir']),
      gpu,
      backends,
      fix: values.fix ?? false,
      signal: controller.signal,
      onProgress: progress.onProgress,
      onFix: (message) => {
        progress.done();
        process.stderr.write(`doctor: ${message}\n`);
      },
      ...(threads !== undefined ? { threads } : {}),
      ...(jobs !== undefined ? { buildJobs: jobs } : {}),
      ...(engineCompute !== undefined ? { engineCompute } : {}),
    });
    progress.done();
    console.log(values.json ? JSON.stringify(report, null, 2) : formatReport(report));
    return exitCodeFor(report);
  } catch (error) {
    progress.done();
    if (controller.signal.aborted) {
      console.error('doctor: cancelled; nothing was left half-built');
      return 130;
    }
    console.error(`doctor: ${isShoalError(error) ? error.message : (error as Error).stack ?? String(error)}`);
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
