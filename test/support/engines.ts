// The llama.cpp engines the engine tests need: from the cache `shoal doctor --fix` fills, built here
// when missing and the build tools are present (as test/integration/engines-build.test.ts does).

import { buildEngines, checkBuildTools, findEngine } from '../../src/doctor/engines.js';

/** The binaries, or why they cannot be had (the tests then skip with that reason). */
export async function builtEngines(): Promise<{ server: string; rpc: string } | string> {
  const server = await findEngine('llama-server');
  const rpc = await findEngine('ggml-rpc-server');
  if (server !== null && rpc !== null) return { server, rpc };
  const tools = await checkBuildTools();
  if (!tools.ok) return `engines not built and ${tools.missing.join(', ')} missing (${tools.installHint})`;
  const built = await buildEngines();
  return { server: built.binaries['llama-server'], rpc: built.binaries['ggml-rpc-server'] };
}
