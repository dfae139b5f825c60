// TOML text -> ModelCard, with errors that name the file, the field and what is wrong with it, so an
// operator can fix a card from the message alone.

import { readFile, stat } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseToml, TomlError } from 'smol-toml';
import type { z } from 'zod';
import { errorMessage } from '../../common/errors.js';
import { ModelCard } from './card.js';

/** Cards are a few hundred bytes; anything this big is not a card and is refused before parsing. */
export const CARD_MAX_BYTES = 64 * 1024;

export interface CardProblem {
  /** Dotted path of the field ('source.revision', 'compatible_backends[1]'), or '' for the whole card. */
  field: string;
  message: string;
}

export class CardError extends Error {
  readonly code = 'CARD_INVALID';
  override name = 'CardError';
  constructor(
    readonly file: string,
    readonly problems: CardProblem[],
  ) {
    super(`${file}: ${problems.map((p) => (p.field === '' ? p.message : `${p.field}: ${p.message}`)).join('; ')}`);
  }
}

function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out;
}

function problemsOf(error: z.ZodError): CardProblem[] {
  return error.issues.flatMap((issue) => {
    // An unknown key is reported on its parent; name the key itself, since that is what to delete.
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ field: fieldPath([...issue.path, key]), message: 'unknown field (check the spelling)' }));
    }
    return [{ field: fieldPath(issue.path), message: issue.message }];
  });
}

/** A `file` source's relative path is relative to the card, as a reader of the card would expect. */
function resolveFileSource(raw: Record<string, unknown>, file: string): Record<string, unknown> {
  const source = raw.source;
  if (typeof source !== 'object' || source === null || Array.isArray(source)) return raw;
  const { kind, path } = source as Record<string, unknown>;
  if (kind !== 'file' || typeof path !== 'string' || path === '' || isAbsolute(path)) return raw;
  return { ...raw, source: { ...source, path: resolve(dirname(file), path) } };
}

/** Parses and validates one card; `file` names it in errors and anchors relative `file` sources. */
export function parseCard(text: string, file: string): ModelCard {
  if (Buffer.byteLength(text, 'utf8') > CARD_MAX_BYTES) {
    throw new CardError(file, [{ field: '', message: `a card is at most ${CARD_MAX_BYTES} bytes` }]);
  }
  let raw: Record<string, unknown>;
  try {
    raw = parseToml(text) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof TomlError) {
      const firstLine = error.message.split('\n')[0] ?? error.message;
      throw new CardError(file, [{ field: '', message: `TOML syntax error at line ${error.line}, column ${error.column}: ${firstLine}` }]);
    }
    throw error;
  }
  const result = ModelCard.safeParse(resolveFileSource(raw, file));
  if (!result.success) throw new CardError(file, problemsOf(result.error));
  return result.data;
}

/** Reads and parses one card file. */
export async function readCardFile(path: string): Promise<ModelCard> {
  let text: string;
  try {
    // Checked before reading so a stray huge file in the cards directory is never pulled into memory.
    const size = (await stat(path)).size;
    if (size > CARD_MAX_BYTES) throw new CardError(path, [{ field: '', message: `a card is at most ${CARD_MAX_BYTES} bytes, this file has ${size}` }]);
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (error instanceof CardError) throw error;
    const reason = errorMessage(error);
    throw new CardError(path, [{ field: '', message: `cannot read the card: ${reason}` }]);
  }
  return parseCard(text, path);
}
