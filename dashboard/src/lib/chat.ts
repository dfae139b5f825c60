// The chat page's reading of an OpenAI chat-completions stream, and its per-answer timing.

export interface ChatChunk {
  /** The stream's `data: [DONE]`. */
  done: boolean;
  content: string;
  reasoning: string;
  finishReason: string | null;
  completionTokens: number | null;
  promptTokens: number | null;
  /** An error the server sent inside the stream (after the 200 went out). */
  error: string | null;
}

const EMPTY: ChatChunk = { done: false, content: '', reasoning: '', finishReason: null, completionTokens: null, promptTokens: null, error: null };

function record(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

/** One `data:` payload of /v1/chat/completions with `stream: true`. */
export function readChatChunk(data: string): ChatChunk {
  if (data.trim() === '[DONE]') return { ...EMPTY, done: true };
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return { ...EMPTY, error: `the node sent a stream chunk that is not JSON: ${data.slice(0, 120)}` };
  }
  const body = record(parsed);
  if (!body) return { ...EMPTY, error: 'the node sent a stream chunk that is not an object' };
  const error = record(body.error);
  if (error) return { ...EMPTY, error: typeof error.message === 'string' ? error.message : JSON.stringify(error) };
  const choice = Array.isArray(body.choices) ? record(body.choices[0]) : null;
  const delta = choice ? record(choice.delta) : null;
  const usage = record(body.usage);
  return {
    done: false,
    content: typeof delta?.content === 'string' ? delta.content : '',
    reasoning: typeof delta?.reasoning_content === 'string' ? delta.reasoning_content : '',
    finishReason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null,
    completionTokens: typeof usage?.completion_tokens === 'number' ? usage.completion_tokens : null,
    promptTokens: typeof usage?.prompt_tokens === 'number' ? usage.prompt_tokens : null,
    error: null,
  };
}

/** The message of an error body from any of the node's API families, or a fallback naming the status. */
export function responseErrorMessage(status: number, body: unknown): string {
  const root = record(body);
  const error = root ? record(root.error) : null;
  if (error && typeof error.message === 'string') return error.message;
  if (root && typeof root.error === 'string') return root.error;
  if (root && typeof root.message === 'string') return root.message;
  return `the node answered HTTP ${status}`;
}

/** Timing of one streamed answer, fed as chunks arrive. */
export class AnswerClock {
  private firstAtMs: number | null = null;
  private lastAtMs: number | null = null;
  private pieces = 0;
  private usageTokens: number | null = null;

  constructor(private readonly startedAtMs: number) {}

  /** A chunk that carried text (answer or reasoning) arrived at `atMs`. */
  token(atMs: number): void {
    if (this.firstAtMs === null) this.firstAtMs = atMs;
    this.lastAtMs = atMs;
    this.pieces += 1;
  }

  usage(completionTokens: number): void {
    this.usageTokens = completionTokens;
  }

  /**
   * Time to first token (from sending the request), and decode speed: tokens after the first over the
   * time between first and last token, so the prompt's processing does not count against it.
   */
  stats(): { ttftMs: number | null; tokens: number; tokensPerS: number | null } {
    const tokens = this.usageTokens ?? this.pieces;
    const ttftMs = this.firstAtMs === null ? null : this.firstAtMs - this.startedAtMs;
    const span = this.firstAtMs !== null && this.lastAtMs !== null ? this.lastAtMs - this.firstAtMs : 0;
    const tokensPerS = tokens > 1 && span > 0 ? ((tokens - 1) * 1000) / span : null;
    return { ttftMs, tokens, tokensPerS };
  }
}

/** The node's built-in voice (POST /v1/audio/speech), listed in /v1/models beside the chat models. */
export const VOICE_MODEL_ID = 'shoal/voice';

/**
 * The models of /v1/models the chat can talk to: not the voice, and not a model whose card (when the
 * page could read the cards) has no chat or completion task, such as a speech-to-text model.
 */
export function chatModelIds(ids: readonly string[], cards: readonly { id: string; tasks: readonly string[] }[] | null): string[] {
  const tasks = new Map((cards ?? []).map((card) => [card.id, card.tasks]));
  return ids.filter((id) => {
    if (id === VOICE_MODEL_ID) return false;
    const of = tasks.get(id);
    return of === undefined || of.includes('chat') || of.includes('completion');
  });
}
