#!/usr/bin/env node
// Fails when an import in src/ runs upward in the layer table below, or when imports circle.
// Usage: node scripts/check-layers.mjs [root] (default: this repository; the tests pass a fixture tree).
// Prints one line per violation, `from -> to: rule`, and exits 1; else `layers ok: N files, M imports`.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/*
 * Layers, lowest first. A file under src/ belongs to the layer of its most specific pattern (an exact
 * path beats a folder, a deeper folder beats a shallower one); `dir/**` is everything under dir. A
 * test file (`x.test.ts`, `x.test-support.ts`, `x.fixture.ts`) belongs where `x.ts` would, and may
 * also import test/support/. Type-only imports count like value imports, except where `typeOnly` says.
 * `why` is printed with a violation: the importing layer's, or the imported one's when it is `sealed`.
 */
const LAYERS = [
  {
    name: 'base',
    why: 'errors, ids, logging and paths are used everywhere, so they can know nothing of the node',
    parts: ['common/**', 'polyfill.ts'],
    may: [],
  },
  {
    name: 'wire',
    why: 'what crosses a process or network boundary is plain data, readable without any subsystem',
    parts: ['wire/**'],
    may: ['base'],
  },
  {
    name: 'state',
    why: 'the replicated state and the models (files, cards, the hub, the store) are what every core decides over, so they know no core and no shell',
    parts: ['master/state/**', 'models/gguf/**', 'models/generate/**', 'models/cards/**', 'models/hub/**', 'models/store/**'],
    may: ['base', 'wire'],
  },
  {
    name: 'core',
    why: 'the pure cores (plain data in, plain data out) must not even know the types of a shell, so they run in the simulation and in unit tests alone',
    parts: [
      'master/**', // core and log: the log store is a shell of the master, but it is the master's own
      'election/**',
      'membership/**',
      'placement/**',
      'models/views.ts', // the models port's view types (src/api/control/models-port.ts shows them)
      'models/cluster-remove-error.ts',
      'worker/assignments.ts',
      'inference/routing.ts',
      'metrics/percentiles.ts',
      'metrics/rate.ts',
      'metrics/ring.ts',
      'metrics/series.ts',
      'metrics/tracker.ts',
      'tracing/spans.ts',
      'diagnostics/recorder.ts',
      'cluster/self-health.ts', // a node's own health reasons (issue #18), from plain readings
      'diagnostics/plane-moments.ts',
      'diagnostics/timeline.ts',
      'diagnostics/envelope.ts',
      'diagnostics/redact.ts',
      'speech/resample.ts', // a pure resampler (samples in, samples out): the voice and the realtime route's audio input share it
    ],
    may: ['base', 'wire', 'state'],
  },
  {
    name: 'router',
    why: 'the libp2p host carries bytes and knows nothing of what the cluster decides',
    parts: ['router/**'],
    may: ['base', 'wire'],
  },
  {
    name: 'port',
    why: 'the interfaces the API serves through, filled by the node: they name only plain types',
    parts: ['api/dispatch.ts', 'api/control/control.ts', 'api/control/models-port.ts', 'api/control/placement-port.ts', 'api/control/diagnostics-port.ts', 'api/control/traces-port.ts', 'api/control/performance-port.ts', 'api/speech-port.ts', 'api/audio-port.ts'],
    may: ['base', 'wire', 'state', 'core'],
  },
  {
    name: 'shell',
    why: 'the thin shells (I/O, processes, the network) around the cores; they may implement a port, so they may know its types, never an API route',
    parts: [
      'cluster/**',
      'inference/**',
      'worker/**',
      'models/**',
      'membership/service.ts',
      'placement/service.ts',
      'placement/control.ts',
      'doctor/**',
      'diagnostics/**',
      'tracing/**',
      'speech/**', // the text to speech and speech to text engines (issue #19)
    ],
    may: ['base', 'wire', 'state', 'core', 'router'],
    typeOnly: ['port'],
  },
  {
    name: 'api',
    why: 'the HTTP API defines ports that the node fills; it reaches a shell only through a port, so it never imports one',
    parts: ['api/**'],
    may: ['base', 'wire', 'state', 'core', 'port'],
  },
  {
    name: 'metrics',
    why: 'metrics and the dashboard observe the running node: its API, its shells and its router',
    parts: ['metrics/**', 'dashboard/**', 'diagnostics/capture.ts'],
    may: ['base', 'wire', 'state', 'core', 'router', 'port', 'shell', 'api'],
  },
  {
    name: 'node',
    why: 'the composition root builds every part; only the CLI starts it',
    sealed: true,
    parts: ['node/**'],
    may: ['base', 'wire', 'state', 'core', 'router', 'port', 'shell', 'api', 'metrics'],
  },
  {
    name: 'cli',
    why: 'the entry point may import anything; nothing imports it',
    sealed: true,
    parts: ['cli/**'],
    may: ['base', 'wire', 'state', 'core', 'router', 'port', 'shell', 'api', 'metrics', 'node'],
  },
];

const TEST_FILE = /\.(test|test-support|fixture)\.ts$/;
const TEST_SUPPORT = 'test/support/';

/** The layer of a path under src/ (posix, without `src/`), or undefined when no part matches. */
function layerOf(path) {
  const owner = path.replace(TEST_FILE, '.ts');
  let best;
  let bestScore = -1;
  for (const layer of LAYERS) {
    for (const part of layer.parts) {
      let score = -1;
      if (part.endsWith('/**')) {
        if (owner.startsWith(part.slice(0, -2))) score = part.length;
      } else if (owner === part) {
        score = Number.POSITIVE_INFINITY;
      }
      if (score > bestScore) {
        best = layer;
        bestScore = score;
      }
    }
  }
  return best;
}

function walk(dir, out) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

function allTypes(elements) {
  return elements.length > 0 && elements.every((element) => element.isTypeOnly);
}

/** Every module specifier in a file: `import`, `export ... from`, `import()` and `typeof import()`. */
function importsOf(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const found = [];
  const visit = (node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const named = clause?.namedBindings !== undefined && ts.isNamedImports(clause.namedBindings) ? clause.namedBindings.elements : null;
      const typeOnly = clause !== undefined && (clause.isTypeOnly || (clause.name === undefined && named !== null && allTypes(named)));
      found.push({ spec: node.moduleSpecifier.text, typeOnly });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      const named = node.exportClause !== undefined && ts.isNamedExports(node.exportClause) ? node.exportClause.elements : null;
      found.push({ spec: node.moduleSpecifier.text, typeOnly: node.isTypeOnly || (named !== null && allTypes(named)) });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] !== undefined && ts.isStringLiteralLike(node.arguments[0])) {
      found.push({ spec: node.arguments[0].text, typeOnly: false });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push({ spec: node.argument.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The rule an import breaks, or null. `from` and `to` are repository paths. */
function breach(from, to, typeOnly) {
  const fromTest = TEST_FILE.test(from);
  if (to.startsWith(TEST_SUPPORT)) return fromTest ? null : 'only test files import test/support';
  if (!to.startsWith('src/')) return 'src imports nothing outside src/ but test/support';
  if (TEST_FILE.test(to) && !fromTest) return 'only test files import test files';
  const source = layerOf(from.slice(4));
  const target = layerOf(to.slice(4));
  if (source === undefined) return 'the importing file is in no layer: add its folder to LAYERS';
  if (target === undefined) return 'the imported file is in no layer: add its folder to LAYERS';
  if (source === target || source.may.includes(target.name)) return null;
  if (typeOnly && (source.typeOnly ?? []).includes(target.name)) return null;
  const typeOnlyNote = (source.typeOnly ?? []).includes(target.name) ? ' (only its types)' : '';
  return `${source.name} may not import ${target.name}${typeOnlyNote}: ${target.sealed === true ? target.why : source.why}`;
}

/**
 * The import cycles, found per strongly connected component of the graph (Tarjan): the shortest cycle
 * through each file of a component that no cycle printed so far passes through, so every file that
 * sits on a cycle is named at least once.
 */
function cycles(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  let next = 0;
  const connect = (v) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), index.get(w)));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component = new Set();
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.add(w);
    } while (w !== v);
    if (component.size === 1 && !(graph.get(v) ?? new Set()).has(v)) return;
    const covered = new Set();
    for (const start of [...component].sort()) {
      if (covered.has(start)) continue;
      const cycle = shortestCycle(graph, component, start);
      for (const file of cycle) covered.add(file);
      found.push(cycle);
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) connect(v);
  return found;
}

/** The shortest way from `start` back to itself inside its component (breadth first). */
function shortestCycle(graph, component, start) {
  const previous = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift();
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let at = v; at !== start; at = previous.get(at)) path.unshift(at);
        return [start, ...path];
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

function checkLayers(root) {
  const files = walk(join(root, 'src'), []);
  const repoPath = (path) => relative(root, path).split(sep).join('/');
  const violations = [];
  const graph = new Map();
  let imports = 0;
  for (const file of files) {
    const from = repoPath(file);
    const edges = new Set();
    graph.set(from, edges);
    for (const { spec, typeOnly } of importsOf(file)) {
      if (!spec.startsWith('.')) continue;
      imports++;
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      const to = repoPath(target);
      if (!existsSync(target)) {
        violations.push(`${from} -> ${to}: does not resolve to a file`);
        continue;
      }
      if (to.startsWith('src/')) edges.add(to);
      const rule = breach(from, to, typeOnly);
      if (rule !== null) violations.push(`${from} -> ${to}: ${rule}`);
    }
  }
  for (const cycle of cycles(graph)) violations.push(`${cycle[0]} -> ${cycle[1]}: import cycle ${cycle.join(' -> ')}`);
  return { files: files.length, imports, violations: [...new Set(violations)].sort() };
}

const result = checkLayers(resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..')));
for (const line of result.violations) console.log(line);
if (result.violations.length > 0) {
  console.log(`${result.violations.length} layer violation(s): see "Layers" in CONTRIBUTING.md`);
  process.exit(1);
}
console.log(`layers ok: ${result.files} files, ${result.imports} imports`);
