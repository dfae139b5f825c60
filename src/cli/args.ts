import { parseArgs as nodeParseArgs, type ParseArgsConfig } from 'node:util';
import { ShoalError } from '../common/errors.js';
import { nearest } from './suggest.js';

/**
 * Every CLI command parses its arguments here: node's `parseArgs`, with errors a person can act on
 * ("unknown option --apiport; did you mean --api-port?") instead of node's advice about `--`.
 */

export type Parsed<T extends ParseArgsConfig> = ReturnType<typeof nodeParseArgs<T>>;

/** `--name` for long options, `-n` for one-letter ones: how they are typed. */
function optionNames(config: ParseArgsConfig): string[] {
  const names: string[] = [];
  for (const [name, option] of Object.entries(config.options ?? {})) {
    names.push(`--${name}`);
    if (option.short !== undefined) names.push(`-${option.short}`);
  }
  return names;
}

/** "unknown option --x; did you mean --y?" (or without the question when nothing is close). */
export function unknownOptionMessage(typed: string, known: readonly string[]): string {
  // Any one-letter option is one edit from any other: a guess at `-x` would be noise.
  const guess = typed.startsWith('--') ? nearest(typed, known.filter((k) => k.startsWith('--'))) : null;
  return `unknown option ${typed}${guess ? `; did you mean ${guess}?` : ''}`;
}

/** "unknown command 'x'; did you mean 'y'?" for commands and subcommands. */
export function unknownCommandMessage(what: string, typed: string, known: readonly string[]): string {
  const guess = nearest(typed, known);
  return `unknown ${what} '${typed}'${guess ? `; did you mean '${guess}'?` : ''}`;
}

function explain(error: unknown, config: ParseArgsConfig): string {
  const { code, message } = error as { code?: string; message: string };
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const typed = /'([^']+)'/.exec(message)?.[1] ?? message;
    // `--name=value` arrives whole; suggest on the name only.
    return unknownOptionMessage(typed.split('=')[0]!, optionNames(config));
  }
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    const typed = /'([^']*)'/.exec(message)?.[1];
    return `unexpected argument${typed === undefined ? '' : ` '${typed}'`}: this command takes only options`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const option = /'(-[^' ]+)/.exec(message)?.[1];
    if (option !== undefined && /argument missing/.test(message)) return `option ${option} needs a value`;
    if (option !== undefined && /does not take an argument/.test(message)) return `option ${option} takes no value`;
  }
  return message;
}

/** Node's `parseArgs`, throwing a BAD_REQUEST ShoalError whose message suggests the nearest option. */
export function parseArgs<T extends ParseArgsConfig>(config: T): Parsed<T> {
  try {
    return nodeParseArgs(config);
  } catch (error) {
    throw new ShoalError('BAD_REQUEST', explain(error, config), { cause: error });
  }
}

/** Whether the arguments ask for help: `-h` or `--help` before any `--`. */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((a) => a === '-h' || a === '--help');
}

/**
 * For a command's whole parse: prints `help` and answers 0 when help is asked for (whatever else is
 * there), prints the error and the usage and answers 2 when the arguments are wrong, else the
 * parsed arguments.
 */
export function parseCommand<T extends ParseArgsConfig>(argv: string[], config: T, help: string): Parsed<T> | number {
  if (wantsHelp(argv)) {
    console.log(help);
    return 0;
  }
  try {
    return parseArgs({ ...config, args: argv, strict: true, options: { ...config.options, help: { type: 'boolean', short: 'h' } } }) as Parsed<T>;
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${help}`);
    return 2;
  }
}
