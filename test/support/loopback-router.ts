// A real libp2p router on 127.0.0.1 with mDNS off, for the data-plane protocols' own tests: routers
// find each other only by explicit dials, and a peer is a member once the test adds it to `roster`.

import { generateKeyPair } from '@libp2p/crypto/keys';
import { pino } from 'pino';
import { createRouter, type Router } from '../../src/router/index.js';

export interface LoopbackRouter {
  router: Router;
  roster: Set<string>;
}

/** Starts a router named `<prefix>-<4 random chars>`; the caller stops it. */
export async function startLoopbackRouter(prefix: string): Promise<LoopbackRouter> {
  const roster = new Set<string>();
  const router = await createRouter({
    privateKey: await generateKeyPair('Ed25519'),
    name: `${prefix}-${Math.random().toString(36).slice(2, 6)}`,
    isMember: (id) => roster.has(id),
    host: '127.0.0.1',
    p2pPort: 0,
    mdns: false,
    log: pino({ level: 'silent' }),
  });
  return { router, roster };
}
