// GGUF header facts of files on this node's disk, for model views and cards: read with
// @huggingface/gguf, cached by size and mtime so listing models does not reread every header.

import { stat } from 'node:fs/promises';
import { gguf } from '@huggingface/gguf';
import type { Logger } from '../../common/log.js';
import { factsFromHeader, type GgufFacts } from '../cards/gguf-facts.js';
import type { FactsView } from '../views.js';

/** A file's header facts and its chat template (null when it has none). */
export interface FileFacts {
  facts: FactsView;
  template: string | null;
}

async function readFacts(path: string): Promise<FileFacts> {
  const size = (await stat(path)).size;
  const parsed = await gguf(path, { allowLocalFile: true });
  const metadata = parsed.metadata as unknown as Record<string, unknown>;
  const facts: GgufFacts = factsFromHeader({ metadata, tensorInfos: parsed.tensorInfos, tensorDataOffset: parsed.tensorDataOffset }, size, path);
  const template = typeof metadata['tokenizer.chat_template'] === 'string' ? (metadata['tokenizer.chat_template'] as string) : null;
  return {
    facts: {
      architecture: facts.architecture,
      trainedContext: facts.trainedContext,
      blockCount: facts.blockCount,
      embeddingLength: facts.embeddingLength,
      headCount: facts.headCount,
      headCountKv: facts.headCountKv,
      vocabSize: facts.vocabSize,
      fileBytes: facts.fileBytes,
      chatTemplate: template !== null,
    },
    template,
  };
}

export class FactsCache {
  private readonly cache = new Map<string, { key: string; value: FileFacts | null }>();

  constructor(private readonly log: Logger) {}

  /** GGUF header facts of a local file, cached by size and mtime; null when it cannot be read. */
  async of(path: string): Promise<FileFacts | null> {
    let key: string;
    try {
      const s = await stat(path);
      key = `${s.size}:${s.mtimeMs}`;
    } catch {
      return null;
    }
    const cached = this.cache.get(path);
    if (cached && cached.key === key) return cached.value;
    let value: FileFacts | null;
    try {
      value = await readFacts(path);
    } catch (error) {
      this.log.warn({ err: error, path }, 'cannot read the GGUF header');
      value = null;
    }
    this.cache.set(path, { key, value });
    return value;
  }
}
