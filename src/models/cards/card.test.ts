import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canPool, engineOf, ModelCard } from './card.js';
import { CardError, parseCard } from './parse.js';

const SHA = '0123456789abcdef0123456789abcdef01234567';

const VALID = `
id = "acme/llama-3b"
name = "Acme Llama 3B Q4"
tasks = ["chat", "completion"]
compatible_backends = ["llama_server-cuda", "llama_cpp-cpu", "rpc-cuda"]
backend_preference = ["llama_server-cuda"]

[source]
kind = "huggingface"
repo = "acme/llama-3b-gguf"
file = "llama-3b.Q4_K_M.gguf"
revision = "${SHA}"

[capabilities]
tools = true

[runtime]
context_size = 8192
parallel = 4
`;

test('a full card parses, with defaults filled in', () => {
  const card = parseCard(VALID, '/cards/llama.toml');
  assert.equal(card.id, 'acme/llama-3b');
  assert.deepEqual(card.source, { kind: 'huggingface', repo: 'acme/llama-3b-gguf', file: 'llama-3b.Q4_K_M.gguf', revision: SHA });
  assert.deepEqual(card.capabilities, { tools: true, reasoning: false, vision: false });
  assert.deepEqual(card.runtime, { context_size: 8192, parallel: 4, min_nodes: 1 });
  assert.deepEqual(card.tasks, ['chat', 'completion']);
});

test('a minimal card gets empty preference and default runtime', () => {
  const card = parseCard(
    `id = "x/y"\nname = "Y"\ntasks = ["embeddings"]\ncompatible_backends = ["llama_cpp-cpu"]\n[source]\nkind = "builtin"\nspec = "shoal/tiny"\n`,
    'y.toml',
  );
  assert.deepEqual(card.backend_preference, []);
  assert.deepEqual(card.runtime, { min_nodes: 1 });
  assert.equal(card.runtime.context_size, undefined);
});

test('the memory knobs parse onto runtime', () => {
  const card = parseCard(VALID.replace('parallel = 4', 'parallel = 4\nkv_cache_type = "q4_0"\nflash_attention = "on"'), '/cards/llama.toml');
  assert.deepEqual(card.runtime, { context_size: 8192, parallel: 4, min_nodes: 1, kv_cache_type: 'q4_0', flash_attention: 'on' });
});

test('a draft model for speculative decoding parses onto runtime', () => {
  const card = parseCard(VALID.replace('parallel = 4', 'parallel = 4\n[runtime.speculative]\ndraft = "acme/llama-tiny"\ndraft_max = 16\ndraft_min = 2'), '/cards/llama.toml');
  assert.deepEqual(card.runtime.speculative, { draft: 'acme/llama-tiny', draft_max: 16, draft_min: 2 });
});

test('a relative file source is resolved against the card directory; an absolute one is kept', () => {
  const base = `id = "x/y"\nname = "Y"\ntasks = ["chat"]\ncompatible_backends = ["llama_cpp-cpu"]\n`;
  const relative = parseCard(`${base}[source]\nkind = "file"\npath = "../models/y.gguf"\n`, '/data/cards/y.toml');
  assert.deepEqual(relative.source, { kind: 'file', path: '/data/models/y.gguf' });
  const absolute = parseCard(`${base}[source]\nkind = "file"\npath = "/srv/y.gguf"\n`, '/data/cards/y.toml');
  assert.deepEqual(absolute.source, { kind: 'file', path: '/srv/y.gguf' });
});

test('errors name the file and the field', () => {
  const cases: Array<{ what: string; edit: (text: string) => string; field: string; message: RegExp }> = [
    { what: 'branch as revision', edit: (t) => t.replace(SHA, 'main'), field: 'source.revision', message: /40-character commit sha/ },
    { what: 'unknown field', edit: (t) => t.replace('tools = true', 'tools = true\ntool = true'), field: 'capabilities.tool', message: /unknown field/ },
    { what: 'unknown top-level field', edit: (t) => `layers = 32\n${t}`, field: 'layers', message: /unknown field/ },
    { what: 'bad backend tag', edit: (t) => t.replace('"llama_cpp-cpu"', '"llamacpp-cpu"'), field: 'compatible_backends[1]', message: /<engine>-<compute>/ },
    { what: 'preference outside compatible', edit: (t) => t.replace('backend_preference = ["llama_server-cuda"]', 'backend_preference = ["llama_server-cpu"]'), field: 'backend_preference[0]', message: /not in compatible_backends/ },
    { what: 'repeated backend', edit: (t) => t.replace('"rpc-cuda"]', '"rpc-cuda", "rpc-cuda"]'), field: 'compatible_backends', message: /must not repeat/ },
    { what: 'unknown task', edit: (t) => t.replace('"completion"', '"rerank"'), field: 'tasks[1]', message: /./ },
    { what: 'no tasks', edit: (t) => t.replace('tasks = ["chat", "completion"]', 'tasks = []'), field: 'tasks', message: /at least one task/ },
    { what: 'zero parallel', edit: (t) => t.replace('parallel = 4', 'parallel = 0'), field: 'runtime.parallel', message: /./ },
    { what: 'bad id', edit: (t) => t.replace('"acme/llama-3b"', '"acme llama"'), field: 'id', message: /owner\/name/ },
    { what: 'not a gguf file', edit: (t) => t.replace('llama-3b.Q4_K_M.gguf', 'model.safetensors'), field: 'source.file', message: /\.gguf/ },
    { what: 'escaping file path', edit: (t) => t.replace('llama-3b.Q4_K_M.gguf', '../x.gguf'), field: 'source.file', message: /path inside the repo/ },
    { what: 'unknown source kind', edit: (t) => t.replace('kind = "huggingface"', 'kind = "s3"'), field: 'source.kind', message: /./ },
    { what: 'min_nodes without a split engine', edit: (t) => t.replace('"rpc-cuda"]', '"llama_cpp-cuda"]').replace('parallel = 4', 'parallel = 4\nmin_nodes = 2'), field: 'runtime.min_nodes', message: /llama_server-\* and an rpc-\*/ },
    { what: 'unknown kv cache type', edit: (t) => t.replace('parallel = 4', 'parallel = 4\nkv_cache_type = "q5_1"'), field: 'runtime.kv_cache_type', message: /./ },
    { what: 'speculative without llama-server', edit: (t) => t.replace('["llama_server-cuda", "llama_cpp-cpu", "rpc-cuda"]', '["llama_cpp-cpu"]').replace('backend_preference = ["llama_server-cuda"]', '').replace('parallel = 4', 'parallel = 4\n[runtime.speculative]\ndraft = "acme/llama-tiny"'), field: 'runtime.speculative', message: /llama-server only: add a llama_server-\* backend/ },
    { what: 'a model as its own draft', edit: (t) => t.replace('parallel = 4', 'parallel = 4\n[runtime.speculative]\ndraft = "acme/llama-3b"'), field: 'runtime.speculative.draft', message: /cannot be its own draft/ },
    { what: 'draft_min above draft_max', edit: (t) => t.replace('parallel = 4', 'parallel = 4\n[runtime.speculative]\ndraft = "acme/llama-tiny"\ndraft_max = 4\ndraft_min = 8'), field: 'runtime.speculative.draft_min', message: /must not exceed draft_max/ },
    { what: 'unknown speculative knob', edit: (t) => t.replace('parallel = 4', 'parallel = 4\n[runtime.speculative]\ndraft = "acme/llama-tiny"\nn_max = 4'), field: 'runtime.speculative.n_max', message: /unknown field/ },
    { what: 'quantized KV without flash attention', edit: (t) => t.replace('parallel = 4', 'parallel = 4\nkv_cache_type = "q8_0"\nflash_attention = "off"'), field: 'runtime.kv_cache_type', message: /flash attention/ },
  ];
  for (const c of cases) {
    const text = c.edit(VALID);
    assert.notEqual(text, VALID, `${c.what}: the edit applied`);
    assert.throws(
      () => parseCard(text, '/cards/bad.toml'),
      (error: unknown) => {
        assert.ok(error instanceof CardError, c.what);
        assert.equal(error.file, '/cards/bad.toml');
        const problem = error.problems.find((p) => p.field === c.field);
        assert.ok(problem, `${c.what}: expected a problem on ${c.field}, got ${JSON.stringify(error.problems)}`);
        assert.match(problem.message, c.message, c.what);
        assert.ok(error.message.startsWith('/cards/bad.toml: '), c.what);
        assert.ok(error.message.includes(c.field), c.what);
        return true;
      },
    );
  }
});

test('a builtin source must name a generated model', () => {
  assert.throws(
    () => parseCard(`id = "x/y"\nname = "Y"\ntasks = ["chat"]\ncompatible_backends = ["llama_cpp-cpu"]\n[source]\nkind = "builtin"\nspec = "shoal/huge"\n`, 'y.toml'),
    (error: unknown) => error instanceof CardError && error.problems[0]?.field === 'source.spec' && /shoal\/tiny/.test(error.message),
  );
});

test('TOML syntax errors give the line and column', () => {
  assert.throws(
    () => parseCard('id = "x/y"\nname = \n', '/cards/broken.toml'),
    (error: unknown) => error instanceof CardError && /^\/cards\/broken\.toml: TOML syntax error at line 2, column \d+/.test(error.message),
  );
});

test('an oversized card is refused before parsing', () => {
  assert.throws(() => parseCard(`# ${'x'.repeat(70_000)}\n`, 'big.toml'), (error: unknown) => error instanceof CardError && /at most 65536 bytes/.test(error.message));
});

test('engine helpers', () => {
  assert.equal(engineOf('llama_server-cuda'), 'llama_server');
  assert.equal(engineOf('rpc-cpu'), 'rpc');
  assert.equal(canPool(['llama_server-cpu', 'rpc-cuda']), true);
  assert.equal(canPool(['llama_server-cpu', 'llama_cpp-cpu']), false);
  assert.equal(ModelCard.safeParse({}).success, false);
});
