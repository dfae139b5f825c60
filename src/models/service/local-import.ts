// `shoal models add ./model.gguf`: a GGUF already on this machine's disk becomes a model like any
// other. Its header is read (it must be a GGUF Shoal can place), it is taken into the store under
// `local/<stem>` at a revision made of its SHA-256 (so members copy and verify it as they do a hub
// download), and a card of kind `local` is written beside the cards of `shoal models add <repo>`. A
// vision model's projector given with it is checked (a `clip` GGUF), hashed and taken in beside it.
// A whisper.cpp model (`ggml-base.en.bin`, told by its ggml header) becomes a speech-to-text card.

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readFile, stat } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { errorMessage, ShoalError } from '../../common/errors.js';
import { writeFileAtomic } from '../../common/durable-fs.js';
import { localRevision, ModelCard, type ModelCardInput } from '../cards/card.js';
import { cardsDir, loadCatalog, type CatalogEntry } from '../cards/catalog.js';
import { readGgufArchitecture, readGgufFacts } from '../cards/gguf-facts.js';
import { parseCard } from '../cards/parse.js';
import type { DownloadPlan } from '../store/plan.js';
import type { AddFileRequest, AddFileResult } from '../views.js';
import { cardFileName, factsLine, GENERATED_CARD_MARKER, HUB_BACKENDS, HUB_VISION_BACKENDS, renderCard, templateCapabilities, WHISPER_BACKENDS } from './card-text.js';
import type { ModelsContext } from './context.js';
import { readWhisperHeader } from './facts.js';
import type { Listing } from './listing.js';

/** The owner part of every imported model's id: hub ids always carry `:<quant>`, these never do. */
export const LOCAL_OWNER = 'local';
/** Longest name part of an imported model's id (the store's repo name limit). */
const MAX_STEM_CHARS = 96;

/** `~/dl/Qwen3 0.6B-Q4_K_M.gguf` -> `Qwen3-0.6B-Q4_K_M` (`ggml-base.en.bin` -> `ggml-base.en`): what the id and store file name are made of. */
export function localStem(path: string): string {
  const stem = basename(path)
    .replace(/\.(gguf|bin)$/i, '')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/\.{2,}/g, '.')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, MAX_STEM_CHARS)
    .replace(/[.-]+$/, '')
    .replace(/\.git$/i, '');
  return stem === '' ? 'model' : stem;
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** The size of the file at `from`, or a typed error that says what to give (`what`: "model", "projector"). */
async function fileSize(from: string, what: string): Promise<number> {
  try {
    const s = await stat(from);
    if (!s.isFile()) throw new ShoalError('BAD_REQUEST', `${from} is not a file: give the path of a .gguf ${what} file`);
    return s.size;
  } catch (error) {
    if (error instanceof ShoalError) throw error;
    throw new ShoalError('NOT_FOUND', `no file ${from} on the node's machine (${errorMessage(error)}): give the path of a .gguf ${what} file`);
  }
}

/** The projector given with a model: a `clip` GGUF (llama.cpp's mmproj), hashed; stored as `mmproj-<stem>.gguf`. */
async function readProjector(path: string): Promise<{ from: string; size: number; sha256: string; fileName: string }> {
  const from = resolve(path);
  const size = await fileSize(from, 'projector');
  let architecture: string | null;
  try {
    architecture = await readGgufArchitecture(from);
  } catch (error) {
    throw new ShoalError('BAD_REQUEST', `${from} is not a GGUF projector: ${errorMessage(error)}`, { cause: error });
  }
  if (architecture !== 'clip') {
    throw new ShoalError('BAD_REQUEST', `${from} is not a multimodal projector (its GGUF architecture is ${architecture ?? 'not set'}, a projector's is clip): give the model's mmproj-*.gguf file`);
  }
  const stem = localStem(from);
  return { from, size, sha256: await sha256Of(from), fileName: `${stem.startsWith('mmproj') ? stem : `mmproj-${stem}`}.gguf` };
}

/** Makes the GGUF at `request.path` (on this node's machine) a model of the store with a card, with its projector if given; idempotent for the same files. */
export async function addFile(ctx: ModelsContext, listing: Listing, request: AddFileRequest): Promise<AddFileResult> {
  const from = resolve(request.path);
  const size = await fileSize(from, 'model');
  const speech = (await readWhisperHeader(from)) !== null;
  if (!speech) {
    try {
      await readGgufFacts(from);
    } catch (error) {
      throw new ShoalError('BAD_REQUEST', `${from} is not a GGUF model Shoal can place (nor a whisper.cpp ggml model): ${errorMessage(error)}`, { cause: error });
    }
  }
  if (speech && request.projector !== undefined) throw new ShoalError('BAD_REQUEST', `${from} is a whisper.cpp speech-to-text model, which takes no projector: add it without --projector`);
  const stem = localStem(from);
  const id = `${LOCAL_OWNER}/${stem}`;
  const fileName = `${stem}.${speech ? 'bin' : 'gguf'}`;

  const dir = cardsDir(ctx.dataDir);
  const cardFile = join(dir, cardFileName(id));
  const catalog = await loadCatalog(ctx.dataDir);
  const existing = catalog.entries.get(id);
  if (existing && existing.origin !== 'builtin' && resolve(existing.origin) !== resolve(cardFile)) {
    throw new ShoalError('BAD_REQUEST', `a card for ${id} already exists at ${existing.origin}: edit that card, or remove it (shoal models rm ${id}) and add the file again`);
  }
  const previousText = await readFile(cardFile, 'utf8').catch(() => null);
  if (previousText !== null && !previousText.startsWith(GENERATED_CARD_MARKER)) {
    throw new ShoalError('BAD_REQUEST', `${cardFile} exists and was not written by 'shoal models add': move it away or edit it by hand`);
  }
  const sha256 = await sha256Of(from);
  const previous = existing?.card.source;
  // Another file of the same name is another model: refuse rather than silently replace it. The same
  // path with new bytes (a re-quantized file) is an update of the same model.
  if (previous && previous.kind === 'local' && previous.sha256 !== sha256 && previous.imported_from !== from) {
    throw new ShoalError('BAD_REQUEST', `${id} is already the model of another file (${previous.imported_from}): remove it first (shoal models rm ${id}) or rename ${from}`);
  }
  if (previous && previous.kind !== 'local') throw new ShoalError('BAD_REQUEST', `${cardFile} holds a card of another kind for ${id}: remove it first (shoal models rm ${id})`);

  const projector = request.projector === undefined ? null : await readProjector(request.projector);
  if (projector !== null && projector.fileName === fileName) throw new ShoalError('BAD_REQUEST', `the projector ${projector.from} is the model file itself: give the model's mmproj-*.gguf file`);
  const plan: DownloadPlan = {
    modelId: id,
    repo: id,
    revision: localRevision(sha256, projector?.sha256),
    group: stem,
    primaryPath: fileName,
    files: [{ path: fileName, size, sha256, gitOid: null }, ...(projector ? [{ path: projector.fileName, size: projector.size, sha256: projector.sha256, gitOid: null }] : [])],
  };
  const { stored, how } = await ctx.store.importFile(plan, { [fileName]: from, ...(projector ? { [projector.fileName]: projector.from } : {}) });
  const read = await ctx.facts.of(stored.path);
  const fromTemplate = templateCapabilities(read?.template ?? null);
  const card = ModelCard.parse({
    id,
    name: stem.slice(0, 200),
    source: { kind: 'local', file: fileName, sha256, imported_from: from },
    tasks: speech ? ['transcription'] : ['chat', 'completion'],
    capabilities: { tools: fromTemplate.tools, reasoning: fromTemplate.reasoning, vision: projector !== null },
    compatible_backends: speech ? WHISPER_BACKENDS : projector !== null ? HUB_VISION_BACKENDS : HUB_BACKENDS,
    ...(projector !== null ? { projector: { kind: 'local', file: projector.fileName, sha256: projector.sha256 } } : {}),
    backend_preference: [],
    runtime: speech ? { min_nodes: 1, parallel: 1 } : { min_nodes: 1 },
  } satisfies ModelCardInput);
  const comments = [
    `${GENERATED_CARD_MARKER} from the file ${from}`,
    `# SHA-256 ${sha256}; ${how === 'linked' ? 'hard-linked into the store (same filesystem, no second copy)' : how === 'copied' ? 'copied into the store (another filesystem)' : 'already in the store'}: ${stored.path}`,
    ...(projector !== null ? [`# A vision card: the projector ${projector.from} (SHA-256 ${projector.sha256}) is stored beside it; only llama-server loads a projector.`] : []),
    factsLine(read?.facts ?? null),
    `# Architecture facts come from the ${speech ? 'ggml header of the whisper model' : 'GGUF file'} itself and are never typed here. Edit this card freely;`,
    `# 'shoal models add' replaces only cards that start with its first line.`,
  ];
  const text = renderCard(card, comments);
  parseCard(text, cardFile);
  await mkdir(dir, { recursive: true });
  await writeFileAtomic(cardFile, text);
  ctx.log.info({ modelId: id, cardFile, from, stored: how }, 'model card written for a local file');
  const entry: CatalogEntry = { card, origin: cardFile, overridesBuiltin: false };
  return {
    card,
    cardFile,
    created: previousText === null,
    file: { path: from, storedPath: stored.path, bytes: size, sha256, stored: how },
    projector: projector === null ? null : { path: projector.from, storedPath: join(stored.dir, projector.fileName), bytes: projector.size, sha256: projector.sha256 },
    model: await listing.modelView(entry, ctx.inUse()),
  };
}
