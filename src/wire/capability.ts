import { z } from 'zod';

/** What a model can be asked for: it travels in cluster state (an instance's capabilities) and between nodes. `speech` is text to speech. */
export const ModelCapability = z.enum(['chat', 'completion', 'embeddings', 'tools', 'vision', 'speech']);
export type ModelCapability = z.infer<typeof ModelCapability>;
