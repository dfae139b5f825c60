import { ShoalError } from '../common/errors.js';
import { ModelsError, type ModelsErrorReason } from './hub/errors.js';
import type { NodeRemoval } from './views.js';

/**
 * A cluster-wide removal that removed nothing anywhere. Its code, message and `reason` are those of
 * why (this node's own error when it had one, else a member's refusal or NOT_FOUND), kept as `cause`;
 * `nodes` says what each member did, and the API answers it beside the error.
 */
export class ClusterRemoveError extends ShoalError {
  /** The models reason of why, when it was a models failure (a member's MODEL_IN_USE answers 409). */
  readonly reason: ModelsErrorReason | null;
  readonly nodes: NodeRemoval[];

  constructor(why: ShoalError, nodes: NodeRemoval[]) {
    super(why.code, why.message, { cause: why });
    this.name = 'ClusterRemoveError';
    this.reason = why instanceof ModelsError ? why.reason : null;
    this.nodes = nodes;
  }
}
