// Validates bodies that Shoal returns on its OpenAI-compatible surface against OpenAI's published OpenAPI
// description. The schemas come from test/fixtures/openai-schemas.json, a committed subset of the spec
// written by scripts/extract-openai-schemas.mjs (which also rewrites the OpenAPI 3.0 `nullable` keyword
// into JSON Schema type unions, so the fixture is plain JSON Schema 2020-12 as OpenAPI 3.1 specifies).
//
//   assertOpenAIShape('CreateChatCompletionResponse', body);   // throws AssertionError when invalid
//   assertOpenAIShape('CreateChatCompletionStreamResponse', chunk);
//   assertOpenAIShape('ErrorResponse', errorBody);
import { readFileSync } from 'node:fs';
import { AssertionError } from 'node:assert';
import Ajv2020Module from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { errorMessage } from '../../src/common/errors.js';

// Both packages are CommonJS whose `module.exports` is also reachable as `.default`; under NodeNext the
// default import is `module.exports`, so the class and plugin are taken from `.default` explicitly.
const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;

interface OpenAISchemaFixture {
  source: { title: string | null; version: string | null; openapi?: string | null };
  roots?: string[];
  schemas: Record<string, unknown>;
}

/** Base URI of the one document the fixture is mounted in; `$ref`s in it are `#/components/schemas/X`. */
const DOCUMENT_ID = 'https://shoal.invalid/openai-openapi.json';
/** At most this many Ajv errors are listed in an assertion message. */
const MAX_ERRORS_LISTED = 40;
/** At most this many characters of the offending body are quoted in an assertion message. */
const MAX_BODY_CHARS = 1500;

let fixture: OpenAISchemaFixture | undefined;
let ajv: InstanceType<typeof Ajv2020> | undefined;
const validators = new Map<string, ValidateFunction>();

function loadFixture(): OpenAISchemaFixture {
  if (fixture) return fixture;
  // Compiled: dist/test/support/openai-schema.js → <repo>/test/fixtures. Run from source (a TS loader):
  // test/support/openai-schema.ts → test/fixtures.
  const candidates = [
    new URL('../../../test/fixtures/openai-schemas.json', import.meta.url),
    new URL('../fixtures/openai-schemas.json', import.meta.url),
  ];
  let lastError: unknown;
  for (const url of candidates) {
    try {
      const parsed = JSON.parse(readFileSync(url, 'utf8')) as OpenAISchemaFixture;
      if (!parsed || typeof parsed !== 'object' || !parsed.schemas || typeof parsed.schemas !== 'object') {
        throw new Error(`${url.pathname} has no "schemas" object`);
      }
      fixture = parsed;
      return parsed;
    } catch (err) {
      lastError = err;
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') break;
    }
  }
  throw new Error(
    `cannot load the OpenAI schema fixture (run \`node scripts/extract-openai-schemas.mjs\`): ${
      errorMessage(lastError)
    }`,
  );
}

/** Every `format` value used anywhere in the fixture's schemas. */
function collectFormats(node: unknown, out: Set<string>): Set<string> {
  if (Array.isArray(node)) {
    for (const item of node) collectFormats(item, out);
  } else if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === 'format' && typeof value === 'string') out.add(value);
      collectFormats(value, out);
    }
  }
  return out;
}

function getAjv(): InstanceType<typeof Ajv2020> {
  if (ajv) return ajv;
  const { schemas } = loadFixture();
  // strict: false — the OpenAPI dialect carries annotation keywords Ajv does not know (x-oaiMeta,
  // x-stainless-const, discriminator, deprecated, example); they do not constrain instances.
  const instance = new Ajv2020({ strict: false, allErrors: true });
  addFormats(instance);
  // OpenAI's own format for Unix timestamps in seconds (on `integer` and, for Responses, `number`).
  instance.addFormat('unixtime', { type: 'number', validate: (n: number) => Number.isFinite(n) && n >= 0 });
  // Any other format ajv-formats lacks is an annotation only (rather than an "unknown format" warning).
  for (const name of collectFormats(schemas, new Set())) {
    if (!instance.formats[name]) instance.addFormat(name, true);
  }
  instance.addSchema({ $id: DOCUMENT_ID, components: { schemas } });
  ajv = instance;
  return instance;
}

function getValidator(schemaName: string): ValidateFunction {
  const cached = validators.get(schemaName);
  if (cached) return cached;
  const { schemas } = loadFixture();
  if (!Object.hasOwn(schemas, schemaName)) {
    throw new Error(`unknown OpenAI schema "${schemaName}"; known: ${openAISchemaNames().join(', ')}`);
  }
  const validate = getAjv().getSchema(`${DOCUMENT_ID}#/components/schemas/${encodeURIComponent(schemaName)}`);
  if (!validate) throw new Error(`Ajv could not compile OpenAI schema "${schemaName}"`);
  validators.set(schemaName, validate);
  return validate;
}

function describeError(e: ErrorObject): string {
  const where = e.instancePath === '' ? '(root)' : e.instancePath;
  let detail = '';
  if (e.keyword === 'enum' && 'allowedValues' in e.params) detail = ` ${JSON.stringify(e.params.allowedValues)}`;
  else if (e.keyword === 'additionalProperties') detail = ` (${JSON.stringify(e.params.additionalProperty)})`;
  else if (e.keyword === 'const') detail = ` ${JSON.stringify(e.params.allowedValue)}`;
  return `${where} ${e.message ?? e.keyword}${detail} [${e.schemaPath}]`;
}

function snippet(body: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(body, null, 2) ?? String(body);
  } catch {
    text = String(body);
  }
  return text.length > MAX_BODY_CHARS ? `${text.slice(0, MAX_BODY_CHARS)}\n… (${text.length} chars)` : text;
}

/**
 * The validation errors of `body` against OpenAI's component schema `schemaName`, one line each; empty
 * when the body is valid. Throws for a schema name the fixture does not hold.
 */
export function openAIShapeErrors(schemaName: string, body: unknown): string[] {
  const validate = getValidator(schemaName);
  if (validate(body)) return [];
  return (validate.errors ?? []).map(describeError);
}

/**
 * Throws an AssertionError (listing every Ajv error and quoting the body) unless `body` validates against
 * OpenAI's component schema `schemaName`, e.g. 'CreateChatCompletionResponse'. Names: openAISchemaNames().
 */
export function assertOpenAIShape(schemaName: string, body: unknown): void {
  const errors = openAIShapeErrors(schemaName, body);
  if (errors.length === 0) return;
  const listed = errors.slice(0, MAX_ERRORS_LISTED).map((line) => `  - ${line}`);
  if (errors.length > MAX_ERRORS_LISTED) listed.push(`  … and ${errors.length - MAX_ERRORS_LISTED} more`);
  throw new AssertionError({
    message:
      `body does not match OpenAI schema ${schemaName} (${errors.length} error${errors.length === 1 ? '' : 's'}):\n` +
      `${listed.join('\n')}\nbody:\n${snippet(body)}`,
    operator: 'assertOpenAIShape',
  });
}

/** Names of the OpenAI component schemas available to assertOpenAIShape, sorted. */
export function openAISchemaNames(): string[] {
  return Object.keys(loadFixture().schemas).sort();
}
