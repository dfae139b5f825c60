// Which instance last served a prompt, so that a conversation's next turn goes back to the replica
// whose KV cache still holds its earlier turns (llama-server's slots, the in-process engine's
// sequences) and only its new part is evaluated.

import { createHash } from 'node:crypto';
import type { InstanceId, NodeId } from '../common/ids.js';
import type { InferenceTask } from '../wire/task.js';

/** Prompts remembered on this node, least recently used dropped first (docs/LIMITS.md). */
export const MAX_PREFIX_ROUTES = 4096;
/** A text prompt is hashed in blocks of this many characters: a continuation shares all but the last. */
export const PREFIX_BLOCK_CHARS = 512;

export interface RouteKey {
  nodeId: NodeId;
  instanceId: InstanceId;
}

/**
 * Chained hashes of the prompt's leading units, shortest first: for a chat each message, for a text
 * prompt each whole block. The next turn of a conversation starts with every unit of the last one, so
 * the hash of the last turn's whole prompt is among the next turn's. The model and tools seed the chain
 * (tools render into the prompt's start).
 */
export function prefixKeys(task: Pick<InferenceTask, 'model' | 'prompt' | 'tools'>): string[] {
  const units: string[] = [];
  if (task.prompt.kind === 'chat') {
    for (const message of task.prompt.messages) units.push(JSON.stringify(message));
  } else {
    const { text } = task.prompt;
    for (let at = 0; at + PREFIX_BLOCK_CHARS <= text.length; at += PREFIX_BLOCK_CHARS) units.push(text.slice(at, at + PREFIX_BLOCK_CHARS));
  }
  let chain = createHash('sha256').update(JSON.stringify([task.model, task.prompt.kind, task.tools])).digest();
  return units.map((unit) => {
    chain = createHash('sha256').update(chain).update(unit).digest();
    return chain.toString('base64url', 0, 16);
  });
}

/** A bounded map from a prompt's last prefix key to the instance that served it. */
export class PrefixRoutes {
  private readonly routes = new Map<string, RouteKey>();

  constructor(private readonly limit = MAX_PREFIX_ROUTES) {}

  get size(): number {
    return this.routes.size;
  }

  /** The instance that served the longest of `keys` and is still among `live`, or null. */
  holder(keys: readonly string[], live: (route: RouteKey) => boolean): RouteKey | null {
    for (let i = keys.length - 1; i >= 0; i -= 1) {
      const route = this.routes.get(keys[i]!);
      if (route === undefined || !live(route)) continue;
      this.touch(keys[i]!, route);
      return route;
    }
    return null;
  }

  /** Remembers that `route` now holds the prompt whose keys these are. */
  served(keys: readonly string[], route: RouteKey): void {
    const last = keys.at(-1);
    if (last !== undefined) this.touch(last, route);
  }

  private touch(key: string, route: RouteKey): void {
    this.routes.delete(key);
    this.routes.set(key, route);
    if (this.routes.size > this.limit) this.routes.delete(this.routes.keys().next().value!);
  }
}
