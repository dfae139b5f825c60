import type { Logger } from '../../common/log.js';
import type { ModelStore } from '../store/store.js';
import type { FactsCache } from './facts.js';
import type { HubAccess } from './hub-access.js';
import type { ModelPeers } from './peers.js';
import type { RecordMoment } from '../../diagnostics/recorder.js';

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
  /** Where failed downloads are recorded as node moments; undefined: not recorded (tests). */
  moments: RecordMoment | undefined;
}
