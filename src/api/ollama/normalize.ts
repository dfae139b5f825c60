import { ShoalError } from '../../common/errors.js';
import type { ModelView } from '../../models/views.js';
import type { ChatMessage, EmbeddingTask, InferenceTask, OutputFormat, Sampling, TaskImage, ToolDefinition } from '../../wire/task.js';
import { ImageIntake } from '../images.js';
import { generateTask } from '../task-builder.js';
import type { ChatRequest, EmbedRequest, GenerateRequest, OllamaMessage, OllamaTool, Options } from './schemas.js';

/** Ollama's own defaults when a request sets no temperature / top_p, so answers feel the same as on Ollama. */
export const OLLAMA_DEFAULT_TEMPERATURE = 0.8;
export const OLLAMA_DEFAULT_TOP_P = 0.9;

/** Ollama's tag for "the default version"; Shoal ids carry no tags, so `x:latest` means `x`. */
const LATEST_TAG = ':latest';

/** What normalize needs to know about the model a request names. */
export interface TargetModel {
  id: string;
  /** Whether prompts for it go through its chat template. */
  chat: boolean;
}

/** The model id (placed, or a card on disk) an Ollama model name refers to, or null. */
export function resolveModelName(name: string, ids: readonly string[]): string | null {
  if (ids.includes(name)) return name;
  if (name.endsWith(LATEST_TAG)) {
    const bare = name.slice(0, -LATEST_TAG.length);
    if (ids.includes(bare)) return bare;
  }
  return null;
}

/** The name Ollama clients expect to see listed: tagged, so names they send back resolve. */
export function ollamaName(id: string): string {
  return id.includes(':') ? id : `${id}${LATEST_TAG}`;
}

function unsupported(param: string, why: string): ShoalError {
  return new ShoalError('UNSUPPORTED_PARAMETER', `unsupported parameter '${param}': ${why}`, { param });
}

function refuseImages(images: readonly string[] | null | undefined, param: string): void {
  if (images && images.length > 0) throw unsupported(param, 'only user messages carry images; move them to a user message');
}

/** Ollama's base64 images, decoded and sniffed, in order; none for an absent or empty list. */
function takeImages(images: readonly string[] | null | undefined, param: string, intake: ImageIntake): TaskImage[] {
  return (images ?? []).map((data, index) => intake.base64(data, `${param}[${index}]`));
}

function withImages<T extends object>(value: T, images: TaskImage[]): T & { images?: TaskImage[] } {
  return images.length > 0 ? { ...value, images } : value;
}

/** Whether thinking is returned to the client; levels are an Ollama feature of specific models Shoal cannot steer. */
export function wantsThinking(think: ChatRequest['think']): boolean {
  if (typeof think === 'string') throw unsupported('think', 'thinking levels are not supported; send think: true or false');
  return think !== false;
}

function sampling(options: Options | undefined): Partial<Sampling> {
  const numPredict = options?.num_predict;
  const seed = options?.seed;
  return {
    maxTokens: numPredict !== undefined && numPredict > 0 ? numPredict : null,
    temperature: options?.temperature ?? OLLAMA_DEFAULT_TEMPERATURE,
    topP: options?.top_p ?? OLLAMA_DEFAULT_TOP_P,
    // Negative seeds mean "random" in Ollama and llama.cpp.
    seed: seed !== undefined && seed >= 0 ? seed : null,
    presencePenalty: options?.presence_penalty ?? 0,
    frequencyPenalty: options?.frequency_penalty ?? 0,
    // Absent, these samplers stay off (not Ollama's top_k 40 / repeat_penalty 1.1), as on the other APIs.
    ...(options?.top_k !== undefined && options.top_k > 0 ? { topK: options.top_k } : {}),
    ...(options?.min_p !== undefined ? { minP: options.min_p } : {}),
    ...(options?.repeat_penalty !== undefined ? { repeatPenalty: options.repeat_penalty } : {}),
    ...(options?.repeat_last_n !== undefined ? { repeatLastN: options.repeat_last_n } : {}),
  };
}

function stopList(stop: Options['stop']): string[] {
  if (stop === undefined) return [];
  return typeof stop === 'string' ? [stop] : stop;
}

export function outputFormat(format: ChatRequest['format']): OutputFormat {
  if (format === undefined || format === null || format === '') return { kind: 'text' };
  if (format === 'json') return { kind: 'json' };
  return { kind: 'json_schema', schema: format };
}

function logprobs(request: Pick<ChatRequest, 'logprobs' | 'top_logprobs'>): InferenceTask['logprobs'] {
  const top = request.top_logprobs ?? 0;
  if (request.logprobs === true) return { top };
  if (top > 0) throw new ShoalError('BAD_REQUEST', "invalid 'top_logprobs': it needs logprobs: true", { param: 'top_logprobs' });
  return null;
}

function toolDefinition(tool: OllamaTool): ToolDefinition {
  const { name, description, parameters } = tool.function;
  return {
    name,
    ...(description === undefined ? {} : { description }),
    parameters: parameters ?? { type: 'object', properties: {} },
  };
}

interface OpenCall {
  id: string;
  name: string;
}

function takeOpenCall(open: OpenCall[], id: string | undefined, name: string | undefined): OpenCall | undefined {
  let at = id === undefined ? -1 : open.findIndex((c) => c.id === id);
  if (at < 0 && id === undefined) at = name === undefined ? 0 : open.findIndex((c) => c.name === name);
  return at >= 0 ? open.splice(at, 1)[0] : undefined;
}

/**
 * Ollama tool calls and results carry no ids unless the client kept them; Shoal's messages pair
 * results with calls by id, so missing ids are made up and each result is matched to the oldest
 * open call of the same tool (or the oldest open call, when the result names no tool).
 */
export function toChatMessages(messages: readonly OllamaMessage[]): ChatMessage[] {
  const open: OpenCall[] = [];
  const intake = new ImageIntake();
  return messages.map((message, index): ChatMessage => {
    if (message.role === 'user') return withImages({ role: 'user', content: message.content }, takeImages(message.images, `messages[${index}].images`, intake));
    refuseImages(message.images, `messages[${index}].images`);
    switch (message.role) {
      case 'system':
        return { role: message.role, content: message.content };
      case 'assistant': {
        const toolCalls = (message.tool_calls ?? []).map((call, callIndex) => {
          const id = call.id ?? `call_${index}_${callIndex}`;
          open.push({ id, name: call.function.name });
          return { id, name: call.function.name, arguments: JSON.stringify(call.function.arguments) };
        });
        return {
          role: 'assistant',
          content: message.content,
          ...(message.thinking ? { reasoning: message.thinking } : {}),
          ...(toolCalls.length > 0 ? { toolCalls } : {}),
        };
      }
      case 'tool': {
        const call = takeOpenCall(open, message.tool_call_id, message.tool_name);
        const name = message.tool_name ?? call?.name;
        return {
          role: 'tool',
          toolCallId: message.tool_call_id ?? call?.id ?? `call_result_${index}`,
          ...(name === undefined ? {} : { name }),
          content: message.content,
        };
      }
    }
  });
}

/** `/api/chat` with at least one message (an empty list is the load request, answered without a task). */
export function chatRequestToTask(request: ChatRequest, target: TargetModel): InferenceTask {
  const messages = request.messages ?? [];
  if (messages.length === 0) throw new ShoalError('BAD_REQUEST', "invalid 'messages': send at least one message", { param: 'messages' });
  wantsThinking(request.think);
  return generateTask({
    model: target.id,
    prompt: { kind: 'chat', messages: toChatMessages(messages) },
    sampling: sampling(request.options),
    stop: stopList(request.options?.stop),
    tools: (request.tools ?? []).map(toolDefinition),
    format: outputFormat(request.format),
    logprobs: logprobs(request),
  });
}

/**
 * `/api/generate` with a prompt. Like Ollama, the prompt goes through the model's chat template as
 * a user turn (after `system`) unless `raw` is set; models without chat support get plain text,
 * with `system` as a first paragraph.
 */
export function generateRequestToTask(request: GenerateRequest, target: TargetModel): InferenceTask {
  const images = takeImages(request.images, 'images', new ImageIntake());
  if (request.suffix) throw unsupported('suffix', 'fill-in-the-middle is not supported; send the text before the gap as the prompt');
  if (request.template) throw unsupported('template', 'Shoal uses the model’s own chat template; send raw: true with a pre-templated prompt instead');
  if (request.context && request.context.length > 0) {
    throw unsupported('context', 'token contexts from earlier answers are not supported; use /api/chat with the earlier turns as messages');
  }
  wantsThinking(request.think);
  const prompt = request.prompt ?? '';
  const system = request.system ?? '';
  if (request.raw === true && system !== '') {
    throw new ShoalError('BAD_REQUEST', "invalid 'system': raw prompts skip the template, so put the system text into the prompt", { param: 'system' });
  }
  let taskPrompt: InferenceTask['prompt'];
  if (request.raw === true) taskPrompt = withImages({ kind: 'text', text: prompt }, images);
  else if (target.chat) {
    const messages: ChatMessage[] = system === '' ? [] : [{ role: 'system', content: system }];
    taskPrompt = { kind: 'chat', messages: [...messages, withImages({ role: 'user', content: prompt }, images)] };
  } else taskPrompt = withImages({ kind: 'text', text: system === '' ? prompt : `${system}\n\n${prompt}` }, images);
  return generateTask({
    model: target.id,
    prompt: taskPrompt,
    sampling: sampling(request.options),
    stop: stopList(request.options?.stop),
    format: outputFormat(request.format),
    logprobs: logprobs(request),
  });
}

/** The inputs of an embed request, one or many; an empty list is answered without a task. */
export function embedInputs(input: EmbedRequest['input']): string[] {
  return typeof input === 'string' ? [input] : input;
}

export function embedTask(inputs: string[], truncate: boolean | undefined, target: TargetModel, normalize: boolean): EmbeddingTask {
  return { kind: 'embed', model: target.id, inputs, truncate: truncate ?? true, normalize };
}

/** What `/api/pull` of a name does: nothing (already here), download a known card, or add a hub repo and download it. */
export type PullPlan = { kind: 'present'; id: string } | { kind: 'download'; id: string } | { kind: 'add'; repo: string };

type KnownModel = Pick<ModelView, 'id' | 'origin' | 'state'>;

/**
 * A name that is a model of this node (its card id, or `<id>:latest`) pulls that model; any other
 * is a hub repo (`owner/name[:QUANT]`, also with Ollama's `hf.co/` prefix) that gets a card first,
 * as `shoal models add --pull` does.
 */
export function pullPlan(name: string, known: readonly KnownModel[]): PullPlan {
  const id = resolveModelName(name, known.map((m) => m.id));
  const model = known.find((m) => m.id === id);
  if (!model) return { kind: 'add', repo: name };
  // Built-in models are generated where they run, local files and card-less copies are on disk: nothing to fetch.
  if (model.origin === 'builtin' || model.state === 'file' || (model.origin === 'store' && model.state === 'on-disk')) return { kind: 'present', id: model.id };
  return { kind: 'download', id: model.id };
}

/**
 * The model id `/api/delete` removes, on every member that holds it (as `shoal models rm` does): this
 * node's model of that name, else the name itself without `:latest` (another member may hold it).
 */
export function deleteTarget(name: string, known: readonly Pick<ModelView, 'id'>[]): string {
  return resolveModelName(name, known.map((m) => m.id)) ?? (name.endsWith(LATEST_TAG) ? name.slice(0, -LATEST_TAG.length) : name);
}
