// The cluster as the models service sees it: the port src/models/peer-models.ts implements. Pulls copy
// from the members it names before the hub; removal reaches them.

import type { ByteSource } from '../store/transfer.js';
import type { NodeRemoval } from '../views.js';

/** A member that reports a complete copy of a model. */
export interface PeerHolder {
  nodeId: string;
  /** Its name (or nickname), for messages. */
  name: string;
  revision: string;
}

/** A member's copy of a model as it describes it: the files with the hashes it verified them against. */
export interface PeerCopy {
  modelId: string;
  repo: string;
  revision: string;
  group: string;
  primaryPath: string;
  files: { path: string; size: number; sha256: string | null; gitOid: string | null }[];
  bytes: number;
}

/** The cluster as the models service sees it (implemented by src/models/peer-models.ts). */
export interface ModelPeers {
  /** This node, once the cluster planes run; null before. */
  self(): { nodeId: string; name: string } | null;
  /** Connected members that report a complete copy of `modelId` (at `revision`, when given), best first. */
  holders(modelId: string, revision: string | null): PeerHolder[];
  /** The member's copy of `modelId`, or null when it has none (any other failure throws). */
  describe(nodeId: string, modelId: string, signal: AbortSignal): Promise<PeerCopy | null>;
  /** Reads files of `repo@revision` from the member (each verified by the store against the plan's hashes). */
  source(nodeId: string, repo: string, revision: string): ByteSource;
  /** Removes `modelId` on every other member; what each did. */
  removeElsewhere(modelId: string): Promise<NodeRemoval[]>;
}
