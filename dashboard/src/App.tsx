// The frame around every page: header with navigation (a menu button on narrow screens), the live
// connection indicator, the theme toggle, and the admin-token prompt when the node asks for one.

import { useEffect, useState, type ReactNode } from 'react';
import { getAdminToken, setAdminToken } from './api.js';
import { NoticeProvider } from './components/Notice.js';
import { TokenPrompt } from './components/TokenPrompt.js';
import { parseRoute, routeHash, type Page, type Route } from './lib/route.js';
import { LiveProvider, useLive } from './live.js';
import { ChatPage } from './pages/Chat.js';
import { ClusterPage } from './pages/Cluster.js';
import { LogsPage } from './pages/Logs.js';
import { MetricsPage } from './pages/Metrics.js';
import { ModelsPage } from './pages/Models.js';
import { ObservabilityPage } from './pages/Observability.js';
import { SettingsPage } from './pages/Settings.js';
import { saveTheme, savedTheme, systemTheme, type Theme } from './theme.js';

const NAV: { page: Page; label: string }[] = [
  { page: 'cluster', label: 'Cluster' },
  { page: 'models', label: 'Models' },
  { page: 'chat', label: 'Chat' },
  { page: 'metrics', label: 'Metrics' },
  { page: 'logs', label: 'Logs' },
  { page: 'observability', label: 'Observability' },
  { page: 'settings', label: 'Settings' },
];

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onHash = (): void => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  return route;
}

function ThemeToggle(): ReactNode {
  const [theme, setTheme] = useState<Theme>(() => savedTheme() ?? systemTheme());
  useEffect(() => {
    // Follow the system until the person chooses.
    const media = window.matchMedia?.('(prefers-color-scheme: dark)');
    const onChange = (): void => {
      if (savedTheme() === null) {
        const next = systemTheme();
        document.documentElement.dataset.theme = next;
        setTheme(next);
      }
    };
    media?.addEventListener('change', onChange);
    return () => media?.removeEventListener('change', onChange);
  }, []);
  const next: Theme = theme === 'dark' ? 'light' : 'dark';
  return (
    <button
      type="button"
      className="icon"
      aria-label={`Switch to ${next} theme`}
      title={`Switch to ${next} theme`}
      data-theme-toggle={theme}
      onClick={() => {
        saveTheme(next);
        setTheme(next);
      }}
    >
      {theme === 'dark' ? '☀' : '☾'}
    </button>
  );
}

function Connection(): ReactNode {
  const { stream, streamDetail, state } = useLive();
  const words = stream === 'live' ? 'Live' : stream === 'unauthorized' ? 'Token needed' : stream === 'connecting' ? 'Connecting' : 'Reconnecting';
  return (
    <span className={`conn conn-${stream}`} title={streamDetail ?? (state ? `${state.name} · ${state.fingerprint}` : '')} data-stream={stream}>
      <i />
      {words}
    </span>
  );
}

function Header({ page }: { page: Page }): ReactNode {
  const [open, setOpen] = useState(false);
  const { state } = useLive();
  useEffect(() => {
    setOpen(false);
  }, [page]);
  return (
    <header className="top">
      <a className="brand" href={routeHash('cluster')}>
        <svg viewBox="0 0 24 24" width="22" height="22" aria-hidden="true">
          <path d="M2 14c3-4 6-4 9 0s6 4 11 0M2 9c3-4 6-4 9 0s6 4 11 0" fill="none" stroke="currentColor" strokeWidth="2" strokeLinecap="round" />
        </svg>
        Shoal
        {state && <span className="brand-node">{state.name}</span>}
        {state && (
          <span className="brand-version" title={`Shoal ${state.version}`} data-version={state.version}>
            v{state.version}
          </span>
        )}
      </a>
      <button type="button" className="icon menu-button" aria-expanded={open} aria-controls="main-nav" aria-label="Menu" onClick={() => setOpen((o) => !o)}>
        ☰
      </button>
      <nav id="main-nav" className={open ? 'open' : ''}>
        {NAV.map((item) => (
          <a key={item.page} href={routeHash(item.page)} className={item.page === page ? 'active' : ''} aria-current={item.page === page ? 'page' : undefined} onClick={() => setOpen(false)}>
            {item.label}
          </a>
        ))}
      </nav>
      <div className="top-right">
        <Connection />
        {getAdminToken() !== null && (
          <button type="button" className="link small" title="Forget the admin token kept in this browser" onClick={() => setAdminToken(null)}>
            Forget token
          </button>
        )}
        <ThemeToggle />
      </div>
    </header>
  );
}

function Body({ route }: { route: Route }): ReactNode {
  const { authRequired, error, state } = useLive();
  // Chat uses the inference routes, which do not need the admin token.
  if (authRequired && route.page !== 'chat') return <TokenPrompt />;
  return (
    <>
      {error && state === null && (
        <div className="error-box" role="alert">
          <strong>Cannot read this node&apos;s state</strong>
          <div>{error}</div>
        </div>
      )}
      {route.page === 'cluster' && <ClusterPage />}
      {route.page === 'models' && <ModelsPage />}
      {route.page === 'chat' && <ChatPage />}
      {route.page === 'metrics' && <MetricsPage params={route.params} />}
      {route.page === 'logs' && <LogsPage params={route.params} />}
      {route.page === 'observability' && <ObservabilityPage params={route.params} />}
      {route.page === 'settings' && <SettingsPage />}
    </>
  );
}

export function App(): ReactNode {
  const route = useRoute();
  useEffect(() => {
    document.title = `Shoal · ${NAV.find((n) => n.page === route.page)?.label ?? ''}`;
  }, [route.page]);
  return (
    <NoticeProvider>
      <LiveProvider>
        <Header page={route.page} />
        <main data-page={route.page}>
          <Body route={route} />
        </main>
      </LiveProvider>
    </NoticeProvider>
  );
}
