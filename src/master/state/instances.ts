// Model instances as replicated state: what the cluster decided to run where. Whether a runner is up
// right now is a reading (telemetry), not a decision, so it is not here.

import { z } from 'zod';
import { InstanceId, ModelId, NodeId } from '../../common/ids.js';
import { ModelCapability } from '../../wire/capability.js';
import { InstanceRole } from '../../wire/instance-role.js';

/** Most nodes one instance spans (replicas or split parts). */
export const MAX_INSTANCE_PLACEMENTS = 64;
/** Most instances the cluster holds at once; placing more is a typed rejection. */
export const MAX_INSTANCES = 256;
export const MAX_INSTANCE_WARNINGS = 16;
/** Most GPUs one part runs on (the telemetry plane reports at most this many per node). */
export const MAX_PLACEMENT_DEVICES = 8;
export const INSTANCE_TEXT_MAX_CHARS = 500;

export const InstancePlacement = z.strictObject({
  nodeId: NodeId,
  role: InstanceRole,
  /** Backend tag the node runs its part with (`llama_cpp-cpu`, `llama_server-cpu`, `rpc-cpu`...). */
  backend: z.string().min(1).max(64),
  firstLayer: z.number().int().min(0),
  layerCount: z.number().int().min(0),
  holdsOutput: z.boolean(),
  /** Pooled only: this part's `--tensor-split` weight. */
  tensorSplit: z.number().min(0).nullable(),
  /** Bytes the planner expected this part to need (the worker's memory guard checks against it). */
  estimatedBytes: z.number().int().min(0),
  /**
   * A part on a GPU backend (issue #15): `-ngl`, the layers on this node's GPUs plus one when the output
   * head is offloaded (fewer than all: the first layers stay in system RAM). Absent: a CPU part.
   * `estimatedBytes` is then what the part takes from system RAM (with the devices' bytes on unified memory).
   */
  gpuLayers: z.number().int().min(0).optional(),
  /**
   * The GPUs the part runs on, in index order (`--device`), each with its `--tensor-split` weight (its
   * layers, plus one on the device holding the output) and the VRAM the planner expects it to take.
   */
  devices: z
    .array(z.strictObject({ index: z.number().int().min(0).max(63), layerCount: z.number().int().min(0), tensorSplit: z.number().min(0), estimatedBytes: z.number().int().min(0) }))
    .max(MAX_PLACEMENT_DEVICES)
    .optional(),
});
export type InstancePlacement = z.infer<typeof InstancePlacement>;

/** A download a placement needs on a member without the model, large enough to need an operator's yes. */
export const PendingDownload = z.strictObject({
  nodeId: NodeId,
  bytes: z.number().int().min(0),
  /** `peer`: a member reported a copy when it was placed; else the hub. */
  source: z.enum(['hub', 'peer']),
});
export type PendingDownload = z.infer<typeof PendingDownload>;

/** A decided instance: the plan stamped with everything a re-placement needs to honour it. */
export const InstanceSpec = z.strictObject({
  instanceId: InstanceId,
  modelId: ModelId,
  shape: z.enum(['single', 'replicas', 'pooled']),
  placements: z.array(InstancePlacement).min(1).max(MAX_INSTANCE_PLACEMENTS),
  contextTokens: z.number().int().min(1),
  parallel: z.number().int().min(1),
  kvCacheType: z.enum(['f32', 'f16', 'bf16', 'q8_0', 'q4_0']),
  /** Flash attention for the engines; absent (instances placed before the knob) means auto. */
  flashAttention: z.enum(['auto', 'on', 'off']).optional(),
  /** Layers may stay in system RAM where GPUs cannot hold them (a re-placement keeps it); absent means false. */
  allowSpill: z.boolean().optional(),
  capabilities: z.array(ModelCapability).max(4),
  exclusions: z.array(NodeId).max(256),
  replicas: z.number().int().min(1),
  minNodes: z.number().int().min(1),
  refusal: z.strictObject({ hops: z.number().int().min(0), fellBack: z.boolean() }),
  predictedDecodeTokPerS: z.number().min(0),
  warnings: z.array(z.string().max(INSTANCE_TEXT_MAX_CHARS)).max(MAX_INSTANCE_WARNINGS),
  /** Unix ms on the placing node's clock; for display only (never compared across nodes). */
  createdAtMs: z.number().int().min(0),
  /**
   * Downloads above the cluster's approval threshold this placement needs: while present, no node starts
   * a part (so none downloads) until an ApproveDownloads command clears it. Absent: nothing waits.
   */
  awaitingApproval: z.array(PendingDownload).min(1).max(MAX_INSTANCE_PLACEMENTS).optional(),
});
export type InstanceSpec = z.infer<typeof InstanceSpec>;

export const InstanceEndReason = z.enum([
  /** An operator stopped it. */
  'deleted',
  /** Logs written before instances waited for their lost node: a node holding a part was lost and it could not be re-placed. */
  'node-lost',
  /** Re-placed: a successor instance replaces it (memory refusal, lost donor, failed download). */
  'replaced',
  /** It failed for good (runner breaker open, re-placement chain spent). */
  'failed',
]);
export type InstanceEndReason = z.infer<typeof InstanceEndReason>;

export const InstanceState = z.strictObject({
  ...InstanceSpec.shape,
  /** idx of the record that created it. */
  createdIdx: z.number().int().min(1),
});
export type InstanceState = z.infer<typeof InstanceState>;
