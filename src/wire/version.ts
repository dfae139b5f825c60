/**
 * Version of everything Shoal nodes say to each other. Nodes of different wire versions refuse each other
 * (loudly, on both sides) instead of half-understanding. Bump it with any incompatible change to a message,
 * event, command or snapshot schema.
 *
 * 2: the RPC tunnel's open frame and the model copy's read request may ask for a direct socket
 *    (router/direct-socket.ts), which version-1 strict schemas refuse.
 * 3: cluster settings in state and snapshots (SetSettings, SettingsChanged: master/state/settings.ts).
 */
export const WIRE_VERSION = 3;
