// "Connect a client": where an OpenAI, Anthropic or Ollama client points to reach this node, whether
// it needs a key, and a first request as curl, Python and JavaScript (lib/connect.ts writes them).

import { useState, type ReactNode } from 'react';
import { clientSnippets, isLoopbackOrigin, KEY_VARIABLE, openAiBaseUrl } from '../lib/connect.js';
import type { StateView } from '../lib/types.js';

/** A model the node serves for the examples: a ready one first, else any it holds. */
function exampleModel(state: StateView): string {
  const ready = [...state.models.filter((m) => m.state === 'ready').map((m) => m.modelId), ...state.instances.filter((i) => i.runners.some((r) => r.state === 'ready')).map((i) => i.modelId)];
  return ready[0] ?? state.models[0]?.modelId ?? state.instances[0]?.modelId ?? 'shoal/tiny';
}

export function ConnectPanel({ state }: { state: StateView }): ReactNode {
  const origin = window.location.origin;
  const snippets = clientSnippets({ origin, apiKeyRequired: state.apiKeyRequired, model: exampleModel(state) });
  const [chosen, setChosen] = useState<string>(snippets[0]!.id);
  const shown = snippets.find((s) => s.id === chosen) ?? snippets[0]!;
  return (
    <section className="card connect" aria-labelledby="connect-title" data-connect>
      <div className="card-head">
        <h2 id="connect-title">Connect a client</h2>
        <span className="muted small" data-version={state.version}>
          Shoal {state.version}
        </span>
      </div>
      <dl className="connect-facts">
        <dt>OpenAI base URL</dt>
        <dd>
          <code className="wrap" data-base-url>
            {openAiBaseUrl(origin)}
          </code>
        </dd>
        <dt>Anthropic, Ollama</dt>
        <dd>
          <code className="wrap">{origin}</code> <span className="muted">(/v1/messages, /api/chat)</span>
        </dd>
        <dt>API key</dt>
        <dd data-api-key={state.apiKeyRequired ? 'required' : 'none'}>
          {state.apiKeyRequired ? (
            <>
              Needed: send one of the keys given with <code>--api-key</code> (or <code>SHOAL_API_KEYS</code>) or set for the cluster (<code>shoal config</code>) as <code>Authorization: Bearer</code>. The examples read it from <code>${KEY_VARIABLE}</code>.
            </>
          ) : (
            'Not needed: any key, or none, is accepted.'
          )}
        </dd>
      </dl>
      {isLoopbackOrigin(origin) && <p className="muted small">From another machine, use this machine&apos;s network address instead of {new URL(origin).hostname}.</p>}
      <div className="tabs" role="tablist" aria-label="Client examples">
        {snippets.map((s) => (
          <button key={s.id} type="button" role="tab" aria-selected={s.id === shown.id} className={s.id === shown.id ? 'active' : ''} onClick={() => setChosen(s.id)}>
            {s.label}
          </button>
        ))}
      </div>
      <div className="code-block" role="tabpanel" data-snippet={shown.id}>
        <pre>
          <code>{shown.code}</code>
        </pre>
      </div>
    </section>
  );
}
