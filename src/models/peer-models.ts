// Models between members: each node reports the complete copies it holds (telemetry `artifacts`),
// serves their files to members over `/shoal/model-copy/1`, copies from a member that holds a model
// instead of downloading it again, and removes models on request over `/shoal/model-delete/1`.
// ModelsService (service/service.ts) decides when; this is the cluster side of it.

import { open, type FileHandle } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import type { TLSSocket } from 'node:tls';
import { toShoalError, errorMessage } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import type { ArtifactsMessage } from '../wire/telemetry.js';
import type { NodeId } from '../common/ids.js';
import type { ClusterState } from '../master/state/state.js';
import { ModelsError } from './hub/errors.js';
import type { HubFile } from './hub/gguf-files.js';
import { RetryableError, type ByteSource, type PartWriter } from './store/transfer.js';
import { isDirectReply, offerDirect, RouterError, takeDirect, type FrameChannel, type RequestContext, type Router } from '../router/index.js';
import {
  ARTIFACTS_CHECK_INTERVAL_MS,
  ARTIFACTS_REFRESH_MS,
  ARTIFACTS_STALE_MS,
  artifactsOf,
  clip,
  CopyFrame,
  CopyRequest,
  DeleteAnswer,
  DeleteRequest,
  MODEL_COPY_CHUNK_BYTES,
  MODEL_COPY_DIRECT_IDLE_TIMEOUT_MS,
  MODEL_COPY_DIRECT_READ_BYTES,
  MODEL_COPY_IDLE_TIMEOUT_MS,
  MODEL_COPY_MAX_FILES,
  MODEL_COPY_MAX_MESSAGE_BYTES,
  MODEL_COPY_MAX_STREAMS_PER_CONNECTION,
  MODEL_COPY_PROTOCOL,
  MODEL_COPY_READ_BYTES,
  MODEL_COPY_REQUEST_TIMEOUT_MS,
  MODEL_COPY_RETRIES,
  MODEL_DELETE_MAX_MESSAGE_BYTES,
  MODEL_DELETE_MAX_STREAMS_PER_CONNECTION,
  MODEL_DELETE_PROTOCOL,
  MODEL_DELETE_TIMEOUT_MS,
  pickHolders,
  type ErrorFrame,
  type HeardArtifacts,
  type PeerModelRecord,
} from './model-copy.js';
import type { ModelPeers, PeerCopy, PeerHolder } from './service/peers.js';
import type { ModelsService } from './service/service.js';
import type { NodeRemoval } from './views.js';

/** What peer-models needs of the control plane (ControlPlane implements it). */
export interface PeerModelsPlane {
  readonly nodeId: NodeId;
  readonly net: Pick<Router, 'handle' | 'handleStream' | 'unhandle' | 'request' | 'openStream' | 'isConnected'>;
  view(): { state: ClusterState };
  publishTelemetry(message: ArtifactsMessage): void;
  onArtifacts(listener: (message: ArtifactsMessage, from: NodeId) => void): () => void;
}

export interface PeerModelsOptions {
  log: Logger;
  /**
   * Move file bytes over a direct TLS socket (router/direct-socket.ts) instead of the libp2p stream:
   * asked for when copying, offered when serving. The stream carries them when either side has it
   * off or the socket cannot be reached. Default true.
   */
  direct?: boolean;
}

/** Files moved to or from members, by how their bytes went. */
export interface CopyTransports {
  direct: number;
  stream: number;
}

/** Router failures after which the same member is worth asking again (the part file keeps what arrived). */
const RETRYABLE: ReadonlySet<string> = new Set(['timeout', 'unreachable', 'reset', 'closed']);

interface Started {
  plane: PeerModelsPlane;
  models: ModelsService;
  name: string;
  timer: NodeJS.Timeout;
  unsubscribe: () => void;
}

export type ArtifactsView = Record<string, { models: ArtifactsMessage['models']; ageMs: number }>;

/**
 * The cluster side of models on disk. Created before the models service (which takes it as its
 * `peers`), started once the control plane runs; until then it knows no holders and removes nothing
 * elsewhere, so the service works as a node alone.
 */
export class PeerModels implements ModelPeers {
  private started: Started | null = null;
  private readonly heard = new Map<string, HeardArtifacts>();
  private seq = 0;
  private lastSent: { text: string; atMs: number } | null = null;
  private readonly copiedBy: CopyTransports = { direct: 0, stream: 0 };
  private readonly servedBy: CopyTransports = { direct: 0, stream: 0 };

  constructor(private readonly options: PeerModelsOptions) {}

  /** Files this node copied from members to their end, by transport. */
  get copied(): CopyTransports {
    return { ...this.copiedBy };
  }

  /** Files (or their rest, from an offset) this node sent to members to their end, by transport. */
  get served(): CopyTransports {
    return { ...this.servedBy };
  }

  private get direct(): boolean {
    return this.options.direct ?? true;
  }

  async start(deps: { plane: PeerModelsPlane; models: ModelsService; name: string }): Promise<void> {
    if (this.started) return;
    const { plane } = deps;
    await plane.net.handleStream<CopyRequest>(MODEL_COPY_PROTOCOL, (channel, ctx) => this.serveCopy(channel, ctx), {
      schema: CopyRequest,
      maxMessageBytes: MODEL_COPY_MAX_MESSAGE_BYTES,
      maxInboundStreams: MODEL_COPY_MAX_STREAMS_PER_CONNECTION,
      maxOutboundStreams: MODEL_COPY_MAX_STREAMS_PER_CONNECTION,
    });
    await plane.net.handle<DeleteRequest, DeleteAnswer>(MODEL_DELETE_PROTOCOL, (request, ctx) => this.serveDelete(request, ctx), {
      schema: DeleteRequest,
      maxMessageBytes: MODEL_DELETE_MAX_MESSAGE_BYTES,
      maxInboundStreams: MODEL_DELETE_MAX_STREAMS_PER_CONNECTION,
    });
    const unsubscribe = plane.onArtifacts((message, from) => {
      if (from === plane.nodeId) return;
      this.heard.set(from, { models: message.models, atMs: performance.now() });
    });
    const timer = setInterval(() => this.publish(), ARTIFACTS_CHECK_INTERVAL_MS);
    timer.unref();
    this.started = { ...deps, timer, unsubscribe };
    this.publish();
  }

  async stop(): Promise<void> {
    const started = this.started;
    if (!started) return;
    this.started = null;
    clearInterval(started.timer);
    started.unsubscribe();
    await started.plane.net.unhandle(MODEL_COPY_PROTOCOL).catch(() => undefined);
    await started.plane.net.unhandle(MODEL_DELETE_PROTOCOL).catch(() => undefined);
  }

  // ---- artifacts ---------------------------------------------------------------------------------

  /** Publishes this node's report when it changed, and every ARTIFACTS_REFRESH_MS anyway. */
  private publish(): void {
    const started = this.started;
    if (!started) return;
    const state = started.plane.view().state;
    if (state.clusterId === null || state.dissolved) return;
    const models = artifactsOf(started.models.store.list());
    const text = JSON.stringify(models);
    const now = performance.now();
    if (this.lastSent && this.lastSent.text === text && now - this.lastSent.atMs < ARTIFACTS_REFRESH_MS) return;
    this.lastSent = { text, atMs: now };
    started.plane.publishTelemetry({ type: 'artifacts', clusterId: state.clusterId, nodeId: started.plane.nodeId, seq: this.seq++, models });
  }

  /** Every member's latest report (this node's read now), with its age, for GET /state. */
  artifactsView(): ArtifactsView {
    const started = this.started;
    if (!started) return {};
    const now = performance.now();
    const members = started.plane.view().state.members;
    const out: ArtifactsView = { [started.plane.nodeId]: { models: artifactsOf(started.models.store.list()), ageMs: 0 } };
    for (const [nodeId, heard] of this.heard) {
      if (members[nodeId as NodeId] === undefined) continue;
      out[nodeId] = { models: [...heard.models], ageMs: Math.round(now - heard.atMs) };
    }
    return out;
  }

  // ---- ModelPeers ----------------------------------------------------------------------------------

  self(): { nodeId: string; name: string } | null {
    const started = this.started;
    return started ? { nodeId: started.plane.nodeId, name: started.name } : null;
  }

  private nameOf(nodeId: string): string {
    const member = this.started?.plane.view().state.members[nodeId as NodeId];
    return member ? (member.nickname ?? member.name) : nodeId;
  }

  holders(modelId: string, revision: string | null): PeerHolder[] {
    const started = this.started;
    if (!started) return [];
    const state = started.plane.view().state;
    if (state.dissolved) return [];
    const usable = (nodeId: string): boolean => state.members[nodeId as NodeId]?.status === 'active' && started.plane.net.isConnected(nodeId);
    return pickHolders(this.heard, { modelId, revision }, { self: started.plane.nodeId, nowMs: performance.now(), staleMs: ARTIFACTS_STALE_MS, usable }).map((h) => ({
      nodeId: h.nodeId,
      name: this.nameOf(h.nodeId),
      revision: h.revision,
    }));
  }

  async describe(nodeId: string, modelId: string, signal: AbortSignal): Promise<PeerCopy | null> {
    const net = this.net();
    const name = this.nameOf(nodeId);
    const channel = await net.openStream<CopyFrame>(nodeId, MODEL_COPY_PROTOCOL, { signal, schema: CopyFrame, maxMessageBytes: MODEL_COPY_MAX_MESSAGE_BYTES });
    try {
      await channel.send({ type: 'describe', modelId }, { signal });
      await channel.close();
      const answer = await channel.next({ signal });
      if (answer === undefined) throw new RouterError('closed', `${name} closed ${MODEL_COPY_PROTOCOL} without describing ${modelId}`);
      if (answer instanceof Uint8Array || (answer.type !== 'model' && answer.type !== 'error')) throw new ModelsError('PEER_COPY_FAILED', `${name} answered a describe of ${modelId} with ${frameName(answer)}`);
      if (answer.type === 'error') {
        if (answer.code === 'NOT_FOUND') return null;
        throw refusal(name, answer);
      }
      if (answer.model.modelId !== modelId) throw new ModelsError('PEER_COPY_FAILED', `${name} described ${answer.model.modelId} when asked for ${modelId}`);
      return answer.model;
    } finally {
      channel.abort();
    }
  }

  source(nodeId: string, repo: string, revision: string): ByteSource {
    const name = `member ${this.nameOf(nodeId)}`;
    return {
      name,
      verb: 'copying',
      badAnswer: 'PEER_COPY_FAILED',
      retries: MODEL_COPY_RETRIES,
      fetch: (file, writer, signal) => this.readFile(nodeId, name, repo, revision, file, writer, signal),
      retryable: (error) => error instanceof RouterError && RETRYABLE.has(error.reason),
      failure: (error, what) => new ModelsError('PEER_COPY_FAILED', `copying ${what} from ${name} failed: ${errorMessage(error)}`, { cause: error }),
    };
  }

  async removeElsewhere(modelId: string): Promise<NodeRemoval[]> {
    const started = this.started;
    if (!started) return [];
    const state = started.plane.view().state;
    if (state.clusterId === null || state.dissolved) return [];
    const others = Object.values(state.members).filter((m) => m.nodeId !== started.plane.nodeId);
    return Promise.all(
      others.map(async (member): Promise<NodeRemoval> => {
        const base = { nodeId: member.nodeId, name: member.nickname ?? member.name, self: false, freedBytes: 0, removedFiles: false, cardFile: null };
        if (!started.plane.net.isConnected(member.nodeId)) {
          return { ...base, outcome: 'unreachable', error: { code: 'INTERNAL', reason: null, message: `${base.name} is not connected: its copy (if any) stays; remove it there once it is back` } };
        }
        try {
          const answer = await started.plane.net.request<DeleteAnswer>(member.nodeId, MODEL_DELETE_PROTOCOL, { modelId }, { timeoutMs: MODEL_DELETE_TIMEOUT_MS, schema: DeleteAnswer, maxMessageBytes: MODEL_DELETE_MAX_MESSAGE_BYTES });
          return { ...base, outcome: answer.outcome, freedBytes: answer.freedBytes, removedFiles: answer.removedFiles, cardFile: answer.cardFile, error: answer.error };
        } catch (error) {
          const failure = toShoalError(error);
          return { ...base, outcome: 'unreachable', error: { code: failure.code, reason: null, message: clip(`${base.name} did not answer: ${failure.message}`) } };
        }
      }),
    );
  }

  private net(): PeerModelsPlane['net'] {
    if (!this.started) throw new RouterError('closed', 'the cluster planes are not running');
    return this.started.plane.net;
  }

  // ---- copying from a member ---------------------------------------------------------------------

  /**
   * Streams `file` from `writer.position` to its end from the member into `writer`: over a direct
   * socket when both sides allow one and it connects, else as frames on the stream.
   */
  private async readFile(nodeId: string, name: string, repo: string, revision: string, file: HubFile, writer: PartWriter, signal: AbortSignal): Promise<void> {
    const channel = await this.net().openStream<CopyFrame>(nodeId, MODEL_COPY_PROTOCOL, { signal, schema: CopyFrame, maxMessageBytes: MODEL_COPY_MAX_MESSAGE_BYTES });
    // One deadline for the whole file, pushed back by every frame or socket read: a holder that stalls is given up on.
    const idle = new AbortController();
    const timer = setTimeout(() => idle.abort(new RouterError('timeout', `${name} sent nothing for ${MODEL_COPY_IDLE_TIMEOUT_MS / 1000} s`)), MODEL_COPY_IDLE_TIMEOUT_MS);
    const wait = AbortSignal.any([signal, idle.signal]);
    const next = async (): Promise<CopyFrame | undefined> => {
      const frame = await channel.next({ signal: wait });
      timer.refresh();
      return frame;
    };
    const startedMs = performance.now();
    const offset = writer.position;
    const ask = this.direct && channel.remoteHost !== null;
    let ended = false;
    let socket: TLSSocket | null = null;
    try {
      await channel.send({ type: 'read', repo, revision, path: file.path, offset, ...(ask ? { direct: channel.remoteHost } : {}) }, { signal: wait });
      // Asked: the answer to the holder's offer still goes this way.
      if (!ask) await channel.close();
      const head = await next();
      if (head === undefined) throw new RetryableError(`${name} closed the copy of ${file.path} without answering`);
      if (!(head instanceof Uint8Array) && head.type === 'error') throw refusal(name, head);
      if (head instanceof Uint8Array || head.type !== 'file') throw new ModelsError('PEER_COPY_FAILED', `${name} answered a read of ${file.path} with ${frameName(head)}`);
      const different = head.size !== file.size || (file.sha256 !== null ? head.sha256 !== file.sha256 : file.gitOid !== null && head.gitOid !== file.gitOid);
      if (different) {
        throw new ModelsError('PEER_COPY_FAILED', `${name} holds a different ${file.path} (${head.size} bytes, ${head.sha256 ?? head.gitOid ?? 'no hash'}) than the one wanted (${file.size} bytes, ${file.sha256 ?? file.gitOid ?? 'no hash'})`);
      }
      if (ask) {
        const reply = await next();
        if (reply === undefined) throw new RetryableError(`${name} closed the copy of ${file.path} without answering the request for a direct socket`);
        if (!isDirectReply(reply)) {
          if (!(reply instanceof Uint8Array) && reply.type === 'error') throw refusal(name, reply);
          throw new ModelsError('PEER_COPY_FAILED', `${name} answered a request for a direct socket with ${frameName(reply)}`);
        }
        socket = await takeDirect(channel as FrameChannel<unknown>, reply, {
          signal: wait,
          onUnreachable: (error) => this.options.log.info({ from: nodeId, err: error }, `no direct socket to ${name}: copying over the libp2p stream`),
        });
      }
      if (socket !== null) {
        // receiveDirect's listeners report its failures; this one keeps a late error (after its end,
        // or while the stream closes below) from being an uncaught 'error' event.
        socket.on('error', () => undefined);
        const receiving = receiveDirect(socket, writer, { channel, signal: wait, onData: () => timer.refresh(), name, path: file.path });
        receiving.catch(() => undefined);
        await channel.close();
        await receiving;
        // A holder that dies may end the socket without TLS's close_notify: a short file is a cut one.
        if (writer.position !== file.size) throw new RouterError('closed', `the direct socket from ${name} ended at byte ${writer.position} of ${file.path} (${file.size} bytes)`);
        // The holder closes the stream once the socket closed: the copy ends as a stream copy does.
        const tail = await next();
        if (tail !== undefined) throw new ModelsError('PEER_COPY_FAILED', `${name} sent ${frameName(tail)} beside the direct socket of ${file.path}`);
      } else {
        if (ask) await channel.close();
        for (;;) {
          const frame = await next();
          if (frame === undefined) break;
          if (frame instanceof Uint8Array) {
            await writer.write(frame);
            continue;
          }
          if (frame.type === 'error') throw refusal(name, frame);
          throw new ModelsError('PEER_COPY_FAILED', `${name} sent ${frameName(frame)} inside the bytes of ${file.path}`);
        }
      }
      ended = true;
      const transport = socket === null ? 'stream' : 'direct';
      this.copiedBy[transport] += 1;
      const seconds = (performance.now() - startedMs) / 1000;
      const bytes = writer.position - offset;
      this.options.log.info({ from: nodeId, path: file.path, offset, bytes, transport, mbPerS: seconds > 0 ? Math.round(bytes / 1e6 / seconds) : null }, 'copied a model file from a member');
    } finally {
      clearTimeout(timer);
      socket?.destroy();
      if (!ended) channel.abort();
    }
  }

  // ---- serving members ---------------------------------------------------------------------------

  private async serveCopy(channel: FrameChannel<CopyRequest>, ctx: RequestContext): Promise<void> {
    const started = this.started;
    if (!started) return;
    const request = await channel.next({ signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(MODEL_COPY_REQUEST_TIMEOUT_MS)]) });
    if (request === undefined) return;
    if (request.type === 'direct-answer') return sendError(channel, ctx, 'BAD_REQUEST', 'a direct answer before any offer');
    const store = started.models.store;
    if (request.type === 'describe') {
      const model = store.get(request.modelId);
      if (!model) return sendError(channel, ctx, 'NOT_FOUND', `this node holds no complete copy of ${request.modelId}`);
      if (model.files.length > MODEL_COPY_MAX_FILES) return sendError(channel, ctx, 'BAD_REQUEST', `${request.modelId} has ${model.files.length} files, more than the ${MODEL_COPY_MAX_FILES} a copy carries`);
      const record: PeerModelRecord = {
        modelId: request.modelId,
        repo: model.repo,
        revision: model.revision,
        group: model.group,
        primaryPath: model.primaryPath,
        files: model.files.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256, gitOid: f.gitOid })),
        bytes: model.bytes,
      };
      await channel.send({ type: 'model', model: record }, { signal: ctx.signal });
      return;
    }
    // Only a path the index lists for a complete copy: nothing else on this disk can be named.
    const found = store.servable(request.repo, request.revision, request.path);
    if (!found) return sendError(channel, ctx, 'NOT_FOUND', `this node holds no complete copy with ${request.path} of ${request.repo}@${request.revision.slice(0, 12)}`);
    let handle: FileHandle;
    try {
      handle = await open(found.path, 'r');
    } catch {
      return sendError(channel, ctx, 'NOT_FOUND', `the copy of ${request.path} here went away (evicted or removed)`);
    }
    try {
      const size = (await handle.stat()).size;
      if (size !== found.file.size) return await sendError(channel, ctx, 'INTERNAL', `the copy of ${request.path} here is ${size} bytes where its index says ${found.file.size}`);
      if (request.offset > size) return await sendError(channel, ctx, 'BAD_REQUEST', `offset ${request.offset} is past the end of ${request.path} (${size} bytes)`);
      this.options.log.debug({ to: ctx.from, path: request.path, offset: request.offset, size }, 'serving a model file to a member');
      await channel.send({ type: 'file', size, sha256: found.file.sha256, gitOid: found.file.gitOid }, { signal: ctx.signal });
      const socket = request.direct === undefined ? null : await offerDirect(channel as FrameChannel<unknown>, request.direct, { enabled: this.direct, signal: ctx.signal });
      if (socket !== null) {
        await sendDirect(socket, handle, request.offset, size, ctx.signal);
        this.servedBy.direct += 1;
      } else {
        await sendBytes(channel, handle, request.offset, size, ctx.signal);
        this.servedBy.stream += 1;
      }
    } finally {
      await handle.close();
    }
  }

  private async serveDelete(request: DeleteRequest, ctx: RequestContext): Promise<DeleteAnswer> {
    const started = this.started;
    if (!started) return { outcome: 'refused', freedBytes: 0, removedFiles: false, cardFile: null, error: { code: 'RUNNER_STOPPED', reason: null, message: 'the node is stopping' } };
    try {
      const result = await started.models.remove(request.modelId);
      this.options.log.info({ modelId: request.modelId, by: ctx.from, freedBytes: result.freedBytes }, 'removed a model at a member’s request');
      return { outcome: 'removed', freedBytes: result.freedBytes, removedFiles: result.removedFiles, cardFile: result.cardFile === null ? null : clip(result.cardFile), error: null };
    } catch (error) {
      const failure = toShoalError(error);
      return {
        outcome: failure.code === 'NOT_FOUND' ? 'absent' : 'refused',
        freedBytes: 0,
        removedFiles: false,
        cardFile: null,
        error: { code: failure.code, reason: failure instanceof ModelsError ? failure.reason : null, message: clip(failure.message) },
      };
    }
  }
}

async function sendError(channel: FrameChannel<CopyRequest>, ctx: RequestContext, code: string, message: string): Promise<void> {
  await channel.send({ type: 'error', code, message: clip(message) } satisfies ErrorFrame, { signal: ctx.signal });
}

/**
 * The file from `offset` in frames of MODEL_COPY_CHUNK_BYTES, read MODEL_COPY_READ_BYTES at a time
 * with the next read in flight while the frames of the last one are sent: the disk never waits for
 * the network, nor the network for the disk. Each read gets a fresh buffer, as frames may be held by
 * reference (an in-process channel) after `send` returns.
 */
async function sendBytes(channel: FrameChannel<CopyRequest>, handle: FileHandle, offset: number, size: number, signal: AbortSignal): Promise<void> {
  const read = async (at: number): Promise<Uint8Array> => {
    const length = Math.min(MODEL_COPY_READ_BYTES, size - at);
    const buffer = Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length) {
      const { bytesRead } = await handle.read(buffer, filled, length - filled, at + filled);
      if (bytesRead === 0) throw new Error(`the file ended at byte ${at + filled} of ${size} while it was being read`);
      filled += bytesRead;
    }
    return buffer;
  };
  let position = offset;
  let pending: Promise<Uint8Array> | null = position < size ? read(position) : null;
  try {
    while (pending !== null) {
      const block = await pending;
      position += block.byteLength;
      pending = position < size ? read(position) : null;
      for (let at = 0; at < block.byteLength; at += MODEL_COPY_CHUNK_BYTES) {
        await channel.send(block.subarray(at, Math.min(at + MODEL_COPY_CHUNK_BYTES, block.byteLength)), { signal });
      }
    }
  } finally {
    // A read still running when the send failed must finish before the handle closes.
    await pending?.catch(() => undefined);
  }
}

/**
 * The file from `offset` into a direct socket, then the socket's end; resolves once the copier closed
 * its end too. Reads of MODEL_COPY_DIRECT_READ_BYTES alternate between two buffers, the next read in
 * flight while the socket takes the last, and a buffer is read into again only once the socket wrote
 * it out (its write callback): a fresh buffer per read made the holder spend more time in V8's
 * garbage collector (external memory) than in TLS. Rejects with a RouterError when the socket fails,
 * closes early or takes nothing for MODEL_COPY_DIRECT_IDLE_TIMEOUT_MS, and with the reason when
 * `signal` (the stream's) aborts; the socket is destroyed in every case.
 */
async function sendDirect(socket: TLSSocket, handle: FileHandle, offset: number, size: number, signal: AbortSignal): Promise<void> {
  const { promise: broken, reject: breakOff } = Promise.withResolvers<never>();
  broken.catch(() => undefined);
  let ending = false;
  const { promise: closed, resolve: onClosed } = Promise.withResolvers<void>();
  const onError = (error: Error): void => breakOff(new RouterError('reset', `the direct socket failed: ${error.message}`, { cause: error }));
  const onClose = (): void => (ending ? onClosed() : breakOff(new RouterError('closed', 'the copier closed the direct socket before the last byte')));
  const onTimeout = (): void => breakOff(new RouterError('timeout', `the direct socket took nothing for ${MODEL_COPY_DIRECT_IDLE_TIMEOUT_MS / 1000} s`));
  const onAbort = (): void => breakOff(signal.reason);
  socket.on('error', onError);
  socket.once('close', onClose);
  socket.setTimeout(MODEL_COPY_DIRECT_IDLE_TIMEOUT_MS, onTimeout);
  signal.addEventListener('abort', onAbort, { once: true });
  if (signal.aborted) onAbort();
  // The copier sends nothing but its end; reading lets that end (and so 'close') arrive.
  socket.resume();

  const blockBytes = Math.min(MODEL_COPY_DIRECT_READ_BYTES, size - offset);
  const buffers = [Buffer.allocUnsafe(blockBytes), Buffer.allocUnsafe(blockBytes)];
  // Per buffer: settles once the socket has written what was last put in it.
  const written = [Promise.resolve(), Promise.resolve()];
  const read = async (buffer: Buffer, at: number): Promise<Buffer> => {
    const length = Math.min(buffer.byteLength, size - at);
    let filled = 0;
    while (filled < length) {
      const { bytesRead } = await handle.read(buffer, filled, length - filled, at + filled);
      if (bytesRead === 0) throw new Error(`the file ended at byte ${at + filled} of ${size} while it was being read`);
      filled += bytesRead;
    }
    return buffer.subarray(0, length);
  };
  let position = offset;
  let slot = 0;
  let pending: Promise<Buffer> | null = position < size ? read(buffers[0]!, position) : null;
  try {
    while (pending !== null) {
      const block = await Promise.race([pending, broken]);
      pending = null;
      position += block.byteLength;
      written[slot] = new Promise<void>((resolve) => socket.write(block, (error) => (error ? breakOff(new RouterError('reset', `the direct socket failed: ${error.message}`, { cause: error })) : resolve())));
      slot ^= 1;
      if (position < size) {
        await Promise.race([written[slot], broken]);
        pending = read(buffers[slot]!, position);
      }
    }
    ending = true;
    socket.end();
    await Promise.race([closed, broken]);
  } finally {
    // 'error' stays handled: the socket may still report one while it is destroyed.
    socket.off('close', onClose);
    signal.removeEventListener('abort', onAbort);
    socket.setTimeout(0);
    socket.destroy();
    // A read still running when the socket failed must finish before the handle closes.
    await pending?.catch(() => undefined);
  }
}

/**
 * A direct socket's bytes into `writer` until the holder ends it. Flowing: each chunk is pushed
 * (the writer copies it into its block), and the socket is paused while the
 * writer's block waits for the disk. Rejects with the writer's error, with `signal`'s reason, and
 * with a retryable RouterError when the socket fails or closes before its end, or when the stream
 * (the socket's lifetime) is cut; the transfer then resumes from the part file's end.
 */
function receiveDirect(socket: TLSSocket, writer: PartWriter, o: { channel: FrameChannel<CopyFrame>; signal: AbortSignal; onData: () => void; name: string; path: string }): Promise<void> {
  const { channel, signal } = o;
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const finish = (error?: unknown): void => {
      if (settled) return;
      settled = true;
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('error', onError);
      socket.off('close', onClose);
      signal.removeEventListener('abort', onAbort);
      channel.signal.removeEventListener('abort', onCut);
      if (error === undefined) {
        // Half-closed by the holder: this end closes too, which the holder waits for.
        socket.end();
        resolve();
        return;
      }
      socket.destroy();
      reject(error);
    };
    const onData = (chunk: Buffer): void => {
      o.onData();
      let more: boolean;
      try {
        more = writer.push(chunk);
      } catch (error) {
        return finish(error);
      }
      if (more) return;
      socket.pause();
      writer.ready().then(
        () => {
          if (!settled) socket.resume();
        },
        (error: unknown) => finish(error),
      );
    };
    const onEnd = (): void => finish();
    const onError = (error: Error): void => finish(new RouterError('reset', `the direct socket from ${o.name} failed during ${o.path}: ${error.message}`, { cause: error }));
    // After 'end', 'close' finds this settled; before it, the socket went away mid-file.
    const onClose = (): void => finish(new RouterError('closed', `the direct socket from ${o.name} closed before the end of ${o.path}`));
    const onAbort = (): void => finish(signal.reason);
    const onCut = (): void => {
      const reason: unknown = channel.signal.reason;
      finish(reason instanceof RouterError ? reason : new RouterError('reset', `the ${MODEL_COPY_PROTOCOL} stream from ${o.name} was cut during ${o.path}`, { cause: reason }));
    };
    if (signal.aborted) return finish(signal.reason);
    if (channel.signal.aborted) return onCut();
    if (socket.destroyed) return onClose();
    signal.addEventListener('abort', onAbort, { once: true });
    channel.signal.addEventListener('abort', onCut, { once: true });
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('error', onError);
    socket.once('close', onClose);
  });
}

function refusal(name: string, frame: ErrorFrame): ModelsError {
  return new ModelsError('PEER_COPY_FAILED', `${name} refused (${frame.code}): ${frame.message}`);
}

function frameName(frame: CopyFrame): string {
  return frame instanceof Uint8Array ? `${frame.byteLength} bytes of data` : `a '${frame.type}' frame`;
}
