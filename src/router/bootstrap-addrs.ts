import { multiaddr } from '@multiformats/multiaddr';

/** The multicodec of a `/p2p/<peerId>` component. */
const P2P_CODE = 0x01a5;

/**
 * What is wrong with a `--bootstrap` address, in words, or null when it can be dialled. libp2p's
 * bootstrap discovery drops an address without `/p2p/<peerId>` (it must know whom it dials) and one it
 * cannot parse, both silently at debug level, so the node would start alone with no hint why.
 */
export function bootstrapAddrProblem(addr: string): string | null {
  let components;
  try {
    components = multiaddr(addr).getComponents();
  } catch {
    return `--bootstrap ${addr} is not a multiaddr and is ignored: copy one of the other node's addresses (\`shoal status --json\` there lists them as addrs), like /ip4/192.168.1.20/tcp/52601/p2p/12D3KooW…`;
  }
  if (!components.some((c) => c.code === P2P_CODE)) {
    return `--bootstrap ${addr} has no /p2p/<peerId> and is ignored: append the other node's peer id, like ${addr}/p2p/12D3KooW… (\`shoal status --json\` there lists its full addresses as addrs)`;
  }
  return null;
}
