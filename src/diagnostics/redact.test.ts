import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { REDACTED, redactor, SECRET_MIN_CHARS } from './redact.js';

const TOKEN = 'a3f1'.repeat(16);
const KEY = 'sk-test-key-with-"quote';

describe('redaction of a capture bundle', () => {
  test('known secrets are removed everywhere, also JSON-escaped', () => {
    const redact = redactor([TOKEN, KEY, '']);
    const text = `token ${TOKEN} in text\n${JSON.stringify({ note: `key ${KEY}` })}\nraw ${KEY} end`;
    const out = redact(text);
    assert.ok(!out.includes(TOKEN) && !out.includes(KEY) && !out.includes(JSON.stringify(KEY).slice(1, -1)), out);
    assert.equal(out.split(REDACTED).length - 1, 3);
  });

  test('a secret that contains another is removed whole', () => {
    const out = redactor(['abcdef', 'abcdefghij'])('x abcdefghij y');
    assert.equal(out, `x ${REDACTED} y`);
  });

  test('short known values are left to the patterns (replacing them everywhere would shred the text)', () => {
    const short = 'x'.repeat(SECRET_MIN_CHARS - 1);
    assert.equal(redactor([short])(`max ${short}`), `max ${short}`);
    assert.equal(redactor([short])(`shoal run --api-key ${short}`), `shoal run --api-key ${REDACTED}`);
  });

  test('the patterns catch secrets the node does not know', () => {
    const redact = redactor([]);
    const cases: [string, string][] = [
      ['Authorization: Bearer abc.def-123', `Authorization: Bearer ${REDACTED}`],
      ['{"authorization":"bearer zzz"}', `{"authorization":"${REDACTED}"}`],
      ['code shoal1-AAECAwQFBgcICQ_-xyz done', `code shoal1-${REDACTED} done`],
      ['node main.js run --api-key k1 --api-key=k2 --name box', `node main.js run --api-key ${REDACTED} --api-key=${REDACTED} --name box`],
      ['--admin-token t --hf-token=u --api-keys a,b', `--admin-token ${REDACTED} --hf-token=${REDACTED} --api-keys ${REDACTED}`],
      ['SHOAL_API_KEYS=a,b HF_TOKEN=c PATH=/bin', `SHOAL_API_KEYS=${REDACTED} HF_TOKEN=${REDACTED} PATH=/bin`],
      ['{"secret": "s3", "adminToken":"t", "apiKey":"k", "api_key": "k2", "password":"p"}', `{"secret": "${REDACTED}", "adminToken":"${REDACTED}", "apiKey":"${REDACTED}", "api_key": "${REDACTED}", "password":"${REDACTED}"}`],
    ];
    for (const [input, expected] of cases) assert.equal(redact(input), expected, input);
  });

  test('what only looks like a secret stays', () => {
    const text = '--max-tokens 16 MAX_TOKENS=4 {"completionTokens": 3, "tokenizer": "llama", "apiKeyDigests": ["9f86d0"]} shoal1- bearer';
    assert.equal(redactor([])(text), text);
  });
  test('secrets in plural JSON fields, lists, headers, key-value text and Hugging Face tokens are caught by the patterns', () => {
    const redact = redactor([]);
    const samples = [
      ['{"apiKeys":"sk-unknown-1"}', 'sk-unknown-1'],
      ['{"apiKeys":["sk-unknown-2","sk-unknown-3"]}', 'sk-unknown-2'],
      ['{"x-api-key": "sk-unknown-4"}', 'sk-unknown-4'],
      ['x-api-key: sk-unknown-5', 'sk-unknown-5'],
      ['HF_TOKEN: hf_abcdefghijklmnopqrstu', 'hf_abcdefghijklmnopqrstu'],
      ['token=sometokenvalue', 'sometokenvalue'],
      ['Authorization: Basic dXNlcjpwYXNz', 'dXNlcjpwYXNz'],
      ['downloading with hf_ZYXWVUTSRQPONMLKJIHG now', 'hf_ZYXWVUTSRQPONMLKJIHG'],
    ] as const;
    for (const [text, secret] of samples) {
      const out = redact(text);
      assert.ok(!out.includes(secret), `${text} -> ${out}`);
      assert.ok(out.includes(REDACTED), out);
    }
  });
});
