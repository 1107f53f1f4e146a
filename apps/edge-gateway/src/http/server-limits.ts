import type { GatewaySettings } from '@iop/validate';
import type { Server, ServerOptions } from 'node:http';

/**
 * How often the server looks for connections past their header or body time, in ms. Node's
 * default (30 s) would let a slow client overstay its limit by that much.
 */
export const CONNECTION_CHECK_INTERVAL_MS = 250;

/** Options for `http.createServer` so the time limits below are enforced at a useful granularity. */
export const SERVER_OPTIONS: ServerOptions = { connectionsCheckingInterval: CONNECTION_CHECK_INTERVAL_MS };

/**
 * Applies the connection limits of README "Security" to the gateway's HTTP server, at start and on
 * every config reload (Node reads these on each check):
 * - `gateway.max_connections`: connections past it are closed as they arrive, so slow or idle
 *   clients cannot use up the process's file descriptors;
 * - `gateway.header_timeout_ms`: a request's headers must be in within this time (from the
 *   request's first byte; a fresh connection that sends nothing counts from its opening), else
 *   Node answers `408` and closes the connection;
 * - `gateway.body_timeout_ms`: the body then has this long more (the whole request is bounded by
 *   `header_timeout_ms + body_timeout_ms`), else `408` and the connection is closed.
 * Neither time bounds a response: a long stream runs on. Idle keep-alive connections are closed by
 * `keepAliveTimeout` (65 s), not by these.
 */
export function applyServerLimits(server: Server, gateway: Pick<GatewaySettings, 'max_connections' | 'header_timeout_ms' | 'body_timeout_ms'>): void {
  server.maxConnections = gateway.max_connections;
  server.headersTimeout = gateway.header_timeout_ms;
  server.requestTimeout = gateway.header_timeout_ms + gateway.body_timeout_ms;
}
