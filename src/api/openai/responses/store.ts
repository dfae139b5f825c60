import type { ChatMessage } from '../../../wire/task.js';
import type { ResponseBody } from './serialize.js';

/** Stored responses kept per node; the least recently used go first. */
export const MAX_STORED_RESPONSES = 1000;
/** A response whose record (body plus conversation) is larger than this is not stored. */
export const MAX_STORED_RESPONSE_BYTES = 8 * 1024 * 1024;
/** All stored records together; the least recently used go first. */
export const MAX_STORE_BYTES = 256 * 1024 * 1024;

export interface StoredResponse {
  response: ResponseBody;
  /** Everything a `previous_response_id` continues from: earlier turns, this input and this output (no instructions). */
  conversation: ChatMessage[];
}

export interface StoreLimits {
  maxResponses: number;
  maxResponseBytes: number;
  maxTotalBytes: number;
}

const DEFAULT_LIMITS: StoreLimits = {
  maxResponses: MAX_STORED_RESPONSES,
  maxResponseBytes: MAX_STORED_RESPONSE_BYTES,
  maxTotalBytes: MAX_STORE_BYTES,
};

/**
 * In-memory store for `store: true` responses, bounded by count and bytes with LRU eviction. It lives
 * and dies with the node process: responses do not survive a restart and are not shared between nodes.
 */
export class ResponseStore {
  /** Map order is recency order: the first entry is the least recently used. */
  private readonly entries = new Map<string, { record: StoredResponse; bytes: number }>();
  private totalBytes = 0;

  constructor(private readonly limits: StoreLimits = DEFAULT_LIMITS) {}

  /** Stores a record; false when it alone is over the per-response cap (then nothing is stored). */
  put(record: StoredResponse): boolean {
    const bytes = Buffer.byteLength(JSON.stringify(record));
    if (bytes > this.limits.maxResponseBytes) return false;
    this.delete(record.response.id);
    this.entries.set(record.response.id, { record, bytes });
    this.totalBytes += bytes;
    for (const [id] of this.entries) {
      if (this.entries.size <= this.limits.maxResponses && this.totalBytes <= this.limits.maxTotalBytes) break;
      this.delete(id);
    }
    return true;
  }

  /** The record, which becomes the most recently used; undefined when unknown, deleted or evicted. */
  get(id: string): StoredResponse | undefined {
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    this.entries.delete(id);
    this.entries.set(id, entry);
    return entry.record;
  }

  delete(id: string): boolean {
    const entry = this.entries.get(id);
    if (!entry) return false;
    this.entries.delete(id);
    this.totalBytes -= entry.bytes;
    return true;
  }

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.totalBytes;
  }
}
