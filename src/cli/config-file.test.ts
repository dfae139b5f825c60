import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CONFIG_FILE_NAME, ConfigFileError, mergeConfig, readConfigFile } from './config-file.js';

const FLAGS = {
  'api-port': { type: 'string' },
  'data-dir': { type: 'string' },
  engine: { type: 'string' },
  'api-key': { type: 'string', multiple: true },
  'no-mdns': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;
const ENV = { engine: 'SHOAL_ENGINE', 'api-key': 'SHOAL_API_KEYS' };

describe('shoal.toml', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-config-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const write = (text: string): Promise<void> => writeFile(join(dir, CONFIG_FILE_NAME), text);

  test('no file sets nothing', async () => {
    assert.deepEqual(await readConfigFile(join(dir, 'absent'), FLAGS), {});
  });

  test('keys are the flag names; numbers become the strings a flag gives, a single string a list where the flag repeats', async () => {
    await write('api-port = 8080\nengine = "llama_cpp"\napi-key = "k1"\nno-mdns = true\n');
    assert.deepEqual(await readConfigFile(dir, FLAGS), { 'api-port': '8080', engine: 'llama_cpp', 'api-key': ['k1'], 'no-mdns': true });
    await write('api-key = ["k1", "k2"]\n');
    assert.deepEqual(await readConfigFile(dir, FLAGS), { 'api-key': ['k1', 'k2'] });
  });

  test('an unknown key is refused with a typed error naming it and the nearest known key', async () => {
    await write('api-prot = 8080\n');
    await assert.rejects(readConfigFile(dir, FLAGS), (error: unknown) => {
      assert.ok(error instanceof ConfigFileError);
      assert.equal(error.code, 'BAD_REQUEST');
      assert.equal(error.key, 'api-prot');
      assert.equal(error.suggestion, 'api-port');
      assert.match(error.message, /unknown key 'api-prot'; did you mean 'api-port'\?/);
      return true;
    });
  });

  test('data-dir and help cannot be set in the file; wrong types and bad TOML are refused', async () => {
    await write('data-dir = "/x"\n');
    await assert.rejects(readConfigFile(dir, FLAGS), (error: unknown) => error instanceof ConfigFileError && error.key === 'data-dir' && /cannot be set in the file/.test(error.message));
    await write('no-mdns = "yes"\n');
    await assert.rejects(readConfigFile(dir, FLAGS), (error: unknown) => error instanceof ConfigFileError && error.key === 'no-mdns' && /true or false/.test(error.message));
    await write('api-port = \n');
    await assert.rejects(readConfigFile(dir, FLAGS), /is not valid TOML/);
  });

  test('precedence: flag over environment over file over default', () => {
    const file = { 'api-port': '8080', engine: 'llama_cpp', 'api-key': ['from-file'], 'no-mdns': true };
    // The file fills what nothing else sets.
    assert.deepEqual(mergeConfig({}, file, ENV, {}), file);
    // A flag wins over the file.
    assert.equal(mergeConfig({ 'api-port': '9090' }, file, ENV, {})['api-port'], '9090');
    // The environment wins over the file: the file's value is left out so the caller reads the variable.
    const withEnv = mergeConfig({}, file, ENV, { SHOAL_ENGINE: 'llama_server', SHOAL_API_KEYS: 'from-env' });
    assert.equal(withEnv.engine, undefined);
    assert.equal(withEnv['api-key'], undefined);
    // And a flag still wins over both.
    assert.equal(mergeConfig({ engine: 'auto' }, file, ENV, { SHOAL_ENGINE: 'llama_server' }).engine, 'auto');
    // An empty variable does not count as set.
    assert.equal(mergeConfig({}, file, ENV, { SHOAL_ENGINE: '' }).engine, 'llama_cpp');
  });
});
