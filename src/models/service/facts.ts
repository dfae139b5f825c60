// Header facts of files on this node's disk, for model views and cards: a GGUF's read with
// @huggingface/gguf, a whisper model's from its ggml header, cached by size and mtime so listing
// models does not reread every header.

import { open, stat } from 'node:fs/promises';
import { gguf } from '@huggingface/gguf';
import type { Logger } from '../../common/log.js';
import { factsFromHeader, type GgufFacts } from '../cards/gguf-facts.js';
import { parseWhisperHeader, WHISPER_HEADER_BYTES, type WhisperHeader } from '../cards/whisper-facts.js';
import type { FactsView } from '../views.js';

/** A file's header facts and its chat template (null when it has none). */
export interface FileFacts {
  facts: FactsView;
  template: string | null;
}

async function readFacts(path: string): Promise<FileFacts> {
  const size = (await stat(path)).size;
  const whisper = await whisperFacts(path, size);
  if (whisper !== null) return { facts: whisper, template: null };
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

/** The ggml header of the whisper.cpp model at `path`; null when it is no whisper file. */
export async function readWhisperHeader(path: string): Promise<WhisperHeader | null> {
  const fh = await open(path, 'r');
  try {
    const { buffer, bytesRead } = await fh.read(new Uint8Array(WHISPER_HEADER_BYTES), 0, WHISPER_HEADER_BYTES, 0);
    return parseWhisperHeader(buffer.subarray(0, bytesRead));
  } finally {
    await fh.close();
  }
}

/** A whisper.cpp model's facts (the decoder's context, layers, width and heads; both stacks' layers count), null when `path` is no whisper file. */
async function whisperFacts(path: string, size: number): Promise<FactsView | null> {
  const header = await readWhisperHeader(path);
  if (header === null) return null;
  return {
    architecture: 'whisper',
    trainedContext: header.textContext,
    blockCount: header.audioLayers + header.textLayers,
    embeddingLength: header.textState,
    headCount: header.textHeads,
    headCountKv: header.textHeads,
    vocabSize: header.vocabSize,
    fileBytes: size,
    chatTemplate: false,
  };
}

export class FactsCache {
  private readonly cache = new Map<string, { key: string; value: FileFacts | null }>();

  constructor(private readonly log: Logger) {}

  /** Header facts of a local model file, cached by size and mtime; null when it cannot be read. */
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
      this.log.warn({ err: error, path }, 'cannot read the model file header');
      value = null;
    }
    this.cache.set(path, { key, value });
    return value;
  }
}
