import { ShoalError } from '../common/errors.js';
import {
  IMAGE_MEDIA_TYPES,
  MAX_IMAGE_BASE64_CHARS,
  MAX_IMAGE_BYTES,
  MAX_TASK_IMAGE_BYTES,
  MAX_TASK_IMAGES,
  type ImageMediaType,
  type TaskImage,
} from '../wire/task.js';

/**
 * Image intake for every API family: base64 or a data URL in, a sniffed and bounded `TaskImage` out.
 * Pure: no I/O, so remote URLs are refused here rather than fetched.
 */

/**
 * Largest body of a route that carries images (OpenAI chat and Responses, Anthropic messages and
 * count_tokens, Ollama chat and generate): MAX_TASK_IMAGE_BYTES as base64 (16 MiB) plus the 4 MiB
 * every other route allows for text.
 */
export const IMAGE_ROUTE_MAX_BODY_BYTES = 20 * 1024 * 1024;

/** Leading bytes of each accepted format; WEBP is `RIFF????WEBP`, checked in `sniffImageType`. */
const MAGIC: readonly { type: ImageMediaType; bytes: readonly number[] }[] = [
  { type: 'image/png', bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { type: 'image/jpeg', bytes: [0xff, 0xd8, 0xff] },
  { type: 'image/gif', bytes: [...'GIF87a'].map((c) => c.charCodeAt(0)) },
  { type: 'image/gif', bytes: [...'GIF89a'].map((c) => c.charCodeAt(0)) },
];
const ASCII = (text: string): number[] => [...text].map((c) => c.charCodeAt(0));
const RIFF = ASCII('RIFF');
const WEBP = ASCII('WEBP');

const startsWith = (data: Uint8Array, bytes: readonly number[], at = 0): boolean => data.length >= at + bytes.length && bytes.every((b, i) => data[at + i] === b);

/** The format the bytes are, from their leading bytes; null for anything but PNG, JPEG, GIF and WEBP. */
export function sniffImageType(data: Uint8Array): ImageMediaType | null {
  for (const magic of MAGIC) if (startsWith(data, magic.bytes)) return magic.type;
  if (startsWith(data, RIFF) && startsWith(data, WEBP, 8)) return 'image/webp';
  return null;
}

const FORMATS = 'PNG, JPEG, GIF or WEBP';
/** Standard base64, padded or not; whitespace (MIME line breaks) is removed first. */
const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

function notAnImage(param: string, why: string): ShoalError {
  return new ShoalError('BAD_REQUEST', `not an image: '${param}' ${why}; send a ${FORMATS} image as base64`, { param });
}

/** Decoded size of base64 text without whitespace, padded or not. */
function decodedBytes(base64: string): number {
  const padding = base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0;
  return Math.floor((base64.length * 3) / 4) - padding;
}

/**
 * One base64 image (no data URL prefix) as a TaskImage. Its type comes from its bytes, never from
 * what the client declared. Over MAX_IMAGE_BYTES: PAYLOAD_TOO_LARGE; not base64 or not an image: BAD_REQUEST.
 */
export function decodeBase64Image(data: string, param: string): TaskImage {
  // A cheap bound before the whitespace pass copies anything: line breaks add at most 1 in 2 characters.
  if (data.length > MAX_IMAGE_BASE64_CHARS * 2) throw tooLarge(param, Math.floor((data.length * 3) / 4));
  const base64 = data.replace(/\s+/g, '');
  if (base64.length === 0) throw notAnImage(param, 'is empty');
  if (!BASE64_RE.test(base64) || base64.length % 4 === 1 || (base64.endsWith('=') && base64.length % 4 !== 0)) throw notAnImage(param, 'is not valid base64 (standard alphabet A-Z a-z 0-9 + /, optional = padding)');
  const bytes = decodedBytes(base64);
  if (bytes > MAX_IMAGE_BYTES) throw tooLarge(param, bytes);
  const decoded = Buffer.from(base64, 'base64');
  const mediaType = sniffImageType(decoded);
  if (mediaType === null) {
    const head = [...decoded.subarray(0, 8)].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    throw notAnImage(param, `is not ${FORMATS} data (its first bytes are ${head === '' ? 'none' : head})`);
  }
  // Re-encoded, so what travels is canonical padded base64 whatever spelling the client used.
  return { mediaType, data: decoded.toString('base64') };
}

function tooLarge(param: string, bytes: number): ShoalError {
  return new ShoalError('PAYLOAD_TOO_LARGE', `the image at '${param}' is ${mib(bytes)} decoded, over the ${mib(MAX_IMAGE_BYTES)} limit per image: scale it down or compress it (see docs/LIMITS.md)`, { param });
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

const DATA_URL_RE = /^data:([^,]*),/i;

/**
 * An image URL as OpenAI clients send it. Only `data:` URLs with base64 data are read: fetching
 * http(s) URLs would let any API caller make the node issue requests, so it is left to a later,
 * explicit option.
 */
export function decodeImageUrl(url: string, param: string): TaskImage {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme === 'http' || scheme === 'https') {
    throw new ShoalError('BAD_REQUEST', `'${param}' is an ${scheme} URL: Shoal does not fetch remote images; send the image inline as a data URL (data:image/png;base64,...)`, { param });
  }
  const header = DATA_URL_RE.exec(url.slice(0, 256));
  if (scheme !== 'data' || header === null) {
    throw new ShoalError('BAD_REQUEST', `'${param}' must be a data URL (data:image/png;base64,...): other URL schemes are not supported`, { param });
  }
  const parameters = header[1]!.split(';').map((p) => p.trim().toLowerCase());
  if (!parameters.slice(1).includes('base64')) {
    throw new ShoalError('BAD_REQUEST', `'${param}' is a data URL without ';base64': send the image base64-encoded (data:image/png;base64,...)`, { param });
  }
  const declared = parameters[0] ?? '';
  if (declared !== '' && !declared.startsWith('image/')) throw notAnImage(param, `is declared as '${declared}'`);
  return decodeBase64Image(url.slice(header[0].length), param);
}

/** Whether a declared media type is one Shoal reads (Anthropic's `media_type` names one of these). */
export function isImageMediaType(type: string): type is ImageMediaType {
  return (IMAGE_MEDIA_TYPES as readonly string[]).includes(type);
}

/**
 * Counts a task's images as a family takes them, so the task-wide limits name the image that
 * crossed them. Seed it with images the task already holds (a stored Responses conversation).
 */
export class ImageIntake {
  private count = 0;
  private bytes = 0;

  constructor(existing: readonly TaskImage[] = []) {
    for (const image of existing) this.admit(image, 'previous_response_id');
  }

  /** Adds a decoded image; over MAX_TASK_IMAGES: BAD_REQUEST, over MAX_TASK_IMAGE_BYTES: PAYLOAD_TOO_LARGE. */
  admit(image: TaskImage, param: string): TaskImage {
    this.count += 1;
    this.bytes += decodedBytes(image.data);
    if (this.count > MAX_TASK_IMAGES) {
      throw new ShoalError('BAD_REQUEST', `'${param}' is image ${this.count} of the request; at most ${MAX_TASK_IMAGES} images are supported per request: send fewer`, { param });
    }
    if (this.bytes > MAX_TASK_IMAGE_BYTES) {
      throw new ShoalError('PAYLOAD_TOO_LARGE', `with '${param}' the request's images are ${mib(this.bytes)} decoded, over the ${mib(MAX_TASK_IMAGE_BYTES)} limit per request: send fewer or smaller images (see docs/LIMITS.md)`, {
        param,
      });
    }
    return image;
  }

  base64(data: string, param: string): TaskImage {
    return this.admit(decodeBase64Image(data, param), param);
  }

  url(url: string, param: string): TaskImage {
    return this.admit(decodeImageUrl(url, param), param);
  }
}
