import type { FleetFileProvider } from './fleet-config';
import type { HaproxyServer } from './haproxy';
import type { ManagedProcess } from './managed-process';
import type { SupervisorOptions } from './supervisor';

/** The shapes of a local fleet (README "Running a fleet"): how it is started and what a running one offers (`startLocalFleet`). */

export interface FleetOptions {
  /** Port of the load balancer on 127.0.0.1 (`bind` may widen it); 0 = a free one. @defaultValue 0 */
  port?: number;
  /** Address HAProxy binds, e.g. `0.0.0.0`. @defaultValue '127.0.0.1' */
  bindHost?: string;
  /** Port of the status exporter; 0 = a free one. @defaultValue 0 */
  exporterPort?: number;
  /** Port of HAProxy's stats page; 0 = a free one. @defaultValue 0 */
  statsPort?: number;
  /** Use this Redis; otherwise the fleet runs its own `redis-server` on a free port (no persistence). */
  redisUrl?: string;
  /** Where each process writes `<name>.log`. */
  logDir: string;
  /** `IOP_SHUTDOWN_GRACE_MS` of the gateways. @defaultValue 30000 */
  shutdownGraceMs?: number;
  /** `LOG_LEVEL` of the gateways and the exporter. @defaultValue 'info' */
  logLevel?: string;
  /** Workspace root holding dist/ and deploy/. @defaultValue `WORKSPACE_ROOT` (`local-fleet.ts`) */
  root?: string;
  /**
   * The edge.yaml every gateway and the exporter run (absolute, or relative to `root`); the fleet
   * sets `REDIS_URL`, `FLEET_UPSTREAM_A` and `FLEET_UPSTREAM_B` for it. @defaultValue `FLEET_CONFIG` (`local-fleet.ts`)
   */
  config?: string;
  /** Where supervision and rolling restarts write their lines. @defaultValue stderr */
  log?: (line: string) => void;
  /** Back-off of the restarts of crashed processes (`Supervisor`). */
  supervision?: Omit<SupervisorOptions, 'log'>;
}

export interface FleetReplica {
  /** HAProxy's server name, gw1..gw3. */
  readonly name: string;
  readonly port: number;
  readonly process: ManagedProcess;
}

export interface FleetUpstream {
  /** The `${VAR}` the file reaches it by (`FLEET_UPSTREAM_A`, `FLEET_UPSTREAM_B`). */
  readonly variable: string;
  /** The file's pool providers on it, with `max_concurrency` as the file says it (none when the file does not use it). */
  readonly providers: readonly FleetFileProvider[];
  /** Origin of the fake GPU server (its stats are at `/__stats`). */
  readonly origin: string;
  readonly process: ManagedProcess;
}

/** A running local fleet: Redis, fake GPU servers, 3 gateways, the exporter, HAProxy. */
export interface LocalFleet {
  /** The one URL clients use: HAProxy's, with `/v1`. */
  readonly url: string;
  readonly exporterUrl: string;
  readonly statsUrl: string;
  readonly redisUrl: string;
  /** The edge.yaml in use (absolute). */
  readonly configFile: string;
  /** Redis when the fleet started its own, else undefined. */
  readonly redis?: ManagedProcess;
  readonly replicas: readonly FleetReplica[];
  readonly upstreams: readonly FleetUpstream[];
  /** HAProxy's view of the replicas. */
  servers(): Promise<HaproxyServer[]>;
  /** Polls HAProxy until `server`'s status satisfies `ok`. @throws Error after `timeoutMs`. */
  waitForServer(server: string, ok: (status: string) => boolean, timeoutMs?: number): Promise<void>;
  /**
   * One step of a rolling update: take the replica out of HAProxy (runtime API, `state maint`: no
   * new request goes to it, the ones it holds go on), SIGTERM it and wait for its drain and exit,
   * start it again on its port, put it back (`state ready`) and wait until HAProxy has it UP. A
   * replica that is not running (it crashed) is simply started. Supervision of this replica is
   * suspended meanwhile.
   * @throws Error when the replica does not start again or HAProxy does not take it back.
   */
  restartReplica(index: number): Promise<void>;
  /**
   * Restarts every replica in turn ({@link restartReplica}); a replica that fails does not stop
   * the others. Logs each step. @returns the failures, as "gwN: reason" lines (empty when all went well).
   */
  rollingRestart(): Promise<string[]>;
  /** Stops everything (SIGTERM, gateways drained) and closes the logs. Idempotent. */
  close(): Promise<void>;
}
