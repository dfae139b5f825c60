import {
  getLlama,
  LlamaChat,
  LlamaCompletion,
  LlamaLogLevel,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
} from 'node-llama-cpp';
import { ShoalError } from '../../common/errors.js';
import type { ChatMessage, FinishReason, InferenceTask, TaskEvent } from '../../wire/task.js';
import type { RunnerConfig } from './protocol.js';

export type EngineLog = (level: 'debug' | 'info' | 'warn' | 'error', message: string) => void;

/** The `llama_cpp` engine: node-llama-cpp in this process, one context, one sequence per request. */
export class LlamaCppEngine implements AsyncDisposable {
  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly chatWrapper: ChatWrapper,
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
    });
    const chatWrapper = resolveChatWrapper(model);
    return new LlamaCppEngine(llama, model, context, chatWrapper);
  }

  get info(): { contextSize: number; sequences: number; trainContextSize: number; gpu: string | false } {
    return {
      contextSize: this.context.contextSize,
      sequences: this.context.totalSequences,
      trainContextSize: this.model.trainContextSize,
      gpu: this.llama.gpu,
    };
  }

  /**
   * Runs one task on a free sequence, calling `emit` for each event. Resolves when the task ends;
   * rejects with CANCELLED when `signal` aborts, or CONTEXT_OVERFLOW when the prompt cannot fit.
   */
  async generate(task: InferenceTask, signal: AbortSignal, emit: (event: TaskEvent) => void): Promise<void> {
    if (this.context.sequencesLeft === 0) {
      throw new ShoalError('INTERNAL', 'runner was sent more concurrent requests than it has sequences');
    }
    const sequence = this.context.getSequence();
    try {
      if (task.prompt.kind === 'chat') await this.generateChat(sequence, task, task.prompt.messages, signal, emit);
      else await this.generateText(sequence, task, task.prompt.text, signal, emit);
    } finally {
      await sequence.dispose();
    }
  }

  private async generateChat(
    sequence: LlamaContextSequence,
    task: InferenceTask,
    messages: ChatMessage[],
    signal: AbortSignal,
    emit: (event: TaskEvent) => void,
  ): Promise<void> {
    const history = toChatHistory(messages);
    const { contextText } = this.chatWrapper.generateContextState({ chatHistory: history });
    const promptTokens = contextText.tokenize(this.model.tokenizer).length;
    const maxTokens = this.admit(promptTokens, task);
    emit({ type: 'start', promptTokens });
    let completionTokens = 0;
    const chat = new LlamaChat({ contextSequence: sequence, chatWrapper: this.chatWrapper });
    try {
      const result = await chat.generateResponse(history, {
        ...samplingOptions(task),
        maxTokens,
        customStopTriggers: task.stop,
        signal,
        stopOnAbortSignal: true,
        onToken: (tokens) => {
          completionTokens += tokens.length;
        },
        onResponseChunk: (chunk) => {
          if (chunk.type === undefined && chunk.text !== '') emit({ type: 'text', text: chunk.text, tokens: chunk.tokens.length });
        },
      });
      this.finish(result.metadata.stopReason, promptTokens, completionTokens, emit);
    } finally {
      chat.dispose({ disposeSequence: false });
    }
  }

  private async generateText(
    sequence: LlamaContextSequence,
    task: InferenceTask,
    text: string,
    signal: AbortSignal,
    emit: (event: TaskEvent) => void,
  ): Promise<void> {
    const promptTokens = this.model.tokenize(text).length + (this.model.tokens.shouldPrependBosToken ? 1 : 0);
    const maxTokens = this.admit(promptTokens, task);
    emit({ type: 'start', promptTokens });
    let completionTokens = 0;
    const completion = new LlamaCompletion({ contextSequence: sequence });
    try {
      const result = await completion.generateCompletionWithMeta(text, {
        ...samplingOptions(task),
        maxTokens,
        customStopTriggers: task.stop,
        signal,
        stopOnAbortSignal: true,
        onToken: (tokens) => {
          completionTokens += tokens.length;
        },
        onTextChunk: (chunk) => {
          if (chunk !== '') emit({ type: 'text', text: chunk, tokens: 0 });
        },
      });
      this.finish(result.metadata.stopReason, promptTokens, completionTokens, emit);
    } finally {
      completion.dispose({ disposeSequence: false });
    }
  }

  /** Returns how many tokens the task may generate, or throws when its prompt leaves no room. */
  private admit(promptTokens: number, task: InferenceTask): number {
    const room = this.context.contextSize - promptTokens;
    if (room < 1) {
      throw new ShoalError(
        'CONTEXT_OVERFLOW',
        `the prompt is ${promptTokens} tokens but the model's context holds ${this.context.contextSize}: shorten the prompt or start the node with a larger --context-size`,
        { param: 'messages' },
      );
    }
    return Math.min(task.sampling.maxTokens ?? room, room);
  }

  private finish(
    stopReason: 'eogToken' | 'stopGenerationTrigger' | 'functionCalls' | 'maxTokens' | 'abort' | 'customStopTrigger',
    promptTokens: number,
    completionTokens: number,
    emit: (event: TaskEvent) => void,
  ): void {
    if (stopReason === 'abort') throw new ShoalError('CANCELLED', 'the request was cancelled');
    const finishReason: FinishReason = stopReason === 'maxTokens' ? 'length' : 'stop';
    emit({ type: 'end', finishReason, usage: { promptTokens, completionTokens } });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }
}

function samplingOptions(task: InferenceTask): {
  temperature: number;
  topP?: number;
  seed?: number;
  repeatPenalty: false;
} {
  const { temperature, topP, seed } = task.sampling;
  return {
    temperature,
    ...(temperature > 0 ? { topP } : {}),
    ...(seed !== null ? { seed } : {}),
    // OpenAI-style APIs apply no repeat penalty unless asked; the library's default would change outputs.
    repeatPenalty: false,
  };
}

function toChatHistory(messages: ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = messages.map((message) => {
    switch (message.role) {
      case 'system':
        return { type: 'system', text: message.content };
      case 'user':
        return { type: 'user', text: message.content };
      case 'assistant':
        return { type: 'model', response: [message.content] };
    }
  });
  // A trailing assistant message is continued (prefill); otherwise the model starts a new turn.
  if (history.at(-1)?.type !== 'model') history.push({ type: 'model', response: [] });
  return history;
}
