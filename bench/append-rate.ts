import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { LogStore } from '../src/master/log/store.js';

/** A small (~200 B) log record shaped like a real nickname event. */
export interface BenchRecord {
  term: number;
  idx: number;
  hash: string;
  event: { type: 'NicknameSet'; nodeId: string; nickname: string };
  origin: { commandId: string } | null;
}

const nodeId = '12D3KooWGzh8uDgKXeeGEqS2VJ5rA8mHWRvrW2tJmJnUKQ7z6Xcd';
const commandId = randomUUID();

export function benchRecord(idx: number): BenchRecord {
  return { term: 3, idx, hash: '9f86d081884c7d659a2feaa0c55ad015', event: { type: 'NicknameSet', nodeId, nickname: 'gpu-box' }, origin: { commandId } };
}

/**
 * Fsynced appends per second into a fresh log under `parentDir`, with `appenders` concurrent writers
 * that each await their own append (so concurrency is what group commit can batch).
 */
export async function measureAppendRate(parentDir: string, appenders: number, durationMs: number): Promise<{ eventsPerS: number; fsyncsPerS: number }> {
  const dir = await mkdtemp(join(parentDir, 'shoal-bench-log-'));
  let fsyncs = 0;
  try {
    const store = await LogStore.open<BenchRecord>(dir, { onFsync: () => (fsyncs += 1) });
    let next = 1;
    let stop = false;
    const worker = async (): Promise<void> => {
      while (!stop) await store.append([benchRecord(next++)]);
    };
    const started = performance.now();
    const timer = setTimeout(() => (stop = true), durationMs);
    await Promise.all(Array.from({ length: appenders }, worker));
    const seconds = (performance.now() - started) / 1000;
    clearTimeout(timer);
    const appended = store.lastIdx();
    await store.close();
    return { eventsPerS: appended / seconds, fsyncsPerS: fsyncs / seconds };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
