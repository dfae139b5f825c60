import { createHash } from 'node:crypto';
import { ShoalError } from '../../common/errors.js';
import type { FinishReason, TokenLogprob, Usage } from '../../wire/task.js';
import type { DownloadView } from '../../models/views.js';
import type { ModelListing } from '../dispatch.js';
import { ollamaName } from './normalize.js';

/** Builders for Ollama response bodies. Pure: callers pass in clocks and timestamps. */

export const NDJSON_HEADERS = {
  'content-type': 'application/x-ndjson',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
} as const;

/** Shoal keeps placed models loaded; `/api/ps` says so with an expiry no client will reach. */
export const FAR_FUTURE_EXPIRY = '9999-12-31T23:59:59Z';

/**
 * One NDJSON line. JSON.stringify escapes CR and LF inside strings, so model text or echoed input
 * can never end a line early and forge another object.
 */
export function ndjsonLine(payload: unknown): string {
  return `${JSON.stringify(payload)}\n`;
}

/** Monotonic clock readings (nanoseconds) of one request, for Ollama's duration fields. */
export interface Timings {
  receivedNs: bigint;
  /** The runner admitted the task (prompt tokenized, sequence assigned). */
  startedNs: bigint;
  /** The first generated text, thinking or tool call arrived; null when nothing was generated. */
  firstOutputNs: bigint | null;
  endedNs: bigint;
}

export interface DoneStats {
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
  prompt_eval_duration: number;
  eval_count: number;
  eval_duration: number;
}

/**
 * Shoal keeps models loaded, so `load_duration` is the wait before the runner took the task
 * (queueing); prompt evaluation is the time to the first output, evaluation the rest.
 */
export function doneStats(timings: Timings, usage: Usage): DoneStats {
  const firstOutputNs = timings.firstOutputNs ?? timings.endedNs;
  return {
    total_duration: Number(timings.endedNs - timings.receivedNs),
    load_duration: Number(timings.startedNs - timings.receivedNs),
    prompt_eval_count: usage.promptTokens,
    prompt_eval_duration: Number(firstOutputNs - timings.startedNs),
    eval_count: usage.completionTokens,
    eval_duration: Number(timings.endedNs - firstOutputNs),
  };
}

/** Ollama has no "tool_calls" reason: a turn that ends in calls ends with 'stop'. */
export function doneReason(finishReason: FinishReason): 'stop' | 'length' {
  switch (finishReason) {
    case 'stop':
    case 'tool_calls':
      return 'stop';
    case 'length':
      return 'length';
  }
}

export interface OllamaToolCallBody {
  id: string;
  function: { index: number; name: string; arguments: Record<string, unknown> };
}

/** A tool call as the runner streamed it: arguments are JSON text assembled from deltas. */
export interface CollectedToolCall {
  index: number;
  id: string;
  name: string;
  arguments: string;
}

/** Ollama sends tool arguments as an object, so each call's JSON text is parsed once it is complete. */
export function toolCallBodies(calls: readonly CollectedToolCall[], finishReason: FinishReason): OllamaToolCallBody[] {
  return calls.map((call) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(call.arguments);
    } catch (error) {
      if (finishReason === 'length') {
        throw new ShoalError('BAD_REQUEST', `the answer hit the token limit in the middle of a call to '${call.name}': raise options.num_predict`, {
          param: 'options.num_predict',
          cause: error,
        });
      }
      throw new ShoalError('INTERNAL', `the model produced arguments for '${call.name}' that are not JSON`, { cause: error });
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new ShoalError('INTERNAL', `the model produced arguments for '${call.name}' that are not a JSON object`);
    }
    return { id: call.id, function: { index: call.index, name: call.name, arguments: parsed as Record<string, unknown> } };
  });
}

export interface OllamaLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs?: { token: string; logprob: number; bytes: number[] }[];
}

export function ollamaLogprobs(logprobs: readonly TokenLogprob[], top: number): OllamaLogprob[] {
  return logprobs.map((entry) => ({
    token: entry.token,
    logprob: entry.logprob,
    bytes: entry.bytes,
    ...(top > 0 ? { top_logprobs: entry.top.map((alt) => ({ token: alt.token, logprob: alt.logprob, bytes: alt.bytes })) } : {}),
  }));
}

/** A piece of the answer: one streamed chunk, or all of it at once. */
export interface AnswerPart {
  content: string;
  thinking?: string;
  toolCalls?: OllamaToolCallBody[];
  logprobs?: OllamaLogprob[];
}

function assistantMessage(part: AnswerPart) {
  return {
    role: 'assistant' as const,
    content: part.content,
    ...(part.thinking ? { thinking: part.thinking } : {}),
    ...(part.toolCalls && part.toolCalls.length > 0 ? { tool_calls: part.toolCalls } : {}),
  };
}

function withLogprobs(part: AnswerPart) {
  return part.logprobs ? { logprobs: part.logprobs } : {};
}

/** `model` is the name as the client sent it, as Ollama echoes it. */
export function chatChunkBody(model: string, createdAt: string, part: AnswerPart) {
  return { model, created_at: createdAt, message: assistantMessage(part), done: false as const, ...withLogprobs(part) };
}

export function chatDoneBody(model: string, createdAt: string, part: AnswerPart, finishReason: FinishReason, stats: DoneStats) {
  return {
    model,
    created_at: createdAt,
    message: assistantMessage(part),
    done: true as const,
    done_reason: doneReason(finishReason),
    ...stats,
    ...withLogprobs(part),
  };
}

export function generateChunkBody(model: string, createdAt: string, part: AnswerPart) {
  return {
    model,
    created_at: createdAt,
    response: part.content,
    ...(part.thinking ? { thinking: part.thinking } : {}),
    done: false as const,
    ...withLogprobs(part),
  };
}

export function generateDoneBody(model: string, createdAt: string, part: AnswerPart, finishReason: FinishReason, stats: DoneStats) {
  return {
    model,
    created_at: createdAt,
    response: part.content,
    ...(part.thinking ? { thinking: part.thinking } : {}),
    done: true as const,
    done_reason: doneReason(finishReason),
    ...stats,
    ...withLogprobs(part),
  };
}

/** The answer to an empty chat: Ollama's way for clients to preload a model. */
export function chatLoadBody(model: string, createdAt: string) {
  return { model, created_at: createdAt, message: { role: 'assistant' as const, content: '' }, done_reason: 'load' as const, done: true as const };
}

/** The answer to an empty prompt: Ollama's way for clients to preload a model. */
export function generateLoadBody(model: string, createdAt: string) {
  return { model, created_at: createdAt, response: '', done_reason: 'load' as const, done: true as const };
}

export function embedBody(model: string, vectors: number[][], totalNs: number, loadNs: number, promptTokens: number) {
  return { model, embeddings: vectors, total_duration: totalNs, load_duration: loadNs, prompt_eval_count: promptTokens };
}

/** The legacy `/api/embeddings` answer. */
export function embeddingsBody(vector: number[]) {
  return { embedding: vector };
}

/** Shoal has no content-addressed store behind these listings: the digest is the SHA-256 of the model id, stable per id. */
export function modelDigest(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}

/** llama.cpp names file types like `MOSTLY_Q4_K_M`; Ollama shows `Q4_K_M`. */
export function quantizationLevel(fileType: string | null): string {
  return fileType === null ? '' : fileType.replace(/^(MOSTLY|ALL)_/, '');
}

export function modelDetails(listing: ModelListing) {
  return {
    parent_model: '',
    format: 'gguf' as const,
    family: listing.details.family,
    families: [listing.details.family],
    parameter_size: listing.details.parameterSize ?? '',
    quantization_level: quantizationLevel(listing.details.quantization),
  };
}

/** Ollama's names for what a model can do. */
export function ollamaCapabilities(listing: ModelListing): string[] {
  const out = new Set<string>();
  for (const capability of listing.capabilities) {
    switch (capability) {
      case 'chat':
      case 'completion':
        out.add('completion');
        break;
      case 'tools':
        out.add('tools');
        break;
      case 'embeddings':
        out.add('embedding');
        break;
      case 'vision':
        out.add('vision');
        break;
    }
  }
  return [...out];
}

function isoSeconds(unixSeconds: number): string {
  return new Date(unixSeconds * 1000).toISOString();
}

/** One `/api/tags` entry. */
export function tagBody(listing: ModelListing) {
  const name = ollamaName(listing.id);
  return {
    name,
    model: name,
    modified_at: isoSeconds(listing.created),
    size: listing.details.sizeBytes ?? 0,
    digest: modelDigest(listing.id),
    details: modelDetails(listing),
  };
}

/**
 * One `/api/ps` entry. `size` is the memory placement reserved for the instance and `size_vram` the
 * part of it on GPU backends (0 on CPU); a node's own default model, which no placement sized, shows
 * its file's bytes, all in RAM.
 */
export function psBody(listing: ModelListing) {
  const memory = listing.memory ?? null;
  return {
    ...tagBody(listing),
    size: memory?.bytes ?? listing.details.sizeBytes ?? 0,
    size_vram: memory?.gpuBytes ?? 0,
    expires_at: FAR_FUTURE_EXPIRY,
    context_length: listing.contextSize ?? 0,
  };
}

/** The steps of an `/api/pull` Ollama clients show by name. */
export type PullStep = 'pulling manifest' | 'verifying sha256 digest' | 'writing manifest' | 'success';

export function pullStepBody(status: PullStep) {
  return { status };
}

/**
 * Ollama names each file of a pull by its digest. The download's progress does not carry the hub's
 * SHA-256 (the store checks the bytes against it), so a file is named by the SHA-256 of its repo,
 * commit and path: stable per file, like the model digests of `/api/tags`.
 */
export function fileDigest(repo: string, revision: string, path: string): string {
  return `sha256:${createHash('sha256').update(`${repo}@${revision}/${path}`).digest('hex')}`;
}

/** One file's progress line; Ollama's status shows the digest's first 12 hex digits. */
export function pullFileBody(digest: string, total: number, completed: number) {
  return { status: `pulling ${digest.slice('sha256:'.length, 'sha256:'.length + 12)}`, digest, total, completed };
}

/**
 * The progress lines a download snapshot adds: one per file whose byte count changed since the
 * last snapshot (`sent`, file path to bytes, is updated). Files already on disk show complete.
 */
export function pullProgressBodies(view: Pick<DownloadView, 'repo' | 'revision' | 'files'>, sent: Map<string, number>) {
  const bodies: ReturnType<typeof pullFileBody>[] = [];
  for (const file of view.files) {
    if (sent.get(file.path) === file.doneBytes) continue;
    sent.set(file.path, file.doneBytes);
    bodies.push(pullFileBody(fileDigest(view.repo, view.revision, file.path), file.totalBytes, file.doneBytes));
  }
  return bodies;
}

export function showBody(listing: ModelListing) {
  const architecture = listing.details.family;
  return {
    license: '',
    modelfile: '',
    parameters: '',
    template: '',
    system: '',
    details: modelDetails(listing),
    model_info: {
      'general.architecture': architecture,
      ...(listing.contextSize === null ? {} : { [`${architecture}.context_length`]: listing.contextSize }),
    },
    capabilities: ollamaCapabilities(listing),
    modified_at: isoSeconds(listing.created),
  };
}
