// A driver and a donor in one process that stop their routers while a tunnel connection is open,
// then let the event loop drain. It must exit by itself: a socket left half-closed by a refused
// reset kept Node 20 spinning at 100 % CPU in its exit cleanup. Argument: `direct` or `stream`.
import '../polyfill.js';
import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { pino } from 'pino';
import { createRouter, type Router } from '../router/index.js';
import { openRpcTunnel, serveRpcTunnel } from './rpc-tunnel.js';

const direct = process.argv[2] === 'direct';

async function node(roster: Set<string>): Promise<Router> {
  return createRouter({ privateKey: await generateKeyPair('Ed25519'), name: 'exit-fixture', isMember: (id) => roster.has(id), host: '127.0.0.1', p2pPort: 0, mdns: false, log: pino({ level: 'silent' }) });
}

const rosters = [new Set<string>(), new Set<string>()] as const;
const [driver, donor] = await Promise.all([node(rosters[0]), node(rosters[1])]);
rosters[0].add(donor.nodeId);
rosters[1].add(driver.nodeId);
driver.updateRoster([{ nodeId: donor.nodeId, addrs: donor.addrs() }]);
donor.updateRoster([{ nodeId: driver.nodeId, addrs: driver.addrs() }]);
await driver.dial(`${donor.addrs()[0] ?? ''}/p2p/${donor.nodeId}`);

const echo = createServer({ allowHalfOpen: true }, (socket) => {
  socket.on('error', () => {});
  socket.pipe(socket);
});
echo.listen(0, '127.0.0.1');
await once(echo, 'listening');
await serveRpcTunnel(donor, () => (echo.address() as AddressInfo).port, { direct });
const tunnel = await openRpcTunnel(driver, donor.nodeId, 'inst-exit', { direct });

// A full round trip with a half-close, then a connection the client drops while the tunnel holds it.
const first = createConnection({ host: '127.0.0.1', port: tunnel.port, allowHalfOpen: true });
first.on('error', () => {});
await once(first, 'connect');
first.resume();
const ended = once(first, 'end');
first.end(Buffer.alloc(1024 * 1024, 7));
await ended;
first.destroy();
const second = createConnection({ host: '127.0.0.1', port: tunnel.port });
second.on('error', () => {});
await once(second, 'connect');
second.write('x');
await once(second, 'data');
second.destroy();

// Routers first (the streams abort under the tunnel), then the tunnel and the server.
await Promise.all([driver.stop(), donor.stop()]);
await tunnel.close();
echo.close();
process.stdout.write('stopped\n');
