// The cluster as the page knows it: GET /state once for a quick first paint, then the node pushes it
// over GET /events (`event: state` on every change and every 2 s; `event: metrics` with the newest
// sample). Pages read it from this context and call `refresh()` after an action so its result shows
// at once instead of at the next push.

import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { errorMessage } from '../../src/common/errors.js';
import { api, ApiError, onAuthRequired, openStream, type StreamStatus } from './api.js';
import type { MetricsSample } from './lib/series.js';
import type { StateView } from './lib/types.js';

export interface Live {
  state: StateView | null;
  /**
   * Calls `listener` with every `event: metrics` the node pushes (`{nodeId, sample}`: this node's,
   * each peer's, and the cluster sum as nodeId "all"). Several arrive together every 2 s, so they are
   * handed out one by one rather than kept as state (React would only render the last).
   */
  onMetrics(listener: (push: MetricsPush) => void): () => void;
  stream: StreamStatus;
  streamDetail: string | null;
  /** The last failure to read the state, in words. */
  error: string | null;
  authRequired: boolean;
  refresh(): Promise<void>;
}

export interface MetricsPush {
  nodeId: string;
  sample: MetricsSample;
}

const LiveContext = createContext<Live | null>(null);

export function useLive(): Live {
  const live = useContext(LiveContext);
  if (!live) throw new Error('useLive outside LiveProvider');
  return live;
}

/** Members by node id, for naming nodes anywhere on the page. */
export function useNodeNames(): (nodeId: string) => string {
  const { state } = useLive();
  return useCallback(
    (nodeId: string) => {
      if (!state) return nodeId;
      const member = state.members.find((m) => m.nodeId === nodeId);
      if (member) return member.nickname ?? member.name;
      if (nodeId === state.nodeId) return state.name;
      return state.discovered.find((d) => d.nodeId === nodeId)?.name ?? nodeId.slice(-8);
    },
    [state],
  );
}

export function LiveProvider({ children }: { children: ReactNode }): ReactNode {
  const [state, setState] = useState<StateView | null>(null);
  const metricsListeners = useRef(new Set<(push: MetricsPush) => void>());
  const onMetrics = useCallback((listener: (push: MetricsPush) => void) => {
    metricsListeners.current.add(listener);
    return () => void metricsListeners.current.delete(listener);
  }, []);
  const [stream, setStream] = useState<StreamStatus>('connecting');
  const [streamDetail, setStreamDetail] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [authRequired, setAuthRequired] = useState(false);
  const refreshing = useRef<Promise<void> | null>(null);

  const refresh = useCallback(async () => {
    if (refreshing.current) return refreshing.current;
    const run = (async () => {
      try {
        setState(await api<StateView>('GET', 'state'));
        setError(null);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 401)) setError(errorMessage(e));
      } finally {
        refreshing.current = null;
      }
    })();
    refreshing.current = run;
    return run;
  }, []);

  useEffect(() => onAuthRequired(setAuthRequired), []);
  useEffect(() => {
    if (!authRequired) void refresh();
  }, [authRequired, refresh]);

  useEffect(() => {
    const handle = openStream('events', {
      onEvent(event) {
        if (event.event === 'state') {
          try {
            setState(JSON.parse(event.data) as StateView);
            setError(null);
          } catch {
            setError('the node pushed a state that is not JSON');
          }
        } else if (event.event === 'metrics') {
          let push: MetricsPush;
          try {
            push = JSON.parse(event.data) as MetricsPush;
          } catch {
            return; // A damaged sample is skipped; the next comes in 2 s.
          }
          if (typeof push?.nodeId !== 'string' || typeof push.sample?.t !== 'number') return;
          for (const listener of metricsListeners.current) listener(push);
        }
      },
      onStatus(status, detail) {
        setStream(status);
        setStreamDetail(detail);
        // While the stream is down the page still shows the latest state it can get.
        if (status === 'retrying') void refresh();
      },
    });
    return () => handle.close();
  }, [refresh]);

  const value = useMemo<Live>(
    () => ({ state, onMetrics, stream, streamDetail, error, authRequired, refresh }),
    [state, onMetrics, stream, streamDetail, error, authRequired, refresh],
  );
  return <LiveContext.Provider value={value}>{children}</LiveContext.Provider>;
}
