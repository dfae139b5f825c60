import { createHash } from 'node:crypto';
import { isDefaultSettings } from './settings.js';
import type { ClusterState } from './state.js';

/** prevHash of the record at idx 1. */
export const GENESIS_HASH = '0'.repeat(32);
/** Record hashes are truncated SHA-256: 128 bits is plenty against accidents, and halves the log overhead. */
export const RECORD_HASH_HEX_CHARS = 32;

/**
 * JSON with object keys sorted (by UTF-16 code units) at every depth, so equal values hash equally whatever
 * order their keys were built in. Keys whose value is undefined are left out, as JSON.stringify does.
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new Error(`canonicalJson: ${value} has no JSON form`);
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item === undefined ? null : item)).join(',')}]`;
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record)
        .filter((key) => record[key] !== undefined)
        .sort();
      return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`).join(',')}}`;
    }
    default:
      throw new Error(`canonicalJson: a ${typeof value} has no JSON form`);
  }
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Settings at their defaults are left out, and `tracing` while it is off, so a snapshot written
 * before settings (or that setting) existed keeps its hash.
 */
export function stateHash(state: ClusterState): string {
  if (isDefaultSettings(state.settings)) return sha256Hex(canonicalJson({ ...state, settings: undefined }));
  return sha256Hex(canonicalJson({ ...state, settings: { ...state.settings, tracing: state.settings.tracing ? true : undefined } }));
}

/** The hash chain: each record's hash covers its predecessor's hash, so equal hashes mean equal histories. */
export function recordHash(prevHash: string, body: { term: number; idx: number; event: unknown; origin: unknown }): string {
  const { term, idx, event, origin } = body;
  return sha256Hex(prevHash + canonicalJson({ term, idx, event, origin })).slice(0, RECORD_HASH_HEX_CHARS);
}
