#!/usr/bin/env node
import '../polyfill.js';
import { errorMessage } from '../common/errors.js';

const USAGE = `Usage: shoal <command> [options]

Commands:
  run                 start a node (API on --api-port, default 52600)
  models generate     write a random-weight GGUF model (for tests and benchmarks)
  models search|add|pull|ls|rm
                      find GGUF models on the hub, add their cards, download, list and remove them
  models launch <model> [--replicas N] [--parallel N] [--context N] [--exclude node]... [--dry-run]
                      place a model on the cluster (one node, replicas, or split); preview with --dry-run
  models stop <instance>
                      stop a placed instance
  doctor              check this machine (hardware, backends, engines, storage); --fix repairs
  logs [<node>] [-f]  print (and follow) a node's recent log lines: this node's or a member's
  status, token, invite, join, approve, decline, remove, leave, dissolve, nickname, make-host
                      talk to the node running from --data-dir (see 'shoal <command> --help')

Run 'shoal <command> --help' for a command's options.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    // Each command loads only its own modules, so `shoal --help` and small commands start fast.
    case 'run':
      return (await import('./run.js')).runCommand(rest);
    case 'models': {
      const [sub, ...args] = rest;
      if (sub === 'generate') return (await import('./models-generate.js')).modelsGenerateCommand(args);
      if (sub === 'launch') return (await import('./instance-commands.js')).launchCommand(args);
      if (sub === 'stop') return (await import('./instance-commands.js')).stopCommand(args);
      if (sub === 'search' || sub === 'add' || sub === 'pull' || sub === 'ls' || sub === 'rm') return (await import('./models-commands.js')).modelsCommand(sub, args);
      console.error(`unknown models command '${sub ?? ''}'. Commands: generate, search, add, pull, ls, rm, launch, stop (see 'shoal models <command> --help')`);
      return 2;
    }
    case 'doctor':
      return (await import('./doctor.js')).doctorCommand(rest);
    case 'logs':
      return (await import('./logs.js')).logsCommand(rest);
    case 'status':
    case 'token':
    case 'invite':
    case 'join':
    case 'approve':
    case 'decline':
    case 'remove':
    case 'leave':
    case 'dissolve':
    case 'nickname':
    case 'make-host':
      return (await import('./cluster-commands.js')).clusterCommand(command, rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`unknown command '${command}'\n\n${USAGE}`);
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
