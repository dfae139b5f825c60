// The text of the cards `shoal models add` writes: a comment header (where the card came from, the
// GGUF header facts once the file is on disk) above the TOML body. Pure.

import { stringify as stringifyToml } from 'smol-toml';
import { formatBytes } from '../../common/format-bytes.js';
import { CARD_COMPUTES, type CardCapabilities, type ModelCard } from '../cards/card.js';
import type { DownloadPlan } from '../store/plan.js';
import type { FactsView } from '../views.js';

/** First line of every card `shoal models add` writes; it only ever overwrites cards that start with it. */
export const GENERATED_CARD_MARKER = '# Written by `shoal models add`';
export const FACTS_LINE = '# GGUF header:';

/**
 * Every engine and compute a hub GGUF can run on; rpc too, so a model too big for one node may be split.
 * llama_server first: with no preference on the card, placement takes the first the node offers.
 */
export const HUB_BACKENDS = (['llama_server', 'llama_cpp', 'rpc'] as const).flatMap((engine) => CARD_COMPUTES.map((compute) => `${engine}-${compute}`));
/** A vision card's: the in-process engine loads no projector (node-llama-cpp 3.21.1 has no multimodal API). */
export const HUB_VISION_BACKENDS = HUB_BACKENDS.filter((tag) => !tag.startsWith('llama_cpp-'));

/** A whisper.cpp model's: the whisper engine, which runs on the CPU only (the binding's GPU builds are not loaded). */
export const WHISPER_BACKENDS = ['whisper-cpu'];

/** Repo metadata a card's comments and defaults come from (best effort: all may be missing). */
export interface RepoMeta {
  embeddings: boolean;
  pipeline: string | null;
  license: string | null;
  baseModel: string | null;
  projector: boolean;
}

/** `owner/name:Q4_K_M` -> `owner--name--Q4_K_M.toml`. */
export function cardFileName(id: string): string {
  return `${id.replace(/[^A-Za-z0-9._-]+/g, '--').replace(/^[.-]+/, '')}.toml`;
}

export function factsLine(facts: FactsView | null): string {
  if (!facts) return `${FACTS_LINE} not read yet; this card is rewritten with them once the file is downloaded (shoal models pull)`;
  return `${FACTS_LINE} architecture ${facts.architecture}, trained context ${facts.trainedContext} tokens, ${facts.blockCount} layers, embedding ${facts.embeddingLength}, ${facts.headCount} heads (${facts.headCountKv} KV), vocabulary ${facts.vocabSize ?? 'unknown'}, chat template ${facts.chatTemplate ? 'yes' : 'no'}`;
}

/** The comment header of a card written for `plan` from `endpoint` (`selector`: the file or quant asked for). */
export function addedCardComments(args: {
  endpoint: string;
  plan: DownloadPlan;
  requestedRevision: string | undefined;
  selector: string | undefined;
  bytes: number;
  meta: RepoMeta;
  facts: FactsView | null;
  /** The projector fetched with the model (a path in the repo), null for a text-only card. */
  projector: string | null;
}): string[] {
  const { endpoint, plan, requestedRevision, selector, bytes, meta, projector } = args;
  const shards = plan.files.filter((f) => f.path !== projector).length;
  return [
    `${GENERATED_CARD_MARKER} from ${endpoint}/${plan.repo}`,
    `# Revision: ${requestedRevision ?? 'main'}, pinned to commit ${plan.revision}.`,
    `# File: ${plan.primaryPath}${shards > 1 ? ` and ${shards - 1} more shards` : ''}${projector !== null ? ` with the projector ${projector}` : ''}, ${formatBytes(bytes)}; ${selector ? `asked for "${selector}"` : `the default quantization (${plan.modelId.slice(plan.modelId.lastIndexOf(':') + 1)})`}.`,
    ...(meta.pipeline ? [`# Hub pipeline: ${meta.pipeline}.`] : []),
    ...(meta.license ? [`# License: ${meta.license}.`] : []),
    ...(meta.baseModel ? [`# Base model: ${meta.baseModel}.`] : []),
    ...(projector !== null
      ? ['# A vision card: images go to the projector, which only llama-server loads (add with --no-projector for text only).']
      : meta.projector
        ? ['# The repo also has a multimodal projector; this card serves text only (add with --projector to take images).']
        : []),
    factsLine(args.facts),
    '# Architecture facts come from the GGUF file itself and are never typed here. Edit this card freely;',
    `# 'shoal models add' replaces only cards that start with its first line.`,
  ];
}

export function renderCard(card: ModelCard, comments: readonly string[]): string {
  const body: Record<string, unknown> = {
    id: card.id,
    name: card.name,
    tasks: card.tasks,
    compatible_backends: card.compatible_backends,
    backend_preference: card.backend_preference,
    source: card.source,
    capabilities: card.capabilities,
    ...(card.projector !== undefined ? { projector: card.projector } : {}),
    runtime: card.runtime,
  };
  return `${comments.join('\n')}\n\n${stringifyToml(body)}`;
}

/** Capabilities a chat template shows: native tool calls, a reasoning block. */
export function templateCapabilities(template: string | null): Pick<CardCapabilities, 'tools' | 'reasoning'> {
  if (template === null) return { tools: false, reasoning: false };
  return { tools: /\btools\b|tool_call/.test(template), reasoning: /<think>|enable_thinking|reasoning_content/.test(template) };
}
