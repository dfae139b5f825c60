// What the node's API returns, as the dashboard reads it: the node's own view types, imported as types
// only (the bundle gets none of that code, esbuild erases these imports), so that a field the node
// renames or drops fails the dashboard's type check instead of rendering as nothing. The node serves
// the page it was built with, so its types and the page's always match.

import type { StatusView } from '../../../src/api/control/control.js';
import type { ResourcesView } from '../../../src/cluster/telemetry.js';
import type { InstanceStatus } from '../../../src/worker/worker.js';

export type { EnginesProvisionView, InstanceView, MemberView, NodeHealth } from '../../../src/api/control/control.js';
export type { DownloadListView, DownloadView, ModelListView, ModelView, SearchResultView } from '../../../src/models/views.js';
export type { PlacementError as PlacementErrorView } from '../../../src/placement/errors.js';
export type { Plan as PlanView } from '../../../src/placement/plan.js';
export type {
  Attributes,
  ClusterDiagnostics,
  EnvelopePoint,
  MemberDiagnostics,
  NodeDiagnostics,
  PerformanceEnvelope,
  PerformanceView,
  RunnerDiagnostics,
  RunnerEntry,
  Span,
  Timeline,
  TimelineEntry,
  Trace,
  TraceSummary,
} from '../../../src/wire/diagnostics.js';

/** One node's latest resources reading (`/state`'s `resources`), with its age. */
export type NodeResources = ResourcesView;

/** One of this node's own runners (`/state`'s `models`): its default model and its parts of cluster instances. */
export type LocalModelView = InstanceStatus;

/**
 * `GET /state` and the `state` event. The control API's port leaves `models` and `resources` opaque
 * (src/api knows no worker or telemetry types); these are what the node puts there
 * (src/node/control.ts: `worker.status()` and `telemetry.resourcesView()`).
 */
export interface StateView extends Omit<StatusView, 'models' | 'resources'> {
  models: LocalModelView[];
  resources: Record<string, NodeResources>;
}
