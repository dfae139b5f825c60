import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger } from 'pino';

/** JSON lines when stdout is not a terminal (for collectors), readable colour when it is. */
export function createLogger(options: { level?: string; pretty?: boolean } = {}): Logger {
  const level = options.level ?? process.env.SHOAL_LOG_LEVEL ?? 'info';
  const usePretty = options.pretty ?? process.stdout.isTTY === true;
  if (usePretty) return pino({ level }, pretty({ colorize: true, sync: true, ignore: 'pid,hostname' }));
  return pino({ level });
}
