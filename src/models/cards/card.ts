// A model card: what a model is, where its bytes come from, what it can do and which engines may run
// it. Cards are TOML on disk (parse.ts) and plain data everywhere else. Architecture facts (layers,
// heads, context) are deliberately absent: they are read from the GGUF header (gguf-facts.ts), never
// typed by hand, so a card can never disagree with its file.

import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ModelId } from '../../common/ids.js';
import { BUILTIN_MODEL_SPECS, BUILTIN_PROJECTOR_SPECS, BUILTIN_WHISPER_SPECS } from '../generate/builtin.js';
import { CARD_KV_CACHE_TYPES, FLASH_ATTENTION_MODES } from './runtime-knobs.js';

export { CARD_KV_CACHE_TYPES, FLASH_ATTENTION_MODES, type CardKvCacheType, type FlashAttentionMode } from './runtime-knobs.js';

/**
 * Engines a backend tag can name; the same set the node advertises (`<engine>-<compute>`). `whisper`
 * is whisper.cpp in-process (@fugood/whisper.node), for speech-to-text cards only.
 */
export const CARD_ENGINES = ['llama_cpp', 'llama_server', 'rpc', 'whisper'] as const;
export type CardEngine = (typeof CARD_ENGINES)[number];
export const CARD_COMPUTES = ['cpu', 'cuda', 'vulkan', 'metal'] as const;

const BACKEND_TAG_RE = new RegExp(`^(${CARD_ENGINES.join('|')})-(${CARD_COMPUTES.join('|')})$`);

export const BackendTagSchema = z
  .string()
  .regex(BACKEND_TAG_RE, `a backend tag is <engine>-<compute>: engine one of ${CARD_ENGINES.join(', ')}; compute one of ${CARD_COMPUTES.join(', ')}`);

/** The engine half of a tag ('llama_server' of 'llama_server-cuda'). */
export function engineOf(tag: string): string {
  return tag.slice(0, tag.lastIndexOf('-'));
}

/** `transcription`: speech to text (a whisper model), a card's only task when it has it. */
export const CARD_TASKS = ['chat', 'completion', 'embeddings', 'transcription'] as const;
export type CardTask = (typeof CARD_TASKS)[number];

/** Bounds of the runtime knobs: beyond them a card is a typo, not a wish. */
export const CARD_MAX_CONTEXT_TOKENS = 1 << 21;
export const CARD_MAX_PARALLEL = 64;
export const CARD_MAX_MIN_NODES = 16;

const HF_REPO_RE = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;
const COMMIT_SHA_RE = /^[0-9a-f]{40}$/;

/** A .gguf file's path inside a hub repo (`model` also a whisper.cpp .bin); `what` names it in the messages ("the file", "the projector"). */
function repoGgufPath(what: string, model = false): z.ZodType<string> {
  return z
    .string()
    .min(1)
    .max(500)
    .regex(model ? MODEL_FILE_RE : GGUF_FILE_RE, `${what} must be a .gguf file inside the repo${model ? ' (or a whisper.cpp .bin for speech to text)' : ''}`)
    .refine((file) => !file.startsWith('/') && !file.split('/').includes('..'), `${what} is a path inside the repo`);
}

/** A .gguf file's name in the store (an imported model's or its projector's; `model` also a whisper.cpp .bin), with no directory. */
function storeGgufName(what: string, model = false): z.ZodType<string> {
  return z
    .string()
    .min(1)
    .max(255)
    .regex(model ? /^[^/\\]+\.(gguf|bin)$/i : /^[^/\\]+\.gguf$/i, `${what} is a .gguf${model ? ' (or whisper.cpp .bin)' : ''} file name, without a directory`);
}

const GGUF_FILE_RE = /\.gguf$/i;
/** whisper.cpp's models are its legacy ggml files, named `.bin` (`ggml-base.en.bin`), not GGUFs. */
const WHISPER_FILE_RE = /\.bin$/i;
const MODEL_FILE_RE = /\.(gguf|bin)$/i;

const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'sha256 is 64 lowercase hex digits');

export const CardSource = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('huggingface'),
    repo: z.string().regex(HF_REPO_RE, 'a Hugging Face repo looks like "owner/name"'),
    file: repoGgufPath('the file', true),
    // A branch name would let the bytes change under the same card; only a commit pins them.
    revision: z.string().regex(COMMIT_SHA_RE, 'revision must be a full 40-character commit sha (a branch or tag can move)'),
  }),
  z.strictObject({
    kind: z.literal('builtin'),
    spec: z
      .string()
      .refine(
        (spec) => Object.hasOwn(BUILTIN_MODEL_SPECS, spec) || Object.hasOwn(BUILTIN_WHISPER_SPECS, spec),
        `spec must be one of the generated models: ${[...Object.keys(BUILTIN_MODEL_SPECS), ...Object.keys(BUILTIN_WHISPER_SPECS)].join(', ')}`,
      ),
  }),
  z.strictObject({
    kind: z.literal('file'),
    // parse.ts resolves a relative path against the card's directory before validation.
    path: z.string().min(1).max(4096),
  }),
  // A GGUF from this machine's disk taken into the model store (`shoal models add ./x.gguf`): held like
  // a hub download (store repo = the card id, revision = the first 40 hex of its SHA-256), so members
  // copy it as they copy any model, verified against `sha256`.
  z.strictObject({
    kind: z.literal('local'),
    /** The file's name in the store. */
    file: storeGgufName('the file', true),
    sha256: Sha256Hex,
    /** Where it was taken from, for people reading the card (never read again). */
    imported_from: z.string().min(1).max(4096),
  }),
]);
export type CardSource = z.infer<typeof CardSource>;


/**
 * A vision model's multimodal projector (llama.cpp's `mmproj` GGUF), which llama-server loads beside
 * the model (`--mmproj`). Its kind is the source's: a built-in model's is generated with it, a file
 * card's is another file, a hub model's another .gguf of the same repo and revision, an imported
 * model's another file taken into the store with it.
 */
export const CardProjector = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('builtin') }),
  z.strictObject({
    kind: z.literal('file'),
    path: z
      .string()
      .min(1)
      .max(4096)
      .regex(GGUF_FILE_RE, 'the projector must be a .gguf file')
      .refine((path) => path.startsWith('/'), 'the projector path must be absolute'),
  }),
  z.strictObject({
    kind: z.literal('huggingface'),
    file: repoGgufPath('the projector'),
  }),
  z.strictObject({
    kind: z.literal('local'),
    file: storeGgufName('the projector file'),
    sha256: Sha256Hex,
  }),
]);
export type CardProjector = z.infer<typeof CardProjector>;

export const CardCapabilities = z.strictObject({
  /** Accepts tool definitions and answers with tool calls. */
  tools: z.boolean().default(false),
  /** Emits a reasoning segment before its answer. */
  reasoning: z.boolean().default(false),
  vision: z.boolean().default(false),
});
export type CardCapabilities = z.infer<typeof CardCapabilities>;

/** Bounds of the speculation knobs: llama-server drafts at most this many tokens per step here. */
export const CARD_MAX_DRAFT_TOKENS = 64;

/**
 * Speculative decoding with a draft model: the id of another card (same vocab and tokenizer) whose
 * GGUF llama-server loads next to this one (`--spec-draft-model`); it proposes up to `draft_max`
 * tokens a step, which the target checks in one batch.
 */
export const CardSpeculative = z
  .strictObject({
    draft: ModelId,
    /** Tokens drafted per step; absent means llama-server's default. */
    draft_max: z.number().int().min(1).max(CARD_MAX_DRAFT_TOKENS).optional(),
    /** Fewest drafted tokens worth a verification batch; absent means llama-server's default. */
    draft_min: z.number().int().min(0).max(CARD_MAX_DRAFT_TOKENS).optional(),
  })
  .refine((s) => s.draft_min === undefined || s.draft_max === undefined || s.draft_min <= s.draft_max, {
    path: ['draft_min'],
    message: 'draft_min must not exceed draft_max: lower draft_min or raise draft_max',
  });
export type CardSpeculative = z.infer<typeof CardSpeculative>;

export const CardRuntime = z.strictObject({
  /** Tokens of context per sequence to admit; absent means the planner's default (planner.ts). */
  context_size: z.number().int().min(1).max(CARD_MAX_CONTEXT_TOKENS).optional(),
  /** Sequences (slots) served at once, each with its own context_size window; absent means as many as fit, up to planner.ts's default. */
  parallel: z.number().int().min(1).max(CARD_MAX_PARALLEL).optional(),
  /** Fewest nodes to spread one copy over; above 1 forces a pooled split. */
  min_nodes: z.number().int().min(1).max(CARD_MAX_MIN_NODES).default(1),
  /** KV cache element type; absent means f16. */
  kv_cache_type: z.enum(CARD_KV_CACHE_TYPES).optional(),
  /** Flash attention; absent means auto. */
  flash_attention: z.enum(FLASH_ATTENTION_MODES).optional(),
  /** A draft model for speculative decoding; absent means none. */
  speculative: CardSpeculative.optional(),
});
export type CardRuntime = z.infer<typeof CardRuntime>;

/** Whether these backends allow a pooled split: a llama_server driver and rpc donors. */
export function canPool(backends: readonly string[]): boolean {
  return backends.some((tag) => engineOf(tag) === 'llama_server') && backends.some((tag) => engineOf(tag) === 'rpc');
}

function unique<T extends z.ZodType<string>>(item: T, what: string) {
  return z.array(item).refine((list) => new Set(list).size === list.length, `${what} must not repeat an entry`);
}

export const ModelCard = z
  .strictObject({
    id: ModelId,
    name: z.string().min(1).max(200),
    source: CardSource,
    tasks: unique(z.enum(CARD_TASKS), 'tasks').min(1, 'a card needs at least one task'),
    capabilities: CardCapabilities.default({ tools: false, reasoning: false, vision: false }),
    /** Hard filter: a node offering none of these never hosts the model. */
    compatible_backends: unique(BackendTagSchema, 'compatible_backends').min(1, 'a card needs at least one compatible backend'),
    /** Soft order among the compatible backends, most wanted first; unlisted ones rank after. */
    backend_preference: unique(BackendTagSchema, 'backend_preference').default([]),
    runtime: CardRuntime.default({ min_nodes: 1 }),
    /** The multimodal projector of a vision model; absent: text only. */
    projector: CardProjector.optional(),
  })
  .superRefine((card, ctx) => {
    if (card.projector !== undefined) projectorIssues(card, card.projector).forEach(([path, message]) => ctx.addIssue({ code: 'custom', path, message }));
    transcriptionIssues(card).forEach(([path, message]) => ctx.addIssue({ code: 'custom', path, message }));
    card.backend_preference.forEach((tag, i) => {
      if (!card.compatible_backends.includes(tag)) {
        ctx.addIssue({ code: 'custom', path: ['backend_preference', i], message: `'${tag}' is not in compatible_backends` });
      }
    });
    // A split needs a llama-server driver and ggml-rpc-server donors; without both engines the knob
    // could never be honoured, and the card should say so at load rather than at placement.
    if (card.runtime.min_nodes > 1 && !canPool(card.compatible_backends)) {
      ctx.addIssue({
        code: 'custom',
        path: ['runtime', 'min_nodes'],
        message: 'min_nodes above 1 needs a llama_server-* and an rpc-* backend in compatible_backends',
      });
    }
    const speculative = card.runtime.speculative;
    if (speculative !== undefined) {
      // Only llama-server loads a draft next to its model; the in-process runner would ignore it.
      if (!card.compatible_backends.some((tag) => engineOf(tag) === 'llama_server')) {
        ctx.addIssue({
          code: 'custom',
          path: ['runtime', 'speculative'],
          message: 'speculative decoding runs on llama-server only: add a llama_server-* backend to compatible_backends or remove runtime.speculative',
        });
      }
      if (speculative.draft === card.id) {
        ctx.addIssue({ code: 'custom', path: ['runtime', 'speculative', 'draft'], message: 'a model cannot be its own draft: name a smaller model with the same tokenizer' });
      }
    }
    const quantizedKv = card.runtime.kv_cache_type !== undefined && card.runtime.kv_cache_type !== 'f16';
    if (quantizedKv && card.runtime.flash_attention === 'off') {
      ctx.addIssue({ code: 'custom', path: ['runtime', 'kv_cache_type'], message: `llama.cpp quantizes the V cache only with flash attention: use kv_cache_type = "f16" or flash_attention = "auto" / "on"` });
    }
  });
export type ModelCard = z.infer<typeof ModelCard>;

/**
 * A speech-to-text card is a whisper model (whisper.cpp's ggml `.bin` file, not a GGUF) served by the
 * in-process whisper engine and nothing else, and only such a card runs there. Its file is generated
 * (`builtin`), a path (`file`), a hub download or a file taken into the store, like a text model's.
 */
function transcriptionIssues(card: Pick<ModelCard, 'source' | 'tasks' | 'compatible_backends' | 'projector' | 'runtime'>): Array<[Array<string | number>, string]> {
  const issues: Array<[Array<string | number>, string]> = [];
  const transcribes = card.tasks.includes('transcription');
  const whisperTags = card.compatible_backends.map((tag, i) => [tag, i] as const).filter(([tag]) => engineOf(tag) === 'whisper');
  if (!transcribes) {
    for (const [tag, i] of whisperTags) issues.push([['compatible_backends', i], `'${tag}' runs speech-to-text models only: add it to a card whose tasks are ["transcription"]`]);
    if (card.source.kind === 'builtin' && Object.hasOwn(BUILTIN_WHISPER_SPECS, card.source.spec)) issues.push([['tasks'], `the generated model '${card.source.spec}' is a speech-to-text model: its tasks are ["transcription"]`]);
    if (storedFile(card.source) !== null && WHISPER_FILE_RE.test(storedFile(card.source)!)) issues.push([['tasks'], 'a .bin model file is a whisper.cpp speech-to-text model: tasks = ["transcription"], compatible_backends = ["whisper-cpu"]']);
    return issues;
  }
  if (card.tasks.length > 1) issues.push([['tasks'], 'a speech-to-text model does nothing else: tasks = ["transcription"]']);
  if (whisperTags.length !== card.compatible_backends.length) issues.push([['compatible_backends'], 'a speech-to-text model runs on the whisper engine only: compatible_backends = ["whisper-cpu"]']);
  if (card.source.kind === 'builtin' && !Object.hasOwn(BUILTIN_WHISPER_SPECS, card.source.spec)) issues.push([['source', 'spec'], `'${card.source.spec}' is a text model; the generated speech-to-text models: ${Object.keys(BUILTIN_WHISPER_SPECS).join(', ')}`]);
  const file = storedFile(card.source);
  if (file !== null && !WHISPER_FILE_RE.test(file)) issues.push([['source', 'file'], `a speech-to-text model is whisper.cpp's ggml .bin file (ggml-base.en.bin), not ${file}`]);
  if (card.projector !== undefined) issues.push([['projector'], 'a speech-to-text model has no projector']);
  if (card.runtime.speculative !== undefined) issues.push([['runtime', 'speculative'], 'a speech-to-text model has no draft']);
  return issues;
}

/** The file name of a model the store holds (a hub download or an imported file); null for the other sources. */
function storedFile(source: CardSource): string | null {
  return source.kind === 'huggingface' || source.kind === 'local' ? source.file : null;
}

function projectorIssues(card: Pick<ModelCard, 'source' | 'capabilities' | 'compatible_backends'>, projector: CardProjector): Array<[Array<string | number>, string]> {
  const issues: Array<[Array<string | number>, string]> = [];
  if (projector.kind !== card.source.kind) {
    issues.push([['projector', 'kind'], `the projector comes from where the model does: kind must be '${card.source.kind}', like the source`]);
  } else if (card.source.kind === 'builtin' && !Object.hasOwn(BUILTIN_PROJECTOR_SPECS, card.source.spec)) {
    issues.push([['projector'], `the generated model '${card.source.spec}' has no projector; those with one: ${Object.keys(BUILTIN_PROJECTOR_SPECS).join(', ')}`]);
  } else if (projector.kind === 'huggingface' && card.source.kind === 'huggingface' && projector.file === card.source.file) {
    issues.push([['projector', 'file'], 'the projector is a file of its own, not the model file']);
  } else if (projector.kind === 'local' && card.source.kind === 'local' && projector.file === card.source.file) {
    issues.push([['projector', 'file'], 'the projector is a file of its own, not the model file']);
  }
  if (!card.capabilities.vision) issues.push([['capabilities', 'vision'], 'a card with a projector takes images: set capabilities.vision = true']);
  if (!card.compatible_backends.some((tag) => engineOf(tag) === 'llama_server')) {
    issues.push([['compatible_backends'], 'only llama-server loads a projector: add a llama_server-* backend']);
  }
  // node-llama-cpp 3.21.1 has no multimodal API: placed there, the model would refuse every image.
  card.compatible_backends.forEach((tag, i) => {
    if (engineOf(tag) === 'llama_cpp') issues.push([['compatible_backends', i], `'${tag}' cannot load a projector (the in-process engine takes no images): remove it from a vision card`]);
  });
  return issues;
}
/** What a card looks like before defaults are filled in (what a TOML file holds). */
export type ModelCardInput = z.input<typeof ModelCard>;

/**
 * Where the store keeps a card's files: its repo, revision, the file to load and, for a vision model,
 * its projector's path in the same revision (fetched, copied and evicted with it); null for a
 * built-in or a `file` card.
 */
export function storeCoordinates(card: Pick<ModelCard, 'id' | 'source' | 'projector'>): { repo: string; revision: string; file: string; projector: string | null } | null {
  const { source } = card;
  const projector = card.projector?.kind === 'huggingface' || card.projector?.kind === 'local' ? card.projector.file : null;
  if (source.kind === 'huggingface') return { repo: source.repo, revision: source.revision, file: source.file, projector };
  if (source.kind === 'local') return { repo: card.id, revision: localRevision(source.sha256, card.projector?.kind === 'local' ? card.projector.sha256 : undefined), file: source.file, projector };
  return null;
}

/**
 * The store revision of an imported file: its content, so a changed file is another copy. With a
 * projector imported beside it (`projectorSha256`), the pair's: another projector is another copy too.
 */
export function localRevision(sha256: string, projectorSha256?: string): string {
  if (projectorSha256 === undefined) return sha256.slice(0, 40);
  return createHash('sha256').update(`${sha256}:${projectorSha256}`).digest('hex').slice(0, 40);
}
