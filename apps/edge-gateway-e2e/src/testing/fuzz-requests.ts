import type { StatusSnapshot } from '@iop/status';
import { request } from 'node:http';
import type { GatewayProcess } from './gateway-process';

/** One answer as the fuzz suite reads it. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * One raw HTTP request (node:http, so any method, header or body bytes can be sent) on a fresh
 * connection: a connection the server closes after an answer whose body it did not read (Node's
 * rule) must not fail the next case. Never rejects on HTTP errors.
 */
export function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
): Promise<Answer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method, path, headers, timeout: 30_000, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
    req.end(body);
  });
}

/**
 * The invariants of the fuzz suite after one answer (README "Tests": fuzz): no 5xx from the input, an
 * OpenAI-shaped error without a stack trace, no server error event mid-stream, the process alive, no
 * provider booked unhealthy (`GET /status`).
 * @throws Error naming `what` and the broken invariant.
 */
export async function checkInvariants(gateway: GatewayProcess, answer: Answer, what: string): Promise<void> {
  if (answer.status >= 500) throw new Error(`${what}: answered ${answer.status}: ${answer.body.slice(0, 500)}`);
  if (answer.status >= 400 && answer.status !== 408 && answer.body !== '') {
    const parsed = JSON.parse(answer.body) as { error?: { message?: unknown; type?: unknown; code?: unknown } };
    if (
      typeof parsed.error?.message !== 'string' ||
      typeof parsed.error.type !== 'string' ||
      typeof parsed.error.code !== 'string'
    ) {
      throw new Error(`${what}: ${answer.status} is not OpenAI-shaped: ${answer.body.slice(0, 300)}`);
    }
    if (/\n\s+at /.test(parsed.error.message)) throw new Error(`${what}: a stack trace in the answer`);
  }
  if (/data: \{"error"/.test(answer.body) && /"type":"server_error"/.test(answer.body))
    throw new Error(`${what}: a server error event mid-stream: ${answer.body.slice(-400)}`);
  if (gateway.child.exitCode !== null || gateway.child.signalCode !== null)
    throw new Error(`${what}: the gateway died:\n${gateway.output()}`);
  const snapshot = JSON.parse((await send(gateway.url, 'GET', '/status', {})).body) as StatusSnapshot;
  const unhealthy = snapshot.nodes.flatMap((n) => n.resources).filter((r) => r.state === 'unhealthy');
  if (unhealthy.length > 0) throw new Error(`${what}: booked unhealthy: ${unhealthy.map((r) => r.id).join(', ')}`);
}
