// Tier 4: copy from a peer across network namespaces (root only; skipped with a reason otherwise). The
// hub serves on h1's loopback, inside h1's namespace, so only h1 can reach it; h2 is pointed at the
// same address, which in its own namespace is its own loopback with nothing listening. h1 pulls from
// the hub; h2, which has no card and cannot reach the hub, pulls the same model and gets it from h1.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { StatusView } from '../../src/api/control/control.js';
import type { DownloadView } from '../../src/models/views.js';
import { ggufFixture } from '../support/hub-server.js';
import { eventually } from '../support/cli.js';
import { lanCli, lanStatus, startLanNode, type LanNode } from '../support/lan-node.js';
import { captureOutput, createLan, killGroup, netnsAvailable, waitForExit, type Captured, type Lan } from '../support/netns.js';

const available = await netnsAvailable();
const skip = available.ok ? false : `multi-host model copy tests skipped: ${available.reason}`;

const REPO = 'shoal-test/Peer-GGUF';
const FILE = 'Peer-Q4_K_M.gguf';
const MODEL_ID = `${REPO}:Q4_K_M`;
const HUB_SERVER_MODULE = pathToFileURL(fileURLToPath(new URL('../support/hub-server.js', import.meta.url))).href;

type HostNode = LanNode;

let lan: Lan;
let root: string;
const nodes: HostNode[] = [];
let hubProcess: ChildProcess | null = null;
let hubUrl = '';
let fixture = '';

function start(node: HostNode): void {
  node.env = { SHOAL_HF_ENDPOINT: hubUrl, SHOAL_DISK_RESERVE_BYTES: String(1024 * 1024) };
  startLanNode(lan, node);
}

const cli = (node: HostNode, ...args: string[]): ReturnType<typeof lanCli> => lanCli(lan, node, ...args);

const status = (node: HostNode): Promise<StatusView> => lanStatus(lan, node);


const h1 = (): HostNode => nodes[0]!;
const h2 = (): HostNode => nodes[1]!;

describe('copy from a peer across network namespaces', { skip, timeout: 300_000 }, () => {
  before(async () => {
    lan = await createLan({ hosts: 2 });
    root = await mkdtemp(join(tmpdir(), 'shoal-multihost-copy-'));
    fixture = await ggufFixture(join(root, 'peer.gguf'), { seed: 51, vocabSize: 4096 });
    // The hub, on 127.0.0.1 of h1's namespace only; it prints its URL and then every request it answers, until killed.
    const hubScript = `(async () => {
      const { HubServer } = await import(${JSON.stringify(HUB_SERVER_MODULE)});
      const hub = await HubServer.start([{ repo: ${JSON.stringify(REPO)}, files: [{ path: ${JSON.stringify(FILE)}, filePath: ${JSON.stringify(fixture)} }] }]);
      const push = hub.requests.push.bind(hub.requests);
      hub.requests.push = (...records) => { for (const r of records) console.log('REQUEST ' + JSON.stringify(r)); return push(...records); };
      console.log('HUB ' + hub.url);
    })()`;
    hubProcess = lan.execNode(lan.hosts[0]!, hubScript);
    const hubOut = captureOutput(hubProcess, 256 * 1024);
    hubUrl = (await hubOut.stdout.waitFor(/HUB http:\/\/127\.0\.0\.1:\d+/, 30_000, hubOut.exited)).slice(4);
    (hubProcess as ChildProcess & { captured?: Captured }).captured = hubOut;

    for (const host of lan.hosts) nodes.push({ host, dataDir: join(root, host.name), process: null, output: null });
    for (const node of nodes) start(node);
    await Promise.all(nodes.map((node) => eventually(`${node.host.name} to answer`, 60_000, async () => ((await cli(node, 'status', '--json')).code === 0 ? true : undefined))));
    const code = /shoal1-\S+/.exec((await cli(h1(), 'invite', '--code')).stdout)?.[0];
    assert.ok(code);
    const joined = await cli(h2(), 'join', code);
    assert.equal(joined.code, 0, joined.stderr);
  });

  after(async () => {
    for (const node of nodes) {
      if (!node.process) continue;
      killGroup(node.process, 'SIGTERM');
      await waitForExit(node.process, 6000).catch(() => killGroup(node.process!, 'SIGKILL'));
    }
    if (hubProcess) {
      killGroup(hubProcess, 'SIGTERM');
      await waitForExit(hubProcess, 5000).catch(() => killGroup(hubProcess!, 'SIGKILL'));
    }
    await lan?.destroy();
    if (root) await rm(root, { recursive: true, force: true });
  });

  test('h2 cannot reach the hub; it gets the model h1 pulled from h1, verified', async () => {
    const expected = createHash('sha256').update(await readFile(fixture)).digest('hex');
    const search = await cli(h2(), 'models', 'search', 'peer');
    assert.equal(search.code, 1, 'h2 has no route to the hub');
    assert.match(search.stderr, /cannot be reached/);

    const added = await cli(h1(), 'models', 'add', REPO, '--pull', '--json');
    assert.equal(added.code, 0, `${added.stdout}\n${added.stderr}`);
    const h1Id = (await status(h1())).nodeId;
    await eventually('h2 to see h1 hold the model', 30_000, async () => ((await status(h2())).artifacts[h1Id]?.models.some((m) => m.modelId === MODEL_ID) ? true : undefined));

    const hubOut = (hubProcess as ChildProcess & { captured: Captured }).captured;
    const requestsBefore = hubOut.stdout.toString().split('\n').filter((l) => l.startsWith('REQUEST ')).length;
    const pulled = await cli(h2(), 'models', 'pull', MODEL_ID, '--json');
    assert.equal(pulled.code, 0, `${pulled.stdout}\n${pulled.stderr}\n--- h2 ---\n${h2().output?.all.toString().slice(-3000)}`);
    const copy = JSON.parse(pulled.stdout) as DownloadView;
    assert.equal(copy.state, 'done');
    assert.deepEqual(copy.source, { kind: 'peer', nodeId: h1Id, name: 'h1' });
    assert.ok(copy.path);
    assert.equal(createHash('sha256').update(await readFile(copy.path)).digest('hex'), expected);
    const requestsAfter = hubOut.stdout.toString().split('\n').filter((l) => l.startsWith('REQUEST ')).length;
    assert.equal(requestsAfter, requestsBefore, 'the hub answered nothing while h2 pulled');

    const h2Id = (await status(h2())).nodeId;
    await eventually('h1 to see h2 hold it too', 30_000, async () => ((await status(h1())).artifacts[h2Id]?.models.some((m) => m.modelId === MODEL_ID) ? true : undefined));
    // A second pull on h2 finds its own copy: no hub, no member.
    const again = await cli(h2(), 'models', 'pull', MODEL_ID, '--json');
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual((JSON.parse(again.stdout) as DownloadView).source, { kind: 'disk' });
  });
});
