import { catalogAnswer, resolveError } from '@iop/errors';
import { KeySet, presentedKey } from '@iop/validate';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

/** The one path the exporter serves without a status key (README "Security"): its probe. */
const OPEN_PATH = '/healthz';

/**
 * `Expect: 100-continue` on the exporter (README "Security"): with `status.api_keys` set, a request
 * for anything but `/healthz` without one of the keys (`Bearer`, or Basic with the key as password)
 * gets its `401 invalid_api_key` with a Basic challenge and `Connection: close` instead of `100
 * Continue`, so an unauthenticated caller never uploads a body and learns nothing but the 401. Any
 * other request is continued and served by `app` as usual. Keys are read per request.
 */
export function answerContinue(
  server: Server,
  apiKeys: () => readonly string[],
  app: (req: IncomingMessage, res: ServerResponse) => void,
): void {
  let keys = new KeySet([]);
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const configured = apiKeys();
    if (configured !== keys.keys) keys = new KeySet(configured);
    const path = (req.url ?? '')
      .split('?', 1)[0]
      .toLowerCase()
      .replace(/(.)\/$/, '$1');
    if (path === OPEN_PATH || keys.open || keys.matches(presentedKey(req.headers.authorization))) {
      res.writeContinue();
      app(req, res);
      return;
    }
    const answer = catalogAnswer(
      'invalid_api_key',
      resolveError({ code: 'invalid_api_key', fields: { keys: 'status.api_keys' } }).message,
    );
    const body = JSON.stringify(answer.body);
    res.writeHead(answer.status, {
      ...answer.headers,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'www-authenticate': 'Basic realm="iop-edge status", charset="UTF-8"',
      connection: 'close',
    });
    res.end(body);
  });
}
