// The cards a node knows: built-in cards for Shoal's generated models, then the operator's cards from
// `<dataDir>/cards/*.toml`, which replace a built-in card of the same id. One broken file is reported
// and skipped; it never hides the other cards.

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { errorMessage } from '../../common/errors.js';
import { TINY_EOS_MODEL_ID, TINY_MODEL_ID, TINY_THINK_MODEL_ID, TINY_TOOLS_MODEL_ID, TINY_VISION_MODEL_ID, TINY_WHISPER_MODEL_ID } from '../generate/builtin.js';
import { ModelCard, type ModelCardInput } from './card.js';
import { CardError, readCardFile } from './parse.js';

/** The generated models are ~1 MB: any llama.cpp engine runs them, and none is worth splitting. */
const TINY_BACKENDS = [
  'llama_cpp-cpu',
  'llama_cpp-cuda',
  'llama_cpp-vulkan',
  'llama_cpp-metal',
  'llama_server-cpu',
  'llama_server-cuda',
  'llama_server-vulkan',
  'llama_server-metal',
];
// CPU first: for a model this small, moving it to a GPU costs more than the whole decode
// (docs/STACK-NOTES.md: ~2000 tok/s on one CPU thread). llama-server before node-llama-cpp: on small
// models the prebuilt node-llama-cpp decodes at a quarter of llama-server's speed on 2 threads.
const TINY_PREFERENCE = ['llama_server-cpu', 'llama_cpp-cpu'];

function builtinCard(id: string, name: string, capabilities: ModelCardInput['capabilities']): ModelCard {
  return ModelCard.parse({
    id,
    name,
    source: { kind: 'builtin', spec: id },
    tasks: ['chat', 'completion', 'embeddings'],
    // Every generated model serves tool requests (the runner constrains output with a grammar);
    // `tiny-tools` additionally calls tools unprompted, `tiny-think` reasons first.
    capabilities,
    compatible_backends: TINY_BACKENDS,
    backend_preference: TINY_PREFERENCE,
    runtime: { min_nodes: 1 },
  } satisfies ModelCardInput);
}

/**
 * The vision model: tiny-eos with a generated projector. Only llama-server loads a projector
 * (node-llama-cpp 3.21.1 has no multimodal API), so it runs there alone.
 */
const TINY_VISION_CARD = ModelCard.parse({
  id: TINY_VISION_MODEL_ID,
  name: 'Shoal tiny, seeing images',
  source: { kind: 'builtin', spec: TINY_VISION_MODEL_ID },
  projector: { kind: 'builtin' },
  tasks: ['chat', 'completion'],
  capabilities: { tools: true, reasoning: false, vision: true },
  compatible_backends: TINY_BACKENDS.filter((tag) => tag.startsWith('llama_server-')),
  backend_preference: ['llama_server-cpu'],
  runtime: { min_nodes: 1 },
} satisfies ModelCardInput);

/** The speech-to-text model: a generated whisper model on the in-process whisper engine (random weights: its transcripts are noise). */
const TINY_WHISPER_CARD = ModelCard.parse({
  id: TINY_WHISPER_MODEL_ID,
  name: 'Shoal tiny, transcribing speech (generated, random weights)',
  source: { kind: 'builtin', spec: TINY_WHISPER_MODEL_ID },
  tasks: ['transcription'],
  compatible_backends: ['whisper-cpu'],
  backend_preference: [],
  // One transcription at a time per engine: slots would only queue inside it.
  runtime: { min_nodes: 1, parallel: 1 },
} satisfies ModelCardInput);

export const BUILTIN_CARDS: readonly ModelCard[] = [
  builtinCard(TINY_MODEL_ID, 'Shoal tiny (generated, random weights)', { tools: true, reasoning: false }),
  builtinCard(TINY_EOS_MODEL_ID, 'Shoal tiny, ending its replies', { tools: true, reasoning: false }),
  builtinCard(TINY_THINK_MODEL_ID, 'Shoal tiny, reasoning', { tools: true, reasoning: true }),
  builtinCard(TINY_TOOLS_MODEL_ID, 'Shoal tiny, calling tools', { tools: true, reasoning: false }),
  TINY_VISION_CARD,
  TINY_WHISPER_CARD,
];

export function cardsDir(dataDir: string): string {
  return join(dataDir, 'cards');
}

export interface CatalogEntry {
  card: ModelCard;
  /** 'builtin', or the file the card came from. */
  origin: string;
  /** A user card that replaced the built-in card of the same id. */
  overridesBuiltin: boolean;
}

export interface Catalog {
  /** By model id, built-ins first then user cards in file-name order. */
  entries: Map<string, CatalogEntry>;
  /** One per file that could not be used; the other cards are loaded regardless. */
  errors: CardError[];
}

/** Built-in cards plus `<dataDir>/cards/*.toml`; a missing directory just means no user cards. */
export async function loadCatalog(dataDir: string): Promise<Catalog> {
  const entries = new Map<string, CatalogEntry>();
  for (const card of BUILTIN_CARDS) entries.set(card.id, { card, origin: 'builtin', overridesBuiltin: false });
  const errors: CardError[] = [];
  const dir = cardsDir(dataDir);
  let names: string[];
  try {
    names = (await readdir(dir)).filter((name) => name.endsWith('.toml')).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      const reason = errorMessage(error);
      errors.push(new CardError(dir, [{ field: '', message: `cannot list the cards directory: ${reason}` }]));
    }
    return { entries, errors };
  }
  const userIds = new Map<string, string>();
  for (const name of names) {
    const path = join(dir, name);
    let card: ModelCard;
    try {
      card = await readCardFile(path);
    } catch (error) {
      if (!(error instanceof CardError)) throw error;
      errors.push(error);
      continue;
    }
    // Two user files claiming one id is ambiguous: the first (by name) wins, the second is reported.
    const earlier = userIds.get(card.id);
    if (earlier !== undefined) {
      errors.push(new CardError(path, [{ field: 'id', message: `'${card.id}' is already defined by ${earlier}` }]));
      continue;
    }
    userIds.set(card.id, path);
    const overridesBuiltin = entries.get(card.id)?.origin === 'builtin';
    entries.set(card.id, { card, origin: path, overridesBuiltin });
  }
  return { entries, errors };
}
