// Models: running instances with their runners and a Stop button, downloads with progress, the model
// cards on this node, Hugging Face search and add, and launching with a placement preview.

import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { errorMessage } from '../../../src/common/errors.js';
import { CARD_KV_CACHE_TYPES, FLASH_ATTENTION_MODES } from '../../../src/models/cards/runtime-knobs.js';
import { api, ApiError } from '../api.js';
import { Empty, ErrorBox, ProgressBar, StateBadge } from '../components/Bits.js';
import { ActionButton, ConfirmButton, Modal, useAction } from '../components/Modal.js';
import { useNotify } from '../components/Notice.js';
import { formatBytes, formatNumber, formatPercent } from '../lib/format.js';
import type { DownloadListView, DownloadView, InstanceView, LocalModelView, ModelListView, ModelView, PlacementErrorView, PlanView, SearchResultView } from '../lib/types.js';
import { nameNodeIds } from '../lib/names.js';
import { describePlacementError, roleWords, SHAPE_WORDS } from '../lib/words.js';
import { useLive, useNodeNames } from '../live.js';
import { ApprovalPrompt, DownloadReportRow, PlannedDownloads } from '../components/ClusterDownloads.js';
import type { DownloadsPlan } from '../../../src/placement/downloads.js';

const ORIGIN_WORDS: Record<string, string> = { builtin: 'Built-in', added: 'From Hugging Face', user: 'Custom card', store: 'Files only' };
const DISK_WORDS: Record<string, string> = {
  builtin: 'Generated here',
  'on-disk': 'On disk',
  stale: 'Older revision on disk',
  partial: 'Partly downloaded',
  downloading: 'Downloading',
  'not-downloaded': 'Not downloaded',
  file: 'Local file',
  'file-missing': 'File missing',
};

function PlacementFailure({ error }: { error: PlacementErrorView }): ReactNode {
  const words = describePlacementError(error);
  const name = useNodeNames();
  return (
    <ErrorBox title={words.title}>
      <p>{nameNodeIds(words.detail, name)}</p>
      {words.advice && <p className="muted">{words.advice}</p>}
      {error.causes && error.causes.length > 0 && (
        <ul>
          {error.causes.map((c, i) => (
            <li key={i}>
              {describePlacementError(c).title}: {nameNodeIds(c.message, name)}
            </li>
          ))}
        </ul>
      )}
    </ErrorBox>
  );
}

function PlanPreview({ plan }: { plan: PlanView }): ReactNode {
  const name = useNodeNames();
  return (
    <div className="plan" data-plan-shape={plan.shape}>
      <div className="plan-head">
        <span className="tag">{SHAPE_WORDS[plan.shape] ?? plan.shape}</span>
        <span>
          {plan.predictedDecodeTokPerS === null ? (
            <span data-predicted="none">
              No prediction (not measured){plan.decodeUpperBoundTokPerS !== null && <> · at most {formatNumber(plan.decodeUpperBoundTokPerS)} tokens/s (its measured CPU parts)</>}
            </span>
          ) : (
            <>
              Predicted <strong data-predicted>{formatNumber(plan.predictedDecodeTokPerS)} tokens/s</strong> per request
            </>
          )}
        </span>
        <span data-plan-slots={plan.parallel}>
          <strong>{plan.parallel}</strong> {plan.parallel === 1 ? 'slot' : 'slots'} <span className="muted">({SIZING_WORDS[plan.sizing.parallel]})</span>
        </span>
        <span className="muted">
          context {plan.contextTokens} tokens per slot ({SIZING_WORDS[plan.sizing.contextTokens]}, ceiling {plan.contextCeiling}) · KV cache {plan.kvCacheType} · flash attention {plan.flashAttention}
        </span>
      </div>
      <table className="table">
        <thead>
          <tr>
            <th>Node</th>
            <th>Role</th>
            <th>Backend</th>
            <th>Layers</th>
            <th>Memory</th>
          </tr>
        </thead>
        <tbody>
          {plan.placements.map((p) => (
            <tr key={`${p.nodeId}-${p.role}`}>
              <td>{name(p.nodeId)}</td>
              <td>{roleWords(p.role)}</td>
              <td className="mono">{p.backend}</td>
              <td>
                {p.layerShare.layerCount} ({formatPercent(p.layerShare.fraction)})
              </td>
              <td>
                {p.gpuLayers === null ? '' : 'RAM '}
                {formatBytes(p.ramBytes)} of {formatBytes(p.freeBytes)} free
                {p.spilledLayers > 0 && <> · {p.spilledLayers} layers spilled to RAM</>}
                {p.devices.map((d) => (
                  <div key={d.index} className="small" data-plan-device={d.index} data-fits={d.fits}>
                    GPU {d.index} {d.name}: {d.layerCount} layers{d.holdsOutput ? ' + output' : ''}, {formatBytes(d.bytes)} of {formatBytes(d.freeBytes)} VRAM free
                  </div>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {plan.warnings.length > 0 && (
        <ul className="warnings">
          {plan.warnings.map((w, i) => (
            <li key={i}>⚠ {nameNodeIds(w, name)}</li>
          ))}
        </ul>
      )}
      {plan.speedArithmetic.length > 0 && (
        <details>
          <summary>How the speed is predicted</summary>
          <ul className="small mono">
            {plan.speedArithmetic.map((line, i) => (
              <li key={i}>{line}</li>
            ))}
          </ul>
        </details>
      )}
    </div>
  );
}

const SIZING_WORDS: Record<string, string> = { request: 'as asked', card: 'from the card', default: 'default', 'memory fit': 'what fits' };

interface LaunchOptions {
  replicas: string;
  minNodes: string;
  parallel: string;
  contextTokens: string;
  /** '' keeps the card's choice. */
  kvCacheType: string;
  flashAttention: string;
  /** Layers that do not fit a node's GPUs may stay in system RAM. */
  allowSpill: boolean;
  exclude: string[];
}

function launchBody(model: string, options: LaunchOptions, dryRun: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = { model, dry_run: dryRun };
  const int = (s: string): number | null => (/^\d+$/.test(s.trim()) ? Number(s.trim()) : null);
  if (int(options.replicas) !== null) body.replicas = int(options.replicas);
  if (int(options.minNodes) !== null) body.min_nodes = int(options.minNodes);
  if (int(options.parallel) !== null) body.parallel = int(options.parallel);
  if (int(options.contextTokens) !== null) body.context_tokens = int(options.contextTokens);
  if (options.kvCacheType !== '') body.kv_cache_type = options.kvCacheType;
  if (options.flashAttention !== '') body.flash_attention = options.flashAttention;
  if (options.exclude.length > 0) body.exclude = options.exclude;
  if (options.allowSpill) body.allow_spill = true;
  return body;
}

function LaunchDialog({ model, onClose }: { model: ModelView; onClose: () => void }): ReactNode {
  const { state, refresh } = useLive();
  const notify = useNotify();
  const [options, setOptions] = useState<LaunchOptions>({ replicas: '', minNodes: '', parallel: '', contextTokens: '', kvCacheType: '', flashAttention: '', allowSpill: false, exclude: [] });
  const [plan, setPlan] = useState<PlanView | null>(null);
  const [downloads, setDownloads] = useState<DownloadsPlan | null>(null);
  const [failure, setFailure] = useState<PlacementErrorView | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [previewing, setPreviewing] = useState(true);
  const [busy, run] = useAction();

  useEffect(() => {
    const controller = new AbortController();
    setPreviewing(true);
    const timer = setTimeout(() => {
      api<{ plan: PlanView; downloads: DownloadsPlan }>('POST', 'place_instance', launchBody(model.id, options, true), controller.signal)
        .then((res) => {
          setPlan(res.plan);
          setDownloads(res.downloads);
          setFailure(null);
          setError(null);
        })
        .catch((e: unknown) => {
          if (controller.signal.aborted) return;
          setPlan(null);
          if (e instanceof ApiError && e.placement) {
            setFailure(e.placement);
            setError(null);
          } else {
            setFailure(null);
            setError(errorMessage(e));
          }
        })
        .finally(() => !controller.signal.aborted && setPreviewing(false));
    }, 250);
    return () => {
      clearTimeout(timer);
      controller.abort();
    };
  }, [model.id, options]);

  const members = state?.members ?? [];
  const set = (patch: Partial<LaunchOptions>): void => setOptions((o) => ({ ...o, ...patch }));
  return (
    <Modal
      title={`Launch ${model.name}`}
      onClose={onClose}
      actions={
        <>
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button
            type="button"
            className="primary"
            disabled={busy || previewing || plan === null}
            onClick={() =>
              void run(async () => {
                const res = await api<{ instance: InstanceView }>('POST', 'place_instance', launchBody(model.id, options, false));
                notify('ok', res.instance.awaitingApproval ? `Placed ${res.instance.modelId}: approve its downloads under Running` : `Launched ${res.instance.modelId}`);
                await refresh();
                onClose();
              })
            }
          >
            Launch
          </button>
        </>
      }
    >
      <div className="launch-options">
        <label>
          Replicas
          <input inputMode="numeric" placeholder="auto" value={options.replicas} onChange={(e) => set({ replicas: e.target.value })} />
        </label>
        <label>
          At least nodes
          <input inputMode="numeric" placeholder="auto" value={options.minNodes} onChange={(e) => set({ minNodes: e.target.value })} />
        </label>
        <label>
          Context tokens
          <input inputMode="numeric" placeholder="card default" value={options.contextTokens} onChange={(e) => set({ contextTokens: e.target.value })} />
        </label>
        <label>
          Slots
          <input name="parallel" inputMode="numeric" placeholder="what fits, up to 16" value={options.parallel} onChange={(e) => set({ parallel: e.target.value })} />
        </label>
        <label>
          KV cache
          <select name="kv-cache-type" value={options.kvCacheType} onChange={(e) => set({ kvCacheType: e.target.value })}>
            <option value="">card default</option>
            {CARD_KV_CACHE_TYPES.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <label>
          Flash attention
          <select name="flash-attention" value={options.flashAttention} onChange={(e) => set({ flashAttention: e.target.value })}>
            <option value="">card default</option>
            {FLASH_ATTENTION_MODES.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </label>
        <label className="check" title="Layers that do not fit a node's GPUs stay in system RAM (slower) instead of the node counting as short">
          <input type="checkbox" name="allow-spill" checked={options.allowSpill} onChange={(e) => set({ allowSpill: e.target.checked })} />
          Spill to RAM
        </label>
      </div>
      {members.length > 1 && (
        <fieldset className="exclude">
          <legend>Do not use</legend>
          {members.map((m) => (
            <label key={m.nodeId} className="check">
              <input
                type="checkbox"
                checked={options.exclude.includes(m.nodeId)}
                onChange={(e) => set({ exclude: e.target.checked ? [...options.exclude, m.nodeId] : options.exclude.filter((id) => id !== m.nodeId) })}
              />
              {m.nickname ?? m.name}
            </label>
          ))}
        </fieldset>
      )}
      <h3>Placement preview {previewing && <span className="muted small">(planning…)</span>}</h3>
      {plan && <PlanPreview plan={plan} />}
      {plan && downloads && <PlannedDownloads downloads={downloads} />}
      {failure && <PlacementFailure error={failure} />}
      {error && <ErrorBox title="No preview">{error}</ErrorBox>}
    </Modal>
  );
}

/** This node's own runners that belong to no cluster instance (its default model). */
function LocalRunners({ models }: { models: LocalModelView[] }): ReactNode {
  return (
    <>
      {models.map((m) => (
        <div key={m.instanceId} className="row" data-instance={m.instanceId} data-model={m.modelId} data-local>
          <div className="row-main">
            <div className="row-title">
              <strong>{m.modelId}</strong> <StateBadge state={m.state} reason={m.reason} />
              <span className="tag">This node only</span>
            </div>
            <div className="muted small">
              The node&apos;s default model · {m.inFlight} in flight, {m.queued} waiting
              {m.reason ? ` · ${m.reason}` : ''}
            </div>
          </div>
        </div>
      ))}
    </>
  );
}

function Instances(): ReactNode {
  const { state, refresh } = useLive();
  const name = useNodeNames();
  if (!state) return null;
  const instances = state.instances;
  const clusterIds = new Set(instances.map((i) => i.instanceId));
  const local = state.models.filter((m) => !clusterIds.has(m.instanceId));
  if (instances.length === 0 && local.length === 0) return <Empty>No model is running. Launch one from the cards below.</Empty>;
  return (
    <div className="rows">
      {instances.map((inst) => (
        <div key={inst.instanceId} className="row" data-instance={inst.instanceId} data-model={inst.modelId}>
          <div className="row-main">
            <div className="row-title">
              <strong>{inst.modelId}</strong>
              <span className="tag">{SHAPE_WORDS[inst.shape] ?? inst.shape}</span>
              <span className="muted small">
                {inst.predictedDecodeTokPerS !== null ? `~${formatNumber(inst.predictedDecodeTokPerS)} tokens/s` : 'no prediction (not measured)'} · context {inst.contextTokens} · {inst.parallel} parallel
              </span>
            </div>
            <ul className="runners">
              {inst.runners.map((r) => (
                <li key={`${r.nodeId}-${r.role}`} data-runner-state={r.state}>
                  <StateBadge state={r.state} reason={r.reason} /> {name(r.nodeId)} <span className="muted">({roleWords(r.role)})</span>
                  {r.state === 'ready' && (
                    <span className="muted small">
                      {' '}
                      · {r.inFlight} in flight, {r.queued} waiting
                    </span>
                  )}
                  {r.reason && <span className="muted small"> · {r.reason}</span>}
                </li>
              ))}
            </ul>
            {inst.downloads.map((d) => (
              <DownloadReportRow key={`${d.nodeId}-${d.id}`} nodeId={d.nodeId} report={d} />
            ))}
            <ApprovalPrompt instance={inst} />
            {inst.warnings.length > 0 && (
              <ul className="warnings">
                {inst.warnings.map((w, i) => (
                  <li key={i}>⚠ {w}</li>
                ))}
              </ul>
            )}
          </div>
          <div className="row-actions">
            <ActionButton
              className="danger"
              action={async () => {
                await api('DELETE', `instance/${encodeURIComponent(inst.instanceId)}`);
                await refresh();
              }}
              done={`Stopped ${inst.modelId}`}
            >
              Stop
            </ActionButton>
          </div>
        </div>
      ))}
      <LocalRunners models={local} />
    </div>
  );
}

function Downloads({ downloads }: { downloads: DownloadView[] }): ReactNode {
  if (downloads.length === 0) return null;
  return (
    <section className="card" aria-labelledby="dl-title">
      <h2 id="dl-title">Downloads</h2>
      <div className="rows">
        {downloads.map((d) => (
          <div key={d.id} className="row" data-download={d.id}>
            <div className="row-main">
              <div className="row-title">
                <strong>{d.modelId}</strong> <span className="muted small">{d.repo}</span> <StateBadge state={d.state === 'done' ? 'ready' : d.state === 'downloading' || d.state === 'resolving' ? 'starting' : d.state === 'failed' ? 'failed' : 'stopped'} />
              </div>
              <ProgressBar done={d.doneBytes} total={d.totalBytes} label={`Download of ${d.modelId}`} />
              <div className="muted small">
                {d.state === 'downloading' && d.bytesPerSecond > 0 ? `${formatBytes(d.bytesPerSecond)}/s` : d.state}
                {d.etaSeconds !== null && d.state === 'downloading' ? ` · about ${Math.round(d.etaSeconds)} s left` : ''}
                {d.error ? ` · ${d.error.message}` : ''}
              </div>
            </div>
            {(d.state === 'downloading' || d.state === 'resolving') && (
              <div className="row-actions">
                <ActionButton action={() => api('DELETE', `models/downloads/${encodeURIComponent(d.id)}`)} done="Download cancelled">
                  Cancel
                </ActionButton>
              </div>
            )}
          </div>
        ))}
      </div>
    </section>
  );
}

function ModelCard({ model, onLaunch, onChanged }: { model: ModelView; onLaunch: () => void; onChanged: () => Promise<void> }): ReactNode {
  const downloading = model.download && (model.download.state === 'downloading' || model.download.state === 'resolving');
  const onDisk = ['builtin', 'on-disk', 'file', 'stale'].includes(model.state);
  return (
    <article className="model-card" data-model-card={model.id}>
      <div className="model-card-head">
        <h3 title={model.id}>{model.name}</h3>
        <span className={`tag origin-${model.origin}`}>{ORIGIN_WORDS[model.origin] ?? model.origin}</span>
      </div>
      <div className="mono small muted wrap">{model.id}</div>
      <div className="small">
        {model.tasks.join(', ') || 'no tasks'} · {DISK_WORDS[model.state] ?? model.state}
        {model.bytes > 0 ? ` · ${formatBytes(model.bytes)}` : ''}
        {model.inUse ? ' · in use' : ''}
      </div>
      {model.facts && (
        <div className="small muted">
          {model.facts.architecture} · {model.facts.blockCount} layers · trained context {model.facts.trainedContext}
        </div>
      )}
      {model.source?.kind === 'huggingface' && <div className="small muted wrap">{model.source.repo}</div>}
      {downloading && model.download && <ProgressBar done={model.download.doneBytes} total={model.download.totalBytes} label={`Download of ${model.id}`} />}
      <div className="row-actions">
        <button type="button" className="primary" onClick={onLaunch}>
          Launch…
        </button>
        {!onDisk && !downloading && (
          <ActionButton
            action={async () => {
              await api('POST', 'models/pull', { id: model.id });
              await onChanged();
            }}
            done={`Downloading ${model.name}`}
          >
            Download
          </ActionButton>
        )}
        {model.origin !== 'builtin' && !model.inUse && !downloading && (
          <ConfirmButton
            title={`Remove ${model.name}?`}
            question={<p>Its files{model.origin === 'added' ? ' and its card' : ''} are deleted from this node&apos;s disk.</p>}
            confirm="Remove"
            done={`Removed ${model.name}`}
            action={async () => {
              await api('DELETE', `models/${encodeURIComponent(model.id)}`);
              await onChanged();
            }}
          >
            Remove
          </ConfirmButton>
        )}
      </div>
    </article>
  );
}

function SearchResult({ result, onAdded }: { result: SearchResultView; onAdded: () => Promise<void> }): ReactNode {
  const [quant, setQuant] = useState(result.defaultQuant ?? result.models[0]?.tag ?? '');
  const chosen = result.models.find((m) => m.tag === quant);
  return (
    <div className="row" data-search-result={result.repo}>
      <div className="row-main">
        <strong className="wrap">{result.repo}</strong>
        <div className="muted small">
          {result.downloads.toLocaleString()} downloads · {result.likes.toLocaleString()} likes · updated {result.updatedAt.slice(0, 10)}
        </div>
      </div>
      <div className="row-actions">
        {result.models.length > 0 ? (
          <>
            <select aria-label={`Quantization of ${result.repo}`} value={quant} onChange={(e) => setQuant(e.target.value)}>
              {result.models.map((m) => (
                <option key={m.tag} value={m.tag}>
                  {m.tag} ({formatBytes(m.bytes)})
                </option>
              ))}
            </select>
            <ActionButton
              className="primary"
              action={async () => {
                await api('POST', 'models/add', { repo: result.repo, ...(quant ? { quant } : {}) });
                await onAdded();
              }}
              done={`Added ${result.repo}${chosen ? `:${chosen.tag}` : ''}`}
            >
              Add
            </ActionButton>
          </>
        ) : (
          <span className="muted small">no usable GGUF</span>
        )}
      </div>
    </div>
  );
}

function HubSearch({ onAdded }: { onAdded: () => Promise<void> }): ReactNode {
  const [query, setQuery] = useState('');
  const [results, setResults] = useState<SearchResultView[] | null>(null);
  const [error, setError] = useState<ApiError | Error | null>(null);
  const [busy, setBusy] = useState(false);
  const search = async (): Promise<void> => {
    setBusy(true);
    setError(null);
    try {
      const res = await api<{ results: SearchResultView[] }>('GET', `models/search?q=${encodeURIComponent(query.trim())}`);
      setResults(res.results);
    } catch (e) {
      setResults(null);
      setError(e instanceof Error ? e : new Error(String(e)));
    } finally {
      setBusy(false);
    }
  };
  const reason = error instanceof ApiError ? error.reason : null;
  return (
    <section className="card" aria-labelledby="hub-title">
      <h2 id="hub-title">Add from Hugging Face</h2>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (query.trim() !== '') void search();
        }}
      >
        <input aria-label="Search Hugging Face" placeholder="Model name, owner/repo or GGUF file" value={query} onChange={(e) => setQuery(e.target.value)} />
        <button type="submit" disabled={busy || query.trim() === ''}>
          {busy ? 'Searching…' : 'Search'}
        </button>
      </form>
      {error && (
        <ErrorBox title={reason === 'HUB_UNREACHABLE' ? 'Hugging Face is unreachable' : reason === 'HUB_AUTH_REQUIRED' ? 'Hugging Face needs a token' : 'Search failed'}>
          {error.message}
        </ErrorBox>
      )}
      {results && results.length === 0 && <Empty>No repositories match.</Empty>}
      {results && results.length > 0 && (
        <div className="rows">
          {results.map((r) => (
            <SearchResult key={r.repo} result={r} onAdded={onAdded} />
          ))}
        </div>
      )}
    </section>
  );
}

/** Refresh interval of the download list while something downloads (nothing is polled otherwise). */
const DOWNLOAD_REFRESH_MS = 1000;

export function ModelsPage(): ReactNode {
  const [models, setModels] = useState<ModelView[] | null>(null);
  const [cardErrors, setCardErrors] = useState<ModelListView['errors']>([]);
  const [downloads, setDownloads] = useState<DownloadView[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [launching, setLaunching] = useState<ModelView | null>(null);
  const mounted = useRef(true);

  const load = useCallback(async () => {
    try {
      const [list, dl] = await Promise.all([api<ModelListView>('GET', 'models'), api<DownloadListView>('GET', 'models/downloads')]);
      if (!mounted.current) return;
      setModels(list.models);
      setCardErrors(list.errors);
      setDownloads(dl.downloads);
      setError(null);
    } catch (e) {
      if (mounted.current) setError(errorMessage(e));
    }
  }, []);

  useEffect(() => {
    mounted.current = true;
    void load();
    return () => {
      mounted.current = false;
    };
  }, [load]);

  const active = downloads.some((d) => d.state === 'downloading' || d.state === 'resolving');
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => void load(), DOWNLOAD_REFRESH_MS);
    return () => {
      clearInterval(timer);
      // Once more after the last download ends, so the cards show what is now on disk.
      void load();
    };
  }, [active, load]);

  return (
    <div className="page models-page">
      <section className="card" aria-labelledby="running-title">
        <h2 id="running-title">Running</h2>
        <Instances />
      </section>
      <Downloads downloads={downloads} />
      <section className="card" aria-labelledby="cards-title">
        <h2 id="cards-title">Models</h2>
        {error && <ErrorBox title="Cannot list the models">{error}</ErrorBox>}
        {models === null && !error && <Empty>Reading the model cards…</Empty>}
        {models && models.length === 0 && <Empty>No model cards yet. Add one from Hugging Face below.</Empty>}
        {models && models.length > 0 && (
          <div className="model-grid">
            {models.map((m) => (
              <ModelCard key={m.id} model={m} onLaunch={() => setLaunching(m)} onChanged={load} />
            ))}
          </div>
        )}
        {cardErrors.length > 0 && (
          <ul className="warnings">
            {cardErrors.map((e) => (
              <li key={e.file}>
                ⚠ {e.file}: {e.message}
              </li>
            ))}
          </ul>
        )}
      </section>
      <HubSearch onAdded={load} />
      {launching && <LaunchDialog model={launching} onClose={() => setLaunching(null)} />}
    </div>
  );
}

