import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IMAGE_MEDIA_TYPES, MAX_IMAGE_BYTES as NODE_MAX_IMAGE_BYTES, MAX_TASK_IMAGE_BYTES, MAX_TASK_IMAGES } from '../../../src/wire/task.js';
import { checkImageFile, dataUrlBytes, IMAGE_TYPES, imageBudget, imageSupport, MAX_IMAGE_BYTES, MAX_REQUEST_IMAGE_BYTES, MAX_REQUEST_IMAGES, messageContent, sniffDataUrl } from './images.js';

const MiB = 1024 * 1024;
const PNG_HEAD = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
const dataUrl = (bytes: Buffer, type = 'image/png'): string => `data:${type};base64,${bytes.toString('base64')}`;

test('the limits are the node\'s own (docs/LIMITS.md)', () => {
  assert.equal(MAX_IMAGE_BYTES, NODE_MAX_IMAGE_BYTES);
  assert.equal(MAX_REQUEST_IMAGES, MAX_TASK_IMAGES);
  assert.equal(MAX_REQUEST_IMAGE_BYTES, MAX_TASK_IMAGE_BYTES);
  assert.deepEqual([...IMAGE_TYPES].sort(), [...IMAGE_MEDIA_TYPES].sort());
});

test('the attach control is on only for a model whose card says vision, with the reason when off', () => {
  const cards = [
    { id: 'shoal/tiny', capabilities: { vision: false } },
    { id: 'shoal/tiny-vision', capabilities: { vision: true } },
    { id: 'store/x', capabilities: null },
  ];
  assert.equal(imageSupport('shoal/tiny-vision', cards).enabled, true);
  const text = imageSupport('shoal/tiny', cards);
  assert.equal(text.enabled, false);
  assert.match(text.reason, /shoal\/tiny is not a vision model/);
  assert.equal(imageSupport('store/x', cards).enabled, false);
  assert.match(imageSupport('gone', cards).reason, /no model card/);
  assert.match(imageSupport('shoal/tiny-vision', null).reason, /Cannot tell/);
  assert.equal(imageSupport('', cards).enabled, false);
});

test('a file is checked for its type, its size and what the conversation already carries', () => {
  const empty = { count: 0, bytes: 0 };
  assert.equal(checkImageFile({ name: 'a.png', type: 'image/png', size: 1000 }, empty), null);
  assert.equal(checkImageFile({ name: 'a.WEBP', type: 'image/webp', size: 1000 }, empty), null);
  assert.match(checkImageFile({ name: 'a.bmp', type: 'image/bmp', size: 1000 }, empty) ?? '', /'a\.bmp' is image\/bmp: only PNG, JPEG, GIF or WEBP/);
  assert.match(checkImageFile({ name: 'notes', type: '', size: 1000 }, empty) ?? '', /not a known image type/);
  assert.match(checkImageFile({ name: '', type: 'image/png', size: 0 }, empty) ?? '', /the pasted image is empty/);
  assert.equal(checkImageFile({ name: 'big.jpg', type: 'image/jpeg', size: 8 * MiB }, empty), null, 'exactly the limit is allowed');
  assert.match(checkImageFile({ name: 'big.jpg', type: 'image/jpeg', size: 8 * MiB + 1 }, empty) ?? '', /8\.0 MiB, over the 8\.0 MiB limit per image/);
  assert.match(checkImageFile({ name: 'a.png', type: 'image/png', size: 10 }, { count: 16, bytes: 100 }) ?? '', /image 17 .* at most 16 images/);
  assert.equal(checkImageFile({ name: 'a.png', type: 'image/png', size: 10 }, { count: 15, bytes: 100 }), null);
  assert.match(checkImageFile({ name: 'a.png', type: 'image/png', size: 5 * MiB }, { count: 2, bytes: 8 * MiB }) ?? '', /13\.0 MiB, over the 12\.0 MiB a request may carry/);
});

test('data URLs: decoded size, and the format their bytes are', () => {
  assert.equal(dataUrlBytes(dataUrl(Buffer.alloc(10))), 10);
  assert.equal(dataUrlBytes(dataUrl(Buffer.alloc(11))), 11);
  assert.equal(dataUrlBytes(dataUrl(Buffer.alloc(12))), 12);
  assert.equal(dataUrlBytes('data:text/plain,hello'), 0, 'not base64');
  assert.deepEqual(imageBudget([dataUrl(Buffer.alloc(10)), dataUrl(Buffer.alloc(20))]), { count: 2, bytes: 30 });

  assert.equal(sniffDataUrl(dataUrl(PNG_HEAD)), 'image/png');
  assert.equal(sniffDataUrl(dataUrl(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]), 'image/jpeg')), 'image/jpeg');
  assert.equal(sniffDataUrl(dataUrl(Buffer.from('GIF89a\x01\x00\x01\x00', 'latin1'), 'image/gif')), 'image/gif');
  assert.equal(sniffDataUrl(dataUrl(Buffer.from('RIFF\x24\x00\x00\x00WEBPVP8 ', 'latin1'), 'image/webp')), 'image/webp');
  assert.equal(sniffDataUrl(dataUrl(Buffer.from('just some text here'), 'image/png')), null, 'a .png that is not one');
  assert.equal(sniffDataUrl('data:image/png;base64,'), null);
  assert.equal(sniffDataUrl('data:image/png,raw'), null);
});

test('message content: text alone, or the text and each image as an OpenAI image_url part', () => {
  assert.equal(messageContent('hello'), 'hello');
  assert.equal(messageContent('hello', []), 'hello');
  const a = dataUrl(PNG_HEAD);
  assert.deepEqual(messageContent('what is this?', [a, a]), [
    { type: 'text', text: 'what is this?' },
    { type: 'image_url', image_url: { url: a } },
    { type: 'image_url', image_url: { url: a } },
  ]);
  assert.deepEqual(messageContent('', [a]), [{ type: 'image_url', image_url: { url: a } }], 'an image without text');
});
