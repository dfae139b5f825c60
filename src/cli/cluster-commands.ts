import { parseArgs } from './args.js';
import { isShoalError } from '../common/errors.js';
import type { StatusView } from '../api/control/control.js';
import { connectToNode } from './client.js';
import { nodeNamer, psRows, table } from './ps.js';
import { gpuLines } from './gpu-lines.js';

/**
 * The CLI commands that talk to a running node: each is a thin call to one control route on
 * loopback, with the admin token of that node's current start.
 */

const COMMANDS: Record<string, { usage: string; positionals: [number, number]; run: (args: string[], dataDir: string | undefined, json: boolean) => Promise<unknown> }> = {
  status: {
    usage: 'shoal status [--json]',
    positionals: [0, 0],
    run: async (_args, dataDir, json) => {
      const client = await connectToNode(dataDir);
      const status = await client.call<StatusView>('GET', '/state');
      return json ? status : formatStatus(status, client.baseUrl);
    },
  },
  invite: {
    usage: 'shoal invite <nodeId|name> | shoal invite --code',
    positionals: [0, 1],
    run: async (args, dataDir) => {
      const client = await connectToNode(dataDir);
      if (args.length === 0) {
        const { code, expiresAt } = await client.call<{ code: string; expiresAt: string }>('POST', '/cluster/invite-code');
        return `Join code (single use, valid until ${expiresAt}):\n\n  ${code}\n\nOn the other machine: shoal join <code>`;
      }
      const result = await client.call<{ nodeId: string }>('POST', '/cluster/invite', { node: args[0] });
      return `Invitation sent to ${result.nodeId}. Its operator approves it with 'shoal approve' after comparing fingerprints.`;
    },
  },
  join: {
    usage: 'shoal join <code>',
    positionals: [1, 1],
    run: async (args, dataDir) => {
      const { clusterId } = await (await connectToNode(dataDir)).call<{ clusterId: string }>('POST', '/cluster/join', { code: args[0] });
      return `Joined cluster ${clusterId}.`;
    },
  },
  approve: {
    usage: 'shoal approve [<invitationId|nodeId|name>]',
    positionals: [0, 1],
    run: async (args, dataDir) => {
      const { clusterId } = await (await connectToNode(dataDir)).call<{ clusterId: string }>('POST', '/cluster/approve', args[0] ? { invitation: args[0] } : {});
      return `Joined cluster ${clusterId}.`;
    },
  },
  decline: {
    usage: 'shoal decline [<invitationId|nodeId|name>]',
    positionals: [0, 1],
    run: async (args, dataDir) => {
      await (await connectToNode(dataDir)).call('POST', '/cluster/decline', args[0] ? { invitation: args[0] } : {});
      return 'Invitation declined.';
    },
  },
  remove: {
    usage: 'shoal remove <nodeId|name>',
    positionals: [1, 1],
    run: async (args, dataDir) => {
      await (await connectToNode(dataDir)).call('POST', '/cluster/remove', { node: args[0] });
      return `Removed ${args[0]} from the cluster.`;
    },
  },
  leave: {
    usage: 'shoal leave',
    positionals: [0, 0],
    run: async (_args, dataDir) => {
      await (await connectToNode(dataDir)).call('POST', '/cluster/leave');
      return 'Left the cluster; this node is standalone again.';
    },
  },
  dissolve: {
    usage: 'shoal dissolve',
    positionals: [0, 0],
    run: async (_args, dataDir) => {
      await (await connectToNode(dataDir)).call('POST', '/cluster/dissolve');
      return 'The cluster is dissolved; every node is standalone again.';
    },
  },
  nickname: {
    usage: 'shoal nickname <node> [<name>]   (no name clears it)',
    positionals: [1, 2],
    run: async (args, dataDir) => {
      await (await connectToNode(dataDir)).call('POST', '/cluster/nickname', { node: args[0], nickname: args[1] ?? null });
      return args[1] ? `${args[0]} is now called ${args[1]}.` : `Cleared the nickname of ${args[0]}.`;
    },
  },
  'make-host': {
    usage: 'shoal make-host <node>',
    positionals: [1, 1],
    run: async (args, dataDir) => {
      await (await connectToNode(dataDir)).call('POST', '/cluster/make-host', { node: args[0] });
      return `${args[0]} is now the preferred master.`;
    },
  },
};

export async function clusterCommand(name: string, argv: string[]): Promise<number> {
  const command = COMMANDS[name]!;
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { 'data-dir': { type: 'string' }, json: { type: 'boolean' }, code: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    console.error(`${(error as Error).message}\nUsage: ${command.usage} [--data-dir <dir>]`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(`Usage: ${command.usage} [--data-dir <dir>]`);
    return 0;
  }
  const [min, max] = command.positionals;
  if (positionals.length < min || positionals.length > max || (name === 'invite' && values.code === (positionals.length === 1))) {
    console.error(`Usage: ${command.usage} [--data-dir <dir>]`);
    return 2;
  }
  try {
    const out = await command.run(positionals, values['data-dir'], values.json === true);
    console.log(typeof out === 'string' ? out : JSON.stringify(out, null, 2));
    return 0;
  } catch (error) {
    console.error(isShoalError(error) ? error.message : (error as Error).message);
    return 1;
  }
}

function cluster(s: StatusView, name: (nodeId: string) => string): string {
  if (s.role === 'standalone' || s.members.length === 0) return 'none: this node is standalone';
  // The first launch founds a cluster of one silently: to its operator the node is still alone.
  if (s.members.length === 1) return 'this node alone (a cluster of one)';
  return `${s.members.length} members, master ${s.masterId === null ? 'not elected yet' : name(s.masterId)}`;
}

/** Where this node's llama-server / ggml-rpc-server stand: in use, on their way (with progress), or what to run. */
export function enginesLine(e: NonNullable<StatusView['engines']>): string {
  const percent = e.percent === null ? '' : ` ${e.percent}%`;
  const progress = e.phase === 'cached' || e.phase === 'ready' ? '' : `${e.phase}${percent}: `;
  return `${progress}${e.message}${e.remediation ? `\n    -> ${e.remediation}` : ''}`;
}

/** The node and its cluster as a person reads them: names and URLs; ids only where no name is known. */
export function formatStatus(s: StatusView, baseUrl: string): string {
  const name = nodeNamer(s);
  const self = s.members.find((m) => m.isSelf);
  const health = (h: StatusView['health']): string => `${h.level}${h.reasons.map((r) => `\n    - ${r.text} (${r.remediation})`).join('')}`;
  const lines = [
    `Node         ${self?.nickname ?? s.name}${self?.nickname ? ` (${s.name})` : ''}, fingerprint ${s.fingerprint}, Shoal ${s.version}`,
    `API          ${baseUrl}/v1 (OpenAI, Anthropic), ${baseUrl}/api (Ollama)${s.apiKeyRequired ? '; needs an API key' : ''}`,
    `Dashboard    ${baseUrl}/`,
    `Health       ${health(s.health)}`,
    ...(s.engines ? [`Engines      ${enginesLine(s.engines)}`] : []),
    `Cluster      ${cluster(s, name)}`,
  ];
  if (s.members.length > 1) {
    lines.push('', 'Members:');
    const rows = s.members.map((m) => {
      const tags = [m.isSelf ? 'this node' : '', m.isMaster ? 'master' : '', m.hostPreferred ? 'preferred host' : ''].filter(Boolean).join(', ');
      return [`  ${m.nickname ?? m.name}`, m.health.level, tags];
    });
    lines.push(table(['  NAME', 'HEALTH', ''], rows));
  }
  lines.push('', ...gpuLines(s, name));
  const rows = psRows(s);
  lines.push('', rows.length === 0 ? 'Models: none runs (place one with `shoal launch <model>`)' : 'Models and instances (details: shoal ps):');
  for (const r of rows) lines.push(`  ${r.model}  ${r.instance} on ${r.node}${r.role === 'full' ? '' : ` (${r.role})`}: ${r.state}`);
  if (s.discovered.length > 0) {
    lines.push('', 'Nodes on this network (not members):');
    for (const d of s.discovered) lines.push(`  ${d.name}  fingerprint ${d.fingerprint}   -> shoal invite ${d.name}`);
  }
  if (s.invitations.length > 0) {
    lines.push('', 'Invitations waiting for your approval (compare the fingerprint with the inviter):');
    for (const i of s.invitations) lines.push(`  ${i.id}  from ${i.fromName}  fingerprint ${i.fingerprint}  until ${i.expiresAt}   -> shoal approve ${i.id}`);
  }
  return lines.join('\n');
}
