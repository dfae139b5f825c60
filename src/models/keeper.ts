// The keep budget of the model store: idle complete copies beyond it are evicted, least recently used
// first, when the node starts and whenever a model stops being used (its instance ended). A model in
// use, or placed on this node and not loaded yet, is never evicted. Disk admission (store.ts) evicts
// too, but only when a download needs the room; this keeps the disk tidy before that.

import { statfs } from 'node:fs/promises';
import { ShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import type { NodeId } from '../common/ids.js';
import type { ClusterState } from '../master/state/state.js';
import type { ModelStore } from './store/store.js';
import type { EvictionReport } from './store/usage.js';

/** Without SHOAL_MODEL_KEEP_BYTES, idle copies may take this share of the size of the store's filesystem. */
export const DEFAULT_KEEP_FRACTION = 0.5;

/** `SHOAL_MODEL_KEEP_BYTES`: bytes of idle copies kept; undefined means the default (half the disk). 0 keeps none. */
export function keepBytesFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.SHOAL_MODEL_KEEP_BYTES;
  if (raw === undefined || raw.trim() === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new ShoalError('BAD_REQUEST', `SHOAL_MODEL_KEEP_BYTES must be a whole number of bytes >= 0, got '${raw}'`);
  return n;
}

/** The default keep budget for a store at `root`: DEFAULT_KEEP_FRACTION of its filesystem's size. */
export async function defaultKeepBytes(root: string): Promise<number> {
  const s = await statfs(root);
  return Math.floor(s.blocks * s.bsize * DEFAULT_KEEP_FRACTION);
}

/** Models of the instances cluster state places on `nodeId` (loaded or about to be). */
export function modelsPlacedOn(state: ClusterState, nodeId: NodeId): string[] {
  const out = new Set<string>();
  for (const instance of Object.values(state.instances)) {
    if (instance.placements.some((p) => p.nodeId === nodeId)) out.add(instance.modelId);
  }
  return [...out];
}

/** Ids in `before` and not in `now` (stopped being used), and the other way round (started). */
export function usageChanges(before: ReadonlySet<string>, now: ReadonlySet<string>): { stopped: string[]; started: string[] } {
  return { stopped: [...before].filter((id) => !now.has(id)), started: [...now].filter((id) => !before.has(id)) };
}

export interface ModelKeeperOptions {
  store: Pick<ModelStore, 'root' | 'evictBeyond' | 'markUsed'>;
  /** Models in use on this node now: its runners' models and the models placed on it. */
  inUse: () => Iterable<string>;
  /** Bytes of idle copies kept; null for the default (half the disk). */
  keepBytes: number | null;
  log: Logger;
}

export class ModelKeeper {
  private budget: number | null = null;
  private using = new Set<string>();
  /** Last-use records and eviction passes, one after another, so a pass sees the uses recorded before it. */
  private chain: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(private readonly options: ModelKeeperOptions) {}

  /** Resolves the budget and runs the start-up pass. */
  async start(): Promise<EvictionReport | null> {
    this.budget = this.options.keepBytes ?? (await defaultKeepBytes(this.options.store.root));
    this.using = new Set(this.options.inUse());
    this.options.log.debug({ keepBytes: this.budget, default: this.options.keepBytes === null }, 'model keep budget');
    return this.enqueue(() => this.evict('start'));
  }

  get keepBytes(): number | null {
    return this.budget;
  }

  /**
   * Call when what is in use may have changed (cluster state, runners). A model that stopped or started
   * being used is recorded as used now (LRU counts its last use); one that stopped triggers a pass.
   */
  check(): void {
    if (this.stopped || this.budget === null) return;
    const now = new Set(this.options.inUse());
    const { stopped, started } = usageChanges(this.using, now);
    this.using = now;
    if (stopped.length === 0 && started.length === 0) return;
    void this.enqueue(async () => {
      for (const id of [...stopped, ...started]) {
        await this.options.store.markUsed(id).catch((error: unknown) => this.options.log.warn({ err: error, modelId: id }, 'could not record the model’s last use'));
      }
      return stopped.length > 0 ? this.evict('idle') : null;
    });
  }

  private enqueue<T>(task: () => Promise<T>): Promise<T> {
    const result = this.chain.then(task);
    this.chain = result.catch(() => undefined);
    return result;
  }

  private async evict(why: 'start' | 'idle'): Promise<EvictionReport | null> {
    if (this.stopped || this.budget === null) return null;
    try {
      const report = await this.options.store.evictBeyond(this.budget, this.options.inUse());
      if (report.evicted.length > 0) this.options.log.info({ why, evicted: report.evicted, freedBytes: report.freedBytes, keptBytes: report.keptBytes, keepBytes: this.budget }, 'evicted idle models beyond the keep budget');
      else if (report.overBudgetBytes > 0) this.options.log.debug({ overBudgetBytes: report.overBudgetBytes }, 'over the keep budget with models in use');
      return report;
    } catch (error) {
      this.options.log.warn({ err: error }, 'evicting idle models failed');
      return null;
    }
  }

  /** Waits for the records and passes queued so far (tests, stop). */
  async idle(): Promise<void> {
    await this.chain;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.chain;
  }
}
