import '../../polyfill.js';
import { randomBytes } from 'node:crypto';
import {
  getLlama,
  LlamaGrammar,
  LlamaGrammarEvaluationState,
  LlamaLogLevel,
  resolveChatWrapper,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaModel,
  type Token,
} from 'node-llama-cpp';
import { ShoalError } from '../../common/errors.js';
import type { CountTask, EmbeddingTask, InferenceTask, TaskEvent, TaskPrompt, TokenLogprob, ToolDefinition } from '../../wire/task.js';
import { grammarSchema, toolCallSchema } from './grammar-schema.js';
import { JsonEnd } from './json-end.js';
import { OutputParser, THINK_OPEN, type ToolMode } from './output-parser.js';
import { toChatHistory } from './prompt.js';
import type { ModelFacts, RunnerConfig } from './protocol.js';
import { StopMatcher } from './stop-matcher.js';
import { unitLength } from './vectors.js';

export type EngineLog = (level: 'debug' | 'info' | 'warn' | 'error', message: string) => void;
type Emit = (event: TaskEvent) => void;

/** Compiled grammars kept per runner; compiling one costs milliseconds, clients reuse schemas. */
const MAX_CACHED_GRAMMARS = 32;
/** Tokens detokenized together while a multi-byte character is incomplete. */
const MAX_PENDING_TOKENS = 8;
/** The penalties' window when the task sets none: llama-server's `repeat_last_n` default, so both engines agree. */
const DEFAULT_REPEAT_LAST_N_TOKENS = 64;
/** Shoal's KV cache type names as node-llama-cpp's GgmlType keys. */
const KV_GGML_TYPES = { f32: 'F32', f16: 'F16', bf16: 'BF16', q8_0: 'Q8_0', q4_0: 'Q4_0' } as const satisfies Record<NonNullable<RunnerConfig['kvCacheType']>, string>;
/**
 * The share of an idle sequence's held tokens that must lead the new prompt for the request to reuse
 * that sequence rather than a fresh or least recently used one; below it, reusing would throw away a
 * cache some other conversation is likelier to come back to. Same idea as llama-server's
 * `--slot-prompt-similarity` (default 0.10 there, where every slot is always taken).
 */
const MIN_REUSE_SHARE = 0.5;

interface RenderedPrompt {
  tokens: Token[];
  /** The prompt ended inside an open `<think>` block. */
  startInReasoning: boolean;
}

/**
 * The `llama_cpp` engine: node-llama-cpp in this process, one context whose sequences serve
 * concurrent requests in one batch. Generation is a token loop of our own over
 * `sequence.evaluateWithMetadata`, so stop sequences, grammars that switch on mid-answer (tool calls),
 * reasoning separation and log probabilities all live in one place.
 */
export class LlamaCppEngine implements AsyncDisposable {
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();
  private embeddingContext: Promise<LlamaEmbeddingContext> | null = null;
  /**
   * Sequences between requests, least recently used first. Each keeps the tokens its KV cache holds,
   * so a conversation's next turn evaluates only what follows the part it shares with them.
   */
  private readonly idle: LlamaContextSequence[] = [];
  /**
   * Cache edits (erase, dispose) waiting for the context's lock. node-llama-cpp's batch loop holds that
   * lock for as long as any sequence has a decode queued, and with two or more streams one of them has
   * always queued its next token by the time the loop looks again, so an edit waited for every running
   * generation to end: a request that reused an idle sequence under load got no first token until the
   * others finished. While an edit waits, the token loops hold their next token back (editsSettled),
   * the batch loop finds its queue empty after the batch in flight and lets go, the edit runs, and the
   * streams go on: one batch's pause instead of a whole generation's.
   */
  private cacheEditsWaiting = 0;
  /** Resolves when no cache edit waits any more; a new one while edits wait. */
  private editsSettled: PromiseWithResolvers<void> | null = null;

  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly chatWrapper: ChatWrapper,
    private readonly config: RunnerConfig,
  ) {}

  static async load(config: RunnerConfig, log: EngineLog): Promise<LlamaCppEngine> {
    const llama = await getLlama({
      gpu: config.gpu,
      // Never compile or download at run time: a node must start offline and in seconds.
      build: 'never',
      skipDownload: true,
      progressLogs: false,
      // Explicit, because the library's default oversubscribes small machines badly.
      maxThreads: config.threads,
      logLevel: LlamaLogLevel.warn,
      logger: (level, message) => {
        const text = message.trim();
        if (text === '') return;
        log(level === LlamaLogLevel.error || level === LlamaLogLevel.fatal ? 'error' : 'warn', text);
      },
    });
    const model = await llama.loadModel({ modelPath: config.modelPath });
    const context = await model.createContext({
      contextSize: Math.min(config.contextSize, model.trainContextSize),
      sequences: config.sequences,
      threads: config.threads,
      ...(config.flashAttention !== undefined ? { flashAttention: config.flashAttention === 'auto' ? 'auto' : config.flashAttention === 'on' } : {}),
      // The library marks these experimental; placement counted the cache at this type, so it must be it.
      ...(config.kvCacheType !== undefined ? { experimentalKvCacheKeyType: KV_GGML_TYPES[config.kvCacheType], experimentalKvCacheValueType: KV_GGML_TYPES[config.kvCacheType] } : {}),
    });
    return new LlamaCppEngine(llama, model, context, resolveChatWrapper(model), config);
  }

  get info(): { contextSize: number; sequences: number; trainContextSize: number; gpu: string | false; model: ModelFacts } {
    const general = this.model.fileInfo.metadata.general;
    const fileType = general.file_type;
    return {
      contextSize: this.context.contextSize,
      sequences: this.context.totalSequences,
      trainContextSize: this.model.trainContextSize,
      gpu: this.llama.gpu,
      model: {
        architecture: String(general.architecture),
        sizeBytes: this.model.size,
        fileType: fileType === undefined ? null : String(fileTypeName(fileType)),
        parameterCount: this.model.fileInsights.totalParameters ?? null,
        hasChatTemplate: typeof this.model.fileInfo.metadata.tokenizer?.chat_template === 'string',
      },
    };
  }

  async run(task: InferenceTask | EmbeddingTask | CountTask, signal: AbortSignal, emit: Emit): Promise<void> {
    switch (task.kind) {
      case 'generate':
        return this.generate(task, signal, emit);
      case 'embed':
        return this.embed(task, signal, emit);
      case 'count': {
        const prompt = this.render(task.prompt, task.tools, { mode: task.tools.length > 0 ? 'auto' : 'none' });
        emit({ type: 'start', promptTokens: prompt.tokens.length });
        emit({ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: prompt.tokens.length, completionTokens: 0 } });
        return;
      }
    }
  }

  private render(prompt: TaskPrompt, tools: readonly ToolDefinition[], choice: InferenceTask['toolChoice']): RenderedPrompt {
    if (prompt.kind === 'text') {
      const tokens = this.model.tokenize(prompt.text);
      if (this.model.tokens.shouldPrependBosToken && this.model.tokens.bos !== null) tokens.unshift(this.model.tokens.bos);
      return { tokens, startInReasoning: false };
    }
    const history = toChatHistory(prompt.messages, tools, choice);
    // Reasoning templates (Qwen3, DeepSeek-R1 style) open the think block in the generation prompt;
    // node-llama-cpp renders that only when the new turn starts inside an open thought segment.
    const last = history.at(-1);
    if (this.chatWrapper.settings.segments?.thought?.openOnResponseStart && last?.type === 'model' && last.response.length === 0) {
      last.response.push({ type: 'segment', segmentType: 'thought', text: '', ended: false });
    }
    const { contextText } = this.chatWrapper.generateContextState({ chatHistory: history });
    const tokens = contextText.tokenize(this.model.tokenizer);
    if (this.model.tokens.shouldPrependBosToken && this.model.tokens.bos !== null && tokens[0] !== this.model.tokens.bos) {
      tokens.unshift(this.model.tokens.bos);
    }
    const tail = this.model.detokenize(tokens.slice(-8), true).trimEnd();
    return { tokens, startInReasoning: tail.endsWith(THINK_OPEN) };
  }

  private async grammarFor(key: string, make: () => Promise<LlamaGrammar>): Promise<LlamaGrammar> {
    let grammar = this.grammars.get(key);
    if (!grammar) {
      grammar = make();
      this.grammars.set(key, grammar);
      if (this.grammars.size > MAX_CACHED_GRAMMARS) this.grammars.delete(this.grammars.keys().next().value!);
      grammar.catch(() => this.grammars.delete(key));
    }
    return grammar;
  }

  private async compileSchema(schema: Record<string, unknown>): Promise<LlamaGrammar> {
    const key = `schema:${JSON.stringify(schema)}`;
    try {
      // The schema was checked structurally; the library's own types are narrower than JSON Schema.
      return await this.grammarFor(key, () => this.llama.createGrammarForJsonSchema(schema as never));
    } catch (error) {
      throw new ShoalError('BAD_REQUEST', `the JSON schema cannot be turned into a grammar: ${(error as Error).message}`, { cause: error, param: 'schema' });
    }
  }

  private async generate(task: InferenceTask, signal: AbortSignal, emit: Emit): Promise<void> {
    const toolsActive = task.tools.length > 0 && task.toolChoice.mode !== 'none';
    const toolMode: ToolMode = !toolsActive ? 'off' : task.toolChoice.mode === 'auto' ? 'lazy' : 'forced';
    const prompt = this.render(task.prompt, task.tools, task.toolChoice);
    const contextSize = this.context.contextSize;
    if (prompt.tokens.length >= contextSize) {
      throw new ShoalError(
        'CONTEXT_OVERFLOW',
        `the prompt is ${prompt.tokens.length} tokens but the model's context holds ${contextSize}: shorten the prompt or start the node with a larger --context-size`,
        { param: task.prompt.kind === 'chat' ? 'messages' : 'prompt' },
      );
    }
    const maxTokens = Math.min(task.sampling.maxTokens ?? Infinity, contextSize - prompt.tokens.length);

    // Grammars: a format constrains the whole answer; a tool call is constrained from its first token.
    let grammarState: LlamaGrammarEvaluationState | undefined;
    if (toolMode === 'forced') {
      grammarState = new LlamaGrammarEvaluationState({ model: this.model, grammar: await this.compileSchema(toolCallSchema(task.tools, task.toolChoice)) });
    } else if (task.format.kind === 'json') {
      const grammar = await this.grammarFor('json', () => LlamaGrammar.getFor(this.llama, 'json'));
      grammarState = new LlamaGrammarEvaluationState({ model: this.model, grammar });
    } else if (task.format.kind === 'json_schema') {
      grammarState = new LlamaGrammarEvaluationState({ model: this.model, grammar: await this.compileSchema(grammarSchema(task.format.schema)) });
    }
    const lazyToolGrammar = toolMode === 'lazy' ? await this.compileSchema(toolCallSchema(task.tools, task.toolChoice)) : null;

    const parser = new OutputParser({
      startInReasoning: prompt.startInReasoning && grammarState === undefined,
      toolMode,
      newCallId: () => `call_${randomBytes(12).toString('hex')}`,
    });
    // Stop sequences apply to free text; constrained output ends where its JSON closes.
    const stops = new StopMatcher(grammarState === undefined ? task.stop : []);
    const formatEnd = task.format.kind !== 'text' && toolMode !== 'forced' ? new JsonEnd() : null;

    emit({ type: 'start', promptTokens: prompt.tokens.length });
    const sequence = this.takeSequence(prompt.tokens);
    let reusable = false;
    try {
      const cachedPromptTokens = await this.keepSharedPrefix(sequence, prompt.tokens);
      const result = await this.decode(sequence, prompt.tokens.slice(cachedPromptTokens), task, maxTokens, signal, {
        // A grammar that may switch on mid-answer must be read per token; otherwise it is fixed, and a
        // fixed value spares the library re-checking its sampler on every token.
        grammar: lazyToolGrammar ? () => grammarState : grammarState,
        onText: (text, logprobs) => {
          const end = formatEnd ? formatEnd.push(text) : -1;
          const released = stops.push(end >= 0 ? text.slice(0, end) : text);
          this.forward(parser.push(released.text), logprobs, emit);
          if (parser.inToolCall && grammarState === undefined && lazyToolGrammar) {
            grammarState = new LlamaGrammarEvaluationState({ model: this.model, grammar: lazyToolGrammar });
          }
          return released.stopped || end >= 0 || parser.callComplete;
        },
      });
      this.forward(parser.push(stops.flush()), [], emit);
      this.forward(parser.finish(), [], emit);
      // A call cut off by the token limit is reported as the truncation it is.
      const finishReason = result.reason === 'length' ? 'length' : parser.toolCalls > 0 ? 'tool_calls' : 'stop';
      reusable = true;
      emit({
        type: 'end',
        finishReason,
        stopSequence: stops.matchedStop,
        usage: { promptTokens: prompt.tokens.length, completionTokens: result.completionTokens, ...(cachedPromptTokens > 0 ? { cachedPromptTokens } : {}) },
      });
    } catch (error) {
      // A cancelled request leaves the sequence's tokens as evaluated; any other failure may not.
      reusable = error instanceof ShoalError && error.code === 'CANCELLED';
      throw error;
    } finally {
      if (reusable) this.idle.push(sequence);
      else await this.editCache(() => sequence.dispose());
    }
  }

  /**
   * The idle sequence holding the longest prefix of `tokens`, when that prefix is most of what it
   * holds; else a fresh one while the context has any left (so no cache is thrown away); else the
   * least recently used idle one.
   */
  private takeSequence(tokens: Token[]): LlamaContextSequence {
    let best = -1;
    let bestShared = 0;
    this.idle.forEach((sequence, i) => {
      const held = sequence.nextTokenIndex;
      const shared = sequence.compareContextTokens(tokens).firstDifferentIndex;
      if (held > 0 && shared >= held * MIN_REUSE_SHARE && shared > bestShared) {
        best = i;
        bestShared = shared;
      }
    });
    if (best >= 0) return this.idle.splice(best, 1)[0]!;
    if (this.context.sequencesLeft > 0 || this.idle.length === 0) return this.context.getSequence();
    return this.idle.shift()!;
  }

  /** Runs a cache edit that takes the context's lock, the token loops holding back until it has (see cacheEditsWaiting). */
  private async editCache(edit: () => Promise<void> | void): Promise<void> {
    this.cacheEditsWaiting++;
    this.editsSettled ??= Promise.withResolvers<void>();
    try {
      await edit();
    } finally {
      this.cacheEditsWaiting--;
      if (this.cacheEditsWaiting === 0) {
        this.editsSettled?.resolve();
        this.editsSettled = null;
      }
    }
  }

  /** Erases what the sequence holds past its prefix shared with `tokens`; answers how many tokens it kept. */
  private async keepSharedPrefix(sequence: LlamaContextSequence, tokens: Token[]): Promise<number> {
    // The last prompt token is always evaluated again: its logits choose the first answer token.
    const keep = Math.max(0, Math.min(sequence.compareContextTokens(tokens).firstDifferentIndex, tokens.length - 1));
    if (keep < sequence.nextTokenIndex) await this.editCache(() => sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]));
    // Where the library cannot cut the cache at `keep` (sliding-window models) it evaluates the kept
    // part again on its own; the count then overstates what was saved, never what the cache holds.
    return keep;
  }

  /** Sends parsed output on, attaching pending log probabilities to the first answer text. */
  private forward(events: ReturnType<OutputParser['push']>, logprobs: TokenLogprob[], emit: Emit): void {
    let pending = logprobs;
    for (const event of events) {
      if (event.type === 'text' && pending.length > 0) {
        emit({ type: 'text', text: event.text, logprobs: pending });
        pending = [];
      } else {
        emit(event);
      }
    }
  }

  /**
   * The token loop. Detokenizes incrementally (holding tokens while a UTF-8 character is split
   * across them), reports text to `onText`, which answers whether a stop sequence ended the answer.
   */
  private async decode(
    sequence: LlamaContextSequence,
    promptTokens: Token[],
    task: InferenceTask,
    maxTokens: number,
    signal: AbortSignal,
    hooks: {
      grammar: LlamaGrammarEvaluationState | undefined | (() => LlamaGrammarEvaluationState | undefined);
      onText: (text: string, logprobs: TokenLogprob[]) => boolean;
    },
  ): Promise<{ reason: 'stop' | 'length'; completionTokens: number }> {
    const { temperature, topP, seed, presencePenalty, frequencyPenalty, topK, minP, repeatPenalty, repeatLastN } = task.sampling;
    const generated: Token[] = [];
    const penalty = repeatPenalty ?? 1;
    // llama.cpp's window: the latest N tokens, -1 all of them, 0 none; counted over the answer, as the library punishes only what it is given.
    const lastN = repeatLastN === undefined ? DEFAULT_REPEAT_LAST_N_TOKENS : repeatLastN;
    const punished = (): Token[] => (lastN < 0 ? generated : lastN === 0 ? [] : generated.slice(-lastN));
    const penalized = (presencePenalty !== 0 || frequencyPenalty !== 0 || penalty !== 1) && lastN !== 0;
    const wantLogprobs = task.logprobs !== null;
    const iterator = sequence.evaluateWithMetadata(
      promptTokens,
      { probabilities: wantLogprobs },
      {
        temperature,
        topP: temperature > 0 ? topP : 1,
        // Off unless the task sets them: the library's default top-k of 40 would change sampling.
        topK: topK ?? 0,
        minP: minP ?? 0,
        // Without a seed the library seeds from the wall clock in seconds, so identical requests in
        // the same second would sample identically.
        seed: seed ?? randomBytes(4).readUInt32LE(0),
        ...(hooks.grammar !== undefined ? { grammarEvaluationState: hooks.grammar } : {}),
        ...(penalized
          ? { repeatPenalty: { punishTokens: punished, ...(lastN > 0 ? { maxPunishTokens: lastN } : {}), penalty, presencePenalty, frequencyPenalty } }
          : {}),
      },
    );
    let pending: Token[] = [];
    let pendingLogprobs: TokenLogprob[] = [];
    let committedTail: Token[] = [];
    let reason: 'stop' | 'length' = 'stop';
    try {
      for await (const output of iterator) {
        if (signal.aborted) throw new ShoalError('CANCELLED', 'the request was cancelled');
        generated.push(output.token);
        pending.push(output.token);
        if (wantLogprobs) pendingLogprobs.push(this.logprob(output.token, (output as { probabilities?: Map<Token, number> }).probabilities, task.logprobs!.top));
        const text = this.model.detokenize(pending, false, committedTail);
        const incomplete = text.endsWith('\uFFFD') && pending.length < MAX_PENDING_TOKENS;
        if (!incomplete) {
          const stopped = hooks.onText(text, pendingLogprobs);
          committedTail = [...committedTail, ...pending].slice(-4);
          pending = [];
          pendingLogprobs = [];
          if (stopped) break;
        }
        if (generated.length >= maxTokens) {
          reason = 'length';
          break;
        }
        if (this.editsSettled !== null) await this.editsSettled.promise;
      }
      if (pending.length > 0) hooks.onText(this.model.detokenize(pending, false, committedTail), pendingLogprobs);
    } finally {
      await iterator.return();
    }
    if (signal.aborted) throw new ShoalError('CANCELLED', 'the request was cancelled');
    return { reason, completionTokens: generated.length };
  }

  private logprob(token: Token, probabilities: Map<Token, number> | undefined, top: number): TokenLogprob {
    const entry = (t: Token, p: number) => {
      const text = this.model.detokenize([t], true);
      return { token: text, logprob: p > 0 ? Math.log(p) : -9999, bytes: [...Buffer.from(text, 'utf8')] };
    };
    const chosen = entry(token, probabilities?.get(token) ?? 0);
    const alternatives = [...(probabilities ?? new Map<Token, number>()).entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([t, p]) => entry(t, p));
    return { ...chosen, top: alternatives };
  }

  private async embed(task: EmbeddingTask, signal: AbortSignal, emit: Emit): Promise<void> {
    const limit = Math.min(this.config.contextSize, this.model.trainContextSize);
    // Created on first use: models that never embed do not pay for a second context.
    this.embeddingContext ??= this.model.createEmbeddingContext({ contextSize: limit, threads: this.config.threads });
    const context = await this.embeddingContext;
    const inputs = task.inputs.map((text, i) => {
      const tokens = this.model.tokenize(text);
      if (tokens.length <= limit) return tokens;
      if (!task.truncate) {
        throw new ShoalError('CONTEXT_OVERFLOW', `input ${i} is ${tokens.length} tokens but the embedding context holds ${limit}: shorten it or allow truncation`, {
          param: 'input',
        });
      }
      return tokens.slice(0, limit);
    });
    const promptTokens = inputs.reduce((sum, tokens) => sum + tokens.length, 0);
    emit({ type: 'start', promptTokens });
    const vectors: number[][] = [];
    for (const tokens of inputs) {
      if (signal.aborted) throw new ShoalError('CANCELLED', 'the request was cancelled');
      const embedding = await context.getEmbeddingFor(tokens);
      vectors.push(task.normalize ? unitLength(embedding.vector) : [...embedding.vector]);
    }
    emit({ type: 'embeddings', vectors });
    emit({ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens, completionTokens: 0 } });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.embeddingContext) await (await this.embeddingContext).dispose();
    await this.context.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }
}

/** llama.cpp's `general.file_type` numbers for the types Shoal meets most. */
const FILE_TYPES: Record<number, string> = { 0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 7: 'Q8_0', 8: 'Q5_0', 9: 'Q5_1', 15: 'Q4_K_M', 17: 'Q5_K_M', 18: 'Q6_K', 32: 'BF16' };

function fileTypeName(fileType: unknown): string {
  return typeof fileType === 'number' ? (FILE_TYPES[fileType] ?? `type ${fileType}`) : String(fileType);
}
