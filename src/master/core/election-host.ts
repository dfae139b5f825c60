import type { ElectionHost, Role } from '../../election/bully.js';
import type { NodeId } from '../../common/ids.js';
import type { CoreContext } from './context.js';
import type { MasterDuties } from './master-duties.js';
import type { Sync } from './sync.js';
import { commonPrefix } from './term-ranges.js';

/** The election's view of a node: its context, and the parts that fetch and lead. */
export function electionHost(ctx: CoreContext, master: MasterDuties, sync: Sync): ElectionHost {
  return {
    selfId: ctx.self.nodeId,
    timings: ctx.cfg,
    now: () => ctx.now(),
    get role() {
      return ctx.role;
    },
    set role(role: Role) {
      ctx.role = role;
    },
    get masterId() {
      return ctx.masterId;
    },
    set masterId(masterId: NodeId | null) {
      ctx.masterId = masterId;
    },
    get lastHeardMasterMs() {
      return ctx.lastHeardMasterMs;
    },
    set lastHeardMasterMs(ms: number) {
      ctx.lastHeardMasterMs = ms;
    },
    get term() {
      return ctx.term;
    },
    get maxSeenTerm() {
      return ctx.maxSeenTerm;
    },
    leaving: () => ctx.departing !== null,
    catchingUp: () => ctx.sync !== null || ctx.reproposals.size > 0,
    member: (nodeId) => ctx.member(nodeId),
    dissolved: () => ctx.log.state.dissolved,
    liveOthers: () => ctx.liveOthers(),
    position: () => ctx.position(),
    extendsMine: (reply) => {
      const common = commonPrefix(ctx.log.shape(), { terms: reply.terms, lastIdx: reply.lastIdx });
      return common === null || common === ctx.log.lastIdx;
    },
    changed: () => ctx.changed(),
    claimTerm: (term) => {
      ctx.persistTerm(term);
      ctx.counters.claims++;
      ctx.sync = null;
      ctx.needSync = false;
      // Our log is about to be the master's: nothing of it will be cut, nothing needs re-proposing.
      ctx.reproposals.clear();
      ctx.reproposalDecided.clear();
    },
    announceElection: (position) => ctx.publish({ type: 'election', clusterId: ctx.clusterId, term: ctx.term, ...position }),
    answerAlive: (to) => ctx.publish({ type: 'alive', clusterId: ctx.clusterId, term: ctx.term, to }),
    requestStatus: (term) => ctx.publish({ type: 'status-request', clusterId: ctx.clusterId, term }),
    announceMaster: () => {
      master.publishCoordinator();
      master.publishHeartbeat();
    },
    fetchFrom: (nodeId) => sync.sendSyncRequest(nodeId, 'reconcile'),
    installSnapshot: (snapshot) => sync.installSnapshot(snapshot),
    acceptRecords: (records) => sync.acceptRecords(records),
    becomeMaster: () => master.becomeMaster(),
  };
}
