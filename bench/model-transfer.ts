import { mkdtemp, rm, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ModelStore } from '../src/models/store/store.js';
import { ensureBenchModel, liveDirs, log, printTransferResult, requireCurl, runChecked, startHub, transferArgs, transferOptions, type Transfer } from './common.js';
import { createLink, linkRateBytesPerS, type Link } from './link.js';
import { alternation } from './stats.js';

/**
 * Model transfer throughput: a generated GGUF (about 1 GB; 200 MB with --quick) served by the local hub
 * (test/support/hub-server.ts, in its own process), fetched
 *
 *   - hubDownload: through Shoal's real download path, ModelStore.pull (what `shoal models pull` and
 *     POST /models/pull run): repo and file listing, the Range probe, the streamed body hashed with
 *     SHA-256 as it is written, fsync, verification and rename into the store;
 *   - curl: a plain `curl -o` of the same resolve URL from the same server (the baseline);
 *   - curlFsync: the same curl followed by an fsync of the file (`sync FILE`), to separate the cost of
 *     durability from that of Shoal's code;
 *
 * each repetition in rotated order, into fresh directories on one filesystem. Each measurement is one
 * function of the context; the report compares every one with the curl baseline. Prints one JSON object.
 *
 * Over loopback (the default) the CPU bounds every client. With `--link <rate>` (e.g. 1gbit) the hub
 * runs in one network namespace and this same program, as the client side, in another, across a link
 * shaped to that rate (bench/link.ts): what a user pulling from a server on the LAN sees. The client
 * side measures exactly as on loopback; its result carries `link`.
 */

const BENCHMARK = 'model-transfer';
const options = transferOptions();
const TARGET_RATIO = 0.9;
const REPO = 'bench/transfer-GGUF';

/** What the --link side that started this process (in the client's namespace) tells it. */
const LinkClient = z.strictObject({
  hubUrl: z.string().url(),
  size: z.number().int().nonnegative(),
  link: z.strictObject({ rate: z.string(), qdisc: z.string() }),
});
type LinkClient = z.infer<typeof LinkClient>;

interface TransferContext {
  /** The hub's base URL. */
  hubUrl: string;
  repo: string;
  /** The file's name in the repo. */
  path: string;
  size: number;
  /** A fresh directory for this one transfer, removed afterwards. */
  workDir: string;
}


type Measurement = (ctx: TransferContext) => Promise<Transfer>;

async function hubDownload(ctx: TransferContext): Promise<Transfer> {
  // reserveBytes 0: disk admission is not what is measured, and must not refuse on a small CI disk.
  const store = await ModelStore.open({ dataDir: ctx.workDir, hub: { endpoint: ctx.hubUrl }, reserveBytes: 0 });
  const started = performance.now();
  const model = await store.pull({ repo: ctx.repo });
  const seconds = (performance.now() - started) / 1000;
  const bytes = (await stat(model.path)).size;
  if (bytes !== ctx.size) throw new Error(`ModelStore.pull wrote ${bytes} bytes, the hub serves ${ctx.size}`);
  return { bytes, seconds };
}

function curlInto(ctx: TransferContext, file: string): Promise<void> {
  const url = `${ctx.hubUrl}/${ctx.repo}/resolve/main/${encodeURIComponent(ctx.path)}`;
  return runChecked('curl', ['--silent', '--show-error', '--fail', '--output', file, url]);
}

async function curl(ctx: TransferContext): Promise<Transfer> {
  const file = join(ctx.workDir, ctx.path);
  const started = performance.now();
  await curlInto(ctx, file);
  const seconds = (performance.now() - started) / 1000;
  return { bytes: (await stat(file)).size, seconds };
}

async function curlFsync(ctx: TransferContext): Promise<Transfer> {
  const file = join(ctx.workDir, ctx.path);
  const started = performance.now();
  await curlInto(ctx, file);
  await runChecked('sync', [file]);
  const seconds = (performance.now() - started) / 1000;
  return { bytes: (await stat(file)).size, seconds };
}

/** The baseline first; every other measurement is reported as a ratio to it. */
const BASELINE = 'curl';
const MEASUREMENTS: Record<string, Measurement> = { curl, hubDownload, curlFsync };

/** Loopback, or the client side of a --link run: measures against a hub that runs here or across the link. */
async function main(client: LinkClient | null): Promise<void> {
  await requireCurl();
  const model = await ensureBenchModel(options.params, options.type, options.modelDir);
  const path = basename(model.path);
  let hubUrl: string;
  let size: number;
  let stopHub = (): void => undefined;
  if (client) {
    ({ hubUrl, size } = client);
    log(BENCHMARK, `fetching ${path} (${(size / 1e6).toFixed(0)} MB) from the hub across a ${client.link.rate} link`);
  } else {
    log(BENCHMARK, `serving ${model.path} (${(model.bytes / 1e6).toFixed(0)} MB) from a local hub`);
    const hub = await startHub(model.path, REPO, path);
    ({ url: hubUrl, size, stop: stopHub } = hub);
  }
  const workRoot = await mkdtemp(join(options.dir, 'shoal-transfer-'));
  liveDirs.add(workRoot);
  const samples: Record<string, Transfer[]> = Object.fromEntries(Object.keys(MEASUREMENTS).map((name) => [name, []]));
  try {
    const run = async (name: string): Promise<Transfer> => {
      const workDir = await mkdtemp(join(workRoot, `${name}-`));
      try {
        return await MEASUREMENTS[name]!({ hubUrl, repo: REPO, path, size, workDir });
      } finally {
        await rm(workDir, { recursive: true, force: true });
      }
    };
    // One unmeasured round: the served file into the page cache, both clients' code warm.
    for (const name of Object.keys(MEASUREMENTS)) await run(name);
    for (let rep = 0; rep < options.reps; rep++) {
      for (const name of alternation(Object.keys(MEASUREMENTS), rep)) {
        const t = await run(name);
        samples[name]!.push(t);
        log(BENCHMARK, `rep ${rep + 1} ${name}: ${(t.bytes / t.seconds / 1e6).toFixed(0)} MB/s`);
      }
    }
  } finally {
    stopHub();
    await rm(workRoot, { recursive: true, force: true });
    liveDirs.delete(workRoot);
  }

  const where = client
    ? `one file from the local hub server (its own process) in one network namespace, fetched from another across a link shaped by tc ${client.link.qdisc} on both ends`
    : 'one file from the local hub server (its own process, loopback)';
  await printTransferResult({
    benchmark: BENCHMARK,
    options,
    method: `${where}; every measurement into a fresh directory under ${options.dir}`,
    model,
    fileName: path,
    samples,
    baseline: BASELINE,
    measured: 'hubDownload',
    targetRatio: TARGET_RATIO,
    link: client?.link ?? null,
  });
}

/**
 * --link: the hub in the server's namespace, this program again as the client side in the client's
 * (it measures and prints the result, passed through here), the namespaces removed afterwards.
 */
async function overLink(rate: string): Promise<void> {
  await requireCurl();
  // Generated here, before any namespace exists: the client side finds it cached.
  const model = await ensureBenchModel(options.params, options.type, options.modelDir);
  const path = basename(model.path);
  log(BENCHMARK, `serving ${model.path} (${(model.bytes / 1e6).toFixed(0)} MB) from a local hub across a ${rate} link (network namespaces)`);
  // The client side writes under this directory, which this process removes however it ends (a
  // SIGKILLed client side cannot remove its own).
  const workRoot = await mkdtemp(join(options.dir, 'shoal-transfer-link-'));
  liveDirs.add(workRoot);
  let link: Link | null = null;
  try {
    link = await createLink(rate);
    const l = link;
    const hub = await startHub(model.path, REPO, path, (command, args, stdio) => l.spawn(l.server, command, args, stdio));
    const hubUrl = await link.exposeServerLoopback(hub.port);
    const client: LinkClient = { hubUrl, size: hub.size, link: link.summary };
    // Every transfer at most 4× its time at line rate, plus start-up.
    const timeoutMs = 120_000 + ((options.reps + 1) * Object.keys(MEASUREMENTS).length * 4 * hub.size * 1000) / linkRateBytesPerS(rate);
    const script = fileURLToPath(import.meta.url);
    const result = await link.runClient(script, transferArgs({ ...options, dir: workRoot, link: null, linkClient: JSON.stringify(client) }), timeoutMs);
    process.stdout.write(result);
    hub.stop();
  } finally {
    await link?.destroy();
    await rm(workRoot, { recursive: true, force: true });
    liveDirs.delete(workRoot);
  }
}

if (options.link !== null) await overLink(options.link);
else await main(options.linkClient === null ? null : LinkClient.parse(JSON.parse(options.linkClient)));
