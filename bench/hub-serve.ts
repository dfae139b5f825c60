import { parseArgs } from 'node:util';
import { HubServer } from '../test/support/hub-server.js';

/**
 * The local hub (test/support/hub-server.ts) serving one file as one repo, in a process of its own so
 * the clients bench/model-transfer.ts compares do not share its event loop. Prints one JSON line
 * `{ url, revision, size, sha256 }` once it listens; serves until its stdin closes.
 *
 * Usage: node dist/bench/hub-serve.js --file <path> --repo <owner/name> --path <name in the repo>
 */

const { values } = parseArgs({
  options: {
    file: { type: 'string' },
    repo: { type: 'string' },
    path: { type: 'string' },
  },
});
if (!values.file || !values.repo || !values.path) {
  process.stderr.write('usage: hub-serve --file <path> --repo <owner/name> --path <name in the repo>\n');
  process.exit(2);
}

const hub = await HubServer.start([{ repo: values.repo, files: [{ path: values.path, filePath: values.file }] }]);
const served = hub.file(values.repo, values.path);
process.stdout.write(`${JSON.stringify({ url: hub.url, revision: hub.head(values.repo), size: served.size, sha256: served.sha256 })}\n`);
process.stdin.resume();
process.stdin.on('end', () => void hub.close().then(() => process.exit(0)));
process.stdin.on('close', () => void hub.close().then(() => process.exit(0)));
