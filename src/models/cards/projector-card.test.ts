// A card's multimodal projector (card.ts CardProjector): one kind per source kind, and only on cards
// that take images on an engine that loads it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCard, type ModelCardInput } from './card.js';
import { CardError, parseCard } from './parse.js';

const SHA = '0123456789abcdef0123456789abcdef01234567';
const SHA256 = 'ab'.repeat(32);

const HUB_VISION = `
id = "acme/vl-2b"
name = "Acme VL 2B"
tasks = ["chat"]
compatible_backends = ["llama_server-cuda", "llama_server-cpu"]

[source]
kind = "huggingface"
repo = "acme/vl-2b-gguf"
file = "vl-2b.Q4_K_M.gguf"
revision = "${SHA}"

[projector]
kind = "huggingface"
file = "mmproj-vl-2b-f16.gguf"

[capabilities]
vision = true
`;

function base(extra: Partial<ModelCardInput>): ModelCardInput {
  return {
    id: 'acme/vl',
    name: 'vl',
    source: { kind: 'file', path: '/m/vl.gguf' },
    tasks: ['chat'],
    capabilities: { vision: true },
    compatible_backends: ['llama_server-cpu'],
    ...extra,
  };
}

function problems(input: ModelCardInput): string[] {
  const result = ModelCard.safeParse(input);
  assert.equal(result.success, false, 'the card should be refused');
  return result.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
}

test('a hub vision card names its projector file in the same repo and revision', () => {
  const card = parseCard(HUB_VISION, '/cards/vl.toml');
  assert.deepEqual(card.projector, { kind: 'huggingface', file: 'mmproj-vl-2b-f16.gguf' });
  assert.equal(card.capabilities.vision, true);
});

test('each source kind takes its own projector kind', () => {
  assert.deepEqual(ModelCard.parse(base({ projector: { kind: 'file', path: '/m/mmproj.gguf' } })).projector, { kind: 'file', path: '/m/mmproj.gguf' });
  const local = ModelCard.parse(
    base({ source: { kind: 'local', file: 'vl.gguf', sha256: SHA256, imported_from: '/x/vl.gguf' }, projector: { kind: 'local', file: 'mmproj.gguf', sha256: SHA256 } }),
  );
  assert.equal(local.projector?.kind, 'local');
  assert.equal(ModelCard.parse(base({ source: { kind: 'builtin', spec: 'shoal/tiny-vision' }, projector: { kind: 'builtin' } })).projector?.kind, 'builtin');
  assert.match(problems(base({ projector: { kind: 'huggingface', file: 'mmproj.gguf' } })).join('\n'), /projector\.kind: .*kind must be 'file'/);
});

test('a projector card must take images, on llama-server, and never on the in-process engine', () => {
  assert.match(problems(base({ capabilities: { vision: false }, projector: { kind: 'file', path: '/m/p.gguf' } })).join('\n'), /capabilities\.vision: .*vision = true/);
  assert.match(problems(base({ compatible_backends: ['rpc-cpu'], projector: { kind: 'file', path: '/m/p.gguf' } })).join('\n'), /add a llama_server-\* backend/);
  assert.match(
    problems(base({ compatible_backends: ['llama_server-cpu', 'llama_cpp-cpu'], projector: { kind: 'file', path: '/m/p.gguf' } })).join('\n'),
    /compatible_backends\.1: 'llama_cpp-cpu' cannot load a projector/,
  );
});

test('a projector is a .gguf of its own, where the source kind says', () => {
  assert.match(problems(base({ projector: { kind: 'file', path: 'relative/p.gguf' } })).join('\n'), /absolute/);
  assert.match(problems(base({ projector: { kind: 'file', path: '/m/p.bin' } })).join('\n'), /\.gguf/);
  assert.match(problems(base({ source: { kind: 'builtin', spec: 'shoal/tiny' }, projector: { kind: 'builtin' } })).join('\n'), /has no projector.*shoal\/tiny-vision/);
  assert.throws(() => parseCard(HUB_VISION.replace('mmproj-vl-2b-f16.gguf', 'vl-2b.Q4_K_M.gguf'), '/cards/vl.toml'), (error: unknown) => error instanceof CardError && /not the model file/.test(error.message));
  assert.throws(() => parseCard(HUB_VISION.replace('mmproj-vl-2b-f16.gguf', '../x.gguf'), '/cards/vl.toml'), CardError);
});
