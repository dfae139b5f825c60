// Each member's recent log lines, live: GET /logs/stream?node= sends the tail, then every new line
// (`event: log`), `event: gap` when lines were dropped before they could be read, and `event: status`
// when the member cannot be reached.

import { useEffect, useRef, useState, type ReactNode } from 'react';
import { openStream, type StreamStatus } from '../api.js';
import { Empty, ErrorBox } from '../components/Bits.js';
import { routeHash } from '../lib/route.js';
import { useLive } from '../live.js';

interface LogEntry {
  seq: number;
  time: number;
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
  msg: string;
  fields: Record<string, unknown>;
}

type Line = { kind: 'log'; entry: LogEntry } | { kind: 'gap'; dropped: number; key: string };

/** Lines kept on the page; older ones scroll away. */
const MAX_LINES = 2000;
const LEVEL_RANK: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

function time(ms: number): string {
  const d = new Date(ms);
  return `${[d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':')}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

function fieldsText(fields: Record<string, unknown>): string {
  const rest = Object.entries(fields).filter(([k]) => k !== 'part');
  if (rest.length === 0) return '';
  return rest.map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
}

export function LogsPage({ params }: { params: Record<string, string> }): ReactNode {
  const { state } = useLive();
  const node = params.node ?? state?.nodeId ?? '';
  const [lines, setLines] = useState<Line[]>([]);
  const [status, setStatus] = useState<StreamStatus>('connecting');
  const [remoteError, setRemoteError] = useState<string | null>(null);
  const [minLevel, setMinLevel] = useState('trace');
  const [follow, setFollow] = useState(true);
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    if (node === '') return;
    setLines([]);
    setRemoteError(null);
    let lastSeq: number | null = null;
    let gaps = 0;
    const handle = openStream(() => `logs/stream?node=${encodeURIComponent(node)}${lastSeq === null ? '' : `&since=${lastSeq}`}`, {
      onEvent(event) {
        try {
          if (event.event === 'log') {
            const entry = JSON.parse(event.data) as LogEntry;
            lastSeq = entry.seq;
            setLines((list) => [...list.slice(-(MAX_LINES - 1)), { kind: 'log', entry }]);
          } else if (event.event === 'gap') {
            const { dropped } = JSON.parse(event.data) as { dropped: number };
            gaps += 1;
            setLines((list) => [...list.slice(-(MAX_LINES - 1)), { kind: 'gap', dropped, key: `gap-${gaps}` }]);
          } else if (event.event === 'status') {
            const s = JSON.parse(event.data) as { ok: boolean; error: string | null };
            setRemoteError(s.ok ? null : s.error);
          }
        } catch {
          // A damaged event is skipped.
        }
      },
      onStatus: (s) => setStatus(s),
    });
    return () => handle.close();
  }, [node]);

  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines, follow]);

  const members = state?.members.length ? state.members : state ? [{ nodeId: state.nodeId, name: state.name, nickname: null }] : [];
  const shown = lines.filter((l) => l.kind === 'gap' || (LEVEL_RANK[l.entry.level] ?? 30) >= (LEVEL_RANK[minLevel] ?? 0));

  return (
    <div className="page logs-page">
      <div className="toolbar">
        <label>
          Machine
          <select aria-label="Machine" value={node} onChange={(e) => (window.location.hash = routeHash('logs', { node: e.target.value }))}>
            {members.map((m) => (
              <option key={m.nodeId} value={m.nodeId}>
                {m.nickname ?? m.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Level
          <select aria-label="Level" value={minLevel} onChange={(e) => setMinLevel(e.target.value)}>
            <option value="trace">all</option>
            <option value="info">info and above</option>
            <option value="warn">warnings and errors</option>
            <option value="error">errors</option>
          </select>
        </label>
        <label className="check">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} />
          Follow
        </label>
        <span className={`conn conn-${status}`} data-stream={status}>
          <i />
          {status === 'live' ? 'Live' : status === 'unauthorized' ? 'Token needed' : status === 'connecting' ? 'Connecting' : 'Reconnecting'}
        </span>
      </div>
      {remoteError && <ErrorBox title="This machine does not answer">{remoteError}</ErrorBox>}
      <div className="log-box" ref={box} role="log" aria-label="Log lines">
        {shown.length === 0 && <Empty>No lines yet.</Empty>}
        {shown.map((line) =>
          line.kind === 'gap' ? (
            <div key={line.key} className="log-gap">
              … {line.dropped} line{line.dropped === 1 ? '' : 's'} dropped before they could be read
            </div>
          ) : (
            <div key={line.entry.seq} className={`log-line level-${line.entry.level}`} data-seq={line.entry.seq}>
              <span className="log-time">{time(line.entry.time)}</span>
              <span className="log-level">{line.entry.level}</span>
              {typeof line.entry.fields.part === 'string' && <span className="log-part">{line.entry.fields.part}</span>}
              <span className="log-msg">{line.entry.msg}</span>
              <span className="log-fields">{fieldsText(line.entry.fields)}</span>
            </div>
          ),
        )}
      </div>
    </div>
  );
}
