// The store's health: which kinds of write currently fail, and why. A full disk degrades the node
// instead of crashing it; the next write that succeeds clears its kind.

import assert from 'node:assert/strict';
import { ShoalError, errorMessage } from '../../common/errors.js';
import { errnoCode } from './files.js';
import type { LogHealth, LogStoreLogger } from './types.js';

export type DegradedSource = 'append' | 'snapshot' | 'term' | 'maintenance';

export class LogHealthTracker {
  private readonly degraded = new Map<DegradedSource, { reason: string; remediation: string }>();

  constructor(
    private readonly dir: string,
    private readonly log: LogStoreLogger,
    private readonly onHealthChange: ((health: LogHealth) => void) | undefined,
  ) {}

  health(): LogHealth {
    for (const value of this.degraded.values()) return { level: 'degraded', ...value };
    return { level: 'ok' };
  }

  /** A failed write during `source`: marks the store degraded and becomes a ShoalError (bugs pass through). */
  failure(source: DegradedSource, error: unknown): unknown {
    if (error instanceof ShoalError || error instanceof assert.AssertionError) return error;
    const code = errnoCode(error);
    const detail = errorMessage(error);
    if (code === 'ENOSPC' || code === 'EDQUOT') {
      const reason = `the event log in ${this.dir} cannot be persisted: the disk is full (${code}, during ${source})`;
      const remediation = `free space on the filesystem holding ${this.dir}; this node will not persist new events until then, and retries on the next write`;
      this.set(source, reason, remediation);
      return new ShoalError('DISK_FULL', `${reason}; ${remediation}`, { cause: error });
    }
    const reason = `the event log in ${this.dir} cannot be persisted: ${detail}`;
    const remediation = `check the disk holding ${this.dir} (permissions, kernel log); the next write retries`;
    this.set(source, reason, remediation);
    return new ShoalError('INTERNAL', `${reason}; ${remediation}`, { cause: error });
  }

  set(source: DegradedSource, reason: string, remediation: string): void {
    const before = this.health().level;
    // Logged once per change of reason, not once per refused write while the disk stays full.
    if (this.degraded.get(source)?.reason !== reason) this.log.error({ dir: this.dir, source, remediation }, reason);
    this.degraded.set(source, { reason, remediation });
    if (before === 'ok') this.onHealthChange?.(this.health());
  }

  clear(source: DegradedSource): void {
    if (!this.degraded.delete(source)) return;
    const now = this.health();
    this.log.info({ dir: this.dir, source, health: now.level }, 'event log: writes succeed again');
    if (now.level === 'ok') this.onHealthChange?.(now);
  }
}
