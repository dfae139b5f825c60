// The `llama_server` engine: a managed `llama-server` child serving one model over loopback HTTP,
// with parallel slots sharing one unified KV cache, and Shoal's FIFO token reservations in front so
// that a burst of long requests queues here instead of exhausting the cache. It keeps the runner
// contract (runner-contract.ts) like RunnerSupervisor, so the worker can hold either.

import { randomBytes, randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { gguf } from '@huggingface/gguf';
import { AsyncQueue } from '../../common/async-queue.js';
import { ShoalError } from '../../common/errors.js';
import { formatPath } from '../../common/format-path.js';
import type { Logger } from '../../common/log.js';
import { promptImages, RunnerTask, type CountTask, type EmbeddingTask, type InferenceTask, type TaskEvent, type TaskImage } from '../../wire/task.js';
import type { ModelFacts } from '../runner/protocol.js';
import { DEFAULT_CRASH_LOOP, withOverrides } from '../crash-loop.js';
import type { InstanceRunner, RunnerStatus } from '../runner-contract.js';
import { unitLength } from '../runner/vectors.js';
import { ALL_LAYERS, llamaServerArgs, probeServerFeatures, speculativeEnabled, type DraftInput, type ServerArgsInput } from './llama-server-args.js';
import { describeSocketError, LoopbackHttp, readBody, readJson } from './loopback-http.js';
import {
  chatCountBody,
  chatRequestBody,
  completionRequestBody,
  contextExceeded,
  countTaskChoice,
  multimodalPrompt,
  promptProgressTotal,
  serverError,
  SseDecoder,
  StreamTranslator,
  toolPlan,
} from './llama-server-protocol.js';
import { DEFAULT_STOP_GRACE_MS, ManagedProcess, pollUntil, type ManagedProcessPolicy } from './managed-process.js';
import { TokenReservations } from './token-reservations.js';

export interface LlamaServerRunnerOptions {
  /** The `llama-server` binary (`findEngine('llama-server')`). */
  binaryPath: string;
  modelPath: string;
  /** The node's data directory, for the orphan record under `<dataDir>/run/engines`. */
  dataDir: string;
  log: Logger;
  /** CPU threads for generation and prompt processing (`-t`, `-tb`); always explicit. */
  threads: number;
  /** Tokens of context per request (per slot): prompt plus generated tokens. */
  contextTokens: number;
  /** Requests served at once (`--parallel` slots). */
  parallel: number;
  /**
   * Tokens of KV cache shared by all slots (`-c`), the budget token reservations draw from. Default
   * `contextTokens * parallel` (every slot can be full at once); smaller lets many short requests run
   * side by side while long ones queue. At least `contextTokens`.
   */
  kvTokens?: number;
  /**
   * Layers on devices (`-ngl`): this node's GPUs and the RPC donors, split by `tensorSplit`; the
   * rest run on this process's CPU. Default: 0, or all (999) when `rpcServers` are given. On a
   * CPU-only build the CPU is not a device, so with donors and all layers offloaded this node holds
   * none: give it a share by running a donor here too, or by offloading fewer layers.
   */
  gpuLayers?: number;
  /** What `status().gpu` reports: the backend doing the work, or false for CPU. Default false. */
  gpu?: string | false;
  /** KV cache element type (`-ctk`/`-ctv`). Default f16. */
  kvCacheType?: ServerArgsInput['kvCacheType'];
  /** Flash attention (`-fa`). Default auto. */
  flashAttention?: ServerArgsInput['flashAttention'];
  /** Donors of a pooled split, `host:port` each (`--rpc`); on this node these are tunnel ends on loopback. */
  rpcServers?: string[];
  /** Share of the model per device, local devices first then the RPC donors (`--tensor-split`, e.g. `1,1`). */
  tensorSplit?: string;
  /** This node's GPUs to offload to, by llama.cpp name (`--device`, e.g. `CUDA0,CUDA1`). Default: the binary's choice. */
  devices?: string[];
  /** Start llama-server with `--embeddings` (the instance's capabilities include embeddings). Default false. */
  embeddings?: boolean;
  /**
   * A draft model for speculative decoding (the card's runtime.speculative). Left off when this
   * node's SHOAL_SPECULATIVE is 0, so the same card can be measured without it.
   */
  draft?: DraftInput;
  /** The card's multimodal projector (`--mmproj`): the instance then takes images. Absent: text only. */
  projectorPath?: string;
  /** Requests allowed to wait for a reservation; more are refused with QUEUE_FULL. Default 256. */
  maxQueuedRequests?: number;
  /** Spawn to ready before the server is killed as hung. Default 180 000. */
  loadTimeoutMs?: number;
  /** First restart delay after a crash; doubles per crash in the window up to `maxBackoffMs`. Default 1000. */
  initialBackoffMs?: number;
  /** Default 30 000. */
  maxBackoffMs?: number;
  /** Crashes within `crashWindowMs` that open the circuit breaker. Default 5. */
  maxCrashes?: number;
  /** Default 600 000 (10 minutes). */
  crashWindowMs?: number;
  /** SIGTERM to SIGKILL on stop. Default 3000. */
  stopGraceMs?: number;
  /** Called whenever status() may have changed (state, in flight, queued): telemetry republishes on it. */
  onChange?: () => void;
}

/** What the runner learns from a server once it is up. */
interface ServerFacts {
  /** Tokens per slot as the server applies them (capped at the model's trained context). */
  slotContextTokens: number;
  templateSupportsTools: boolean;
  /** The server loaded a projector that takes images (`/props` modalities.vision). */
  vision: boolean;
  /** Where an image goes in a multimodal `/completion` prompt (`/props` media_marker, random per process); null when the server does not say. */
  mediaMarker: string | null;
  model: ModelFacts | null;
}

interface Request {
  id: string;
  task: RunnerTask;
  events: AsyncQueue<TaskEvent>;
  /** Aborted (with the ShoalError to report as reason) by cancel, crash, give-up or stop. */
  abort: AbortController;
  /** An HTTP request holding a slot is out: a crash now fails the request. */
  sent: boolean;
  /** Resolves when the reservation is granted. */
  onGrant: (() => void) | null;
  /** Its first reservation was granted: an embedding's later groups queue again, after `start`, unreported. */
  admitted: boolean;
  /** The queue position last reported to it, so a report goes out only when it moved. */
  reportedPosition: number | null;
  detach: () => void;
}

interface StreamHooks {
  /** The prompt's token count when known before sending; null when the stream's first chunk gives it. */
  promptTokens: number | null;
  /** Where a prompt too long for the context is reported (`messages` or `prompt`). */
  param: string;
  /** The prompt's size arrived with the stream (only when `promptTokens` was null), before any text. */
  onStart: (promptTokens: number) => void;
  onChunk: (chunk: unknown) => TaskEvent[];
}

/**
 * Spawn to ready for llama-server: longer than the node-llama-cpp child's 120 s because a pooled
 * driver also sends its layers to the RPC donors, over the network, before it serves.
 */
const LLAMA_SERVER_LOAD_TIMEOUT_MS = 180_000;
/** How long a dropped connection waits for the process's exit to explain it. */
const CONNECTION_LOSS_SETTLE_MS = 2000;
/** Tokenize calls in flight per embedding request. */
const EMBED_TOKENIZE_CONCURRENCY = 8;
/** Connections to llama-server beyond one per slot, for the calls around generations (tokenize, count). */
const CONNECTIONS_BEYOND_SLOTS = 4;
/** llama-server HTTP threads beyond the node's connections, for a probe on a fresh connection while all are held. */
const HTTP_THREADS_BEYOND_CONNECTIONS = 2;
const FILE_TYPES: Record<number, string> = { 0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 7: 'Q8_0', 8: 'Q5_0', 9: 'Q5_1', 15: 'Q4_K_M', 17: 'Q5_K_M', 18: 'Q6_K', 32: 'BF16' };

export class LlamaServerRunner implements InstanceRunner, AsyncDisposable {
  private readonly process: ManagedProcess<ServerFacts>;
  private readonly reservations: TokenReservations;
  private readonly requests = new Map<string, Request>();
  /** Loopback is reachable by every local user and any web page's fetch: the server demands this key. */
  private readonly apiKey = randomBytes(24).toString('hex');
  private readonly http: LoopbackHttp;
  private readonly kvTokens: number;
  /** Connections the node holds to the server at most: one per slot and a few for the calls around generations. */
  private readonly connections: number;
  private facts: ServerFacts | null = null;
  /** Counts ready processes: a connection lost under one generation is explained by its exit. */
  private generation = 0;

  constructor(private readonly options: LlamaServerRunnerOptions) {
    for (const key of ['threads', 'contextTokens', 'parallel'] as const) {
      if (!Number.isSafeInteger(options[key]) || options[key] < 1) throw new RangeError(`${key} must be a positive integer, got ${options[key]}`);
    }
    this.kvTokens = options.kvTokens ?? options.contextTokens * options.parallel;
    if (!Number.isSafeInteger(this.kvTokens) || this.kvTokens < options.contextTokens) {
      throw new RangeError(`kvTokens (${this.kvTokens}) must be an integer of at least contextTokens (${options.contextTokens})`);
    }
    this.connections = options.parallel + CONNECTIONS_BEYOND_SLOTS;
    this.http = new LoopbackHttp({ maxSockets: this.connections, maxIdleSockets: this.connections, headers: { authorization: `Bearer ${this.apiKey}` } });
    this.reservations = new TokenReservations({
      budgetTokens: this.kvTokens,
      maxActive: options.parallel,
      maxQueued: options.maxQueuedRequests ?? 256,
      maxRequestTokens: options.contextTokens,
    });
    const policy: ManagedProcessPolicy = withOverrides(
      { ...DEFAULT_CRASH_LOOP, loadTimeoutMs: LLAMA_SERVER_LOAD_TIMEOUT_MS, stopGraceMs: DEFAULT_STOP_GRACE_MS },
      options,
    );
    this.process = new ManagedProcess<ServerFacts>({
      name: 'llama-server',
      binaryPath: options.binaryPath,
      dataDir: options.dataDir,
      log: options.log,
      policy,
      env: { LLAMA_API_KEY: this.apiKey },
      args: async (port) =>
        llamaServerArgs(
          {
            modelPath: options.modelPath,
            port,
            threads: options.threads,
            contextTokens: options.contextTokens,
            parallel: options.parallel,
            kvTokens: this.kvTokens,
            httpThreads: this.connections + HTTP_THREADS_BEYOND_CONNECTIONS,
            gpuLayers: options.gpuLayers ?? ((options.rpcServers ?? []).length > 0 ? ALL_LAYERS : 0),
            rpcServers: options.rpcServers ?? [],
            tensorSplit: options.tensorSplit ?? null,
            devices: options.devices ?? [],
            embeddings: options.embeddings ?? false,
            kvCacheType: options.kvCacheType ?? 'f16',
            flashAttention: options.flashAttention ?? 'auto',
            draft: speculativeEnabled(process.env) ? options.draft : undefined,
            projectorPath: options.projectorPath,
          },
          await probeServerFeatures(options.binaryPath),
        ),
      probe: (port, signal) => this.probe(port, signal),
      onReady: (facts) => {
        this.facts = facts;
        this.generation += 1;
      },
      onCrash: (error) => this.onCrash(error),
      onGiveUp: (error) => this.onGiveUp(error),
      ...(options.onChange ? { onChange: options.onChange } : {}),
    });
  }

  status(): RunnerStatus {
    const snapshot = this.reservations.snapshot();
    return {
      state: this.process.state,
      reason: this.process.reason,
      pid: this.process.pid,
      restarts: this.process.restarts,
      inFlight: snapshot.active,
      queued: snapshot.queued,
      contextSize: this.facts ? this.slotContextTokens() : null,
      sequences: this.facts ? this.options.parallel : null,
      gpu: this.facts ? (this.options.gpu ?? false) : null,
      model: this.facts?.model ?? null,
    };
  }

  whenReady(signal?: AbortSignal): Promise<void> {
    return this.process.whenReady(signal);
  }

  /**
   * Queues a task and streams its events. Aborting `signal` cancels it: a waiting task leaves the
   * queue, a running one's HTTP request is aborted (llama-server frees the slot), and the stream ends
   * with CANCELLED.
   */
  run(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    const state = this.process.state;
    if (state === 'failed' || state === 'stopped') throw this.process.unavailableError();
    const valid = RunnerTask.safeParse(task);
    if (!valid.success) {
      const issue = valid.error.issues[0]!;
      throw new ShoalError('BAD_REQUEST', `invalid request: ${formatPath(issue.path) || 'task'}: ${issue.message}`);
    }
    if (task.kind === 'embed' && !this.options.embeddings) {
      throw new ShoalError('CAPABILITY_MISSING', 'this model instance does not serve embeddings: place an embedding model, or one whose card lists the embeddings capability');
    }
    if (task.kind === 'transcribe') throw new ShoalError('CAPABILITY_MISSING', 'llama-server serves text models, not speech to text: send audio to a speech-to-text model (a card with the transcription task)');
    const id = randomUUID();
    // Counting holds no KV cells, so it does not queue for a reservation.
    if (task.kind !== 'count') {
      this.reservations.enqueue(id, null);
      this.options.onChange?.();
    }
    const onAbort = (): void => this.cancel(id);
    const request: Request = {
      id,
      task,
      events: new AsyncQueue<TaskEvent>(() => this.cancel(id)),
      abort: new AbortController(),
      sent: false,
      onGrant: null,
      admitted: false,
      reportedPosition: null,
      detach: () => signal.removeEventListener('abort', onAbort),
    };
    this.requests.set(id, request);
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) this.cancel(id);
    void this.serve(request);
    return request.events;
  }

  async stop(): Promise<void> {
    await this.process.stop();
    this.http.close();
  }

  kill(reason: string): void {
    this.process.kill(reason);
  }

  stderrTail(): string[] {
    return this.process.stderrTail();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  // -------------------------------------------------------------------------------------------
  // Lifecycle of one request

  private cancel(id: string): void {
    this.end(id, new ShoalError('CANCELLED', 'the request was cancelled'));
  }

  /** Ends a request with `error` now; its HTTP request (if any) is aborted and its reservation freed when `serve` unwinds. */
  private end(id: string, error: ShoalError): void {
    const request = this.requests.get(id);
    if (!request) return;
    request.events.fail(error);
    request.abort.abort(error);
  }

  private onCrash(error: ShoalError): void {
    for (const request of this.requests.values()) {
      // Requests not yet holding a slot wait for the restart.
      if (request.sent) this.end(request.id, error);
    }
  }

  private onGiveUp(error: ShoalError): void {
    for (const id of [...this.requests.keys()]) this.end(id, error);
  }

  private async serve(request: Request): Promise<void> {
    try {
      switch (request.task.kind) {
        case 'generate':
          await this.generate(request, request.task);
          break;
        case 'count':
          await this.count(request, request.task);
          break;
        case 'embed':
          await this.embed(request, request.task);
          break;
      }
      request.events.end();
    } catch (error) {
      request.events.fail(this.failure(request, error));
    } finally {
      request.detach();
      this.requests.delete(request.id);
      this.wake(this.reservations.release(request.id));
    }
  }

  private failure(request: Request, error: unknown): ShoalError {
    const reason: unknown = request.abort.signal.reason;
    if (request.abort.signal.aborted && reason instanceof ShoalError) return reason;
    if (error instanceof ShoalError) return imageRefusal(request.task, error) ?? error;
    this.options.log.error({ err: error }, 'llama-server request failed');
    return new ShoalError('INTERNAL', `internal error talking to llama-server: ${(error as Error).message}`, { cause: error });
  }

  /** Starts the requests whose reservations were granted; reservation counts changed either way. */
  private wake(granted: string[]): void {
    this.options.onChange?.();
    for (const id of granted) {
      const request = this.requests.get(id);
      const resolve = request?.onGrant;
      if (request) {
        request.onGrant = null;
        request.admitted = true;
      }
      resolve?.();
    }
    this.reportPositions();
  }

  /**
   * Tells each request waiting for its first grant its place in the FIFO (1 = granted next), when it
   * starts waiting and whenever it moved up. Requests still being sized count as ahead: they keep
   * the place they arrived at.
   */
  private reportPositions(): void {
    this.reservations.waitingIds().forEach((id, index) => {
      const request = this.requests.get(id);
      if (!request || request.admitted || request.onGrant === null || request.reportedPosition === index + 1) return;
      request.reportedPosition = index + 1;
      request.events.push({ type: 'queued', position: index + 1 });
    });
  }

  /** Sizes the request's reservation and waits, FIFO, until it is granted. */
  private async reserve(request: Request, tokens: number): Promise<void> {
    this.wake(this.reservations.setSize(request.id, tokens));
    if (this.reservations.isActive(request.id)) return;
    const signal = request.abort.signal;
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason);
      request.onGrant = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) onAbort();
      else this.reportPositions();
    });
  }

  private slotContextTokens(): number {
    return Math.min(this.options.contextTokens, this.facts?.slotContextTokens ?? this.options.contextTokens);
  }

  // -------------------------------------------------------------------------------------------
  // Tasks

  private async generate(request: Request, task: InferenceTask): Promise<void> {
    const signal = request.abort.signal;
    await this.process.whenReady(signal);
    const plan = toolPlan(task, this.facts!.templateSupportsTools);
    const slotTokens = this.slotContextTokens();
    const isChat = task.prompt.kind === 'chat';
    const param = isChat ? 'messages' : 'prompt';
    const maxTokens = task.sampling.maxTokens;
    // As in the llama_cpp engine, a token limit beyond the context is cut to what fits (the answer
    // then ends with the length reason), so the reservation always fits one slot.
    const nPredictFor = (promptTokens: number): number => Math.min(maxTokens ?? Infinity, slotTokens - promptTokens);
    let promptTokens: number | null;
    let body: Record<string, unknown>;
    const images = this.imagesOf(task);
    if (task.prompt.kind === 'text' && images.length > 0) {
      const { prompt, tokens } = await this.multimodalText(request, task.prompt.text, images);
      promptTokens = tokens;
      body = completionRequestBody(task, plan, prompt, 0);
    } else if (task.prompt.kind === 'text') {
      const tokens = await this.tokenize(request, task.prompt.text);
      promptTokens = tokens.length;
      body = completionRequestBody(task, plan, tokens, 0);
    } else {
      body = chatRequestBody({ ...task, prompt: task.prompt }, plan, 0);
      if (this.facts!.slotContextTokens === slotTokens && this.reservations.fitsNow(request.id, slotTokens)) {
        // Counted alongside the generation: a whole slot is free, so it is reserved for now and the
        // server's first chunk (prompt progress) gives the prompt's size, which shrinks the
        // reservation. The server applies the same cut: without context shift a slot stops, with
        // the length reason, once prompt plus generated tokens fill it, and refuses a prompt that
        // fills it already. This saves a round trip (the count) before every chat.
        promptTokens = null;
        body.max_tokens = maxTokens ?? -1;
        body.return_progress = true;
        this.wake(this.reservations.setSize(request.id, slotTokens));
      } else {
        promptTokens = await this.countChat(request, body);
      }
    }
    if (promptTokens !== null) {
      if (promptTokens >= slotTokens) throw contextOverflow(promptTokens, slotTokens, param);
      const nPredict = nPredictFor(promptTokens);
      if (isChat) body.max_tokens = nPredict;
      else body.n_predict = nPredict;
      await this.reserve(request, promptTokens + nPredict);
    }

    const newTranslator = (counted: number): StreamTranslator =>
      new StreamTranslator({ plan, userStops: task.stop, logprobsTop: task.logprobs?.top ?? null, promptTokens: counted, verbose: body.verbose === true });
    let translator = promptTokens === null ? null : newTranslator(promptTokens);
    await this.stream(request, isChat ? '/v1/chat/completions' : '/completion', body, {
      promptTokens,
      param,
      onStart: (counted) => {
        translator = newTranslator(counted);
        this.wake(this.reservations.shrink(request.id, counted + nPredictFor(counted)));
      },
      onChunk: (chunk) => (isChat ? translator!.chatChunk(chunk) : translator!.completionChunk(chunk)),
    });
    if (!translator?.done) throw await this.connectionLost(this.generation, 'the stream ended before the answer did');
    for (const event of translator.finish()) request.events.push(event);
  }

  private async count(request: Request, task: CountTask): Promise<void> {
    const signal = request.abort.signal;
    await this.process.whenReady(signal);
    let promptTokens: number;
    const images = this.imagesOf(task);
    if (task.prompt.kind === 'text' && images.length > 0) {
      promptTokens = (await this.multimodalText(request, task.prompt.text, images)).tokens;
    } else if (task.prompt.kind === 'text') {
      promptTokens = (await this.tokenize(request, task.prompt.text)).length;
    } else {
      promptTokens = await this.countChat(request, chatCountBody(task.prompt, task.tools, countTaskChoice(task), this.facts!.templateSupportsTools));
    }
    request.events.push({ type: 'start', promptTokens });
    request.events.push({ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens, completionTokens: 0 } });
  }

  private async embed(request: Request, task: EmbeddingTask): Promise<void> {
    const signal = request.abort.signal;
    await this.process.whenReady(signal);
    const limit = this.slotContextTokens();
    const inputs: number[][] = new Array<number[]>(task.inputs.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < task.inputs.length) {
        const i = next++;
        const tokens = await this.tokenize(request, task.inputs[i]!);
        if (tokens.length > limit && !task.truncate) {
          throw new ShoalError('CONTEXT_OVERFLOW', `input ${i} is ${tokens.length} tokens but the embedding context holds ${limit}: shorten it or allow truncation`, {
            param: 'input',
          });
        }
        inputs[i] = tokens.slice(0, limit);
      }
    };
    await Promise.all(Array.from({ length: Math.min(EMBED_TOKENIZE_CONCURRENCY, task.inputs.length) }, worker));
    const promptTokens = inputs.reduce((sum, tokens) => sum + tokens.length, 0);

    // Inputs go in groups that fit one slot's worth of KV; each group is one reservation. The first
    // keeps the request's place in the queue, later ones queue again at the back.
    const vectors: number[][] = [];
    let started = false;
    for (let start = 0; start < inputs.length; ) {
      let end = start;
      let tokens = 0;
      while (end < inputs.length && end - start < this.options.parallel && tokens + inputs[end]!.length <= limit) tokens += inputs[end++]!.length;
      if (start > 0) {
        this.wake(this.reservations.release(request.id));
        this.reservations.enqueue(request.id, null);
      }
      await this.reserve(request, Math.max(1, tokens));
      await this.process.whenReady(signal);
      if (!started) {
        request.events.push({ type: 'start', promptTokens });
        started = true;
      }
      request.sent = true;
      const generation = this.generation;
      let answer: unknown;
      try {
        answer = await this.post(request, '/embedding', { input: inputs.slice(start, end), embd_normalize: -1 });
      } catch (error) {
        if (signal.aborted || error instanceof ShoalError) throw error;
        throw await this.connectionLost(generation, describeSocketError(error));
      }
      request.sent = false;
      vectors.push(...embeddingsOf(answer, end - start).map((vector) => (task.normalize ? unitLength(vector) : vector)));
      start = end;
    }
    request.events.push({ type: 'embeddings', vectors });
    request.events.push({ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens, completionTokens: 0 } });
  }

  // -------------------------------------------------------------------------------------------
  // HTTP

  /** A task's images, refused unless this server loaded a projector. */
  private imagesOf(task: InferenceTask | CountTask): TaskImage[] {
    const images = promptImages(task.prompt);
    if (images.length > 0 && !this.facts!.vision) {
      throw new ShoalError('CAPABILITY_MISSING', 'this model instance does not take images (no projector loaded): send the request to a vision model, whose card names a projector');
    }
    return images;
  }

  /**
   * A text prompt with images, for `/completion`, and its token count. The server tokenizes a
   * multimodal prompt itself, with special-token parsing on, so text that spells a control token is
   * refused rather than read as one (token ids, the text-only form, keep such text as text). The
   * images' share of the count is what they add to a one-turn chat: the template's text cancels out.
   */
  private async multimodalText(request: Request, text: string, images: TaskImage[]): Promise<{ prompt: ReturnType<typeof multimodalPrompt>; tokens: number }> {
    const marker = this.facts!.mediaMarker;
    if (marker === null) throw new ShoalError('CAPABILITY_MISSING', 'this llama-server build does not say its media marker, so a text prompt cannot carry images: send them in a chat, or update the engine (shoal doctor --fix)');
    const [plain, special] = await Promise.all([this.tokenize(request, text), this.tokenize(request, text, true)]);
    if (plain.length !== special.length || plain.some((token, i) => token !== special[i])) {
      throw new ShoalError('BAD_REQUEST', 'a prompt with images must not spell a control token of the model (such as its chat markers): remove it, or send the conversation as chat messages', { param: 'prompt' });
    }
    const turn = (list: TaskImage[] | undefined): Record<string, unknown> =>
      chatCountBody({ kind: 'chat', messages: [{ role: 'user', content: '', ...(list ? { images: list } : {}) }] }, [], { mode: 'none' }, false);
    const [withImages, without] = await Promise.all([this.countChat(request, turn(images)), this.countChat(request, turn(undefined))]);
    return { prompt: multimodalPrompt(text, images, marker), tokens: plain.length + withImages - without };
  }

  /** Prompt tokens of text, with BOS as the model wants it and control-token text left as text (unless `parseSpecial`). */
  private async tokenize(request: Request, text: string, parseSpecial = false): Promise<number[]> {
    const answer = await this.prepare(request, '/tokenize', { content: text, add_special: true, parse_special: parseSpecial });
    const tokens = (answer as { tokens?: unknown }).tokens;
    if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === 'number')) throw new Error('llama-server /tokenize answered without tokens');
    return tokens as number[];
  }

  /** Prompt tokens of a chat body, rendered exactly as the generation will render it. */
  private async countChat(request: Request, body: Record<string, unknown>): Promise<number> {
    const answer = await this.prepare(request, '/v1/chat/completions/input_tokens', body);
    const count = (answer as { input_tokens?: unknown }).input_tokens;
    if (typeof count !== 'number') throw new Error('llama-server /v1/chat/completions/input_tokens answered without input_tokens');
    return count;
  }

  /**
   * A call before the request holds a slot (tokenizing, counting). If the server dies under it, the
   * call is repeated on the restarted server: nothing was generated yet.
   */
  private async prepare(request: Request, path: string, body: unknown): Promise<unknown> {
    const signal = request.abort.signal;
    for (;;) {
      await this.process.whenReady(signal);
      const generation = this.generation;
      try {
        return await this.post(request, path, body);
      } catch (error) {
        if (signal.aborted || error instanceof ShoalError) throw error;
        const lost = await this.connectionLost(generation, describeSocketError(error));
        if (lost.code !== 'RUNNER_CRASHED') throw lost;
      }
    }
  }

  private async post(request: Request, path: string, body: unknown): Promise<unknown> {
    const port = this.process.port;
    if (port === null) throw this.process.unavailableError();
    const answer = await this.http.postJson(port, path, body, request.abort.signal);
    if (answer.status !== 200) throw serverError(answer.status, answer.body);
    return answer.body;
  }

  /**
   * Sends a generation and feeds each SSE payload to `onChunk`. `start` goes out once the server
   * accepts, or, when the prompt's size is not known yet, with the first chunk (its prompt progress).
   */
  private async stream(request: Request, path: string, body: unknown, hooks: StreamHooks): Promise<void> {
    const signal = request.abort.signal;
    await this.process.whenReady(signal);
    const port = this.process.port;
    if (port === null) throw this.process.unavailableError();
    const generation = this.generation;
    request.sent = true;
    try {
      const response = await this.http.post(port, path, body, signal);
      if (response.statusCode !== 200) {
        const answer = await readJson(response, signal);
        const exceeded = contextExceeded(answer);
        throw exceeded ? contextOverflow(exceeded.promptTokens, exceeded.contextTokens, hooks.param) : serverError(response.statusCode ?? null, answer);
      }
      let started = hooks.promptTokens !== null;
      if (hooks.promptTokens !== null) request.events.push({ type: 'start', promptTokens: hooks.promptTokens });
      const sse = new SseDecoder();
      const handle = (payloads: string[]): void => {
        for (const payload of payloads) {
          if (payload === '[DONE]') continue;
          const chunk: unknown = JSON.parse(payload);
          if (!started) {
            const counted = promptProgressTotal(chunk);
            if (counted === null) throw serverError(null, chunk);
            started = true;
            request.events.push({ type: 'start', promptTokens: counted });
            hooks.onStart(counted);
          }
          for (const event of hooks.onChunk(chunk)) request.events.push(event);
        }
      };
      await readBody(response, signal, (chunk) => handle(sse.push(chunk)));
      handle(sse.flush());
    } catch (error) {
      if (signal.aborted || error instanceof ShoalError || error instanceof SyntaxError) throw error;
      throw await this.connectionLost(generation, describeSocketError(error));
    }
  }

  /**
   * A connection to the server broke. If the process died (or dies within a moment), that is a
   * crash; otherwise it is reported as what it was.
   */
  private async connectionLost(generation: number, detail: string): Promise<ShoalError> {
    const deadline = Date.now() + CONNECTION_LOSS_SETTLE_MS;
    while (Date.now() < deadline) {
      if (this.generation !== generation || this.process.state !== 'ready') {
        return new ShoalError('RUNNER_CRASHED', `the model's engine crashed mid-request (${this.process.reason ?? detail}): retry the request`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    return new ShoalError('RUNNER_CRASHED', `lost the connection to llama-server (${detail}): retry the request`);
  }

  /** Up when /health answers 200; then reads what the runner needs to know. */
  private async probe(port: number, signal: AbortSignal): Promise<ServerFacts> {
    await pollUntil(async (s) => (await this.http.getJson(port, '/health', s)).status === 200, signal);
    const props = (await this.http.getJson(port, '/props', signal)).body as {
      default_generation_settings?: { n_ctx?: number };
      chat_template_caps?: { supports_tools?: boolean; supports_tool_calls?: boolean };
      model_ftype?: string;
      modalities?: { vision?: boolean };
      media_marker?: string;
    };
    const slotContextTokens = props.default_generation_settings?.n_ctx;
    if (typeof slotContextTokens !== 'number' || slotContextTokens < 1) throw new Error('/props does not give the slot context size');
    const caps = props.chat_template_caps ?? {};
    return {
      slotContextTokens,
      templateSupportsTools: caps.supports_tools === true && caps.supports_tool_calls === true,
      vision: props.modalities?.vision === true,
      mediaMarker: typeof props.media_marker === 'string' && props.media_marker !== '' ? props.media_marker : null,
      model: await this.modelFacts(port, signal, props.model_ftype ?? null),
    };
  }

  /** Model facts for listings: the GGUF header for what the server does not say. Null if unreadable. */
  private async modelFacts(port: number, signal: AbortSignal, ftype: string | null): Promise<ModelFacts | null> {
    try {
      const [{ size }, header, models] = await Promise.all([
        stat(this.options.modelPath),
        gguf(this.options.modelPath, { allowLocalFile: true }),
        this.http.getJson(port, '/v1/models', signal).then((answer) => answer.body as { data?: Array<{ meta?: { n_params?: number } }> }),
      ]);
      const metadata = header.metadata as unknown as Record<string, unknown>;
      const fileType = metadata['general.file_type'];
      const params = models.data?.[0]?.meta?.n_params;
      return {
        architecture: String(metadata['general.architecture'] ?? 'unknown'),
        sizeBytes: size,
        fileType: typeof fileType === 'number' ? (FILE_TYPES[fileType] ?? `type ${fileType}`) : ftype,
        parameterCount: typeof params === 'number' ? params : null,
        hasChatTemplate: typeof metadata['tokenizer.chat_template'] === 'string',
      };
    } catch (error) {
      this.options.log.warn({ err: error }, 'could not read the model facts');
      return null;
    }
  }
}

/**
 * llama-server's refusal of an image its decoder cannot read, which it reports as a server error
 * (HTTP 500) on some routes: the request's fault, said as such. Null for any other error.
 */
function imageRefusal(task: RunnerTask, error: ShoalError): ShoalError | null {
  if ((task.kind !== 'generate' && task.kind !== 'count') || !/failed to load image/i.test(error.message) || promptImages(task.prompt).length === 0) return null;
  return new ShoalError('BAD_REQUEST', 'the model could not decode an image of the request: send PNG, JPEG, GIF or WebP files that open in an image viewer', { param: task.prompt.kind === 'chat' ? 'messages' : 'images' });
}

function contextOverflow(promptTokens: number, slotTokens: number, param: string): ShoalError {
  return new ShoalError(
    'CONTEXT_OVERFLOW',
    `the prompt is ${promptTokens} tokens but the model's context holds ${slotTokens}: shorten the prompt or place the model with a larger context size`,
    { param },
  );
}

/** One vector per input from `/embedding`: the pooled vector, or the mean of per-token vectors when the model does not pool. */
function embeddingsOf(answer: unknown, expected: number): number[][] {
  if (!Array.isArray(answer) || answer.length !== expected) throw new Error(`llama-server /embedding answered ${Array.isArray(answer) ? answer.length : 'no'} results for ${expected} inputs`);
  const byIndex = [...(answer as Array<{ index?: number; embedding?: number[][] }>)].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
  return byIndex.map((item) => {
    const rows = item.embedding;
    if (!Array.isArray(rows) || rows.length === 0 || !Array.isArray(rows[0])) throw new Error('llama-server /embedding answered without vectors');
    if (rows.length === 1) return rows[0]!;
    const mean = new Array<number>(rows[0]!.length).fill(0);
    for (const row of rows) for (let i = 0; i < mean.length; i++) mean[i]! += row[i]! / rows.length;
    return mean;
  });
}
