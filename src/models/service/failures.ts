// How the models service words its failures for an operator: an unreachable hub names the endpoint
// and what to do, a failed download says why the members that hold the model could not give it, a
// member's refusal keeps its reason. Pure.

import { ShoalError, toShoalError, errorMessage } from '../../common/errors.js';
import { knownErrorCode } from '../../router/errors.js';
import { isModelsError, ModelsError, MODELS_ERROR_CODE, type ModelsErrorReason } from '../hub/errors.js';
import type { FailureView, NodeRemoval } from '../views.js';

/** The message of the innermost cause (a few levels down at most): what the network really said. */
export function rootCause(error: unknown): string {
  let e: unknown = error;
  for (let depth = 0; depth < 6; depth += 1) {
    const next = e instanceof Error ? e.cause : undefined;
    if (next === undefined || next === null) break;
    e = next;
  }
  return errorMessage(e);
}

export function hubUnreachable(endpoint: string, why: string, cause?: unknown): ModelsError {
  return new ModelsError('HUB_UNREACHABLE', `the model hub at ${endpoint} cannot be reached (${why}): check the network or set SHOAL_HF_ENDPOINT`, {
    cause,
    details: { endpoint },
  });
}

/** Rewords a hub failure for an operator: an unreachable hub names the endpoint (`configured` when the error does not) and what to do. */
export function friendlyHubError(error: unknown, configured: string | undefined): ShoalError {
  if (isModelsError(error, 'HUB_UNREACHABLE') && !error.message.startsWith('the model hub at ')) {
    const endpoint = typeof error.details.endpoint === 'string' ? error.details.endpoint : configured ?? 'the configured endpoint';
    return hubUnreachable(endpoint, rootCause(error), error);
  }
  return toShoalError(error);
}

/** A failed download's error, saying too why the members that hold the model could not give it. */
export function withPeerFailures(error: ShoalError, failures: readonly { name: string; message: string }[]): ShoalError {
  if (failures.length === 0) return error;
  const message = `${error.message}; copying from the members that hold it failed too (${failures.map((f) => `${f.name}: ${f.message}`).join('; ')})`;
  if (error instanceof ModelsError) return new ModelsError(error.reason, message, { cause: error, details: { ...error.details } });
  return new ShoalError(error.code, message, { cause: error });
}

/** A member's refusal as the error this node answers with, its reason (MODEL_IN_USE → 409) kept. */
export function remoteError(node: NodeRemoval): ShoalError {
  const error = node.error as NonNullable<NodeRemoval['error']>;
  const message = `${node.name} refused: ${error.message}`;
  if (error.reason !== null && error.reason in MODELS_ERROR_CODE) return new ModelsError(error.reason as ModelsErrorReason, message);
  return new ShoalError(knownErrorCode(error.code), message);
}

export function failureView(error: ShoalError): FailureView {
  return { code: error.code, reason: error instanceof ModelsError ? error.reason : null, message: error.message };
}
