import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ParseArgsConfig } from 'node:util';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';
import { ShoalError, errorMessage } from '../common/errors.js';
import { nearest } from './suggest.js';

/**
 * `shoal.toml` in the data dir: the node's options, under the names `shoal run` takes as flags
 * (`api-port = 8080`, `api-key = ["k1", "k2"]`, `no-mdns = true`). A flag wins over the environment,
 * the environment over the file, the file over the default.
 */
export const CONFIG_FILE_NAME = 'shoal.toml';
/** A config file larger than this is not a config file. */
export const CONFIG_FILE_MAX_BYTES = 64 * 1024;

/** Flags that make no sense in the file: where the file is, and asking for help. */
const NOT_IN_FILE = new Set(['data-dir', 'help']);

/** A config file that cannot be used; `key` names the offending key when there is one, `suggestion` the known key it is probably meant as. */
export class ConfigFileError extends ShoalError {
  constructor(
    message: string,
    readonly path: string,
    readonly key: string | null = null,
    readonly suggestion: string | null = null,
  ) {
    super('BAD_REQUEST', message, { param: key });
    this.name = 'ConfigFileError';
  }
}

export type FlagValues = Record<string, string | boolean | string[] | undefined>;

export function configFilePath(dataDir: string): string {
  return join(dataDir, CONFIG_FILE_NAME);
}

/** The schema of the file for these flags: a strict object, so an unknown key is an error and not silently ignored. */
function fileSchema(options: NonNullable<ParseArgsConfig['options']>) {
  const scalar = z.union([z.string(), z.number(), z.boolean()]).transform(String);
  const shape: Record<string, z.ZodType<string | boolean | string[] | undefined>> = {};
  for (const [name, option] of Object.entries(options)) {
    if (NOT_IN_FILE.has(name)) continue;
    if (option.type === 'boolean') shape[name] = z.boolean().optional();
    else if (option.multiple) shape[name] = z.union([scalar.transform((v) => [v]), z.array(scalar)]).optional();
    else shape[name] = scalar.optional();
  }
  return z.strictObject(shape);
}

/** The options `dataDir`'s shoal.toml sets (none when there is no file), checked against the flags `options` defines. */
export async function readConfigFile(dataDir: string, options: NonNullable<ParseArgsConfig['options']>): Promise<FlagValues> {
  const path = configFilePath(dataDir);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new ConfigFileError(`cannot read ${path}: ${errorMessage(error)}`, path);
  }
  if (Buffer.byteLength(text) > CONFIG_FILE_MAX_BYTES) throw new ConfigFileError(`${path} is larger than ${CONFIG_FILE_MAX_BYTES / 1024} KiB: it holds the node's options only`, path);
  let raw: unknown;
  try {
    raw = parseToml(text);
  } catch (error) {
    throw new ConfigFileError(`${path} is not valid TOML: ${errorMessage(error)}`, path);
  }
  const parsed = fileSchema(options).safeParse(raw);
  if (parsed.success) return parsed.data;
  const known = Object.keys(options).filter((name) => !NOT_IN_FILE.has(name));
  const issue = parsed.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    const guess = NOT_IN_FILE.has(key) ? null : nearest(key, known);
    const why = NOT_IN_FILE.has(key) ? `'${key}' cannot be set in the file (pass --${key})` : `unknown key '${key}'${guess ? `; did you mean '${guess}'?` : ''}`;
    throw new ConfigFileError(`${path}: ${why} (the keys are the options of 'shoal run --help', without the dashes)`, path, key, guess);
  }
  const key = String(issue.path[0] ?? '');
  const option = options[key];
  const expected = option?.type === 'boolean' ? 'true or false' : option?.multiple ? 'a string or a list of strings' : 'a string or a number';
  throw new ConfigFileError(`${path}: '${key}' must be ${expected}`, path, key);
}

/**
 * The flag values with the file filling what neither a flag nor the environment gives. `env` names,
 * per flag, the variable that stands in for it (`engine` -> SHOAL_ENGINE).
 */
export function mergeConfig(flags: FlagValues, file: FlagValues, env: Readonly<Record<string, string>>, environment: NodeJS.ProcessEnv = process.env): FlagValues {
  const merged: FlagValues = { ...flags };
  for (const [key, value] of Object.entries(file)) {
    if (merged[key] !== undefined) continue;
    const variable = env[key];
    if (variable !== undefined && (environment[variable] ?? '').trim() !== '') continue;
    merged[key] = value;
  }
  return merged;
}
