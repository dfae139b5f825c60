import { basename, resolve } from 'node:path';
import { writeFileAtomic } from '../common/durable-fs.js';
import { isShoalError, ShoalError } from '../common/errors.js';
import { resolveDataDir } from '../common/paths.js';
import { readRunFiles } from '../node/run-files.js';
import { parseCommand } from './args.js';

const USAGE = `Usage: shoal diagnose [--out <file>] [--data-dir <dir>]

Writes one .tar.gz with what explains this node after the fact: its diagnostics and recorders, the
state, recent logs, the fast doctor checks, the process tree and open descriptors of the node and its
runners, the performance envelopes and the versions. Safe to run while a model hangs. The admin token,
API keys and join codes are redacted; read it before you share it all the same.

Options:
  -o, --out <file>   where to write it (default: shoal-diagnose-<node>-<UTC time>.tar.gz here)
  --data-dir <dir>   the data dir of the local node to ask (default as for 'shoal run')`;

/**
 * How long the bundle may take. Each source has its own limit on the node (BUNDLE_SOURCE_TIMEOUT_MS)
 * and they are read at once, so this covers them with room for packing and the transfer.
 */
const BUNDLE_REQUEST_TIMEOUT_MS = 60_000;

function sizeText(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} B`;
}

/** The name the node suggested (Content-Disposition), kept to a plain file name in the current directory. */
function suggestedName(header: string | null): string {
  const name = header === null ? undefined : /filename="([^"]+)"/.exec(header)?.[1];
  const plain = name === undefined ? '' : basename(name);
  return plain !== '' && plain !== '.' && plain !== '..' ? plain : `shoal-diagnose-${new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}.tar.gz`;
}

export async function diagnoseCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv, { options: { out: { type: 'string', short: 'o' }, 'data-dir': { type: 'string' } } }, USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  try {
    const dataDir = resolveDataDir(values['data-dir']);
    const { info, token } = await readRunFiles(dataDir);
    let res: Response;
    try {
      res = await fetch(`http://127.0.0.1:${info.apiPort}/diagnostics/bundle`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(BUNDLE_REQUEST_TIMEOUT_MS) });
    } catch (error) {
      throw new ShoalError('NOT_FOUND', `the node from ${dataDir} (pid ${info.pid}, port ${info.apiPort}) does not answer: is it still running? Its log file is in ${dataDir}/logs`, { cause: error });
    }
    if (!res.ok) {
      const text = await res.text();
      let message = `${res.status} ${text}`;
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
      } catch {
        // Not the control API's error shape: the status and body say what there is.
      }
      throw new ShoalError('BAD_REQUEST', `the node could not make the bundle: ${message}`);
    }
    const bytes = Buffer.from(await res.arrayBuffer());
    const path = resolve(values.out ?? suggestedName(res.headers.get('content-disposition')));
    // Written whole or not at all, mode 0600: redacted, but still about this machine.
    await writeFileAtomic(path, bytes, { mode: 0o600 });
    console.log(`${path} (${sizeText(bytes.length)})`);
    return 0;
  } catch (error) {
    console.error(isShoalError(error) ? error.message : (error as Error).message);
    return 1;
  }
}
