import { randomUUID } from 'node:crypto';
import { z } from 'zod';

export const InstanceId = z.string().min(1).max(64).brand<'InstanceId'>();
export type InstanceId = z.infer<typeof InstanceId>;

export const ModelId = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*(:[A-Za-z0-9._-]+)?$/, 'a model id looks like "owner/name"')
  .brand<'ModelId'>();
export type ModelId = z.infer<typeof ModelId>;

export function newInstanceId(): InstanceId {
  return `inst-${randomUUID().slice(0, 8)}` as InstanceId;
}
