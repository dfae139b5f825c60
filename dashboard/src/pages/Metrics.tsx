// Live charts of the node's metrics (sampled every 2 s, 10 minutes kept): tokens/s, requests in flight
// and waiting, time to first token, CPU, memory and GPU; for one node or summed over the cluster.
// The series is read once (GET /metrics/series); then each sample the node pushes for the chosen node
// (`event: metrics` on /events) is added to it.

import { useEffect, useState, type ReactNode } from 'react';
import { errorMessage } from '../../../src/common/errors.js';
import { api } from '../api.js';
import { Empty, ErrorBox } from '../components/Bits.js';
import { LineChart } from '../components/LineChart.js';
import { formatBytes, formatDuration, formatNumber } from '../lib/format.js';
import { routeHash } from '../lib/route.js';
import { appendSample, pointsOf, samplesOf, type MetricsSample, type SeriesView } from '../lib/series.js';
import { useLive } from '../live.js';
import type { StateView } from '../lib/types.js';

const WINDOW_MS = 10 * 60 * 1000;
/** 10 minutes of 2 s samples, as the node keeps. */
const MAX_SAMPLES = 300;
const pct = (v: number): string => `${formatNumber(v, 2)}%`;
/** Milliseconds: "12.5 ms" below a second, then "1.2 s". */
const ms = (v: number): string => (v < 1000 ? `${formatNumber(v)} ms` : formatDuration(v));

export function MetricsPage({ params }: { params: Record<string, string> }): ReactNode {
  const { state, onMetrics } = useLive();
  const node = params.node ?? 'all';
  const [samples, setSamples] = useState<MetricsSample[] | null>(null);
  const [nodes, setNodes] = useState<SeriesView['nodes']>(undefined);
  const [error, setError] = useState<string | null>(null);

  const selfId = state?.nodeId ?? null;
  const alone = (state?.members.length ?? 0) <= 1;

  useEffect(() => {
    setSamples(null);
    const controller = new AbortController();
    api<SeriesView & { maxSamples?: number }>('GET', `metrics/series?node=${encodeURIComponent(node)}`, undefined, controller.signal)
      .then((body) => {
        // Pushes that arrived while the series was on its way are kept.
        setSamples((pushed) => (pushed ?? []).reduce((list, s) => appendSample(list, s, MAX_SAMPLES), samplesOf(body)));
        setNodes(body.nodes);
        setError(null);
      })
      .catch((e: unknown) => {
        if (!controller.signal.aborted) setError(errorMessage(e));
      });
    return () => controller.abort();
  }, [node]);

  useEffect(
    () =>
      onMetrics((push) => {
        // A node alone sends no cluster sum: its own samples are the sum.
        const wanted = push.nodeId === node || (node === 'all' && alone && push.nodeId === selfId);
        if (wanted) setSamples((list) => appendSample(list ?? [], push.sample, MAX_SAMPLES));
      }),
    [onMetrics, node, alone, selfId],
  );

  const members = state?.members.length ? state.members : state ? [{ nodeId: state.nodeId, name: state.name, nickname: null }] : [];
  const list = samples ?? [];
  const x1 = list.at(-1)?.t ?? Date.now();
  const x0 = x1 - WINDOW_MS;
  const hasGpu = list.some((s) => s.gpu !== null);
  const failing = nodes?.filter((n) => !n.ok) ?? [];

  return (
    <div className="page metrics-page">
      <div className="toolbar">
        <label>
          Node
          <select aria-label="Node" value={node} onChange={(e) => (window.location.hash = routeHash('metrics', e.target.value === 'all' ? {} : { node: e.target.value }))}>
            <option value="all">All nodes (sum)</option>
            {members.map((m) => (
              <option key={m.nodeId} value={m.nodeId}>
                {m.nickname ?? m.name}
              </option>
            ))}
          </select>
        </label>
        <span className="muted small">Every 2 s, last 10 minutes{list.length > 0 ? ` · ${list.at(-1)!.nodes} node${list.at(-1)!.nodes === 1 ? '' : 's'} in the newest sample` : ''}</span>
      </div>
      {error && <ErrorBox title="Cannot read the metrics">{error}</ErrorBox>}
      {failing.length > 0 && (
        <ErrorBox title="Some nodes are missing from the sum">
          <ul>
            {failing.map((n) => (
              <li key={n.nodeId}>
                {n.name}: {n.error}
              </li>
            ))}
          </ul>
        </ErrorBox>
      )}
      {samples === null && !error && <Empty>Reading the series…</Empty>}
      {samples !== null && (
        <div className="charts">
          <LineChart title="Generated tokens/s" x0={x0} x1={x1} format={(v) => formatNumber(v)} series={[{ label: 'tokens/s', color: 'var(--c1)', points: pointsOf(list, (s) => s.tokensPerS) }]} />
          <LineChart
            title="Requests"
            x0={x0}
            x1={x1}
            format={(v) => formatNumber(v)}
            series={[
              { label: 'in flight', color: 'var(--c1)', points: pointsOf(list, (s) => s.inFlight) },
              { label: 'waiting', color: 'var(--c3)', points: pointsOf(list, (s) => s.waiting) },
            ]}
          />
          <LineChart
            title="Time to first token (last 5 min)"
            x0={x0}
            x1={x1}
            format={ms}
            series={[
              { label: 'p50', color: 'var(--c1)', points: pointsOf(list, (s) => s.ttftMs.p50) },
              { label: 'p95', color: 'var(--c2)', points: pointsOf(list, (s) => s.ttftMs.p95) },
              { label: 'p99', color: 'var(--c3)', points: pointsOf(list, (s) => s.ttftMs.p99) },
            ]}
          />
          <LineChart title="CPU" x0={x0} x1={x1} format={pct} series={[{ label: 'busy', color: 'var(--c2)', points: pointsOf(list, (s) => s.cpu.pct) }]} />
          <LineChart
            title="Memory"
            x0={x0}
            x1={x1}
            bytes
            format={(v) => formatBytes(v)}
            series={[
              { label: 'used', color: 'var(--c1)', points: pointsOf(list, (s) => s.memory.usedBytes) },
              { label: 'total', color: 'var(--muted)', points: pointsOf(list, (s) => s.memory.totalBytes) },
            ]}
          />
          {hasGpu ? (
            <>
              <LineChart title="GPU use" x0={x0} x1={x1} format={pct} series={[{ label: 'utilization', color: 'var(--c4)', points: pointsOf(list, (s) => s.gpu?.utilPct ?? null) }]} />
              <LineChart
                title="GPU memory"
                x0={x0}
                x1={x1}
                bytes
                format={(v) => formatBytes(v)}
                series={[
                  { label: 'used', color: 'var(--c4)', points: pointsOf(list, (s) => s.gpu?.usedBytes ?? null) },
                  { label: 'total', color: 'var(--muted)', points: pointsOf(list, (s) => s.gpu?.totalBytes ?? null) },
                ]}
              />
            </>
          ) : (
            <figure className="chart chart-empty">
              <figcaption>GPU</figcaption>
              <p className="muted">No GPU reported {node === 'all' ? 'by any node' : 'by this node'}.</p>
            </figure>
          )}
        </div>
      )}
      {state && <GpuDevices state={state} node={node} />}
    </div>
  );
}

/** Each GPU of the chosen node (or of every node) as its latest resources report says: a row per device. */
function GpuDevices({ state, node }: { state: StateView; node: string }): ReactNode {
  const members = state.members.length > 0 ? state.members : [{ nodeId: state.nodeId, name: state.name, nickname: null }];
  const rows = members
    .filter((m) => node === 'all' || m.nodeId === node)
    .flatMap((m) => (state.resources[m.nodeId]?.gpus ?? []).map((gpu) => ({ node: m.nickname ?? m.name, nodeId: m.nodeId, gpu })));
  if (rows.length === 0) return null;
  const unknown = '-';
  return (
    <table className="gpu-devices" aria-label="GPU devices">
      <thead>
        <tr>
          <th>Node</th>
          <th>GPU</th>
          <th>Compute</th>
          <th>VRAM free</th>
          <th>Use</th>
          <th>Temperature</th>
          <th>Power</th>
        </tr>
      </thead>
      <tbody>
        {rows.map(({ node: name, nodeId, gpu }) => (
          <tr key={`${nodeId}/${gpu.index}`}>
            <td>{name}</td>
            <td>{gpu.name}</td>
            <td>{gpu.compute}{gpu.unifiedMemory ? ' (unified memory)' : ''}</td>
            <td>
              {formatBytes(gpu.vramFreeBytes)} of {formatBytes(gpu.vramTotalBytes)}
            </td>
            <td>{gpu.utilizationPct === null ? unknown : pct(gpu.utilizationPct)}</td>
            <td>{gpu.temperatureC === null ? unknown : `${formatNumber(gpu.temperatureC)} °C`}</td>
            <td>{gpu.powerW === null ? unknown : `${formatNumber(gpu.powerW)} W`}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
