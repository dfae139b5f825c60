import { z } from 'zod';

/**
 * What a node runs of an instance: all of it (`full`), the driver of a pooled split, or one of its donors.
 * It travels in cluster state (placements) and in runner reports on the telemetry plane.
 */
export const InstanceRole = z.enum(['full', 'driver', 'donor']);
export type InstanceRole = z.infer<typeof InstanceRole>;
