import type { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import { formatPath } from '../common/format-path.js';

/** Parses a request body, turning the first problem into a BAD_REQUEST/UNSUPPORTED_PARAMETER that names the field. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ShoalError('BAD_REQUEST', 'the request body must be a JSON object');
  }
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    const param = formatPath([...issue.path, key]);
    throw new ShoalError('UNSUPPORTED_PARAMETER', `unsupported parameter '${param}': Shoal does not implement it (see docs/API.md)`, { param });
  }
  const param = formatPath(issue.path);
  const where = param === '' ? 'request body' : `'${param}'`;
  throw new ShoalError('BAD_REQUEST', `invalid ${where}: ${issue.message}`, { param: param === '' ? null : param });
}
