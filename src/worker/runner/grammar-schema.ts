import { ShoalError } from '../../common/errors.js';
import type { JsonSchema, ToolChoice, ToolDefinition } from '../../wire/task.js';

/**
 * Converts a client's JSON Schema into the subset node-llama-cpp compiles to a grammar: structure
 * (types, properties, items, enums, consts, one-of, references, string lengths, date formats) is
 * enforced token by token; value constraints it cannot express (`minimum`, `pattern`, `uniqueItems`,
 * other formats...) are dropped rather than refused, because real clients send them on nearly every
 * tool, and the structure is what makes an answer parseable. docs/API.md lists what is enforced.
 */

const STRUCTURAL = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'enum',
  'const',
  'oneOf',
  'anyOf',
  '$defs',
  'definitions',
  '$ref',
  'minLength',
  'maxLength',
  'format',
]);
const FORMATS = new Set(['date-time', 'time', 'date']);

function fail(path: string, message: string): never {
  throw new ShoalError('BAD_REQUEST', `JSON schema at ${path === '' ? 'the root' : path}: ${message}`, { param: 'schema' });
}

/** Any JSON value, for schema nodes that constrain nothing (`{}`, `true`, or only dropped keywords). */
const ANY_VALUE = { oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }, { type: 'object' }, { type: 'array' }] };

function convert(node: unknown, path: string): unknown {
  if (node === true) return ANY_VALUE;
  if (typeof node !== 'object' || node === null || Array.isArray(node)) fail(path, 'every schema must be an object');
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
    if (!STRUCTURAL.has(key)) continue;
    switch (key) {
      case 'properties':
      case '$defs':
      case 'definitions': {
        const converted: Record<string, unknown> = {};
        for (const [name, child] of Object.entries(value as Record<string, unknown>)) converted[name] = convert(child, `${path}/${key}/${name}`);
        out[key === 'definitions' ? '$defs' : key] = converted;
        break;
      }
      case 'items':
      case 'additionalProperties':
        out[key] = typeof value === 'boolean' ? value : convert(value, `${path}/${key}`);
        break;
      case 'prefixItems':
      case 'oneOf':
      case 'anyOf':
        if (!Array.isArray(value)) fail(path, `'${key}' must be an array`);
        // For generation, "one of" and "any of" pick the same way: one branch is produced.
        out[key === 'anyOf' ? 'oneOf' : key] = value.map((child, i) => convert(child, `${path}/${key}/${i}`));
        break;
      case '$ref':
        out.$ref = typeof value === 'string' ? value.replace('#/definitions/', '#/$defs/') : value;
        break;
      case 'format':
        if (typeof value === 'string' && FORMATS.has(value)) out.format = value;
        break;
      default:
        out[key] = value;
    }
  }
  // JSON Schema lets `type` be implied; the grammar generator needs it spelled out, or it emits null.
  if (out.type === undefined && out.enum === undefined && out.const === undefined && out.oneOf === undefined && out.$ref === undefined) {
    if (out.properties !== undefined || out.additionalProperties !== undefined) out.type = 'object';
    else if (out.items !== undefined || out.prefixItems !== undefined) out.type = 'array';
    else return ANY_VALUE;
  }
  return out;
}

export function grammarSchema(schema: JsonSchema): Record<string, unknown> {
  return convert(schema, '') as Record<string, unknown>;
}

/** The schema of one tool call object, `{"name": ..., "arguments": ...}`, over the allowed tools. */
export function toolCallSchema(tools: readonly ToolDefinition[], choice: ToolChoice): Record<string, unknown> {
  const allowed = choice.mode === 'tool' ? tools.filter((t) => t.name === choice.name) : tools;
  if (allowed.length === 0) {
    throw new ShoalError('BAD_REQUEST', `tool_choice names '${choice.mode === 'tool' ? choice.name : ''}', which is not among the tools`, { param: 'tool_choice' });
  }
  const branches = allowed.map((tool) => ({
    type: 'object',
    properties: { name: { const: tool.name }, arguments: grammarSchema(tool.parameters) },
    required: ['name', 'arguments'],
    additionalProperties: false,
  }));
  return branches.length === 1 ? branches[0]! : { oneOf: branches };
}
