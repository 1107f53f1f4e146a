import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { afterAPoll, type LoopStalls } from './loop-stalls';

/** The connection limits in force (README "Security"). */
export interface SlotLimits {
  /** `gateway.max_connections`: open client connections at once. */
  max: number;
  /** `gateway.max_connections_per_address`: open connections of one remote address at once. */
  perAddress: number;
}

/** One open connection: its remote address and the requests it has in progress. */
interface Slot {
  address: string;
  inFlight: number;
  /**
   * `socket.bytesRead` when it last went idle: bytes read since are a request on its way, and the
   * connection is no longer closed for a newcomer.
   */
  readWhenIdle?: number;
  /** It only lingers after an early answer: closed for a newcomer whatever it reads (that is dropped). */
  lingers?: boolean;
}

/**
 * The connection slots of a gateway's HTTP server (README "Security", `gateway.max_connections`,
 * `gateway.max_connections_per_address`). A new connection takes a slot; when none is free, or its
 * address already holds its share, the oldest **idle** connection (a keep-alive connection that
 * answered a request and has none in progress), of that address first for the share, is closed to
 * make room; only when no such connection exists is the new one closed as it arrives, unanswered.
 * So idle keep-alive connections, however many one client opens, never keep others out, and one
 * address can never hold more than its share. Connections with a request in progress, and fresh
 * ones that have not sent a request yet (bounded by `gateway.header_timeout_ms`), are never closed
 * for a newcomer, nor is an idle one that has read bytes of its next request. A request whose first
 * bytes are still on their way on an idle connection at that moment can be cut, as with any
 * keep-alive close; but right after a stall of the event loop ({@link LoopStalls}: the process was
 * stopped or starved, and what clients sent meanwhile is still unread in the kernel), the newcomer
 * is let in over the cap for one turn of the loop, and the choice of the connection to close (or
 * the newcomer's refusal) is made once that turn has read what the idle connections hold. The
 * limits are read on every connection, so a config reload applies at once. Node's own
 * `server.maxConnections` is left unset: it drops a connection before anyone can make room.
 */
export class ConnectionSlots {
  private readonly slots = new Map<Socket, Slot>();
  /** Idle connections, oldest idle first (a Map iterates in insertion order). */
  private readonly idle = new Map<Socket, Slot>();
  private readonly perAddress = new Map<string, number>();

  constructor(
    private readonly limits: () => SlotLimits,
    private readonly stalls: LoopStalls,
  ) {}

  /**
   * Takes over the connection accounting of `server`: call once, before it listens. A request that
   * comes as `checkContinue` instead of `request` (`Expect: 100-continue`) must be passed to
   * {@link busy} by whoever answers that event.
   */
  attach(server: Server): void {
    // Before Node's own HTTP listener: a refused connection is closed before a parser is set on it.
    server.prependListener('connection', (socket: Socket) => this.admit(socket));
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.busy(req.socket, res));
  }

  /** Open connections, and those of `address` (for tests and `/status`-like views). */
  count(address?: string): number {
    return address === undefined ? this.slots.size : (this.perAddress.get(address) ?? 0);
  }

  private admit(socket: Socket): void {
    const address = socket.remoteAddress ?? '';
    if (this.full(address) && this.stalls.settling()) {
      // Idle-looking connections may hold unread requests: decide once a poll phase has read them.
      const slot = this.take(socket, address);
      afterAPoll(() => {
        if (!this.slots.has(socket) || this.makeRoom(address, 1)) return;
        this.release(socket, slot);
        socket.destroy();
      });
      return;
    }
    if (!this.makeRoom(address, 0)) return void socket.destroy();
    this.take(socket, address);
  }

  /** Whether a new connection of `address` finds its share or the cap taken. */
  private full(address: string): boolean {
    const { max, perAddress } = this.limits();
    return this.count(address) >= perAddress || this.slots.size >= max;
  }

  /**
   * Closes the idle connection (at most one for the share, one for the cap) that a connection of
   * `address` needs closed to fit the limits; `counted` is 1 when that connection already holds a
   * slot, else 0.
   * @returns false when there is no idle one to close for a limit it is over
   */
  private makeRoom(address: string, counted: number): boolean {
    const { max, perAddress } = this.limits();
    if (this.count(address) - counted >= perAddress && !this.closeOldestIdle(address)) return false;
    if (this.slots.size - counted >= max && !this.closeOldestIdle()) return false;
    return true;
  }

  private take(socket: Socket, address: string): Slot {
    const slot: Slot = { address, inFlight: 0 };
    this.slots.set(socket, slot);
    this.perAddress.set(address, this.count(address) + 1);
    socket.once('close', () => this.release(socket, slot));
    return slot;
  }

  /** Marks the connection of `res` busy until `res` closes; then it is idle, the newest idle. */
  busy(socket: Socket, res: ServerResponse): void {
    const slot = this.slots.get(socket);
    if (!slot) return;
    slot.inFlight++;
    this.idle.delete(socket);
    res.once('close', () => {
      slot.inFlight--;
      if (slot.inFlight > 0 || socket.destroyed || !this.slots.has(socket)) return;
      slot.readWhenIdle = socket.bytesRead;
      this.idle.delete(socket);
      this.idle.set(socket, slot);
    });
  }

  /**
   * Counts the connection as idle from now on, whatever it had in progress: it was answered and only
   * lingers for the client to read that answer (a request the HTTP parser refused), so a newcomer
   * may close it.
   */
  lingering(socket: Socket): void {
    const slot = this.slots.get(socket);
    if (!slot) return;
    slot.lingers = true;
    if (!this.idle.has(socket)) this.idle.set(socket, slot);
  }

  /**
   * Closes the connection idle the longest (of `address` when given) that has read nothing since
   * it went idle; false when there is none.
   */
  private closeOldestIdle(address?: string): boolean {
    for (const [socket, slot] of this.idle) {
      if (address !== undefined && slot.address !== address) continue;
      if (!slot.lingers && socket.bytesRead !== slot.readWhenIdle) continue;
      // Freed now, not when the close event comes: the newcomer takes the slot at once.
      this.release(socket, slot);
      socket.destroy();
      return true;
    }
    return false;
  }

  private release(socket: Socket, slot: Slot): void {
    if (!this.slots.delete(socket)) return;
    this.idle.delete(socket);
    const left = this.count(slot.address) - 1;
    if (left > 0) this.perAddress.set(slot.address, left);
    else this.perAddress.delete(slot.address);
  }
}
