// What placement counts for a speech-to-text model, which is whisper.cpp's ggml file rather than a
// GGUF: no header to read layers and heads from, so its file stands for the weights of one layer.
// Pure.

import type { GgufFacts } from '../models/cards/gguf-facts.js';

/** whisper's decoder context (every released model): what the instance's window says. */
export const WHISPER_TEXT_CONTEXT_TOKENS = 448;

/**
 * The planner's facts for a whisper model of `fileBytes`: the file is the weights (one "layer", so
 * it is never split), with no KV cache and no vocabulary-sized logits workspace, so the estimate is
 * the file, 10% overhead and the 256 MiB floor (src/placement/memory.ts). whisper.cpp's own buffers
 * (the decoder's self and cross attention caches, the encoder's compute graph for a 30 s window)
 * are inside that margin for the small models; they were measured on the generated model only.
 */
export function transcriptionFacts(fileBytes: number): GgufFacts {
  return {
    architecture: 'whisper',
    blockCount: 1,
    headCount: 1,
    headCountKv: 1,
    kvHeadsPerLayer: [0],
    embeddingLength: 1,
    trainedContext: WHISPER_TEXT_CONTEXT_TOKENS,
    keyLength: 1,
    valueLength: 1,
    vocabSize: null,
    fileBytes,
    tensorBytes: fileBytes,
    layerBytes: [fileBytes],
    embeddingBytes: 0,
    outputBytes: 0,
    outputTied: false,
  };
}
