// Peer ids in text the node wrote (log lines, plan warnings) replaced by the nodes' names, so the
// page speaks of "beta" where the node logged 12D3KooW… (the id stays in the line's hover text).

/** An Ed25519 libp2p peer id as the node prints it (base58btc, `12D3KooW` and 44 more characters). */
const PEER_ID = /\b12D3KooW[1-9A-HJ-NP-Za-km-z]{44}\b/g;

export function nameNodeIds(text: string, nameOf: (nodeId: string) => string): string {
  return text.replace(PEER_ID, (id) => nameOf(id));
}

export function hasNodeId(text: string): boolean {
  return new RegExp(PEER_ID.source).test(text);
}
