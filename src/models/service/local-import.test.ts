import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelId } from '../../common/ids.js';
import { localStem } from './local-import.js';

test('the id of an imported file is made of its name, cleaned to what a model id and a store path allow', () => {
  assert.equal(localStem('/dl/Qwen3 0.6B-Q4_K_M.gguf'), 'Qwen3-0.6B-Q4_K_M');
  assert.equal(localStem('./model.GGUF'), 'model');
  assert.equal(localStem('/x/..hidden..name.gguf'), 'hidden.name');
  assert.equal(localStem('/x/.gguf'), 'model');
  assert.equal(localStem(`/x/${'a'.repeat(300)}.gguf`).length, 96);
  for (const name of ['/dl/Qwen3 0.6B-Q4_K_M.gguf', '/x/é-ü.gguf', '/x/repo.git.gguf']) assert.ok(ModelId.safeParse(`local/${localStem(name)}`).success, name);
});
