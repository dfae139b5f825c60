import type { Logger } from '../common/log.js';

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Says loudly, at start, that the inference API is open to the network: a node bound beyond
 * loopback without an API key serves (and spends its compute on) anyone who can reach the port.
 */
export function warnIfOpenToNetwork(log: Logger, host: string, keyed: boolean, port: number): void {
  if (keyed || isLoopbackHost(host)) return;
  const where = host === '0.0.0.0' || host === '::' ? 'every network interface' : host;
  log.warn(
    { host, port },
    [
      '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!',
      `!! The inference API listens on ${where} (port ${port}) with NO API KEY:`,
      '!! anyone who can reach this port can use your models.',
      '!! Set a key with one of:',
      '!!   shoal run --api-key <key>          (or SHOAL_API_KEYS=<key>, or api-key in shoal.toml)',
      '!!   shoal config set api-keys <key>    (for every member of the cluster)',
      '!! or keep the API on this machine with --host 127.0.0.1.',
      '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!',
    ].join('\n'),
  );
}
