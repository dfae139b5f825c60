// `shoal models generate`: writes a deterministic random-weight llama GGUF of a requested size, for
// load and throughput testing without downloading real weights.

import { mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { parseArgs } from './args.js';
import { countParams, formatCount, generateRandomModel, GgufSpecError, modelSpecForParams, speculativePairSpecs } from '../models/generate/random-model.js';

const USAGE = `usage: shoal models generate --params <N> --out <file> [--type f16|q8_0|q4_0|f32] [--seed N] [--name NAME] [--inert-blocks N]

  --params  approximate parameter count, e.g. 200M, 1.5B, 50k
  --out     destination .gguf file (written atomically)
  --type    matrix storage type (default f16)
  --seed    weight seed, 0..4294967295 (default 0); same arguments give identical bytes
  --name    general.name stored in the file
  --inert-blocks  add N blocks that compute but write nothing: the file is a speculative-decoding
            target whose exact draft is the same command without this option`;

const TENSOR_TYPES = ['f32', 'f16', 'q8_0', 'q4_0'] as const;
type TensorType = (typeof TENSOR_TYPES)[number];
const SUFFIX_SCALE: Record<string, number> = { '': 1, k: 1e3, m: 1e6, b: 1e9 };
const PROGRESS_INTERVAL_MS = 100;
const MB = 1e6;

class UsageError extends Error {
  readonly code = 'CLI_USAGE';
}

/** Parses counts like 200M, 1.5B, 50k or 123456. */
export function parseParamCount(text: string): number {
  const match = /^(\d+(?:\.\d+)?)([kmb]?)$/i.exec(text.trim());
  const value = match ? Math.round(Number(match[1]) * (SUFFIX_SCALE[(match[2] ?? '').toLowerCase()] as number)) : NaN;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new UsageError(`--params must be a positive count like 200M, 1.5B or 50k, got "${text}"`);
  }
  return value;
}

function parseSeed(text: string | undefined): number {
  if (text === undefined) return 0;
  const seed = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(seed) || seed > 0xffffffff) throw new UsageError(`--seed must be an integer 0..4294967295, got "${text}"`);
  return seed;
}

function parseType(text: string | undefined): TensorType {
  if (text === undefined) return 'f16';
  const type = TENSOR_TYPES.find((t) => t === text.toLowerCase());
  if (!type) throw new UsageError(`--type must be one of ${TENSOR_TYPES.join(', ')}, got "${text}"`);
  return type;
}

function parseInertBlocks(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isInteger(value) || value < 1) throw new UsageError(`--inert-blocks must be a whole number of blocks, at least 1, got "${text}"`);
  return value;
}

interface Request {
  params: number;
  out: string;
  type: TensorType;
  seed: number;
  name: string | undefined;
  inertBlocks: number | undefined;
}

function parseRequest(args: string[]): Request | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        params: { type: 'string' },
        out: { type: 'string' },
        type: { type: 'string' },
        seed: { type: 'string' },
        name: { type: 'string' },
        'inert-blocks': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) return 'help';
  if (values.params === undefined) throw new UsageError('--params is required');
  if (values.out === undefined || values.out === '') throw new UsageError('--out is required');
  return {
    params: parseParamCount(values.params),
    out: resolve(values.out),
    type: parseType(values.type),
    seed: parseSeed(values.seed),
    name: values.name,
    inertBlocks: parseInertBlocks(values['inert-blocks']),
  };
}

/** A progress line redrawn in place; only used when stderr is a terminal. */
function progressReporter(stream: NodeJS.WriteStream): { update: (written: number, total: number) => void; finish: () => void } {
  const startedMs = Date.now();
  let lastDrawMs = 0;
  const draw = (written: number, total: number): void => {
    const fraction = total > 0 ? written / total : 1;
    const width = 30;
    const filled = Math.round(fraction * width);
    const seconds = Math.max((Date.now() - startedMs) / 1000, 1e-3);
    const line =
      `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ` +
      `${(written / MB).toFixed(1)}/${(total / MB).toFixed(1)} MB ${(written / MB / seconds).toFixed(1)} MB/s`;
    stream.write(`\r${line}`);
  };
  return {
    update(written, total) {
      const nowMs = Date.now();
      // Throttled, but the final 100% line is always drawn.
      if (written < total && nowMs - lastDrawMs < PROGRESS_INTERVAL_MS) return;
      lastDrawMs = nowMs;
      draw(written, total);
    },
    finish() {
      if (lastDrawMs > 0) stream.write('\n');
    },
  };
}

export async function modelsGenerateCommand(args: string[]): Promise<number> {
  let request;
  let spec;
  try {
    request = parseRequest(args);
    if (request === 'help') {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    spec = modelSpecForParams(request.params, {
      tensorType: request.type,
      seed: request.seed,
      ...(request.name !== undefined ? { name: request.name } : {}),
    });
    if (request.inertBlocks !== undefined) spec = speculativePairSpecs(spec, request.inertBlocks).target;
  } catch (err) {
    if (err instanceof UsageError || err instanceof GgufSpecError) {
      process.stderr.write(`shoal models generate: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }

  const controller = new AbortController();
  const onSigint = (): void => controller.abort(new Error('interrupted'));
  process.once('SIGINT', onSigint);
  const progress = process.stderr.isTTY ? progressReporter(process.stderr) : undefined;
  try {
    await mkdir(dirname(request.out), { recursive: true });
    const bytes = await generateRandomModel(spec, request.out, {
      signal: controller.signal,
      ...(progress ? { onProgress: progress.update } : {}),
    });
    progress?.finish();
    const params = countParams(spec);
    process.stdout.write(
      `wrote ${request.out}: ${formatCount(params)} params (${params}), ${spec.tensorType}, ${(bytes / MB).toFixed(1)} MB\n`,
    );
    return 0;
  } catch (err) {
    progress?.finish();
    process.stderr.write(`shoal models generate: ${(err as Error).message}\n`);
    return 1;
  } finally {
    process.off('SIGINT', onSigint);
  }
}
