import { destination, multistream, pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger } from 'pino';

/**
 * JSON lines when stdout is not a terminal (for collectors), readable colour when it is. `recent`
 * (a LogRing, src/dashboard/log-ring.ts) also gets every JSON line, for `GET /logs` and `shoal logs`;
 * so does `file` (a RotatingLogFile, src/common/log-file.ts), the history kept across restarts.
 */
export function createLogger(options: { level?: string; pretty?: boolean; recent?: { write(line: string): void }; file?: { write(line: string): void } } = {}): Logger {
  const level = options.level ?? process.env.SHOAL_LOG_LEVEL ?? 'info';
  const usePretty = options.pretty ?? process.stdout.isTTY === true;
  let out: DestinationStream | undefined;
  if (usePretty) {
    // JSON lines escape CR/LF by construction; readable output must too, or a model id or prompt
    // fragment quoted in a message could forge a log line.
    const messageFormat = (log: Record<string, unknown>, key: string): string => String(log[key] ?? '').replace(/\r/g, '\\r').replace(/\n/g, '\\n');
    out = pretty({ colorize: true, sync: true, ignore: 'pid,hostname', messageFormat });
  }
  const sinks = [options.recent, options.file].filter((sink) => sink !== undefined);
  if (sinks.length === 0) return out === undefined ? pino({ level }) : pino({ level }, out);
  // Every destination takes every line the logger's level lets through (a stream's own level defaults to info).
  const streams = [out ?? destination({ dest: process.stdout.fd ?? 1 }), ...sinks].map((stream) => ({ level: 'trace' as const, stream }));
  return pino({ level }, multistream(streams));
}
