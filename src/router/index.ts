import '../polyfill.js';

export { createRouter, DEFAULT_P2P_PORT, MDNS_SERVICE_TAG } from './host.js';
export type { Router, RouterOptions, RouterServices, RouterStats, ConnectedPeer } from './host.js';
export type { RosterEntry, DiscoveredPeer } from './roster.js';
export { RouterError, isRouterError } from './errors.js';
export type { RouterFailure } from './errors.js';
export { DEFAULT_MAX_MESSAGE_BYTES } from './framing.js';
export type { FrameChannel } from './framing.js';
export { HELLO_PROTOCOL, INVITE_PROTOCOL, NON_MEMBER_PROTOCOLS, WIRE_VERSION, fingerprintOfPeer, fingerprintOfPublicKey } from './hello.js';
export type { PeerHello } from './hello.js';
export type { ChannelHandler, HandleOptions, OpenStreamOptions, RequestContext, RequestHandler, RequestOptions } from './streams.js';
export type { MessageMeta, Plane, PublishOptions, TelemetryQueueStats, Topic, TopicDefinition, TopicHandler, TopicStats } from './topics.js';
export { DirectAnswerFrame, DirectDeclineFrame, DirectHost, DirectOfferFrame, directSocketStats, isDirectReply, offerDirect, takeDirect } from './direct-socket.js';
export type { DirectReply } from './direct-socket.js';
