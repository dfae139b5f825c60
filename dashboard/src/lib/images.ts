// Images in the chat page: which models take them, the limits checked before anything is sent (the
// node's, docs/LIMITS.md: src/wire/task.ts and src/api/images.ts; images.test.ts checks they match),
// and the OpenAI message content that carries them as data URLs.

/** Images one request may carry, over all its messages (MAX_TASK_IMAGES). */
export const MAX_REQUEST_IMAGES = 16;
/** Decoded bytes of one image (MAX_IMAGE_BYTES). */
export const MAX_IMAGE_BYTES = 8 * 1024 * 1024;
/** Decoded bytes of all of a request's images together (MAX_TASK_IMAGE_BYTES). */
export const MAX_REQUEST_IMAGE_BYTES = 12 * 1024 * 1024;
/** The formats the node reads (IMAGE_MEDIA_TYPES); it tells them apart by their bytes. */
export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
/** For the file picker's `accept`. */
export const IMAGE_ACCEPT = IMAGE_TYPES.join(',');

const FORMATS = 'PNG, JPEG, GIF or WEBP';

export function formatMiB(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** What the page knows of a model's card (GET /models), enough to say whether it takes images. */
export interface CardHint {
  id: string;
  capabilities: { vision: boolean } | null;
}

/** Whether the attach control is on for `model`, and why not when it is off (the control's tooltip). */
export function imageSupport(model: string, cards: readonly CardHint[] | null): { enabled: boolean; reason: string } {
  if (model === '') return { enabled: false, reason: 'Pick a model first' };
  if (cards === null) return { enabled: false, reason: `Cannot tell whether ${model} reads images: the node's model list (GET /models) is not readable from this page` };
  const card = cards.find((c) => c.id === model);
  if (!card) return { enabled: false, reason: `Cannot tell whether ${model} reads images: it has no model card on this node` };
  if (card.capabilities?.vision !== true) return { enabled: false, reason: `${model} is not a vision model: it does not read images` };
  return { enabled: true, reason: `Attach images (${FORMATS}, up to ${formatMiB(MAX_IMAGE_BYTES)} each)` };
}

/** The part of a File the checks read. */
export interface FileFacts {
  name: string;
  type: string;
  size: number;
}

/** Images already in the request: the conversation's and those attached so far. */
export interface ImageBudget {
  count: number;
  bytes: number;
}

/**
 * Why `file` cannot be attached next to `budget`, or null when it can. The declared type is the
 * browser's guess from the name; `sniffDataUrl` checks the bytes once they are read.
 */
export function checkImageFile(file: FileFacts, budget: ImageBudget): string | null {
  const name = file.name === '' ? 'the pasted image' : `'${file.name}'`;
  if (!(IMAGE_TYPES as readonly string[]).includes(file.type.toLowerCase())) {
    return `${name} is ${file.type === '' ? 'not a known image type' : file.type}: only ${FORMATS} images can be sent`;
  }
  if (file.size === 0) return `${name} is empty`;
  if (file.size > MAX_IMAGE_BYTES) return `${name} is ${formatMiB(file.size)}, over the ${formatMiB(MAX_IMAGE_BYTES)} limit per image: scale it down or compress it`;
  if (budget.count + 1 > MAX_REQUEST_IMAGES) return `${name} would be image ${budget.count + 1} of this conversation: a request carries at most ${MAX_REQUEST_IMAGES} images (start a new chat for more)`;
  if (budget.bytes + file.size > MAX_REQUEST_IMAGE_BYTES) {
    return `${name} would bring this conversation's images to ${formatMiB(budget.bytes + file.size)}, over the ${formatMiB(MAX_REQUEST_IMAGE_BYTES)} a request may carry (start a new chat for more)`;
  }
  return null;
}

const DATA_URL_RE = /^data:([^,;]*)(;[^,]*)?,/i;

function base64Of(dataUrl: string): string | null {
  const header = DATA_URL_RE.exec(dataUrl.slice(0, 256));
  if (!header || !(header[2] ?? '').toLowerCase().split(';').includes('base64')) return null;
  return dataUrl.slice(header[0].length);
}

/** Decoded bytes of a base64 data URL (0 for anything else). */
export function dataUrlBytes(dataUrl: string): number {
  const base64 = base64Of(dataUrl);
  if (base64 === null) return 0;
  const padding = base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((base64.length * 3) / 4) - padding);
}

/** The budget the images of a conversation take. */
export function imageBudget(images: readonly string[]): ImageBudget {
  return { count: images.length, bytes: images.reduce((sum, url) => sum + dataUrlBytes(url), 0) };
}

/** The first bytes of base64 data (16 characters are 12 bytes), none when they do not decode. */
function leadingBytes(base64: string): number[] {
  try {
    return [...atob(base64.slice(0, 16))].map((c) => c.charCodeAt(0));
  } catch {
    return [];
  }
}

/** The format a base64 data URL's bytes are (as the node tells them apart), or null for none it reads. */
export function sniffDataUrl(dataUrl: string): (typeof IMAGE_TYPES)[number] | null {
  const base64 = base64Of(dataUrl);
  if (base64 === null) return null;
  const b = leadingBytes(base64);
  const is = (bytes: number[], at = 0): boolean => bytes.every((x, i) => b[at + i] === x);
  const ascii = (text: string): number[] => [...text].map((c) => c.charCodeAt(0));
  if (is([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (is([0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (is(ascii('GIF87a')) || is(ascii('GIF89a'))) return 'image/gif';
  if (is(ascii('RIFF')) && is(ascii('WEBP'), 8)) return 'image/webp';
  return null;
}

export type ContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

/** An OpenAI chat message's content: the text alone, or the text and then each image as a data-URL part. */
export function messageContent(text: string, images: readonly string[] = []): string | ContentPart[] {
  if (images.length === 0) return text;
  const parts: ContentPart[] = [];
  if (text !== '') parts.push({ type: 'text', text });
  for (const url of images) parts.push({ type: 'image_url', image_url: { url } });
  return parts;
}
