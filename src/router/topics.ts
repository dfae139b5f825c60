import '../polyfill.js';
import { TopicValidatorResult, type GossipSub, type Message } from '@libp2p/gossipsub';
import type { PeerId } from '@libp2p/interface';
import type { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { decodeValue, encodeValue } from './framing.js';

/**
 * Topic registry over gossipsub.
 *
 * Receipt path (all inside gossipsub's topic validator, so nothing invalid is ever forwarded):
 * 1. the propagation source and the signed author (`msg.from`, verified by gossipsub's StrictSign
 *    policy) must both be members, else `dropped_non_member`;
 * 2. `data.byteLength <= maxBytes`, checked before any decoding, else `dropped_oversize`;
 * 3. msgpack decode then zod parse, else `dropped_invalid`.
 * Accepted messages reach subscribers with `from` = the signed author's peer id (never a payload field).
 *
 * Publishing: control messages go straight to gossipsub. Telemetry goes through a bounded
 * last-write-wins queue keyed by (topic, kind, key), drained one message per macrotask, so a flood
 * of telemetry can neither grow without bound nor get ahead of a control publish.
 */

export type Plane = 'control' | 'telemetry';

export interface TopicDefinition<S extends z.ZodType> {
  name: string;
  schema: S;
  plane: Plane;
  /** Largest encoded message accepted or sent on this topic. */
  maxBytes: number;
}

export interface MessageMeta {
  /** Node id of the signed author. */
  from: string;
  topic: string;
  /** `performance.now()` at receipt: this node's monotonic clock, never the sender's. */
  receivedAt: number;
}

export type TopicHandler<T> = (message: T, meta: MessageMeta) => void;

export interface PublishOptions {
  /** Telemetry only: the last-write-wins key within the message's kind (e.g. a model id). Default ''. */
  key?: string;
}

export interface Topic<S extends z.ZodType> {
  readonly name: string;
  readonly plane: Plane;
  readonly maxBytes: number;
  /** Control: resolves once handed to gossipsub, with how many peers it went to. Telemetry: queued, resolves at once with 0. */
  publish(message: z.input<S>, options?: PublishOptions): Promise<{ recipients: number }>;
  /** Returns the unsubscribe function. */
  subscribe(handler: TopicHandler<z.output<S>>): () => void;
}

export interface TopicStats {
  received: number;
  dropped_invalid: number;
  dropped_oversize: number;
  dropped_non_member: number;
  published: number;
}

export interface TelemetryQueueStats {
  queued: number;
  sent: number;
  /** Entries overwritten by a newer value for the same (topic, kind, key) before being sent. */
  replaced: number;
  /** Entries evicted (oldest first) because the queue was full. */
  dropped_overflow: number;
  failed: number;
}

const UNKNOWN_TOPIC = '(unregistered)';

interface Registered {
  def: TopicDefinition<z.ZodType>;
  handlers: Set<TopicHandler<unknown>>;
  stats: TopicStats;
}

interface QueuedTelemetry {
  topic: string;
  bytes: Uint8Array;
}

/** Bounded last-write-wins queue for telemetry, drained on its own loop (one publish per macrotask). */
export class TelemetryQueue {
  private readonly entries = new Map<string, QueuedTelemetry>();
  private draining = false;
  private stopped = false;
  private readonly counters: Omit<TelemetryQueueStats, 'queued'> = { sent: 0, replaced: 0, dropped_overflow: 0, failed: 0 };

  constructor(
    private readonly maxEntries: number,
    private readonly send: (topic: string, bytes: Uint8Array) => Promise<void>,
  ) {}

  enqueue(lwwKey: string, topic: string, bytes: Uint8Array): void {
    if (this.stopped) return;
    if (this.entries.has(lwwKey)) {
      // Keep its place in line (it was waiting already) but carry the newest value.
      this.entries.set(lwwKey, { topic, bytes });
      this.counters.replaced++;
    } else {
      while (this.entries.size >= this.maxEntries) {
        const oldest = this.entries.keys().next();
        if (oldest.done === true) break;
        this.entries.delete(oldest.value);
        this.counters.dropped_overflow++;
      }
      this.entries.set(lwwKey, { topic, bytes });
    }
    this.schedule();
  }

  stats(): TelemetryQueueStats {
    return { queued: this.entries.size, ...this.counters };
  }

  stop(): void {
    this.stopped = true;
    this.entries.clear();
  }

  private schedule(): void {
    if (this.draining || this.stopped) return;
    this.draining = true;
    setImmediate(() => void this.drainOne());
  }

  private async drainOne(): Promise<void> {
    const first = this.entries.entries().next();
    if (first.done === true || this.stopped) {
      this.draining = false;
      return;
    }
    const [key, entry] = first.value;
    this.entries.delete(key);
    try {
      await this.send(entry.topic, entry.bytes);
      this.counters.sent++;
    } catch {
      this.counters.failed++;
    }
    // Yield a whole macrotask between telemetry publishes: control publishes, timers and I/O run first.
    setImmediate(() => void this.drainOne());
  }
}

export interface TopicRegistryOptions {
  pubsub: GossipSub;
  isMember: (peer: PeerId) => boolean;
  log: Logger;
  telemetryQueueMax: number;
}

export class TopicRegistry {
  private readonly topics = new Map<string, Registered>();
  private readonly parsed = new WeakMap<Message, { value: unknown; from: string }>();
  private readonly unknownStats: TopicStats = emptyStats();
  readonly telemetry: TelemetryQueue;
  private readonly pubsub: GossipSub;
  private readonly isMember: (peer: PeerId) => boolean;
  private readonly log: Logger;
  private readonly onMessage = (event: CustomEvent<Message>): void => this.deliver(event.detail);

  constructor(options: TopicRegistryOptions) {
    this.pubsub = options.pubsub;
    this.isMember = options.isMember;
    this.log = options.log;
    this.telemetry = new TelemetryQueue(options.telemetryQueueMax, async (topic, bytes) => {
      await this.pubsub.publish(topic, bytes);
      const registered = this.topics.get(topic);
      if (registered !== undefined) registered.stats.published++;
    });
    this.pubsub.addEventListener('message', this.onMessage);
  }

  register<S extends z.ZodType>(def: TopicDefinition<S>): Topic<S> {
    if (this.topics.has(def.name)) throw new ShoalError('BAD_REQUEST', `topic ${def.name} is registered already`);
    if (!(def.maxBytes > 0)) throw new ShoalError('BAD_REQUEST', `topic ${def.name} needs a positive maxBytes`);
    const registered: Registered = { def: def as TopicDefinition<z.ZodType>, handlers: new Set(), stats: emptyStats() };
    this.topics.set(def.name, registered);
    this.pubsub.topicValidators.set(def.name, (source, message) => this.validate(registered, source, message));
    this.pubsub.subscribe(def.name);
    return {
      name: def.name,
      plane: def.plane,
      maxBytes: def.maxBytes,
      publish: (message, options) => this.publish(def.name, message, options),
      subscribe: (handler) => {
        const h = handler as TopicHandler<unknown>;
        registered.handlers.add(h);
        return () => registered.handlers.delete(h);
      },
    };
  }

  unregister(name: string): void {
    if (!this.topics.delete(name)) return;
    this.pubsub.topicValidators.delete(name);
    this.pubsub.unsubscribe(name);
  }

  has(name: string): boolean {
    return this.topics.has(name);
  }

  /** Validates outgoing messages against the topic's schema and byte limit; throws on either. */
  async publish(name: string, message: unknown, options: PublishOptions = {}): Promise<{ recipients: number }> {
    const registered = this.topics.get(name);
    if (registered === undefined) throw new ShoalError('BAD_REQUEST', `topic ${name} is not registered`);
    const { def } = registered;
    const checked = def.schema.safeParse(message);
    if (!checked.success) throw new ShoalError('BAD_REQUEST', `a message for ${name} does not match its schema: ${checked.error.message}`, { cause: checked.error });
    const bytes = encodeValue(checked.data);
    if (bytes.byteLength > def.maxBytes) {
      throw new ShoalError('PAYLOAD_TOO_LARGE', `a ${bytes.byteLength}-byte message is over ${name}'s limit of ${def.maxBytes} bytes`);
    }
    if (def.plane === 'telemetry') {
      const kind = kindOf(checked.data);
      this.telemetry.enqueue(`${name}\u0000${kind}\u0000${options.key ?? ''}`, name, bytes);
      return { recipients: 0 };
    }
    const result = await this.pubsub.publish(name, bytes);
    registered.stats.published++;
    return { recipients: result.recipients.length };
  }

  stats(): Record<string, TopicStats> {
    const out: Record<string, TopicStats> = {};
    for (const [name, registered] of this.topics) out[name] = { ...registered.stats };
    if (Object.values(this.unknownStats).some((n) => n > 0)) out[UNKNOWN_TOPIC] = { ...this.unknownStats };
    return out;
  }

  stop(): void {
    this.telemetry.stop();
    this.pubsub.removeEventListener('message', this.onMessage);
  }

  private validate(registered: Registered, source: PeerId, message: Message): TopicValidatorResult {
    const { def, stats } = registered;
    if (!this.isMember(source) || message.type !== 'signed' || !this.isMember(message.from)) {
      stats.dropped_non_member++;
      return TopicValidatorResult.Reject;
    }
    if (message.data.byteLength > def.maxBytes) {
      stats.dropped_oversize++;
      return TopicValidatorResult.Reject;
    }
    let value: unknown;
    try {
      value = decodeValue(message.data);
    } catch {
      stats.dropped_invalid++;
      return TopicValidatorResult.Reject;
    }
    const parsed = def.schema.safeParse(value);
    if (!parsed.success) {
      stats.dropped_invalid++;
      this.log.debug({ topic: def.name, from: message.from.toString() }, 'dropped an invalid message');
      return TopicValidatorResult.Reject;
    }
    this.parsed.set(message, { value: parsed.data, from: message.from.toString() });
    return TopicValidatorResult.Accept;
  }

  private deliver(message: Message): void {
    const receivedAt = performance.now();
    const registered = this.topics.get(message.topic);
    const entry = this.parsed.get(message);
    if (registered === undefined || entry === undefined) {
      // Only reachable for a topic subscribed outside this registry, or unregistered mid-flight.
      this.unknownStats.dropped_invalid++;
      return;
    }
    this.parsed.delete(message);
    registered.stats.received++;
    const meta: MessageMeta = { from: entry.from, topic: message.topic, receivedAt };
    for (const handler of registered.handlers) {
      try {
        handler(entry.value, meta);
      } catch (error) {
        this.log.error({ err: error, topic: message.topic }, 'a topic handler threw');
      }
    }
  }
}

function emptyStats(): TopicStats {
  return { received: 0, dropped_invalid: 0, dropped_oversize: 0, dropped_non_member: 0, published: 0 };
}

function kindOf(message: unknown): string {
  if (typeof message === 'object' && message !== null && 'type' in message) {
    const type = (message as { type: unknown }).type;
    if (typeof type === 'string') return type;
  }
  return '';
}
