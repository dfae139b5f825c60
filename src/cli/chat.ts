import { createInterface } from 'node:readline';
import { ShoalError } from '../common/errors.js';
import { matchModelName } from '../models/model-name.js';
import { SPEECH_MODEL_ID } from '../speech/espeak-voice.js';
import { parseCommand } from './args.js';
import { connectToNode } from './client.js';
import { sseEvents } from './logs.js';
import { nearest } from './suggest.js';

const HELP = `Usage: shoal chat [<model>] [options]

An interactive chat with a model the cluster serves, over the node's OpenAI route
/v1/chat/completions; answers stream as they are generated. Reads one message per line, also from a
pipe (\`echo hi | shoal chat shoal/tiny\`). Without <model>, the only model served.

In the chat:
  /clear   forget the conversation so far
  /exit    leave (also /bye, Ctrl-D); Ctrl-C stops an answer being written

Options:
  --system <text>      a system message that starts the conversation
  --max-tokens <n>     most tokens per answer (default: the model's limit)
  --verbose            after each answer, its token counts and speed (on stderr)
  --url <url>          the node to talk to, e.g. http://10.0.0.5:52600 (default: the node running
                       from --data-dir)
  --api-key <key>      the API key, where the node requires one (default $SHOAL_API_KEY)
  --data-dir <dir>     the data dir of the local node (default as for 'shoal run')
  -h, --help           show this help`;

/** How long the chat waits for the node's model list before saying it does not answer. */
const MODELS_TIMEOUT_MS = 30_000;

type Message = { role: 'system' | 'user' | 'assistant'; content: string };

interface Target {
  baseUrl: string;
  headers: Record<string, string>;
}

async function apiError(res: Response): Promise<ShoalError> {
  const text = await res.text();
  let message = `${res.status} ${text}`;
  try {
    message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
  } catch {
    // Not JSON: the status line and body say what there is to say.
  }
  return new ShoalError('BAD_REQUEST', message);
}

/** The model to talk to: the one named, checked against `/v1/models`, or the only one served. */
async function chooseModel(target: Target, named: string | undefined): Promise<string> {
  let res: Response;
  try {
    res = await fetch(`${target.baseUrl}/v1/models`, { headers: target.headers, signal: AbortSignal.timeout(MODELS_TIMEOUT_MS) });
  } catch (error) {
    throw new ShoalError('NOT_FOUND', `the node at ${target.baseUrl} does not answer: is it running, and is that its API address?`, { cause: error });
  }
  if (!res.ok) throw await apiError(res);
  // The built-in voice is listed too, but speaks rather than chats.
  const ids = ((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id).filter((id) => id !== SPEECH_MODEL_ID);
  if (named !== undefined) {
    // Short names as for 'shoal launch': owner/name for its one quant, the name without its owner.
    const match = matchModelName(named, ids);
    if (match.kind === 'found') return match.id;
    if (match.kind === 'ambiguous') throw new ShoalError('BAD_REQUEST', `'${named}' names ${match.choices.length} served models: ${match.choices.join(', ')}. Chat with one of them by its id`);
    const guess = nearest(named, ids);
    throw new ShoalError('MODEL_NOT_FOUND', `the cluster serves no model '${named}'${guess ? `; did you mean '${guess}'?` : ''} (served: ${ids.join(', ') || 'none'}; place one with 'shoal launch <model>')`);
  }
  if (ids.length === 1) return ids[0]!;
  throw new ShoalError('BAD_REQUEST', ids.length === 0 ? "the cluster serves no model yet: place one with 'shoal launch <model>'" : `name the model to chat with: shoal chat <model> (served: ${ids.join(', ')})`);
}

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

/**
 * Streams one answer to stdout and returns its text (what was written before an abort, too) and its
 * token counts (null when aborted before the last chunk).
 */
async function answer(target: Target, body: object, signal: AbortSignal): Promise<{ text: string; usage: Usage | null }> {
  const res = await fetch(`${target.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...target.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  if (!res.ok || res.body === null) throw await apiError(res);
  let text = '';
  let usage: Usage | null = null;
  try {
    for await (const event of sseEvents(res.body)) {
      if (event.data === '[DONE]') break;
      const chunk = JSON.parse(event.data) as { choices?: { delta?: { content?: string | null } }[]; usage?: Usage | null; error?: { message?: string } };
      if (chunk.error) throw new ShoalError('BAD_REQUEST', chunk.error.message ?? event.data);
      if (chunk.usage) usage = chunk.usage;
      const delta = chunk.choices?.[0]?.delta?.content ?? '';
      text += delta;
      process.stdout.write(delta);
    }
  } catch (error) {
    if (!signal.aborted) throw error;
  }
  process.stdout.write('\n');
  return { text, usage };
}

export async function chatCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(
    argv,
    { options: { system: { type: 'string' }, 'max-tokens': { type: 'string' }, verbose: { type: 'boolean' }, url: { type: 'string' }, 'api-key': { type: 'string' }, 'data-dir': { type: 'string' } }, allowPositionals: true },
    HELP,
  );
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const maxTokens = values['max-tokens'] === undefined ? undefined : Number(values['max-tokens']);
  if (positionals.length > 1 || (maxTokens !== undefined && (!Number.isInteger(maxTokens) || maxTokens < 1))) {
    console.error(positionals.length > 1 ? `one model at most, got ${positionals.length}\n\n${HELP}` : `--max-tokens must be a positive integer, got '${values['max-tokens']}'`);
    return 2;
  }
  const baseUrl = values.url?.replace(/\/+$/, '') ?? (await connectToNode(values['data-dir'])).baseUrl;
  const key = values['api-key'] ?? process.env.SHOAL_API_KEY;
  const target: Target = { baseUrl, headers: key ? { authorization: `Bearer ${key}` } : {} };
  const model = await chooseModel(target, positionals[0]);

  const interactive = process.stdin.isTTY === true;
  const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: interactive });
  const start: Message[] = values.system === undefined ? [] : [{ role: 'system', content: values.system }];
  let history = [...start];
  let writing: AbortController | null = null;
  // Piped input has no one to read an error as it happens: a failed answer fails the whole run.
  let failed = false;
  // Ctrl-C stops the answer being written; at the prompt it leaves, as in a shell.
  rl.on('SIGINT', () => (writing ? writing.abort() : rl.close()));
  if (interactive) console.log(`Chatting with ${model} at ${baseUrl} (/exit to leave, /clear to start over).`);
  rl.setPrompt('>>> ');
  if (interactive) rl.prompt();
  for await (const raw of rl) {
    const line = raw.trim();
    if (line === '/exit' || line === '/bye') break;
    if (line === '/clear') {
      history = [...start];
      console.log('(conversation cleared)');
    } else if (line.startsWith('/')) {
      console.log('commands: /clear, /exit');
    } else if (line !== '') {
      history.push({ role: 'user', content: line });
      writing = new AbortController();
      try {
        const startedMs = performance.now();
        const { text, usage } = await answer(target, { model, messages: history, ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }) }, writing.signal);
        history.push({ role: 'assistant', content: text });
        if (values.verbose && usage) {
          const seconds = (performance.now() - startedMs) / 1000;
          console.error(`(${usage.prompt_tokens} prompt tokens, ${usage.completion_tokens} answer tokens, ${(usage.completion_tokens / seconds).toFixed(1)} tok/s)`);
        }
      } catch (error) {
        history.pop();
        // Stopped with Ctrl-C before the first token: nothing to report.
        if (!writing.signal.aborted) {
          failed = true;
          // The history only grows: past the model's context the node refuses every turn.
          const hint = interactive && history.length > start.length ? ' (/clear starts a new conversation)' : '';
          console.error(`error: ${(error as Error).message}${hint}`);
        }
      } finally {
        writing = null;
      }
    }
    if (interactive) rl.prompt();
  }
  rl.close();
  return failed && !interactive ? 1 : 0;
}
