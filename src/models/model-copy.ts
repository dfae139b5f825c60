// Wire shapes and pure rules of model copies between members: `/shoal/model-copy/1` (a member reads
// the files of a model another member holds), `/shoal/model-delete/1` (cluster-wide removal), the
// artifacts report on the telemetry plane, and who to copy from. No I/O here; peer-models.ts is the shell.

import { z } from 'zod';
import { ModelId } from '../common/ids.js';
import { MAX_REPORTED_ARTIFACTS, type ArtifactReport } from '../wire/telemetry.js';
// The schemas only (not the router's index, which loads libp2p): this module stays pure.
import { DirectAnswerFrame, DirectDeclineFrame, DirectHost, DirectOfferFrame } from '../router/direct-socket.js';

export const MODEL_COPY_PROTOCOL = '/shoal/model-copy/1';
export const MODEL_DELETE_PROTOCOL = '/shoal/model-delete/1';

/** Bytes of file per data frame. */
export const MODEL_COPY_CHUNK_BYTES = 256 * 1024;
/** Bytes of file a holder reads at once (sent as several frames), with the next read in flight while they go out. */
export const MODEL_COPY_READ_BYTES = 4 * MODEL_COPY_CHUNK_BYTES;
/** Largest frame either side sends or accepts: a chunk plus its msgpack envelope, or a describe answer. */
export const MODEL_COPY_MAX_MESSAGE_BYTES = MODEL_COPY_CHUNK_BYTES + 4 * 1024;
/** Files one describe answer lists (a split GGUF's shards): keeps the answer under the frame limit. */
export const MODEL_COPY_MAX_FILES = 128;
/** Copy streams at once per connection, each way (a store transfers at most 4 files at once per download). */
export const MODEL_COPY_MAX_STREAMS_PER_CONNECTION = 16;
/** Holder: waiting for the request frame once a stream is open. */
export const MODEL_COPY_REQUEST_TIMEOUT_MS = 10_000;
/** Copier: waiting for the holder's answer to a describe request, and for each next frame of a file. */
export const MODEL_COPY_IDLE_TIMEOUT_MS = 30_000;
/**
 * Bytes of file a holder reads at once for a direct socket (router/direct-socket.ts), with the next
 * read in flight while the socket takes the last: large reads keep OpenSSL's records full and the
 * disk ahead of a ~1.5 GB/s socket.
 */
export const MODEL_COPY_DIRECT_READ_BYTES = 4 * 1024 * 1024;
/**
 * Holder: a direct socket that takes no byte for this long (the copier stopped reading, or its
 * machine went away without a FIN) is destroyed; the copier's own deadline is MODEL_COPY_IDLE_TIMEOUT_MS.
 * Also how long the holder waits, once it sent the last byte, for the copier to close its end.
 */
export const MODEL_COPY_DIRECT_IDLE_TIMEOUT_MS = MODEL_COPY_IDLE_TIMEOUT_MS;
/** Attempts per file against one member after a cut stream (each resumes where the part file ends) before trying the next holder or the hub. */
export const MODEL_COPY_RETRIES = 1;
/** Holders tried, in order, before the hub. */
export const MODEL_COPY_MAX_HOLDERS_TRIED = 3;

/** How often a node looks at its store to publish a changed artifacts report. */
export const ARTIFACTS_CHECK_INTERVAL_MS = 1_000;
/** An unchanged report is published again this often, so members that joined since learn it. */
export const ARTIFACTS_REFRESH_MS = 5_000;
/** A report older than this is not used to pick a holder (the node stopped reporting). */
export const ARTIFACTS_STALE_MS = 30_000;

/** One cluster-wide removal request to one member, end to end. */
export const MODEL_DELETE_TIMEOUT_MS = 15_000;
export const MODEL_DELETE_MAX_MESSAGE_BYTES = 16 * 1024;
/** Concurrent delete requests served per connection. */
export const MODEL_DELETE_MAX_STREAMS_PER_CONNECTION = 4;

const MAX_TEXT_CHARS = 4096;
const Hex40 = z.string().regex(/^[0-9a-f]{40}$/);
const Hex64 = z.string().regex(/^[0-9a-f]{64}$/);
const Bytes = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const RepoId = z.string().min(3).max(200);
const FilePath = z.string().min(1).max(1000);

// ---- /shoal/model-copy/1 ------------------------------------------------------------------------

/** "What is your copy of this model": answered with one `model` frame (or an `error` frame). */
export const DescribeRequest = z.strictObject({ type: z.literal('describe'), modelId: ModelId });
/**
 * "Send this file of repo@revision from `offset`": a `file` frame, then the bytes as Uint8Array frames,
 * then the end. With `direct` (the IP the copier reached the holder at), the holder answers the `file`
 * frame with a direct offer or decline (router/direct-socket.ts), the copier with a `direct-answer`;
 * when it connected, the bytes go through the TLS socket, which the holder ends after the last one,
 * and the stream carries nothing more (it stays open as the socket's lifetime).
 */
export const ReadRequest = z.strictObject({ type: z.literal('read'), repo: RepoId, revision: Hex40, path: FilePath, offset: Bytes, direct: DirectHost.optional() });
/** Copier -> holder: one request; after a read that asked for a direct socket, the answer to the holder's offer. */
export const CopyRequest = z.discriminatedUnion('type', [DescribeRequest, ReadRequest, DirectAnswerFrame]);
export type CopyRequest = z.infer<typeof CopyRequest>;

export const CopyFileInfo = z.strictObject({ path: FilePath, size: Bytes, sha256: Hex64.nullable(), gitOid: Hex40.nullable() });
export const PeerModelRecord = z.strictObject({
  modelId: ModelId,
  repo: RepoId,
  revision: Hex40,
  group: FilePath,
  primaryPath: FilePath,
  files: z.array(CopyFileInfo).min(1).max(MODEL_COPY_MAX_FILES),
  bytes: Bytes,
});
export type PeerModelRecord = z.infer<typeof PeerModelRecord>;

export const ModelFrame = z.strictObject({ type: z.literal('model'), model: PeerModelRecord });
/** Sent before a file's bytes: what the holder has, so a copier stops at once if it is not what it wants. */
export const FileFrame = z.strictObject({ type: z.literal('file'), size: Bytes, sha256: Hex64.nullable(), gitOid: Hex40.nullable() });
export const ErrorFrame = z.strictObject({ type: z.literal('error'), code: z.string().min(1).max(64), message: z.string().max(MAX_TEXT_CHARS) });
/** Holder -> copier: an answer (`model`, `file`, `error`), a direct offer or decline after a `file` frame, file bytes. */
export const CopyFrame = z.union([z.instanceof(Uint8Array), ModelFrame, FileFrame, ErrorFrame, DirectOfferFrame, DirectDeclineFrame]);
export type CopyFrame = z.infer<typeof CopyFrame>;
export type ErrorFrame = z.infer<typeof ErrorFrame>;

// ---- /shoal/model-delete/1 ----------------------------------------------------------------------

export const DeleteRequest = z.strictObject({ modelId: z.string().min(1).max(200) });
export type DeleteRequest = z.infer<typeof DeleteRequest>;
const ErrorInfo = z.strictObject({ code: z.string().min(1).max(64), reason: z.string().max(64).nullable(), message: z.string().max(MAX_TEXT_CHARS) });
export const DeleteAnswer = z.strictObject({
  /** `absent`: the member has neither files nor a card of it; `refused`: it has, and would not (in use, downloading...). */
  outcome: z.enum(['removed', 'absent', 'refused']),
  freedBytes: Bytes,
  removedFiles: z.boolean(),
  cardFile: z.string().max(MAX_TEXT_CHARS).nullable(),
  error: ErrorInfo.nullable(),
});
export type DeleteAnswer = z.infer<typeof DeleteAnswer>;

// ---- artifacts and holders ----------------------------------------------------------------------

/** Clips text for a wire field of at most `max` characters. */
export function clip(text: string, max = MAX_TEXT_CHARS): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * What a node reports holding: its complete copies, most recently used first (a node with more than
 * MAX_REPORTED_ARTIFACTS reports the ones most likely wanted), ids that are not wire-valid left out.
 */
export function artifactsOf(models: readonly { modelId: string; revision: string; bytes: number; lastUsedMs: number }[]): ArtifactReport[] {
  return models
    .filter((m) => ModelId.safeParse(m.modelId).success && /^[0-9a-f]{40}$/.test(m.revision) && Number.isSafeInteger(m.bytes) && m.bytes >= 0)
    .sort((a, b) => b.lastUsedMs - a.lastUsedMs || (a.modelId < b.modelId ? -1 : a.modelId > b.modelId ? 1 : 0))
    .slice(0, MAX_REPORTED_ARTIFACTS)
    .map((m) => ({ modelId: m.modelId as ArtifactReport['modelId'], revision: m.revision, bytes: m.bytes }));
}

export interface HeardArtifacts {
  models: readonly ArtifactReport[];
  /** Local monotonic time the report arrived. */
  atMs: number;
}

export interface HolderChoice {
  nodeId: string;
  revision: string;
  bytes: number;
  ageMs: number;
}

/**
 * Members to copy `modelId` from, freshest report first: not this node, connected, an active member,
 * a report no older than `staleMs` that lists the model (at `revision`, when one is asked for).
 */
export function pickHolders(
  heard: ReadonlyMap<string, HeardArtifacts>,
  want: { modelId: string; revision: string | null },
  ctx: { self: string; nowMs: number; staleMs: number; usable: (nodeId: string) => boolean },
): HolderChoice[] {
  const out: HolderChoice[] = [];
  for (const [nodeId, report] of heard) {
    if (nodeId === ctx.self) continue;
    const ageMs = ctx.nowMs - report.atMs;
    if (ageMs > ctx.staleMs) continue;
    const entry = report.models.find((m) => m.modelId === want.modelId && (want.revision === null || m.revision === want.revision));
    if (!entry || !ctx.usable(nodeId)) continue;
    out.push({ nodeId, revision: entry.revision, bytes: entry.bytes, ageMs });
  }
  return out.sort((a, b) => a.ageMs - b.ageMs || (a.nodeId < b.nodeId ? -1 : 1));
}

/**
 * Whether a member's copy is the one wanted: same repo, commit and file to load, and, for a vision
 * model, holding the projector its card names (`want.projector`, a path in the repo).
 */
export function sameCopy(
  record: Pick<PeerModelRecord, 'repo' | 'revision' | 'primaryPath'> & { files: readonly { path: string }[] },
  want: { repo: string; revision: string; file: string | null; projector?: string | null },
): string | null {
  if (record.repo !== want.repo || record.revision !== want.revision) return `it holds ${record.repo}@${record.revision.slice(0, 12)}, not ${want.repo}@${want.revision.slice(0, 12)}`;
  if (want.file !== null && record.primaryPath !== want.file) return `its copy loads ${record.primaryPath}, not ${want.file}`;
  const projector = want.projector ?? null;
  if (projector !== null && !record.files.some((f) => f.path === projector)) return `its copy has no projector ${projector}`;
  return null;
}
