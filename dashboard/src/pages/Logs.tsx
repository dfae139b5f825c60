// Each member's recent log lines, live: GET /logs/stream?node= sends the tail, then every new line
// (`event: log`), `event: gap` when lines were dropped before they could be read, and `event: status`
// when the member cannot be reached. "Earlier lines" reads further back from the member's log file
// (GET /logs?history=), across its restarts.

import { useEffect, useRef, useState, type ReactNode } from 'react';
import { api, openStream, type StreamStatus } from '../api.js';
import { Empty, ErrorBox } from '../components/Bits.js';
import { routeHash } from '../lib/route.js';
import { hasNodeId, nameNodeIds } from '../lib/names.js';
import { useLive, useNodeNames } from '../live.js';

interface LogEntry {
  /** The ring's number; negative for a line read from the log file (those have none), counting back. */
  seq: number;
  time: number;
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
  msg: string;
  fields: Record<string, unknown>;
}

type Line = { kind: 'log'; entry: LogEntry } | { kind: 'gap'; dropped: number; key: string };

/** Lines kept on the page; older ones scroll away. */
const MAX_LINES = 2000;
/** Lines "Earlier lines" asks for (the route's most, LOG_HISTORY_MAX_LINES). */
const HISTORY_LINES = 2000;
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
  const name = useNodeNames();
  const node = params.node ?? state?.nodeId ?? '';
  const [lines, setLines] = useState<Line[]>([]);
  const [status, setStatus] = useState<StreamStatus>('connecting');
  const [remoteError, setRemoteError] = useState<string | null>(null);
  const [minLevel, setMinLevel] = useState('trace');
  const [follow, setFollow] = useState(true);
  const [history, setHistory] = useState<{ loading: boolean; error: string | null }>({ loading: false, error: null });
  const box = useRef<HTMLDivElement>(null);
  const shownNode = useRef(node);
  shownNode.current = node;

  const loadHistory = async (): Promise<void> => {
    const asked = node;
    setHistory({ loading: true, error: null });
    try {
      const answer = await api<{ entries: Omit<LogEntry, 'seq'>[]; lastSeq: number }>('GET', `logs?node=${encodeURIComponent(asked)}&history=${HISTORY_LINES}`);
      // Another machine was picked meanwhile: these lines are not its.
      if (shownNode.current !== asked) return;
      const n = answer.entries.length;
      const earlier: Line[] = answer.entries.map((entry, i) => ({ kind: 'log', entry: { ...entry, seq: i - n } }));
      // The file has every line up to lastSeq: those shown already are replaced, the later ones stay.
      setLines((list) => [...earlier, ...list.filter((l) => l.kind === 'log' && l.entry.seq > answer.lastSeq)]);
      setHistory({ loading: false, error: null });
    } catch (error) {
      setHistory({ loading: false, error: (error as Error).message });
    }
  };

  useEffect(() => {
    if (node === '') return;
    setLines([]);
    setRemoteError(null);
    setHistory({ loading: false, error: null });
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
        <button type="button" onClick={() => void loadHistory()} disabled={history.loading || node === ''} title="Read further back, from the machine's log file">
          {history.loading ? 'Reading…' : 'Earlier lines'}
        </button>
        <span className={`conn conn-${status}`} data-stream={status}>
          <i />
          {status === 'live' ? 'Live' : status === 'unauthorized' ? 'Token needed' : status === 'connecting' ? 'Connecting' : 'Reconnecting'}
        </span>
      </div>
      {remoteError && <ErrorBox title="This machine does not answer">{remoteError}</ErrorBox>}
      {history.error && <ErrorBox title="Could not read earlier lines">{history.error}</ErrorBox>}
      <div className="log-box" ref={box} role="log" aria-label="Log lines">
        {shown.length === 0 && <Empty>No lines yet.</Empty>}
        {shown.map((line) =>
          line.kind === 'gap' ? (
            <div key={line.key} className="log-gap">
              … {line.dropped} line{line.dropped === 1 ? '' : 's'} dropped before they could be read
            </div>
          ) : (
            <div
              key={line.entry.seq}
              className={`log-line level-${line.entry.level}`}
              data-seq={line.entry.seq}
              // Peer ids show as names; the hover keeps the ids, to copy.
              title={hasNodeId(line.entry.msg + fieldsText(line.entry.fields)) ? `${line.entry.msg} ${fieldsText(line.entry.fields)}` : undefined}
            >
              <span className="log-time">{time(line.entry.time)}</span>
              <span className="log-level">{line.entry.level}</span>
              {typeof line.entry.fields.part === 'string' && <span className="log-part">{line.entry.fields.part}</span>}
              <span className="log-msg">{nameNodeIds(line.entry.msg, name)}</span>
              <span className="log-fields">{nameNodeIds(fieldsText(line.entry.fields), name)}</span>
            </div>
          ),
        )}
      </div>
    </div>
  );
}
