import type { Logger } from '../../common/log.js';
import type { ModelStore } from '../store/store.js';
import type { FactsCache } from './facts.js';
import type { HubAccess } from './hub-access.js';
import type { ModelPeers } from './peers.js';

/** What the parts of the models service share: the node's data dir, its store, the hub, the members. */
export interface ModelsContext {
  dataDir: string;
  log: Logger;
  store: ModelStore;
  hub: HubAccess;
  facts: FactsCache;
  /** Members that hold models; undefined: this node alone. */
  peers: ModelPeers | undefined;
  /** Model ids loaded on this node now: never removed, never evicted. */
  inUse(): Set<string>;
}
