// Observability: what every member and runner did, and why. Four tabs, each read from the node the
// page came from (which asks the other members): the cluster timeline (every member's flight
// recorder merged, on this node's clock), each member's diagnostics, traces of single requests (the
// cluster's tracing switch, the trace list and a waterfall of one trace's spans per node), and the
// performance envelopes (throughput against concurrency, per model, engine and serving node).
// The visible tab re-reads every few seconds while the page is in view; nothing polls in the background.

import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { errorMessage } from '../../../src/common/errors.js';
import { api } from '../api.js';
import { Empty, ErrorBox, StateBadge } from '../components/Bits.js';
import { useNotify } from '../components/Notice.js';
import { linePath, niceTicks, scaleX, scaleY, type Frame } from '../lib/chart.js';
import { formatBytes, formatDuration, formatNumber, shortId } from '../lib/format.js';
import {
  attributeRows,
  envelopeCurves,
  envelopeKey,
  filterTimeline,
  formatClockMs,
  formatOffset,
  recorderText,
  TIMELINE_WINDOWS,
  timelineKinds,
  timelinePath,
  tracePath,
  tracesPath,
  waterfall,
  type WaterfallBar,
} from '../lib/observability.js';
import { routeHash } from '../lib/route.js';
import type { Attributes, ClusterDiagnostics, MemberDiagnostics, PerformanceEnvelope, PerformanceView, RunnerDiagnostics, Timeline, Trace, TraceSummary } from '../lib/types.js';
import { roleWords } from '../lib/words.js';
import { useLive, useNodeNames } from '../live.js';

const TABS = [
  { id: 'timeline', label: 'Timeline' },
  { id: 'nodes', label: 'Nodes' },
  { id: 'traces', label: 'Traces' },
  { id: 'performance', label: 'Performance' },
] as const;
type Tab = (typeof TABS)[number]['id'];

/** How often the visible tab re-reads. */
const REFRESH_MS = 5000;

interface Polled<T> {
  data: T | null;
  error: string | null;
  /** When the last answer came (the browser's clock). */
  atMs: number | null;
  loading: boolean;
  refresh(): void;
}

/**
 * Reads `path()` now, again every REFRESH_MS while the page is visible, at once when it becomes visible
 * again, and on `refresh()`; a new `key` starts over. The path is a function so that each read
 * computes its own (a window ending "now"). A read is not started while one is still out (a slow
 * member must not pile reads up).
 */
function usePolled<T>(key: string, path: () => string, parse: (body: unknown) => T = (b) => b as T): Polled<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [atMs, setAtMs] = useState<number | null>(null);
  const [loading, setLoading] = useState(false);
  const busy = useRef(false);
  // Bumped by a new key: an answer to a read made for the old key is dropped.
  const generation = useRef(0);
  const pathRef = useRef(path);
  pathRef.current = path;
  const parseRef = useRef(parse);
  parseRef.current = parse;

  const read = useCallback(async (): Promise<void> => {
    if (busy.current) return;
    const asked = generation.current;
    busy.current = true;
    setLoading(true);
    try {
      const body = await api<unknown>('GET', pathRef.current());
      if (asked !== generation.current) return;
      setData(parseRef.current(body));
      setError(null);
      setAtMs(Date.now());
    } catch (e) {
      if (asked === generation.current) setError(errorMessage(e));
    } finally {
      if (asked === generation.current) {
        busy.current = false;
        setLoading(false);
      }
    }
  }, []);

  useEffect(() => {
    generation.current += 1;
    busy.current = false;
    setData(null);
    setError(null);
    void read();
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') void read();
    }, REFRESH_MS);
    const onVisible = (): void => {
      if (document.visibilityState === 'visible') void read();
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [key, read]);

  return { data, error, atMs, loading, refresh: () => void read() };
}

function RefreshBar({ polled, children }: { polled: Polled<unknown>; children?: ReactNode }): ReactNode {
  return (
    <div className="toolbar">
      {children}
      <button type="button" onClick={polled.refresh} disabled={polled.loading}>
        Refresh
      </button>
      <span className="muted small" data-updated={polled.atMs ?? ''}>
        {polled.atMs === null ? 'not read yet' : `read ${formatClockMs(polled.atMs).slice(0, 8)}`} · again every {REFRESH_MS / 1000} s while shown
      </span>
    </div>
  );
}

/** Flat counters as a key/value list. */
function KeyValues({ title, values }: { title: string; values: Attributes }): ReactNode {
  const rows = attributeRows(values);
  return (
    <div className="kv-block">
      <h4>{title}</h4>
      {rows.length === 0 ? (
        <p className="muted small">none reported</p>
      ) : (
        <dl className="kv">
          {rows.map(([k, v]) => (
            <div key={k}>
              <dt>{k}</dt>
              <dd className="mono">{v}</dd>
            </div>
          ))}
        </dl>
      )}
    </div>
  );
}

// ---- timeline ----

function TimelineTab(): ReactNode {
  const [windowMs, setWindowMs] = useState<number | null>(TIMELINE_WINDOWS[1]!.ms);
  const [nodeId, setNodeId] = useState<string | null>(null);
  const [kind, setKind] = useState<string | null>(null);
  const polled = usePolled<Timeline>(`timeline ${windowMs}`, () => timelinePath(windowMs, Date.now()));
  const timeline = polled.data;
  const rows = timeline ? filterTimeline(timeline.entries, { nodeId, kind }) : [];
  const kinds = timeline ? timelineKinds(timeline.entries) : [];

  return (
    <section className="card" aria-labelledby="timeline-title" data-tab-panel="timeline">
      <div className="card-head">
        <h2 id="timeline-title">Cluster timeline</h2>
        <span className="muted small">Every member&apos;s flight recorder, merged, on this node&apos;s clock (each member&apos;s times moved by its estimated offset).</span>
      </div>
      <RefreshBar polled={polled}>
        <label>
          Node
          <select aria-label="Timeline node" value={nodeId ?? ''} onChange={(e) => setNodeId(e.target.value === '' ? null : e.target.value)}>
            <option value="">all nodes</option>
            {(timeline?.clocks ?? []).map((c) => (
              <option key={c.nodeId} value={c.nodeId}>
                {c.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Kind
          <select aria-label="Timeline kind" value={kind ?? ''} onChange={(e) => setKind(e.target.value === '' ? null : e.target.value)}>
            <option value="">all kinds</option>
            {kinds.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
        <label>
          Window
          <select aria-label="Timeline window" value={String(windowMs)} onChange={(e) => setWindowMs(e.target.value === 'null' ? null : Number(e.target.value))}>
            {TIMELINE_WINDOWS.map((w) => (
              <option key={w.label} value={String(w.ms)}>
                {w.label}
              </option>
            ))}
          </select>
        </label>
      </RefreshBar>
      {polled.error && <ErrorBox title="Cannot read the timeline">{polled.error}</ErrorBox>}
      {timeline && (
        <ul className="clocks" aria-label="Clock offsets">
          {timeline.clocks.map((c) => (
            <li key={c.nodeId} className="tag" data-clock={c.nodeId} title={c.rttMs === null ? undefined : `estimated from a ${formatNumber(c.rttMs)} ms round trip`}>
              {c.name}
              {c.nodeId === timeline.viewerNodeId ? ' (this node\u2019s clock)' : `: ${formatOffset(c.offsetMs)}`}
              {!c.reachable && <span className="tone-bad"> · unreachable, its moments are missing</span>}
            </li>
          ))}
        </ul>
      )}
      {timeline === null && !polled.error && <Empty>Reading every member&apos;s recorder…</Empty>}
      {timeline && rows.length === 0 && (
        <Empty>
          {timeline.entries.length === 0
            ? 'Nothing recorded in this window: choose a longer window, or wait for something to happen (a start, a join, a placement, a request).'
            : 'No moment matches these filters: choose all nodes or all kinds.'}
        </Empty>
      )}
      {rows.length > 0 && (
        <div className="table-scroll">
          <table className="table timeline">
            <thead>
              <tr>
                <th>Time</th>
                <th>Node</th>
                <th>Source</th>
                <th>Kind</th>
                <th>What happened</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((e, i) => (
                <tr key={`${e.nodeId}-${e.localAtMs}-${e.kind}-${i}`} data-timeline-kind={e.kind} data-node={e.nodeId}>
                  <td className="mono nowrap" title={`on ${e.nodeName}'s own clock: ${formatClockMs(e.localAtMs)}`}>
                    {formatClockMs(e.atMs)}
                  </td>
                  <td>{e.nodeName}</td>
                  <td>
                    {e.source}
                    {e.modelId !== null && <span className="muted small"> {e.modelId}</span>}
                  </td>
                  <td>
                    <span className="tag">{e.kind}</span>
                  </td>
                  <td className="wrap">{e.text}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

// ---- nodes ----

function RunnerRow({ runner }: { runner: RunnerDiagnostics }): ReactNode {
  return (
    <li className="runner-diag" data-runner={runner.instanceId}>
      <div className="row-title">
        <strong>{runner.modelId}</strong>
        <StateBadge state={runner.state} reason={runner.reason} />
        <span className="tag">{runner.backend}</span>
        <span className="tag">{roleWords(runner.role)}</span>
        <span className="muted small">
          {runner.inFlight} in flight · {runner.queued} queued · {runner.restarts} restart{runner.restarts === 1 ? '' : 's'}
          {runner.pid !== null ? ` · pid ${runner.pid}` : ''}
        </span>
      </div>
      {runner.reason && <div className="muted small">{runner.reason}</div>}
      <details>
        <summary>Flight recorder ({runner.recorder.length})</summary>
        {runner.recorder.length === 0 ? (
          <p className="muted small">Nothing recorded yet: phases appear as the runner loads and serves.</p>
        ) : (
          <ol className="recorder mono">
            {[...runner.recorder].reverse().map((entry, i) => (
              <li key={`${entry.atMs}-${i}`} data-phase={entry.phase}>
                <span className="muted">{formatClockMs(entry.atMs)}</span> {recorderText(entry, formatBytes)}
              </li>
            ))}
          </ol>
        )}
      </details>
      <details>
        <summary>Engine stderr ({runner.stderrTail.length} line{runner.stderrTail.length === 1 ? '' : 's'})</summary>
        {runner.stderrTail.length === 0 ? <p className="muted small">The engine wrote nothing to stderr.</p> : <pre className="stderr">{runner.stderrTail.join('\n')}</pre>}
      </details>
    </li>
  );
}

function MemberCard({ member, viewer }: { member: MemberDiagnostics; viewer: string }): ReactNode {
  const d = member.diagnostics;
  return (
    <section className="card" data-member={member.nodeId} data-reachable={member.reachable}>
      <div className="card-head">
        <h3>
          {member.name} <span className="muted small mono">{shortId(member.nodeId)}</span>
        </h3>
        <span className={`badge ${member.reachable ? 'tone-ok' : 'tone-bad'}`}>{member.reachable ? 'reachable' : 'unreachable'}</span>
      </div>
      {member.error && <ErrorBox title="Could not read this member">{member.error}</ErrorBox>}
      <p className="muted small">
        {member.nodeId === viewer ? 'this node (the clock the others are measured against)' : `clock ${formatOffset(member.offsetMs)} from this node`}
        {member.rttMs !== null && member.nodeId !== viewer ? ` · round trip ${formatNumber(member.rttMs)} ms` : ''}
      </p>
      {d && (
        <>
          <p className="member-build">
            <span className="tag" data-version={d.version}>
              v{d.version}
            </span>{' '}
            <span className="tag mono" title={d.commit ?? 'built without git metadata'}>
              {d.commit === null ? 'commit unknown' : d.commit.slice(0, 10)}
            </span>{' '}
            <span className="tag">wire {d.wireVersion}</span> <span className="muted small">pid {d.pid} · up {formatDuration(d.uptimeMs)}</span>
          </p>
          <h4>Runners</h4>
          {d.runners.length === 0 ? (
            <p className="muted small">No runner on this member: launch a model on the Models page to see its runner here.</p>
          ) : (
            <ul className="runners">
              {d.runners.map((r) => (
                <RunnerRow key={r.instanceId} runner={r} />
              ))}
            </ul>
          )}
          <div className="kv-grid">
            <KeyValues title="Telemetry" values={d.telemetry} />
            <KeyValues title="Data plane" values={d.dataPlane} />
          </div>
        </>
      )}
    </section>
  );
}

function NodesTab(): ReactNode {
  const polled = usePolled<ClusterDiagnostics>('nodes', () => 'diagnostics/cluster');
  const cluster = polled.data;
  return (
    <div className="page" data-tab-panel="nodes">
      <RefreshBar polled={polled} />
      {polled.error && <ErrorBox title="Cannot read the members' diagnostics">{polled.error}</ErrorBox>}
      {cluster === null && !polled.error && <Empty>Asking every member…</Empty>}
      {cluster?.versionMismatch && (
        <div className="error-box version-mismatch" role="alert" data-version-mismatch>
          <strong>Members run different builds</strong>
          <div>{cluster.versionMismatch}</div>
          <div className="muted small">Upgrade them to one build: members of different wire versions refuse each other.</div>
        </div>
      )}
      {cluster?.members.map((m) => (
        <MemberCard key={m.nodeId} member={m} viewer={cluster.viewerNodeId} />
      ))}
    </div>
  );
}

// ---- traces ----

/** `tracing`: the cluster setting; undefined while the settings are not read yet. */
function TracingSwitch({ tracing }: { tracing: boolean | undefined }): ReactNode {
  const { refresh } = useLive();
  const notify = useNotify();
  const [busy, setBusy] = useState(false);
  const set = async (on: boolean): Promise<void> => {
    setBusy(true);
    try {
      await api('PUT', '/settings', { tracing: on });
      notify('ok', on ? 'Tracing is on for new requests, on every member' : 'Tracing is off');
      await refresh();
    } catch (error) {
      notify('error', errorMessage(error));
    } finally {
      setBusy(false);
    }
  };
  if (tracing === undefined) return <p className="muted">Reading the cluster settings…</p>;
  return (
    <div className="toolbar tracing-switch" data-tracing={tracing ? 'on' : 'off'}>
      <span>
        Tracing is <strong>{tracing ? 'on' : 'off'}</strong>
        <span className="muted small"> (a cluster setting: every member records the spans of each new request)</span>
      </span>
      <button type="button" className={tracing ? '' : 'primary'} disabled={busy} onClick={() => void set(!tracing)}>
        {tracing ? 'Switch tracing off' : 'Switch tracing on'}
      </button>
    </div>
  );
}

function TraceList({ tracing, selected }: { tracing: boolean | undefined; selected: string | null }): ReactNode {
  const polled = usePolled<TraceSummary[]>('traces', () => tracesPath(), (body) => (body as { traces: TraceSummary[] }).traces);
  const name = useNodeNames();
  const traces = polled.data;
  return (
    <section className="card" aria-labelledby="traces-title">
      <div className="card-head">
        <h2 id="traces-title">Traces</h2>
      </div>
      <TracingSwitch tracing={tracing} />
      <RefreshBar polled={polled} />
      {polled.error && <ErrorBox title="Cannot read the traces">{polled.error}</ErrorBox>}
      {traces !== null && traces.length === 0 && (
        <Empty>{tracing ? 'No trace yet: send a request (from the Chat page or any client) and its trace appears here.' : 'Tracing is off: switch it on to record new requests.'}</Empty>
      )}
      {traces !== null && traces.length > 0 && (
        <div className="table-scroll">
          <table className="table traces">
            <thead>
              <tr>
                <th>Started</th>
                <th>Route</th>
                <th>Model</th>
                <th>Status</th>
                <th>Duration</th>
                <th>Nodes</th>
                <th>Spans</th>
              </tr>
            </thead>
            <tbody>
              {traces.map((t) => (
                <tr key={t.traceId} data-trace={t.traceId} className={t.traceId === selected ? 'selected' : ''}>
                  <td className="mono nowrap">
                    <a href={routeHash('observability', { tab: 'traces', trace: t.traceId })}>{formatClockMs(t.startedAtMs)}</a>
                  </td>
                  <td className="mono">{t.route}</td>
                  <td>{t.modelId ?? '–'}</td>
                  <td>{t.status === null ? <span className="muted">running</span> : <span className={t.status < 400 ? 'tone-ok' : 'tone-bad'}>{t.status}</span>}</td>
                  <td>{formatDuration(t.durationMs)}</td>
                  <td>{t.nodes.map(name).join(', ')}</td>
                  <td>{t.spanCount}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function spanTitle(bar: WaterfallBar): string {
  const attrs = attributeRows(bar.span.attributes).map(([k, v]) => `${k}=${v}`);
  return [`${bar.span.name} · ${formatDuration(bar.durationMs)} · at +${formatNumber(bar.offsetMs)} ms`, ...attrs].join('\n');
}

function TraceViewer({ traceId }: { traceId: string }): ReactNode {
  const [trace, setTrace] = useState<Trace | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [chosen, setChosen] = useState<string | null>(null);
  // Bumped by Refresh: a trace read while its request ran lacks the later spans.
  const [reads, setReads] = useState(0);
  const name = useNodeNames();
  useEffect(() => {
    setChosen(null);
  }, [traceId]);
  useEffect(() => {
    setError(null);
    const controller = new AbortController();
    api<{ trace: Trace }>('GET', tracePath(traceId), undefined, controller.signal)
      .then((body) => setTrace(body.trace))
      .catch((e: unknown) => {
        if (!controller.signal.aborted) setError(errorMessage(e));
      });
    return () => controller.abort();
  }, [traceId, reads]);

  const close = (
    <span className="row-actions">
      <button type="button" onClick={() => setReads((n) => n + 1)}>
        Refresh
      </button>
      <a className="small" href={routeHash('observability', { tab: 'traces' })}>
        Close
      </a>
    </span>
  );
  if (error)
    return (
      <section className="card">
        <ErrorBox title="Cannot read this trace">{error}</ErrorBox>
        {close}
      </section>
    );
  if (!trace || trace.traceId !== traceId) return <Empty>Reading the trace…</Empty>;
  const w = waterfall(trace);
  const bar = chosen === null ? null : (w.lanes.flatMap((l) => l.bars).find((b) => b.span.spanId === chosen) ?? null);
  return (
    <section className="card trace-viewer" aria-labelledby="trace-title" data-trace-viewer={trace.traceId}>
      <div className="card-head">
        <h2 id="trace-title">
          {trace.route} <span className="muted small mono">{trace.traceId}</span>
        </h2>
        {close}
      </div>
      <p className="muted small">
        {formatClockMs(trace.startedAtMs)} · {formatDuration(trace.durationMs)} · {trace.modelId ?? 'no model'} · status {trace.status ?? 'running'} · taken by {name(trace.apiNodeId)}
        {Object.entries(trace.offsets).map(([node, ms]) => ` · ${name(node)}'s clock ${formatOffset(ms)}`)}
      </p>
      {trace.spans.length === 0 ? (
        <Empty>This trace has no spans yet: a request still running adds them as it goes; refresh in a moment.</Empty>
      ) : (
        <div className="waterfall" role="group" aria-label="Spans per node">
          <div className="wf-row wf-axis">
            <span className="wf-label" />
            <span className="wf-duration" />
            <span className="wf-track">
              {w.ticks.map((t) => (
                <span key={t.ms} className="wf-tick" style={{ left: `${t.fraction * 100}%` }}>
                  {formatDuration(t.ms)}
                </span>
              ))}
            </span>
          </div>
          {w.lanes.map((lane) => (
            <div key={lane.nodeId} className="wf-lane" data-lane={lane.nodeId}>
              <div className="wf-node">
                {name(lane.nodeId)}
                {lane.nodeId === trace.apiNodeId ? <span className="muted small"> (API node)</span> : ''}
              </div>
              {lane.bars.map((b) => (
                <button
                  type="button"
                  key={b.span.spanId}
                  className={`wf-row${b.span.spanId === chosen ? ' chosen' : ''}`}
                  data-span={b.span.name}
                  title={spanTitle(b)}
                  aria-pressed={b.span.spanId === chosen}
                  onClick={() => setChosen(b.span.spanId === chosen ? null : b.span.spanId)}
                >
                  <span className="wf-label" style={{ paddingLeft: `${b.depth * 0.8}rem` }}>
                    {b.span.name}
                  </span>
                  <span className="wf-duration">{formatDuration(b.durationMs)}</span>
                  <span className="wf-track">
                    <span className="wf-bar" style={{ left: `${b.left * 100}%`, width: `${b.width * 100}%` }} />
                  </span>
                </button>
              ))}
            </div>
          ))}
        </div>
      )}
      {bar && (
        <div className="span-detail" data-span-detail={bar.span.spanId}>
          <h4>
            {bar.span.name} <span className="muted small">on {name(bar.span.nodeId)}</span>
          </h4>
          <p className="muted small">
            starts +{formatNumber(bar.offsetMs)} ms · lasts {formatDuration(bar.durationMs)} · span {bar.span.spanId}
            {bar.span.parentId !== null ? ` · parent ${bar.span.parentId}` : ' · root'}
          </p>
          <KeyValues title="Attributes" values={bar.span.attributes} />
        </div>
      )}
    </section>
  );
}

function TracesTab({ traceId }: { traceId: string | null }): ReactNode {
  const { state } = useLive();
  const tracing = state?.settings.tracing;
  return (
    <div className="page" data-tab-panel="traces">
      {traceId !== null && <TraceViewer traceId={traceId} />}
      <TraceList tracing={tracing} selected={traceId} />
    </div>
  );
}

// ---- performance ----

const CHART = { width: 560, height: 200, left: 48, right: 12, top: 10, bottom: 30 };

function EnvelopeChart({ envelope, title }: { envelope: PerformanceEnvelope; title: string }): ReactNode {
  const c = envelopeCurves(envelope);
  const inner = { width: CHART.width - CHART.left - CHART.right, height: CHART.height - CHART.top - CHART.bottom };
  const max = Math.max(0, ...c.aggregate.map((p) => p.y ?? 0), ...c.mean.map((p) => p.y ?? 0));
  const yTicks = niceTicks(0, max === 0 ? 1 : max, 4);
  const frame: Frame = { width: inner.width, height: inner.height, x0: c.x0, x1: c.x1, y0: yTicks[0]!, y1: yTicks[yTicks.length - 1]! };
  // The mean's points are rings drawn first and the aggregate's dots on top: at one request in flight they are the same value.
  const series = [
    { label: 'mean tokens/s per request', color: 'var(--c2)', points: c.mean, ring: true },
    { label: 'aggregate tokens/s', color: 'var(--c1)', points: c.aggregate, ring: false },
  ];
  return (
    <figure className="chart" data-envelope={envelopeKey(envelope)} data-knee={envelope.kneeInFlight ?? ''}>
      <figcaption>{title}</figcaption>
      <svg viewBox={`0 0 ${CHART.width} ${CHART.height}`} width="100%" role="img" aria-label={`${title}: tokens/s against requests in flight`}>
        <g transform={`translate(${CHART.left},${CHART.top})`}>
          {yTicks.map((t) => (
            <g key={`y${t}`}>
              <line className="grid" x1={0} x2={inner.width} y1={scaleY(frame, t)} y2={scaleY(frame, t)} />
              <text className="axis" x={-6} y={scaleY(frame, t)} textAnchor="end" dominantBaseline="middle">
                {formatNumber(t)}
              </text>
            </g>
          ))}
          {c.xTicks.map((t) => (
            <text key={`x${t}`} className="axis" x={scaleX(frame, t)} y={inner.height + 14} textAnchor="middle">
              {t}
            </text>
          ))}
          <text className="axis" x={inner.width} y={inner.height + 27} textAnchor="end">
            requests in flight
          </text>
          {c.knee && (
            <g className="knee" data-knee-marker={c.knee.inFlight}>
              <line className="cursor" x1={scaleX(frame, c.knee.inFlight)} x2={scaleX(frame, c.knee.inFlight)} y1={0} y2={inner.height} />
              <circle cx={scaleX(frame, c.knee.inFlight)} cy={scaleY(frame, c.knee.aggregateTokensPerS)} r={6} fill="none" stroke="var(--text)" strokeWidth={1.5} />
              <text className="axis" x={scaleX(frame, c.knee.inFlight) + 4} y={10}>
                knee: {c.knee.inFlight}
              </text>
            </g>
          )}
          {series.map((s) => (
            <g key={s.label}>
              <path d={linePath(s.points, frame)} fill="none" stroke={s.color} strokeWidth={1.8} strokeLinejoin="round" />
              {s.points.map((p) =>
                p.y === null ? null : (
                  <circle key={p.x} cx={scaleX(frame, p.x)} cy={scaleY(frame, p.y)} r={s.ring ? 4.5 : 3} fill={s.ring ? 'none' : s.color} stroke={s.color} strokeWidth={1.5}>
                    <title>{`${p.x} in flight: ${formatNumber(p.y)} ${s.label}`}</title>
                  </circle>
                ),
              )}
            </g>
          ))}
        </g>
      </svg>
      <div className="legend">
        {series.map((s) => (
          <span key={s.label}>
            <i style={{ background: s.color }} />
            {s.label}
          </span>
        ))}
        <span className="muted">{c.knee ? `throughput stops rising past ${c.knee.inFlight} in flight` : 'no knee yet: it shows once higher concurrency stops adding throughput'}</span>
      </div>
      <details>
        <summary>Points ({envelope.points.length})</summary>
        <table className="table">
          <thead>
            <tr>
              <th>In flight</th>
              <th>Requests</th>
              <th>Mean tokens/s</th>
              <th>Aggregate tokens/s</th>
              <th>p50 first token</th>
              <th>p50 latency</th>
            </tr>
          </thead>
          <tbody>
            {[...envelope.points]
              .sort((a, b) => a.inFlight - b.inFlight)
              .map((p) => (
                <tr key={p.inFlight} data-point={p.inFlight}>
                  <td>{p.inFlight}</td>
                  <td>{p.requests}</td>
                  <td>{formatNumber(p.meanTokensPerS)}</td>
                  <td>{formatNumber(p.aggregateTokensPerS)}</td>
                  <td>{formatDuration(p.p50TtftMs)}</td>
                  <td>{formatDuration(p.p50LatencyMs)}</td>
                </tr>
              ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}

function PerformanceTab(): ReactNode {
  const polled = usePolled<PerformanceView>('performance', () => 'diagnostics/performance');
  const name = useNodeNames();
  const envelopes = polled.data?.envelopes ?? null;
  return (
    <section className="card" aria-labelledby="perf-title" data-tab-panel="performance">
      <div className="card-head">
        <h2 id="perf-title">Performance envelopes</h2>
        <span className="muted small">Observed from requests this node served or routed: throughput against the serving instance&apos;s requests in flight. Nothing here changes how requests are served.</span>
      </div>
      <RefreshBar polled={polled} />
      {polled.error && <ErrorBox title="Cannot read the performance envelopes">{polled.error}</ErrorBox>}
      {envelopes !== null && envelopes.length === 0 && <Empty>No envelope yet: send requests to a model (several at once to find its knee) and its curve appears here.</Empty>}
      {envelopes !== null && envelopes.length > 0 && (
        <div className="charts">
          {envelopes.map((e) => (
            <EnvelopeChart key={envelopeKey(e)} envelope={e} title={`${e.modelId} · ${e.backend} · on ${name(e.nodeId)}`} />
          ))}
        </div>
      )}
    </section>
  );
}

export function ObservabilityPage({ params }: { params: Record<string, string> }): ReactNode {
  const tab: Tab = TABS.some((t) => t.id === params.tab) ? (params.tab as Tab) : 'timeline';
  return (
    <div className="page observability-page">
      <div className="tabs" role="tablist" aria-label="Observability views">
        {TABS.map((t) => (
          <a key={t.id} role="tab" aria-selected={t.id === tab} className={`tab${t.id === tab ? ' active' : ''}`} href={routeHash('observability', t.id === 'timeline' ? {} : { tab: t.id })}>
            {t.label}
          </a>
        ))}
      </div>
      {tab === 'timeline' && <TimelineTab />}
      {tab === 'nodes' && <NodesTab />}
      {tab === 'traces' && <TracesTab traceId={params.trace ?? null} />}
      {tab === 'performance' && <PerformanceTab />}
    </div>
  );
}
