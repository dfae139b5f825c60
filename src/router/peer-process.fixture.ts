// A router in its own process, for tests that must freeze a peer (SIGSTOP). It admits everyone,
// prints one JSON line {nodeId, addr} once listening, and runs until killed.
import '../polyfill.js';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { pino } from 'pino';
import { createRouter } from './index.js';

const router = await createRouter({
  privateKey: await generateKeyPair('Ed25519'),
  name: 'peer-process',
  isMember: () => true,
  host: '127.0.0.1',
  p2pPort: 0,
  mdns: false,
  log: pino({ level: 'silent' }),
});
process.stdout.write(`${JSON.stringify({ nodeId: router.nodeId, addr: `${router.addrs()[0] ?? ''}/p2p/${router.nodeId}` })}\n`);
process.on('SIGTERM', () => void router.stop().then(() => process.exit(0)));
setInterval(() => {}, 1 << 30);
