// The cluster: topology, members and what can be done to them, nodes on the network to invite,
// invitations to answer, join codes, and leaving or dissolving.

import { useState, type ReactNode } from 'react';
import { api } from '../api.js';
import { Empty, HealthBadge, UsageBar } from '../components/Bits.js';
import { ActionButton, ConfirmButton, Modal, useAction } from '../components/Modal.js';
import { ConnectPanel } from '../components/ConnectPanel.js';
import { ReasonBadges } from '../components/HealthReasons.js';
import { ClusterDownloads } from '../components/ClusterDownloads.js';
import { EnginesProvision } from '../components/EnginesProvision.js';
import { Topology, usageOf } from '../components/Topology.js';
import { formatDuration } from '../lib/format.js';
import type { MemberView, StateView } from '../lib/types.js';
import { useLive } from '../live.js';

function NicknameButton({ member, onDone }: { member: MemberView; onDone: () => Promise<void> }): ReactNode {
  const [open, setOpen] = useState(false);
  const [value, setValue] = useState(member.nickname ?? '');
  const [busy, run] = useAction();
  const save = (nickname: string | null): void =>
    void run(async () => {
      await api('POST', 'cluster/nickname', { node: member.nodeId, nickname });
      await onDone();
    }, nickname === null ? 'Nickname cleared' : 'Nickname saved').then((ok) => ok && setOpen(false));
  return (
    <>
      <button type="button" onClick={() => setOpen(true)}>
        Nickname
      </button>
      {open && (
        <Modal
          title={`Nickname for ${member.name}`}
          onClose={() => setOpen(false)}
          actions={
            <>
              {member.nickname !== null && (
                <button type="button" disabled={busy} onClick={() => save(null)}>
                  Clear
                </button>
              )}
              <button type="button" onClick={() => setOpen(false)}>
                Cancel
              </button>
              <button type="button" className="primary" disabled={busy || value.trim() === ''} onClick={() => save(value.trim())}>
                Save
              </button>
            </>
          }
        >
          <form
            onSubmit={(e) => {
              e.preventDefault();
              if (value.trim() !== '') save(value.trim());
            }}
          >
            <label>
              Nickname (every member sees it)
              <input value={value} maxLength={64} onChange={(e) => setValue(e.target.value)} />
            </label>
          </form>
        </Modal>
      )}
    </>
  );
}

/**
 * A node with no other member is standalone to its operator: the first launch founds a cluster of one
 * (placement needs a log), which changes nothing they can see or do, so the page does not say "cluster".
 */
export function isStandalone(state: StateView): boolean {
  return state.members.filter((m) => !m.isSelf).length === 0;
}

function Members({ state }: { state: StateView }): ReactNode {
  const { refresh } = useLive();
  if (isStandalone(state)) {
    return <Empty>This node is on its own. Invite a node below, or join a cluster with a code.</Empty>;
  }
  return (
    <div className="rows">
      {state.members.map((m) => {
        const usage = usageOf(state.resources[m.nodeId]);
        return (
          <div key={m.nodeId} className="row member" data-member-row={m.nodeId}>
            <div className="row-main">
              <div className="row-title">
                <strong>{m.nickname ?? m.name}</strong>
                {m.nickname !== null && <span className="muted"> ({m.name})</span>}
                {m.isSelf && <span className="tag">This node</span>}
                {m.isMaster && <span className="tag tag-master">Master</span>}
                {m.hostPreferred && !m.isMaster && <span className="tag">Preferred host</span>}
                <HealthBadge health={m.health} />
                <ReasonBadges health={m.health} />
              </div>
              <div className="muted mono" title="Fingerprint: compare it with what this member's own dashboard or `shoal status` shows">
                {m.fingerprint}
              </div>
              {m.health.reasons.length > 0 && (
                <ul className="reasons">
                  {m.health.reasons.map((r, i) => (
                    <li key={i}>
                      {r.text} <span className="muted">— {r.remediation}</span>
                    </li>
                  ))}
                </ul>
              )}
              <div className="usages">
                <UsageBar label="Memory" fraction={usage.memory} text={usage.text.memory} />
                <UsageBar label="CPU" fraction={usage.cpu} text={usage.text.cpu} />
                <UsageBar label="GPU" fraction={usage.gpu} text={usage.text.gpu} />
              </div>
            </div>
            <div className="row-actions">
              <NicknameButton member={m} onDone={refresh} />
              {!m.hostPreferred && (
                <ActionButton
                  action={async () => {
                    await api('POST', 'cluster/make-host', { node: m.nodeId });
                    await refresh();
                  }}
                  done={`${m.name} will be the master`}
                  title="Prefer this node as the cluster's master"
                >
                  Make host
                </ActionButton>
              )}
              {!m.isSelf && (
                <ConfirmButton
                  title={`Remove ${m.name}?`}
                  question={
                    <p>
                      <strong>{m.name}</strong> leaves the cluster and its model instances are placed elsewhere where possible. It can be invited again later.
                    </p>
                  }
                  confirm="Remove"
                  done={`${m.name} removed`}
                  action={async () => {
                    await api('POST', 'cluster/remove', { node: m.nodeId });
                    await refresh();
                  }}
                >
                  Remove
                </ConfirmButton>
              )}
            </div>
          </div>
        );
      })}
    </div>
  );
}

function Discovered({ state }: { state: StateView }): ReactNode {
  const { refresh } = useLive();
  if (state.discovered.length === 0) {
    return <Empty>No other Shoal nodes seen on this network. Nodes on other networks can join with a code.</Empty>;
  }
  return (
    <div className="rows">
      {state.discovered.map((d) => (
        <div key={d.nodeId} className="row" data-discovered-row={d.nodeId}>
          <div className="row-main">
            <strong>{d.name}</strong>
            <div className="muted mono">
              Fingerprint {d.fingerprint}
            </div>
          </div>
          <div className="row-actions">
            <ActionButton
              className="primary"
              action={async () => {
                await api('POST', 'cluster/invite', { node: d.nodeId });
                await refresh();
              }}
              done={`Invitation sent to ${d.name}: approve it there after comparing fingerprints`}
            >
              Invite
            </ActionButton>
          </div>
        </div>
      ))}
    </div>
  );
}

function Invitations({ state }: { state: StateView }): ReactNode {
  const { refresh } = useLive();
  if (state.invitations.length === 0) return null;
  return (
    <section className="card attention" aria-labelledby="inv-title">
      <h2 id="inv-title">Invitations to a cluster</h2>
      <div className="rows">
        {state.invitations.map((inv) => (
          <div key={inv.id} className="row" data-invitation={inv.id}>
            <div className="row-main">
              <div>
                <strong>{inv.fromName}</strong> invites this node into its cluster.
              </div>
              <div>
                Inviter&apos;s fingerprint: <span className="fingerprint">{inv.fingerprint}</span>
              </div>
              <p className="muted">
                Approve only if this matches what <code>shoal status</code> (or this dashboard) shows on {inv.fromName}. Expires in {formatDuration(Date.parse(inv.expiresAt) - Date.now())}.
              </p>
            </div>
            <div className="row-actions">
              <ActionButton
                className="primary"
                action={async () => {
                  await api('POST', 'cluster/approve', { invitation: inv.id });
                  await refresh();
                }}
                done={`Joined ${inv.fromName}'s cluster`}
              >
                Approve
              </ActionButton>
              <ActionButton
                action={async () => {
                  await api('POST', 'cluster/decline', { invitation: inv.id });
                  await refresh();
                }}
                done="Invitation declined"
              >
                Decline
              </ActionButton>
            </div>
          </div>
        ))}
      </div>
    </section>
  );
}

function JoinCodes(): ReactNode {
  const { refresh } = useLive();
  const [code, setCode] = useState<{ code: string; expiresAt: string } | null>(null);
  const [input, setInput] = useState('');
  const [busy, run] = useAction();
  return (
    <div className="join-codes">
      <div>
        <ActionButton action={async () => setCode(await api<{ code: string; expiresAt: string }>('POST', 'cluster/invite-code'))}>Create a join code</ActionButton>
        {code && (
          <div className="code-out">
            <code className="mono wrap">{code.code}</code>
            <span className="muted">
              Single use, valid {formatDuration(Date.parse(code.expiresAt) - Date.now())}. On the other node: <code>shoal join CODE</code> or paste it in its dashboard.
            </span>
          </div>
        )}
      </div>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            await api('POST', 'cluster/join', { code: input.trim() });
            setInput('');
            await refresh();
          }, 'Joined the cluster');
        }}
      >
        <input aria-label="Join code" placeholder="shoal1-… join code from another node" value={input} onChange={(e) => setInput(e.target.value)} />
        <button type="submit" disabled={busy || input.trim() === ''}>
          Join
        </button>
      </form>
    </div>
  );
}

export function ClusterPage(): ReactNode {
  const { state, refresh } = useLive();
  if (!state) return <Empty>Reading the cluster…</Empty>;
  const master = state.members.find((m) => m.isMaster);
  const standalone = isStandalone(state);
  return (
    <div className="page cluster-page">
      <section className="card" aria-labelledby="topo-title">
        <div className="card-head">
          <h2 id="topo-title">Topology</h2>
          <span className="muted" data-cluster-role={standalone ? 'standalone' : 'member'}>
            {standalone ? 'Standalone: this node runs on its own' : `${state.members.length} members · master ${master ? (master.nickname ?? master.name) : 'being elected'} · term ${state.term}`}
          </span>
        </div>
        <Topology state={state} />
        <p className="muted small">
          This node: <strong>{state.name}</strong>, fingerprint <span className="fingerprint">{state.fingerprint}</span> <HealthBadge health={state.health} />
        </p>
      </section>

      <Invitations state={state} />

      <ConnectPanel state={state} />

      <section className="card" aria-labelledby="members-title">
        <h2 id="members-title">Members</h2>
        <Members state={state} />
      </section>

      <ClusterDownloads state={state} />

      <EnginesProvision state={state} />

      <section className="card" aria-labelledby="net-title">
        <h2 id="net-title">Nodes on this network</h2>
        <Discovered state={state} />
        <h3>Join codes</h3>
        <JoinCodes />
      </section>

      {!standalone && (
        <section className="card" aria-labelledby="leave-title">
          <h2 id="leave-title">Leave or dissolve</h2>
          <div className="row-actions">
            <ConfirmButton
              title="Leave the cluster?"
              question={<p>This node leaves and runs on its own. The other members carry on; its model instances are placed elsewhere where possible.</p>}
              confirm="Leave"
              done="This node left the cluster"
              action={async () => {
                await api('POST', 'cluster/leave');
                await refresh();
              }}
            >
              Leave cluster
            </ConfirmButton>
            <ConfirmButton
              title="Dissolve the cluster?"
              question={<p>Every member returns to running on its own and all cluster instances stop. This cannot be undone; forming the cluster again needs new invitations.</p>}
              confirm="Dissolve"
              done="Cluster dissolved"
              action={async () => {
                await api('POST', 'cluster/dissolve');
                await refresh();
              }}
            >
              Dissolve cluster
            </ConfirmButton>
          </div>
        </section>
      )}
    </div>
  );
}
