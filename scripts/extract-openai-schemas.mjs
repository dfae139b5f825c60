#!/usr/bin/env node
// Extracts the response-side component schemas of OpenAI's published OpenAPI description into a small,
// committed fixture (test/fixtures/openai-schemas.json) so that tests can check every OpenAI-surface body
// Shoal returns against the real spec without needing the 3 MB spec itself.
//
// Usage: node scripts/extract-openai-schemas.mjs [path-to-spec]
//   path-to-spec: relative to the working directory; default ../shared/specs/openai-openapi.yaml relative
//   to the repository root (where CI has it; clones without it just keep the committed fixture).
//   The spec is OpenAI's own, not part of this repository: the `openapi.yaml` OpenAI publishes at
//   https://github.com/openai/openai-openapi (MIT). The committed fixture was extracted from a copy whose
//   `info.version` is 2.3.0; download that file and pass its path to refresh the fixture.
//
// What it does to the schemas, and nothing more:
//   - keeps the named roots and every component schema they reference, transitively; `$ref`s stay in
//     their spec form `#/components/schemas/X` (test/support/openai-schema.ts mounts the fixture's
//     `schemas` at `components.schemas` of one document, so they resolve as written);
//   - rewrites the OpenAPI 3.0 keyword `nullable: true` (still used in places by this 3.1 spec, including
//     beside `$ref` and `enum`, where Ajv's own `nullable` support does not apply) into plain JSON Schema:
//     a `type` union with "null" (plus `null` in `enum`), or `anyOf: [<schema>, {type: "null"}]` where
//     the schema has no `type`, or composes others (`$ref`, `allOf`, `anyOf`, `oneOf`, `const`);
//   - rewrites the draft 2019-09 pair `$recursiveAnchor: true` / `$recursiveRef: "#"` (used by
//     CompoundFilter to nest itself) into a plain `$ref` to the enclosing component, since the fixture is
//     validated as 2020-12 (which replaced them with `$dynamic*`) and nothing in the spec extends them;
//   - drops `x-oaiMeta` (documentation examples, not validation);
//   - sorts object keys so that reruns produce byte-identical output.
import { Buffer } from 'node:buffer';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import process from 'node:process';
import { parse } from 'yaml';

const log = (line) => process.stdout.write(`${line}\n`);
const fail = (line) => {
  process.stderr.write(`${line}\n`);
  process.exit(1);
};

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// An explicit path is taken relative to the working directory; the default relative to the repository root.
const specPath = process.argv[2]
  ? resolve(process.cwd(), process.argv[2])
  : resolve(repoRoot, '../shared/specs/openai-openapi.yaml');
const outPath = resolve(repoRoot, 'test/fixtures/openai-schemas.json');

// Roots we want. The first list must exist; the optional ones are included when the spec has them.
const REQUIRED_ROOTS = [
  'CreateChatCompletionResponse',
  'CreateChatCompletionStreamResponse',
  'CreateCompletionResponse',
  'ListModelsResponse',
  'Model',
  'ErrorResponse',
  'CreateEmbeddingResponse',
];
const OPTIONAL_ROOTS = ['Response', 'ResponseStreamEvent', 'ResponseStreamEvents'];

const REF_PREFIX = '#/components/schemas/';
const DROP_KEYS = new Set(['x-oaiMeta']);
// Keywords holding instance data rather than schemas: never searched for references.
const DATA_KEYS = new Set(['enum', 'const', 'default', 'example', 'examples']);

let spec;
try {
  spec = parse(readFileSync(specPath, 'utf8'), { maxAliasCount: -1 });
} catch (err) {
  fail(`cannot read OpenAPI spec at ${specPath}: ${err instanceof Error ? err.message : String(err)}`);
}
const all = spec?.components?.schemas;
if (!all || typeof all !== 'object') {
  fail(`${specPath} has no components.schemas`);
}

const missing = REQUIRED_ROOTS.filter((n) => !(n in all));
if (missing.length > 0) {
  fail(`spec lacks required schemas: ${missing.join(', ')}`);
}
const roots = [...REQUIRED_ROOTS, ...OPTIONAL_ROOTS.filter((n) => n in all)];

/** Name of the component a `$ref` string points at, or throws for any other kind of reference. */
function refTarget(ref, where) {
  if (typeof ref !== 'string' || !ref.startsWith(REF_PREFIX)) {
    throw new Error(`unsupported $ref ${JSON.stringify(ref)} in ${where}`);
  }
  const name = decodeURIComponent(ref.slice(REF_PREFIX.length).split('/')[0].replace(/~1/g, '/').replace(/~0/g, '~'));
  if (!(name in all)) throw new Error(`dangling $ref ${ref} in ${where}`);
  return name;
}

/** Collects the component names a schema references (including discriminator mappings). */
function collectRefs(node, where, out) {
  if (Array.isArray(node)) {
    for (const item of node) collectRefs(item, where, out);
    return;
  }
  if (!node || typeof node !== 'object') return;
  for (const [key, value] of Object.entries(node)) {
    if (DROP_KEYS.has(key) || DATA_KEYS.has(key)) continue;
    if (key === '$ref') out.add(refTarget(value, where));
    else if (key === 'discriminator' && value && typeof value === 'object' && value.mapping) {
      for (const target of Object.values(value.mapping)) {
        if (typeof target === 'string' && target.startsWith(REF_PREFIX)) out.add(refTarget(target, where));
      }
    } else collectRefs(value, where, out);
  }
}

// Transitive closure over the component graph.
const included = new Set();
const queue = [...roots];
while (queue.length > 0) {
  const name = queue.shift();
  if (included.has(name)) continue;
  included.add(name);
  const refs = new Set();
  collectRefs(all[name], name, refs);
  for (const r of refs) if (!included.has(r)) queue.push(r);
}

const COMPOSING = ['$ref', 'allOf', 'anyOf', 'oneOf', 'const'];
let nullableRewrites = 0;

// Keywords whose value is a map of names to subschemas, one subschema, or a list of subschemas. Everything
// else (enum, default, example, discriminator, x-*, ...) is data and is copied verbatim (keys sorted).
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);
const SCHEMA_ONE = new Set([
  'items', 'additionalItems', 'additionalProperties', 'not', 'contains', 'propertyNames', 'if', 'then', 'else',
  'unevaluatedItems', 'unevaluatedProperties',
]);
const SCHEMA_LISTS = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems']);

/** Deep copy of plain data with keys sorted. */
function sortDeep(value) {
  if (Array.isArray(value)) return value.map(sortDeep);
  if (!value || typeof value !== 'object') return value;
  const out = {};
  for (const key of Object.keys(value).sort()) out[key] = sortDeep(value[key]);
  return out;
}

/**
 * Deep copy of a schema with `nullable` and `$recursiveRef` rewritten, dropped keys removed and keys
 * sorted. `component` is the name of the component schema being copied, `recursive` whether it declares
 * `$recursiveAnchor: true` at its root.
 */
function normalize(schema, component, recursive) {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return sortDeep(schema);
  const sub = (s) => normalize(s, component, recursive);
  const copy = {};
  for (const key of Object.keys(schema).sort()) {
    const value = schema[key];
    if (DROP_KEYS.has(key) || key === '$recursiveAnchor') continue;
    if (key === '$recursiveRef') {
      if (value !== '#' || !recursive) {
        throw new Error(`unsupported $recursiveRef ${JSON.stringify(value)} in ${component}`);
      }
      if ('$ref' in schema) throw new Error(`$recursiveRef beside $ref in ${component}`);
      copy.$ref = `${REF_PREFIX}${component}`;
    } else if (SCHEMA_MAPS.has(key) && value && typeof value === 'object') {
      const map = {};
      for (const name of Object.keys(value).sort()) map[name] = sub(value[name]);
      copy[key] = map;
    } else if (SCHEMA_ONE.has(key)) {
      copy[key] = Array.isArray(value) ? value.map(sub) : sub(value);
    } else if (SCHEMA_LISTS.has(key) && Array.isArray(value)) {
      copy[key] = value.map(sub);
    } else {
      copy[key] = sortDeep(value);
    }
  }
  if (!('nullable' in copy)) return sortKeys(copy);
  const nullable = copy.nullable === true;
  delete copy.nullable;
  if (!nullable) return sortKeys(copy);
  nullableRewrites++;
  const hasType = typeof copy.type === 'string' || Array.isArray(copy.type);
  if (hasType && !COMPOSING.some((k) => k in copy)) {
    const types = Array.isArray(copy.type) ? [...copy.type] : [copy.type];
    if (!types.includes('null')) types.push('null');
    copy.type = types;
    if (Array.isArray(copy.enum) && !copy.enum.includes(null)) copy.enum = [...copy.enum, null];
    return sortKeys(copy);
  }
  // No plain type to widen: accept either the schema as it was or null. `$ref` siblings apply in
  // OpenAPI 3.1 / JSON Schema 2020-12, so the whole remaining schema moves into the first branch.
  return { anyOf: [sortKeys(copy), { type: 'null' }] };
}

function sortKeys(obj) {
  const out = {};
  for (const key of Object.keys(obj).sort()) out[key] = obj[key];
  return out;
}

const schemas = {};
for (const name of [...included].sort()) {
  const schema = all[name];
  schemas[name] = normalize(schema, name, schema?.$recursiveAnchor === true);
}

const fixture = {
  source: {
    title: spec.info?.title ?? null,
    version: spec.info?.version ?? null,
    openapi: spec.openapi ?? null,
  },
  roots,
  schemas,
};
const text = `${JSON.stringify(fixture, null, 2)}\n`;
mkdirSync(dirname(outPath), { recursive: true });
writeFileSync(outPath, text);

log(`spec: ${specPath} (${fixture.source.title} ${fixture.source.version}, OpenAPI ${fixture.source.openapi})`);
log(`roots: ${roots.join(', ')}`);
const absent = OPTIONAL_ROOTS.filter((n) => !(n in all));
if (absent.length > 0) log(`optional roots not in spec: ${absent.join(', ')}`);
log(`schemas written: ${included.size} (${nullableRewrites} nullable rewrites)`);
log(`  ${Object.keys(schemas).join(' ')}`);
log(`wrote ${outPath} (${Buffer.byteLength(text)} bytes)`);
