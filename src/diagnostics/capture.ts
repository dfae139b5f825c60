// Fills the performance port (src/api/control/performance-port.ts): the envelopes this node measured as
// API node, and the capture bundle's sources. Each source reads only this process's memory and files
// (and /proc): a hung runner cannot hold the bundle up, and bundle.ts bounds each source's time anyway.

import { arch, platform } from 'node:os';
import type { NodeControl } from '../api/control/control.js';
import type { PerformanceControl } from '../api/control/performance-port.js';
import { physicalCoreCount } from '../common/cpu.js';
import { logsDir, readLogTail } from '../common/log-file.js';
import { shoalCommit, shoalVersion } from '../common/version.js';
import type { LogRing } from '../dashboard/log-ring.js';
import { BUNDLE_FILE_MAX_BYTES, captureBundle } from './bundle.js';
import type { EnvelopeStore } from './envelope.js';
import { formatProcesses, openDescriptors, processTree } from './procfs.js';
import { inspectEngines } from '../doctor/doctor.js';
import { readBandwidthCache } from '../doctor/hardware.js';
import { engineChecks } from '../doctor/report.js';
import { inspectStorage, storageChecks } from '../doctor/storage.js';
import { decodeJoinCode } from '../membership/join-code.js';
import { WIRE_VERSION } from '../wire/version.js';

/** Join codes (and their invitation secrets) remembered for redaction; the oldest is forgotten first. */
export const ISSUED_SECRETS_MAX = 64;
/** Lines of the log file's tail in `logs.txt` (besides the in-memory ring). */
const LOG_FILE_TAIL_LINES = 2000;

/** The secrets this node handed out, so a bundle can redact them wherever they turn up. */
export class IssuedSecrets {
  private readonly values: string[] = [];

  add(...values: string[]): void {
    for (const value of values) {
      if (value === '' || this.values.includes(value)) continue;
      this.values.push(value);
      if (this.values.length > ISSUED_SECRETS_MAX) this.values.shift();
    }
  }

  list(): readonly string[] {
    return this.values;
  }

  /** The control port, with every join code it issues (and the code's invitation secret) remembered. */
  watch(control: NodeControl): NodeControl {
    return {
      ...control,
      inviteCode: async () => {
        const issued = await control.inviteCode();
        this.add(issued.code);
        try {
          this.add(decodeJoinCode(issued.code).secret);
        } catch {
          // A code that does not decode here still has its text remembered; the pattern net covers the rest.
        }
        return issued;
      },
    };
  }
}

export interface CaptureParts {
  nodeId: string;
  name: string;
  dataDir: string;
  envelopes: EnvelopeStore;
  /** This node's diagnostics (`GET /diagnostics/node`): in-memory readings only. */
  diagnostics: () => unknown;
  /** The `/state` view. */
  status: () => unknown;
  recentLogs?: LogRing;
  /** Known secret values: the admin token, the API keys, the issued join codes and secrets. */
  secrets: () => Iterable<string>;
}

/** Every line the ring still holds, oldest first, as JSON lines. */
function ringLines(ring: LogRing): string[] {
  const lines: string[] = [];
  for (let since = 0; ; ) {
    const page = ring.page({ since });
    if (page.entries.length === 0) return lines;
    for (const entry of page.entries) lines.push(JSON.stringify(entry));
    since = page.entries[page.entries.length - 1]!.seq;
  }
}

async function logsText(parts: CaptureParts): Promise<string> {
  const ring = parts.recentLogs === undefined ? ['(no in-memory log ring in this process)'] : ringLines(parts.recentLogs);
  const file = await readLogTail(logsDir(parts.dataDir), { maxLines: LOG_FILE_TAIL_LINES, maxBytes: BUNDLE_FILE_MAX_BYTES / 2 }).catch((error: Error) => [`(log file unreadable: ${error.message})`]);
  // The file tail first: a bundle cut at its size cap keeps its start, and the last lines before a
  // hang are the ones that matter (the ring's lines are in the file too when the node logs to one).
  return `# log file tail (${logsDir(parts.dataDir)})\n${file.join('\n')}\n\n# recent log lines (in memory, oldest first)\n${ring.join('\n')}\n`;
}

/** The fast parts of `shoal doctor`: storage and the engine cache, with their checks (no hardware probe, no bandwidth run). */
async function doctorFacts(dataDir: string): Promise<unknown> {
  const [storage, engines, bandwidth] = await Promise.all([inspectStorage(dataDir), inspectEngines({ signal: AbortSignal.timeout(4_000) }), readBandwidthCache(dataDir)]);
  return {
    note: 'the fast parts of shoal doctor (storage, engines); run `shoal doctor` on the node for hardware and backends',
    checks: [...storageChecks(storage), ...engineChecks(engines, physicalCoreCount())],
    storage,
    engines,
    cachedBandwidth: bandwidth,
  };
}

async function processFiles(): Promise<{ processes: string; fds: string }> {
  const tree = await processTree(process.pid);
  return { processes: formatProcesses(tree), fds: tree === null ? 'no /proc on this system: open descriptors are not available\n' : await openDescriptors(tree.map((p) => p.pid)) };
}

const fileStamp = (ms: number): string => new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');

export function performanceControl(parts: CaptureParts): PerformanceControl {
  return {
    performance: () => parts.envelopes.view(),
    bundle: async () => {
      const stamp = fileStamp(Date.now());
      const folder = `shoal-diagnose-${parts.name}-${stamp}`.replace(/[^A-Za-z0-9._-]/g, '_');
      // Read once, for both files; each file still has its own time limit.
      const procfs = processFiles();
      const bytes = await captureBundle(folder, {
        secrets: parts.secrets(),
        sources: [
          { file: 'node.json', read: parts.diagnostics },
          { file: 'state.json', read: parts.status },
          { file: 'logs.txt', read: () => logsText(parts) },
          { file: 'doctor.json', read: () => doctorFacts(parts.dataDir) },
          { file: 'processes.txt', read: async () => (await procfs).processes },
          { file: 'fds.txt', read: async () => (await procfs).fds },
          { file: 'performance.json', read: () => parts.envelopes.view() },
          {
            file: 'versions.json',
            read: () => ({ shoal: shoalVersion(), commit: shoalCommit(), wireVersion: WIRE_VERSION, nodeId: parts.nodeId, name: parts.name, pid: process.pid, platform: platform(), arch: arch(), runtime: process.versions }),
          },
        ],
      });
      return { name: `${folder}.tar.gz`, bytes };
    },
  };
}
