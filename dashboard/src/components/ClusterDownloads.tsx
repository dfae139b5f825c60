// Downloads as the whole cluster sees them (`/state`'s `downloads`, from the telemetry plane): each
// member's in-progress and recently failed downloads with progress, rate, source and error; and the
// "Download it there?" prompt of an instance that waits for the approval of its downloads.

import type { ReactNode } from 'react';
import type { DownloadReportView, InstanceView } from '../../../src/api/control/control.js';
import type { DownloadsPlan } from '../../../src/placement/downloads.js';
import { api } from '../api.js';
import { formatBytes } from '../lib/format.js';
import { useLive, useNodeNames } from '../live.js';
import type { StateView } from '../lib/types.js';
import { ProgressBar } from './Bits.js';
import { ActionButton } from './Modal.js';

const DOWNLOAD_WORDS: Record<DownloadReportView['state'], string> = { resolving: 'Finding a source', downloading: 'Downloading', failed: 'Failed', cancelled: 'Cancelled' };
const DOWNLOAD_TONES: Record<DownloadReportView['state'], string> = { resolving: 'warn', downloading: 'warn', failed: 'bad', cancelled: 'muted' };

function sourceWords(source: DownloadReportView['source'], name: (nodeId: string) => string): string {
  if (source === null) return 'finding a source';
  if (source.kind === 'peer') return `from ${source.name ?? name(source.nodeId)}`;
  return source.kind === 'hub' ? 'from the hub' : 'from this disk';
}

/** One member's download: progress, rate, where from, and why it failed. */
export function DownloadReportRow({ nodeId, report }: { nodeId: string; report: DownloadReportView }): ReactNode {
  const name = useNodeNames();
  const running = report.state === 'downloading' || report.state === 'resolving';
  return (
    <div className="row" data-cluster-download={report.id} data-download-node={nodeId} data-download-state={report.state}>
      <div className="row-main">
        <div className="row-title">
          <strong>{report.modelId}</strong> <span className="muted small">on {name(nodeId)}</span>{' '}
          <span className={`badge tone-${DOWNLOAD_TONES[report.state]}`} title={report.error?.message}>
            {DOWNLOAD_WORDS[report.state]}
          </span>
        </div>
        {running && <ProgressBar done={report.doneBytes} total={report.totalBytes} label={`Download of ${report.modelId} on ${name(nodeId)}`} />}
        <div className="muted small" data-download-detail>
          {running && report.bytesPerSecond > 0 ? `${formatBytes(report.bytesPerSecond)}/s · ` : ''}
          {sourceWords(report.source, name)}
          {report.error ? ` · ${report.error.message}` : ''}
        </div>
      </div>
    </div>
  );
}

/** Every member's downloads; nothing when no member downloads anything. */
export function ClusterDownloads({ state }: { state: StateView }): ReactNode {
  const rows = Object.entries(state.downloads).flatMap(([nodeId, view]) => view.downloads.map((report) => ({ nodeId, report })));
  if (rows.length === 0) return null;
  return (
    <section className="card" aria-labelledby="cluster-dl-title">
      <h2 id="cluster-dl-title">Downloads on the members</h2>
      <div className="rows">
        {rows.map(({ nodeId, report }) => (
          <DownloadReportRow key={`${nodeId}-${report.id}`} nodeId={nodeId} report={report} />
        ))}
      </div>
    </section>
  );
}

/** "Download it there?" with the size: approving lets the instance's nodes start their downloads. */
export function ApprovalPrompt({ instance }: { instance: InstanceView }): ReactNode {
  const { refresh } = useLive();
  const name = useNodeNames();
  const pending = instance.awaitingApproval;
  if (pending === null) return null;
  const total = pending.reduce((sum, d) => sum + d.bytes, 0);
  return (
    <div className="approval attention" data-approval={instance.instanceId}>
      <p>
        Download it there? <strong>{formatBytes(total)}</strong> onto {pending.map((d) => `${d.name ?? name(d.nodeId)} (${formatBytes(d.bytes)} from ${d.source === 'peer' ? 'a member' : 'the hub'})`).join(', ')}. Nothing starts until you approve.
      </p>
      <ActionButton
        className="primary"
        action={async () => {
          await api('POST', `instance/${encodeURIComponent(instance.instanceId)}/approve`, {});
          await refresh();
        }}
        done={`Downloading ${instance.modelId}`}
      >
        Download
      </ActionButton>
    </div>
  );
}

/** The downloads a launch preview would start, those over the cluster's threshold marked. */
export function PlannedDownloads({ downloads }: { downloads: DownloadsPlan }): ReactNode {
  if (downloads.downloads.length === 0) return null;
  return (
    <div className="planned-downloads" data-needs-approval={downloads.needsApproval ? 'yes' : 'no'}>
      <h4>Downloads</h4>
      <ul>
        {downloads.downloads.map((d) => (
          <li key={d.nodeId}>
            {formatBytes(d.bytes)} onto {d.name ?? d.nodeId.slice(-8)} from {d.source === 'peer' ? 'a member' : 'the hub'}
            {d.needsApproval ? <strong> · over {formatBytes(downloads.approvalBytes)}: waits for your approval after launch</strong> : ''}
          </li>
        ))}
      </ul>
    </div>
  );
}
