// Shown when the node refuses control routes (the page is not on the node's own machine): asks for
// the node's admin token, which `shoal token` prints there, and keeps it in this browser.

import { useState, type ReactNode } from 'react';
import { setAdminToken } from '../api.js';

export function TokenPrompt(): ReactNode {
  const [token, setToken] = useState('');
  return (
    <section className="card token-prompt" aria-labelledby="token-title">
      <h2 id="token-title">This node needs its admin token</h2>
      <p>
        You are not on the node&apos;s own machine, so cluster and model controls need the node&apos;s admin token. Run <code>shoal token</code> on that machine and paste what it prints here. It is kept in
        this browser; a restarted node has a new one.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setAdminToken(token);
        }}
      >
        <label>
          Admin token
          <input type="password" autoComplete="off" spellCheck={false} value={token} onChange={(e) => setToken(e.target.value)} placeholder="64 hex characters" />
        </label>
        <button type="submit" className="primary" disabled={token.trim() === ''}>
          Use token
        </button>
      </form>
    </section>
  );
}
