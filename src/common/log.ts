import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger } from 'pino';

/** JSON lines when stdout is not a terminal (for collectors), readable colour when it is. */
export function createLogger(options: { level?: string; pretty?: boolean } = {}): Logger {
  const level = options.level ?? process.env.SHOAL_LOG_LEVEL ?? 'info';
  const usePretty = options.pretty ?? process.stdout.isTTY === true;
  if (usePretty) {
    // JSON lines escape CR/LF by construction; readable output must too, or a model id or prompt
    // fragment quoted in a message could forge a log line.
    const messageFormat = (log: Record<string, unknown>, key: string): string => String(log[key] ?? '').replace(/\r/g, '\\r').replace(/\n/g, '\\n');
    return pino({ level }, pretty({ colorize: true, sync: true, ignore: 'pid,hostname', messageFormat }));
  }
  return pino({ level });
}
