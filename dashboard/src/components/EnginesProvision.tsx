// This node's llama-server / ggml-rpc-server as it gets them (`/state`'s `engines`): the download or
// build in the background with its progress, and what to install or run when the node cannot.

import type { ReactNode } from 'react';
import { enginesSummary } from '../lib/engines.js';
import type { StateView } from '../lib/types.js';

export function EnginesProvision({ state }: { state: StateView }): ReactNode {
  const view = state.engines;
  if (!view) return null;
  const summary = enginesSummary(view);
  if (!summary.show) return null;
  return (
    <section className="card" aria-labelledby="engines-title" data-engines-phase={view.phase}>
      <div className="card-head">
        <h2 id="engines-title">Fast engine (llama-server)</h2>
        <span className={`badge tone-${summary.tone}`}>{summary.badge}</span>
      </div>
      {summary.percent !== null && (
        <div className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={summary.percent} aria-label="Engine provisioning">
          <div className="progress-fill" style={{ width: `${summary.percent}%` }} />
          <span className="progress-text">{summary.percent}%</span>
        </div>
      )}
      <p className="muted small" data-engines-message>
        {view.message}
      </p>
      {view.remediation && (
        <p className="small" data-engines-remediation>
          <code>{view.remediation}</code>
        </p>
      )}
    </section>
  );
}
