import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../common/errors.js';
import { MAX_IMAGE_BYTES, MAX_TASK_IMAGE_BYTES, MAX_TASK_IMAGES, TaskImage } from '../wire/task.js';
import { decodeBase64Image, decodeImageUrl, ImageIntake, sniffImageType } from './images.js';

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46]);
const GIF87 = Buffer.from('GIF87a\x01\x00\x01\x00', 'latin1');
const GIF89 = Buffer.from('GIF89a\x01\x00\x01\x00', 'latin1');
const WEBP = Buffer.concat([Buffer.from('RIFF'), Buffer.from([26, 0, 0, 0]), Buffer.from('WEBPVP8 ')]);

/** A PNG header padded to `bytes`: enough for the sniffer, which reads leading bytes only. */
function pngOf(bytes: number): Buffer {
  const out = Buffer.alloc(bytes);
  PNG.copy(out);
  return out;
}

function refusal(fn: () => unknown): ShoalError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ShoalError, `expected a ShoalError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a refusal');
}

test('each accepted format is told apart by its leading bytes', () => {
  assert.equal(sniffImageType(PNG), 'image/png');
  assert.equal(sniffImageType(JPEG), 'image/jpeg');
  assert.equal(sniffImageType(GIF87), 'image/gif');
  assert.equal(sniffImageType(GIF89), 'image/gif');
  assert.equal(sniffImageType(WEBP), 'image/webp');
  // RIFF that is not WEBP (a WAV file), a truncated PNG magic, a BMP, text, nothing.
  assert.equal(sniffImageType(Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVEfmt ')])), null);
  assert.equal(sniffImageType(PNG.subarray(0, 7)), null);
  assert.equal(sniffImageType(Buffer.from('BM\x00\x00', 'latin1')), null);
  assert.equal(sniffImageType(Buffer.from('hello world')), null);
  assert.equal(sniffImageType(new Uint8Array()), null);
});

test('base64 decodes to a TaskImage typed by its bytes, in canonical base64', () => {
  for (const [bytes, type] of [[PNG, 'image/png'], [JPEG, 'image/jpeg'], [GIF89, 'image/gif'], [WEBP, 'image/webp']] as const) {
    const image = decodeBase64Image(bytes.toString('base64'), 'p');
    assert.deepEqual(image, { mediaType: type, data: bytes.toString('base64') });
    TaskImage.parse(image);
  }
  // MIME line breaks and missing padding are spellings of the same bytes.
  const b64 = JPEG.toString('base64');
  assert.equal(decodeBase64Image(`${b64.slice(0, 4)}\r\n${b64.slice(4)}`, 'p').data, b64);
  assert.equal(decodeBase64Image(b64.replace(/=+$/, ''), 'p').data, b64);
});

test('data that is not base64, or not an image, is a BAD_REQUEST naming the field', () => {
  for (const data of ['', '   ', 'iVBO*w0KGgo=', 'a', 'aGk=aGk=', 'aG=']) {
    const error = refusal(() => decodeBase64Image(data, 'messages[0].images[0]'));
    assert.equal(error.code, 'BAD_REQUEST', data);
    assert.equal(error.param, 'messages[0].images[0]');
    assert.match(error.message, /not an image: 'messages\[0\]\.images\[0\]'/);
  }
  const text = refusal(() => decodeBase64Image(Buffer.from('hi there').toString('base64'), 'images[0]'));
  assert.equal(text.code, 'BAD_REQUEST');
  assert.match(text.message, /not PNG, JPEG, GIF or WEBP data \(its first bytes are 68 69 20 74/);
});

test('an image over MAX_IMAGE_BYTES is PAYLOAD_TOO_LARGE, before and after whitespace', () => {
  assert.equal(decodeBase64Image(pngOf(MAX_IMAGE_BYTES).toString('base64'), 'p').mediaType, 'image/png');
  const over = refusal(() => decodeBase64Image(pngOf(MAX_IMAGE_BYTES + 1).toString('base64'), 'images[2]'));
  assert.equal(over.code, 'PAYLOAD_TOO_LARGE');
  assert.equal(over.param, 'images[2]');
  assert.match(over.message, /over the 8\.0 MiB limit per image/);
  // Far over: refused on its length alone.
  assert.equal(refusal(() => decodeBase64Image('A'.repeat(MAX_IMAGE_BYTES * 3), 'p')).code, 'PAYLOAD_TOO_LARGE');
});

test('data URLs: base64 ones are read; remote, other schemes and non-base64 ones are refused with what to send', () => {
  const url = `data:image/png;base64,${PNG.toString('base64')}`;
  assert.deepEqual(decodeImageUrl(url, 'u'), { mediaType: 'image/png', data: PNG.toString('base64') });
  // The bytes decide: a JPEG declared as PNG is a JPEG; an undeclared type and extra parameters are fine.
  assert.equal(decodeImageUrl(`data:image/png;base64,${JPEG.toString('base64')}`, 'u').mediaType, 'image/jpeg');
  assert.equal(decodeImageUrl(`DATA:;charset=binary;BASE64,${GIF89.toString('base64')}`, 'u').mediaType, 'image/gif');

  const remote = refusal(() => decodeImageUrl('https://example.com/cat.png', 'messages[0].content[1].image_url.url'));
  assert.equal(remote.code, 'BAD_REQUEST');
  assert.equal(remote.param, 'messages[0].content[1].image_url.url');
  assert.match(remote.message, /https URL: Shoal does not fetch remote images; send the image inline as a data URL/);
  assert.match(refusal(() => decodeImageUrl('http://example.com/cat.png', 'u')).message, /http URL/);
  assert.match(refusal(() => decodeImageUrl('file:///etc/passwd', 'u')).message, /must be a data URL/);
  assert.match(refusal(() => decodeImageUrl('iVBORw0KGgo=', 'u')).message, /must be a data URL/);
  assert.match(refusal(() => decodeImageUrl('data:image/png,%89PNG', 'u')).message, /without ';base64'/);
  assert.match(refusal(() => decodeImageUrl(`data:text/plain;base64,${PNG.toString('base64')}`, 'u')).message, /not an image: 'u' is declared as 'text\/plain'/);
  assert.match(refusal(() => decodeImageUrl(`data:image/png;base64,${Buffer.from('GIF8').toString('base64')}`, 'u')).message, /not an image/);
});

test('the intake bounds a task: MAX_TASK_IMAGES images, MAX_TASK_IMAGE_BYTES bytes, naming the image that crossed', () => {
  const small = PNG.toString('base64');
  const intake = new ImageIntake();
  for (let i = 0; i < MAX_TASK_IMAGES; i++) intake.base64(small, `images[${i}]`);
  const many = refusal(() => intake.base64(small, `images[${MAX_TASK_IMAGES}]`));
  assert.equal(many.code, 'BAD_REQUEST');
  assert.equal(many.param, `images[${MAX_TASK_IMAGES}]`);
  assert.match(many.message, /at most 16 images/);

  const big = pngOf(MAX_IMAGE_BYTES).toString('base64');
  const bytes = new ImageIntake();
  bytes.base64(big, 'a');
  const total = refusal(() => bytes.url(`data:image/png;base64,${pngOf(MAX_TASK_IMAGE_BYTES - MAX_IMAGE_BYTES + 1).toString('base64')}`, 'b'));
  assert.equal(total.code, 'PAYLOAD_TOO_LARGE');
  assert.equal(total.param, 'b');
  assert.match(total.message, /over the 12\.0 MiB limit per request/);
  // Exactly at the limit is fine.
  new ImageIntake().admit({ mediaType: 'image/png', data: big }, 'a');
  const exact = new ImageIntake([{ mediaType: 'image/png', data: big }]);
  exact.base64(pngOf(MAX_TASK_IMAGE_BYTES - MAX_IMAGE_BYTES).toString('base64'), 'c');
  // Images a task already holds count too.
  const seeded = new ImageIntake(Array.from({ length: MAX_TASK_IMAGES }, () => ({ mediaType: 'image/png' as const, data: small })));
  assert.equal(refusal(() => seeded.base64(small, 'input[0].content[0].image_url')).param, 'input[0].content[0].image_url');
});
