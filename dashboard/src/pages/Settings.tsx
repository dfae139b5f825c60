// Settings: the cluster-wide settings (API keys, origins allowed to call the API from a browser, the
// defaults a launch gets, the download approval threshold), kept in cluster state, so a change made
// here applies on every member. PUT /settings; the node's own options live in its shoal.toml.

import { useEffect, useState, type ReactNode } from 'react';
import { api, ApiError } from '../api.js';
import { useNotify } from '../components/Notice.js';
import { formatBytes } from '../lib/format.js';
import { useLive } from '../live.js';

type Settings = NonNullable<ReturnType<typeof useLive>['state']>['settings'];

const GIB = 2 ** 30;

interface Draft {
  corsOrigins: string;
  defaultContextTokens: string;
  defaultParallel: string;
  downloadApprovalGiB: string;
}

function draftOf(settings: Settings): Draft {
  return {
    corsOrigins: settings.corsOrigins.join('\n'),
    defaultContextTokens: settings.defaultContextTokens === null ? '' : String(settings.defaultContextTokens),
    defaultParallel: settings.defaultParallel === null ? '' : String(settings.defaultParallel),
    downloadApprovalGiB: String(Math.round((settings.downloadApprovalBytes / GIB) * 100) / 100),
  };
}

/** An empty field is "none" (the planner decides); anything else must be a positive integer. */
function countOf(name: string, text: string): number | null {
  if (text.trim() === '') return null;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number of at least 1, or empty`);
  return n;
}

/** The PUT /settings body for what changed between `settings` and `draft`. */
function changes(settings: Settings, draft: Draft): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const origins = draft.corsOrigins
    .split(/[\n,]/)
    .map((o) => o.trim())
    .filter((o) => o !== '');
  if (origins.join('\n') !== settings.corsOrigins.join('\n')) body.corsOrigins = origins;
  const context = countOf('Default context', draft.defaultContextTokens);
  if (context !== settings.defaultContextTokens) body.defaultContextTokens = context;
  const parallel = countOf('Default slots', draft.defaultParallel);
  if (parallel !== settings.defaultParallel) body.defaultParallel = parallel;
  const gib = Number(draft.downloadApprovalGiB);
  if (draft.downloadApprovalGiB.trim() === '' || !Number.isFinite(gib) || gib < 0) throw new Error('Ask before downloads above must be a size in GiB (0 asks always)');
  const bytes = Math.round(gib * GIB);
  if (bytes !== settings.downloadApprovalBytes) body.downloadApprovalBytes = bytes;
  return body;
}

export function SettingsPage(): ReactNode {
  const { state, refresh } = useLive();
  const notify = useNotify();
  const settings = state?.settings ?? null;
  const [draft, setDraft] = useState<Draft | null>(null);
  const [newKey, setNewKey] = useState('');
  const [busy, setBusy] = useState(false);
  // The form starts from the cluster's settings and follows them until the person edits it.
  const [edited, setEdited] = useState(false);
  useEffect(() => {
    if (settings && !edited) setDraft(draftOf(settings));
  }, [settings, edited]);

  if (!settings || !draft) return <p className="empty">Reading the settings…</p>;
  const set = (patch: Partial<Draft>): void => {
    setEdited(true);
    setDraft({ ...draft, ...patch });
  };

  const save = async (body: Record<string, unknown>, done: string): Promise<void> => {
    setBusy(true);
    try {
      await api('PUT', '/settings', body);
      notify('ok', done);
      setEdited(false);
      await refresh();
    } catch (error) {
      notify('error', error instanceof ApiError || error instanceof Error ? error.message : String(error));
    } finally {
      setBusy(false);
    }
  };

  const onSave = (): void => {
    let body: Record<string, unknown>;
    try {
      body = changes(settings, draft);
    } catch (error) {
      notify('error', (error as Error).message);
      return;
    }
    if (Object.keys(body).length === 0) {
      notify('info', 'Nothing changed');
      return;
    }
    void save(body, 'Settings saved for every member');
  };

  const keys = settings.apiKeyDigests.length;
  return (
    <div className="settings-page">
      <section className="card" aria-labelledby="settings-title">
        <h2 id="settings-title">Cluster settings</h2>
        <p className="muted">
          Kept in cluster state and applied on every member{state?.role === 'standalone' ? ' (saving founds a cluster of this node first)' : ''}. This node&apos;s own options are its flags or <code>shoal.toml</code> in its data dir.
        </p>
        <form
          className="settings-form"
          onSubmit={(e) => {
            e.preventDefault();
            onSave();
          }}
        >
          <label>
            Web origins allowed to call the API (one per line; loopback origins always are)
            <textarea name="cors-origins" rows={3} placeholder="https://app.example.com" value={draft.corsOrigins} onChange={(e) => set({ corsOrigins: e.target.value })} />
          </label>
          <div className="launch-options">
            <label>
              Default context per slot
              <input name="default-context-tokens" inputMode="numeric" placeholder="planner default" value={draft.defaultContextTokens} onChange={(e) => set({ defaultContextTokens: e.target.value })} />
            </label>
            <label>
              Default slots
              <input name="default-parallel" inputMode="numeric" placeholder="what fits, up to 16" value={draft.defaultParallel} onChange={(e) => set({ defaultParallel: e.target.value })} />
            </label>
            <label>
              Ask before downloads above (GiB)
              <input name="download-approval-gib" inputMode="decimal" value={draft.downloadApprovalGiB} onChange={(e) => set({ downloadApprovalGiB: e.target.value })} />
            </label>
          </div>
          <p className="muted small">
            Defaults apply to a launch that sets neither and whose model card sets neither. Downloads above {formatBytes(settings.downloadApprovalBytes)} on other members wait for approval.
          </p>
          <div className="row-actions">
            <button type="submit" className="primary" disabled={busy}>
              Save
            </button>
            {edited && (
              <button type="button" disabled={busy} onClick={() => setEdited(false)}>
                Discard changes
              </button>
            )}
          </div>
        </form>
      </section>

      <section className="card" aria-labelledby="keys-title">
        <h2 id="keys-title">API keys</h2>
        <p className="muted" data-api-keys={keys}>
          {keys === 0 ? 'No cluster API key: the inference API takes no key (unless a node was started with --api-key).' : `${keys} cluster API key${keys === 1 ? '' : 's'}: every member asks for one on /v1 and /api.`} Keys are kept as digests and cannot be shown again.
        </p>
        <form
          className="toolbar"
          onSubmit={(e) => {
            e.preventDefault();
            const key = newKey.trim();
            if (key === '') return;
            void save({ addApiKeys: [key] }, 'API key added on every member').then(() => setNewKey(''));
          }}
        >
          <input name="new-api-key" aria-label="New API key" placeholder="a new key (8 characters or more)" autoComplete="off" value={newKey} onChange={(e) => setNewKey(e.target.value)} />
          <button type="submit" disabled={busy || newKey.trim() === ''}>
            Add key
          </button>
          {keys > 0 && (
            <button type="button" className="danger" disabled={busy} onClick={() => void save({ apiKeys: [] }, 'Cluster API keys removed')}>
              Remove all keys
            </button>
          )}
        </form>
      </section>
    </div>
  );
}
