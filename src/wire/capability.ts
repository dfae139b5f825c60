import { z } from 'zod';

/** What a model can be asked for: it travels in cluster state (an instance's capabilities) and between nodes. `transcription` is speech to text. */
export const ModelCapability = z.enum(['chat', 'completion', 'embeddings', 'tools', 'vision', 'transcription']);
export type ModelCapability = z.infer<typeof ModelCapability>;
