import type { Socket } from 'node:net';
import { buildConnector } from 'undici';

/**
 * Cutting an upstream call by halves (docs/architecture.md, "Invariants and their tests": a call holds
 * its slot, as the model server sees it, until the server has written its answer's last byte or has
 * seen the connection close).
 *
 * When the gateway cuts a call (the client left, a timeout, a fence, a cap), undici destroys the
 * call's socket: the close leaves at once, but nothing tells the gateway when the server has read
 * it, and a busy server can read the next caller's request in the same event-loop turn as the close
 * (the meter of the chaos suite saw 3 calls at once at a limit of 2 behind a 100 ms settle delay).
 * Here the socket is closed by halves instead: the gateway sends its FIN, keeps reading (and drops)
 * what the server still writes, and closes the socket only when the server closes its own side
 * (uvicorn, and so vLLM, and Node servers do that as they read the client's close; Go servers, and
 * so Ollama, once the handler has stopped) or after `closeWaitMs`. The call's lease is released after
 * that ({@link upstreamClosing}), so the next call never reaches the server before the server has
 * seen this one end.
 */

/** The close of each socket being closed by halves: resolves once the socket is closed. */
const closing = new WeakMap<object, Promise<void>>();

/**
 * An undici connector (undici docs, "Client", `connect` option) whose sockets are closed by halves
 * when a request on them is aborted (see the module comment). `closeWaitMs`: the longest wait for
 * the server's own close, in ms (`close_wait_ms` of the adapter); the socket is destroyed then.
 */
export function halfClosingConnector(closeWaitMs: number): buildConnector.connector {
  const connect = buildConnector({});
  return (options, callback) =>
    connect(options, (err, socket) => {
      // Before undici adds its listeners: what it adds is what leaves the socket at a cut.
      if (socket) closeByHalvesWhenAborted(socket as Socket, closeWaitMs, listenersOf(socket as Socket));
      // The callback's two shapes (an error, or a socket) are passed on as they came.
      (callback as (e: Error | null, s: typeof socket) => void)(err, socket);
    });
}

/**
 * The close of `socket` when the gateway cut the call on it and it is being closed by halves:
 * resolves once the server closed its side (or `closeWaitMs` passed) and the socket is gone; never
 * rejects. `undefined` when the socket is not being closed that way (the call ended, or the socket
 * was destroyed at once).
 */
export function upstreamClosing(socket: object): Promise<void> | undefined {
  return closing.get(socket);
}

/** The socket events undici listens to on a connection (undici 7, `client-h1.js`). */
const UNDICI_EVENTS = ['readable', 'end', 'error', 'close'] as const;
type Listener = (...args: unknown[]) => void;
type Listeners = Record<(typeof UNDICI_EVENTS)[number], Listener[]>;

/** The listeners `socket` has now of the events undici listens to. */
function listenersOf(socket: Socket): Listeners {
  const of = (event: string) => socket.listeners(event) as Listener[];
  return { readable: of('readable'), end: of('end'), error: of('error'), close: of('close') };
}

/**
 * Makes the first abort of a request on `socket` close it by halves. undici aborts a request on an
 * HTTP/1.1 socket by destroying the socket with an `InformationalError` whose message is `aborted`
 * (undici 7, `client-h1.js`); any other destroy (a parse error, the server's close, an idle
 * timeout, the agent closing) goes through unchanged. `before`: the socket's listeners before undici
 * added its own.
 *
 * At the cut, undici is told the socket is gone, as a destroy would have told it: its listeners leave
 * the socket and hear an `error` and a `close` in a microtask. Its client then takes a new
 * connection for its next request. Left on the socket, undici would go on using it: a request cut as
 * undici was about to write it (its signal aborted while it waited for the socket) leaves the socket
 * idle in undici's eyes, and the next request written after the gateway's FIN fails
 * (`ERR_STREAM_WRITE_AFTER_END`) before the server saw a byte, booked as an unreachable upstream.
 */
function closeByHalvesWhenAborted(socket: Socket, closeWaitMs: number, before: Listeners): void {
  const destroy = socket.destroy;
  socket.destroy = function destroyByHalves(this: Socket, err?: Error): Socket {
    socket.destroy = destroy;
    if (!isAbort(err) || socket.destroyed || !socket.writable || socket.readableEnded) return destroy.call(socket, err);
    const undici = detachAddedSince(socket, before);
    // Not at once: undici may be inside its parser or its write loop, and a destroy's events come later too.
    queueMicrotask(() => {
      for (const listener of undici.error) listener.call(socket, err);
      for (const listener of undici.close) listener.call(socket, true);
    });
    // What the server still sends is read and dropped, so its FIN is seen.
    socket.on('data', dropData);
    let finished = false;
    const done = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      destroy.call(socket, err);
    };
    const timer = setTimeout(done, closeWaitMs);
    const closed = new Promise<void>((resolve) =>
      socket.once('close', () => {
        // Also when something else destroyed it first (the agent closing): the wait is over.
        clearTimeout(timer);
        resolve();
      }),
    );
    closing.set(socket, closed);
    // The server's FIN: it has read the gateway's close. A reset ends the socket the same way.
    socket.once('end', done);
    // Kept for good: undici's error listener has left, and an error with no listener would throw.
    socket.on('error', done);
    socket.end();
    return socket;
  };
}

/** Removes the listeners `socket` gained since `before` (undici's) and returns them by event. */
function detachAddedSince(socket: Socket, before: Listeners): Listeners {
  const added = listenersOf(socket);
  for (const event of UNDICI_EVENTS) {
    added[event] = added[event].filter((listener) => !before[event].includes(listener));
    for (const listener of added[event]) socket.removeListener(event, listener);
  }
  return added;
}

const dropData = (): void => undefined;

/** True for the error undici destroys a socket with when a request on it is aborted. */
function isAbort(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  return e?.code === 'UND_ERR_INFO' && e.message === 'aborted';
}
