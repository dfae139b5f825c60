// Short messages after an action ("Invitation sent", or what went wrong), stacked at the bottom.

import { createContext, useCallback, useContext, useMemo, useState, type ReactNode } from 'react';

export interface Notice {
  id: number;
  kind: 'ok' | 'error' | 'info';
  text: string;
}

type Notify = (kind: Notice['kind'], text: string) => void;

const NoticeContext = createContext<Notify>(() => undefined);

export function useNotify(): Notify {
  return useContext(NoticeContext);
}

/** Shown for this long; errors stay until dismissed. */
const NOTICE_MS = 5000;

export function NoticeProvider({ children }: { children: ReactNode }): ReactNode {
  const [notices, setNotices] = useState<Notice[]>([]);
  const dismiss = useCallback((id: number) => setNotices((list) => list.filter((n) => n.id !== id)), []);
  const notify = useCallback<Notify>(
    (kind, text) => {
      const id = Date.now() + Math.random();
      setNotices((list) => [...list.slice(-4), { id, kind, text }]);
      if (kind !== 'error') setTimeout(() => dismiss(id), NOTICE_MS);
    },
    [dismiss],
  );
  const value = useMemo(() => notify, [notify]);
  return (
    <NoticeContext.Provider value={value}>
      {children}
      <div className="notices" role="status" aria-live="polite">
        {notices.map((n) => (
          <div key={n.id} className={`notice notice-${n.kind}`}>
            <span>{n.text}</span>
            <button type="button" className="link" aria-label="Dismiss" onClick={() => dismiss(n.id)}>
              ×
            </button>
          </div>
        ))}
      </div>
    </NoticeContext.Provider>
  );
}
