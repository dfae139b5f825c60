#!/usr/bin/env node
import '../polyfill.js';
import { errorMessage } from '../common/errors.js';
import { unknownCommandMessage, unknownOptionMessage } from './args.js';

const USAGE = `Usage: shoal <command> [options]

Start a node, serve a model:
  run                 start a node (API and dashboard on --api-port, default 52600)
  launch <model>      add, download and place a model in one step (a hub repo, a card id or a .gguf)
  ps                  what runs where: models, instances, nodes, memory, slots, context
  chat [<model>]      an interactive chat with a served model, in the terminal
  pull <model>        download a model (same as 'shoal models pull')
  rm <model>          remove a model (same as 'shoal models rm')

Models:
  models search|add|pull|ls|rm
                      find GGUF models on the hub, add their cards, download, list and remove them
  models launch <model> [--replicas N] [--parallel N] [--context N] [--exclude node]... [--dry-run]
                      place a model on the cluster (one node, replicas, or split); preview with --dry-run
  models stop <instance>
                      stop a placed instance
  models generate     write a random-weight GGUF model (for tests and benchmarks)

The node and its cluster:
  status              this node: its URLs, health, cluster members, models and instances
  logs [<node>] [-f]  print (and follow) a node's recent log lines: this node's or a member's
  doctor              check this machine (hardware, backends, engines, storage); --fix repairs
  diagnose [--out F]  write a .tar.gz of this node's diagnostics, logs and state (secrets redacted)
  trace on|off|list|show <id>
                      per-request traces: switch them on or off cluster-wide, list and show them
  service install|uninstall|status
                      run the node as a systemd (Linux) or launchd (macOS) service
  config get|set      cluster-wide settings: API keys, allowed web origins, launch defaults
  token [--rotate]    the node's admin token (stable across restarts), or a new one
  invite, join, approve, decline, remove, leave, dissolve, nickname, make-host
                      cluster membership, through the node running from --data-dir

  -v, --version       print Shoal's version (and git commit)
  -h, --help          show this help

Run 'shoal <command> --help' (or 'shoal help <command>') for a command's options.`;

const MODELS_USAGE = `Usage: shoal models <command> [options]

Commands:
  search <query>      find GGUF models on the Hugging Face hub
  add <model>         add a model's card (owner/name[:QUANT], a hub URL)
  pull <model>        download a model (a hub repo not added yet is added first)
  ls                  the models this node knows, and the placed instances
  rm <model>          remove a model's files and card
  launch <model>      place a model on the cluster
  stop <instance>     stop a placed instance
  approve <instance>  approve the downloads a placed instance waits for
  generate            write a random-weight GGUF model (for tests and benchmarks)

Run 'shoal models <command> --help' for a command's options.`;

const VERSION_USAGE = `Usage: shoal --version   (or shoal version)

Prints Shoal's version and, when it runs from a git checkout, the commit.`;

const MODELS_SUBCOMMANDS = ['search', 'add', 'pull', 'ls', 'rm', 'launch', 'stop', 'approve', 'generate'];
const CLUSTER_COMMANDS = ['status', 'token', 'invite', 'join', 'approve', 'decline', 'remove', 'leave', 'dissolve', 'nickname', 'make-host'];
const COMMANDS = ['config', 'run', 'launch', 'ps', 'chat', 'pull', 'rm', 'models', 'doctor', 'diagnose', 'trace', 'logs', 'service', 'version', 'help', ...CLUSTER_COMMANDS];
const TOP_OPTIONS = ['--help', '-h', '--version', '-v'];

const isHelp = (arg: string | undefined): boolean => arg === '--help' || arg === '-h' || arg === 'help';

async function models(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'generate':
      return (await import('./models-generate.js')).modelsGenerateCommand(rest);
    case 'launch':
      return (await import('./launch.js')).launchCommand(rest);
    case 'stop':
      return (await import('./instance-commands.js')).stopCommand(rest);
    case 'approve':
      return (await import('./instance-commands.js')).approveCommand(rest);
    case 'search':
    case 'add':
    case 'pull':
    case 'ls':
    case 'rm':
      return (await import('./models-commands.js')).modelsCommand(sub, rest);
    case undefined:
      console.error(MODELS_USAGE);
      return 2;
    default:
      if (isHelp(sub)) {
        console.log(MODELS_USAGE);
        return 0;
      }
      console.error(`${unknownCommandMessage('models command', sub, MODELS_SUBCOMMANDS)}\n\n${MODELS_USAGE}`);
      return 2;
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    // Each command loads only its own modules, so `shoal --help` and small commands start fast.
    case 'run':
      return (await import('./run.js')).runCommand(rest);
    case 'launch':
      return (await import('./launch.js')).launchCommand(rest);
    case 'ps':
      return (await import('./ps.js')).psCommand(rest);
    case 'chat':
      return (await import('./chat.js')).chatCommand(rest);
    case 'pull':
    case 'rm':
      return (await import('./models-commands.js')).modelsCommand(command, rest);
    case 'models':
      return models(rest);
    case 'doctor':
      return (await import('./doctor.js')).doctorCommand(rest);
    case 'logs':
      return (await import('./logs.js')).logsCommand(rest);
    case 'diagnose':
      return (await import('./diagnose.js')).diagnoseCommand(rest);
    case 'trace':
      return (await import('./trace.js')).traceCommand(rest);
    case 'service':
      return (await import('./service.js')).serviceCommand(rest);
    case 'config':
      return (await import('./config.js')).configCommand(rest);
    case 'token':
      return (await import('./config.js')).tokenCommand(rest);
    case 'version':
    case '--version':
    case '-v':
      if (rest.some(isHelp)) {
        console.log(VERSION_USAGE);
        return 0;
      }
      console.log((await import('./version.js')).versionText());
      return 0;
    case undefined:
      console.error(USAGE);
      return 2;
    case 'help':
    case '--help':
    case '-h':
      // `shoal help models pull` is `shoal models pull --help`.
      if (command === 'help' && rest.length > 0) return main([...rest, '--help']);
      console.log(USAGE);
      return 0;
    default:
      if (CLUSTER_COMMANDS.includes(command)) return (await import('./cluster-commands.js')).clusterCommand(command, rest);
      console.error(`${command.startsWith('-') ? unknownOptionMessage(command, TOP_OPTIONS) : unknownCommandMessage('command', command, COMMANDS)}\nRun 'shoal --help' for the commands.`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(errorMessage(error));
    process.exitCode = 1;
  },
);
