/**
 * Version of everything Shoal nodes say to each other. Nodes of different wire versions refuse each other
 * (loudly, on both sides) instead of half-understanding. Bump it with any incompatible change to a message,
 * event, command or snapshot schema.
 */
export const WIRE_VERSION = 1;
