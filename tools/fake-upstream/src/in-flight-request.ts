import type { ServerResponse } from 'node:http';
import type { RequestTicket } from './stats';

/**
 * One counted inference request from arrival until its response finishes or its connection
 * closes. Owns the request's only timer, so a client that goes away stops all work for it.
 */
export class InFlightRequest {
  /** The connection closed or the response finished: write nothing more. */
  closed = false;
  private cutByServerFlag = false;
  private timer: NodeJS.Timeout | undefined;
  private wake: ((ok: boolean) => void) | undefined;

  constructor(
    readonly res: ServerResponse,
    readonly ticket: RequestTicket,
  ) {
    res.once('close', () => {
      this.closed = true;
      this.stopTimer(false);
      ticket.finish(!res.writableFinished && !this.cutByServerFlag);
    });
  }

  /** Waits `ms` milliseconds; resolves false (at once) when the connection closes first. */
  pause(ms: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(() => this.stopTimer(true), ms);
    });
  }

  /** Marks the end of this request as the server's doing (not counted as aborted), e.g. before a reset. */
  cutByServer(): void {
    this.cutByServerFlag = true;
  }

  /** Kills the connection mid-response, after what was written reaches the socket; not counted as aborted. */
  cut(): void {
    this.cutByServerFlag = true;
    const socket = this.res.socket;
    if (socket) socket.destroySoon();
    else this.res.destroy();
  }

  private stopTimer(ok: boolean): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const wake = this.wake;
    this.wake = undefined;
    wake?.(ok);
  }
}
