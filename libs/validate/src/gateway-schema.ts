import { z } from 'zod';
import { clientSchema } from './client-schema';
import { apiKey, DEFAULT_IN_WORDS, listen, positiveMs } from './schema-fields';

/** How the gateway runs CLI programs (`gateway.cli_sandbox`, README "Security"). */
export const CLI_SANDBOXES = ['bwrap', 'none'] as const;
export type CliSandboxMode = (typeof CLI_SANDBOXES)[number];

/** A browser origin: `scheme://host[:port]`, no path, as browsers send it in `Origin`. */
const origin = z
  .string()
  .regex(
    /^https?:\/\/(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/,
    'write an origin as scheme://host[:port], without a path or trailing slash, e.g. https://chat.example.com',
  );

/** The `gateway:` section of `edge.yaml` (README "Configuration", "Security"). */
export const gatewaySchema = z.strictObject({
  /** @defaultValue 127.0.0.1:8080 */
  listen: listen.default('127.0.0.1:8080').meta({
    description: 'Address the gateway listens on, as `host:port` (IPv6 in brackets); `--listen` overrides it.',
  }),
  /** Client API keys (printable ASCII, no spaces); absent or empty = no client auth. */
  api_keys: z.array(apiKey).default([]).meta({
    description:
      'Client bearer keys (printable ASCII without spaces), compared in constant time; each is a client of default settings named `api_keys[<index>]`. Empty (and no `clients`) = no client auth.',
  }),
  /**
   * Named clients: keys with a band, a weight and caps (docs/architecture.md, "Clients, priority and
   * fair share"). A key of `api_keys` is a client of default settings. @defaultValue []
   */
  clients: z.array(clientSchema).default([]).meta({
    description:
      'Named clients: keys with a band, a weight, caps and token budgets (README "Clients, priority and fair share").',
  }),
  /** @defaultValue 4194304 (4 MiB) */
  max_body_bytes: z
    .number()
    .int()
    .positive()
    .default(4 * 1024 * 1024)
    .meta({ description: 'Largest request body, in bytes; a larger one gets 413.' }),
  /**
   * Most JSON values a request body may hold, counted on its decoded bytes before it is parsed and
   * weighted by what building them costs (an array element 1, an object member 20, every array or
   * object 8 more, empty or not); more is a 413. Parsing and checking a body costs CPU per value,
   * not per byte (a 3 KB gzip body can hold a million), so this bounds what one request can cost:
   * at 500000, ~15-90 ms whatever the shape. 500000 fits the largest embeddings request OpenAI
   * accepts (2048 inputs, 300k token ids in all). @defaultValue 500000
   */
  max_body_values: z.number().int().positive().default(500_000).meta({
    description:
      'Most JSON values a request body may hold, counted before it is parsed and weighted by what building them costs (an array element 1, an object member 20, every array or object 8 more); more is a 413. At the default the costliest body admitted costs ~15-90 ms of CPU (README "Security").',
  }),
  /** Bounds the time to the upstream's first byte, not a healthy stream. @defaultValue 120000 */
  request_timeout_ms: positiveMs.default(120_000).meta({
    description: "Longest wait for the upstream's first byte, in ms (not the length of a healthy stream).",
  }),
  /**
   * A stream in which no byte moves for this long, in ms (the upstream sends nothing, or the client
   * accepts nothing), is cut: the upstream call is aborted and the lease released. @defaultValue 60000
   */
  stream_idle_timeout_ms: positiveMs.default(60_000).meta({
    description:
      'A stream in which no byte moves for this long, in ms (a silent upstream, or a client that reads nothing), is cut: the upstream call is aborted and the lease released (README "Streaming").',
  }),
  /**
   * Largest non-streamed answer read from an upstream, in bytes; a larger one is a 502. Streams
   * passed through are not capped (constant memory); a Responses stream translated from chat holds
   * at most this much text for its closing events, then ends with an error event. @defaultValue 67108864 (64 MiB)
   */
  max_response_bytes: z
    .number()
    .int()
    .positive()
    .default(64 * 1024 * 1024)
    .meta({
      description:
        'Largest non-streamed answer read from an upstream, in bytes; a larger one is a 502. Also the most text a Responses stream translated from chat holds for its closing events, past which it ends with an error event (README "Streaming").',
    }),
  /**
   * Open client connections this process accepts at once, so slow or idle clients cannot use up the
   * process's file descriptors: at the cap the oldest idle keep-alive connection is closed for a new
   * one; when none is idle the new one is closed as it arrives. @defaultValue 4096
   */
  max_connections: z.number().int().positive().default(4096).meta({
    description:
      "Open client connections this process accepts at once (keep it below `ulimit -n` minus the upstream and Redis sockets); at the cap the oldest idle keep-alive connection is closed for a new one, and when none is idle the new one is closed. Half of it is a client's default `max_queued`.",
  }),
  /**
   * Open connections one remote address may hold at once; past it, that address's oldest idle
   * keep-alive connection is closed for the new one, or the new one is refused. Behind a load
   * balancer or proxy every connection comes from its address: set this to `max_connections`
   * there. @defaultValue half of max_connections
   */
  max_connections_per_address: z
    .number()
    .int()
    .positive()
    .optional()
    .meta({
      description:
        "Open connections one remote address may hold, at most `max_connections`; past it that address's oldest idle connection is closed for the new one, or the new one is refused. Behind a load balancer or proxy (every connection from its address) set it to `max_connections`.",
      [DEFAULT_IN_WORDS]: 'half of `max_connections`',
    }),
  /**
   * An idle keep-alive connection (no request in progress) is closed after this long, in ms. Behind
   * a load balancer that reuses connections, set it above the balancer's own idle timeout.
   * @defaultValue 5000
   */
  keep_alive_timeout_ms: positiveMs.default(5_000).meta({
    description:
      "An idle keep-alive client connection is closed after this long, in ms; behind a load balancer that reuses connections, set it above the balancer's idle timeout.",
  }),
  /**
   * Longest a client may take to send a request's headers, in ms; a slower connection is closed
   * (408). @defaultValue 10000
   */
  header_timeout_ms: positiveMs.default(10_000).meta({
    description: "Longest a client may take to send a request's headers, in ms; then 408 and the connection is closed.",
  }),
  /**
   * Longest a client may take to send a request's body once its headers are in, in ms; a slower
   * connection is closed (408). @defaultValue 30000
   */
  body_timeout_ms: positiveMs.default(30_000).meta({
    description:
      "Longest a client may take to send a request's body once its headers are in, in ms; then 408 and the connection is closed (neither time bounds a response).",
  }),
  /** Cross-origin (browser) access to the `/v1` API. */
  cors: z
    .strictObject({
      /**
       * Origins (`https://host[:port]`) whose pages may call the API from a browser; empty = no
       * cross-origin access (no CORS headers, preflights refused). @defaultValue []
       */
      allowed_origins: z.array(origin).default([]).meta({
        description:
          'Origins (`scheme://host[:port]`) whose browser pages may call `/v1`; empty = no cross-origin access (no CORS headers, preflights refused).',
      }),
    })
    .prefault({})
    .meta({ description: 'Cross-origin (browser) access to the `/v1` API.' }),
  /**
   * Send `x-iop-node` and `x-iop-resource` (the node and provider that served) on answers; false
   * drops both so clients learn nothing of the topology. @defaultValue true
   */
  topology_headers: z.boolean().default(true).meta({
    description:
      'Send `x-iop-node` and `x-iop-resource` (the node and provider that served) on answers; false drops both, so clients learn nothing of the topology.',
  }),
  /**
   * How CLI programs run (README "Security"): `bwrap` runs each in a bubblewrap sandbox with its
   * own PID namespace and `/proc`, the filesystem read-only (but `/tmp` and its `HOME`), the config
   * file and `/run/secrets` hidden, so it can read none of the gateway's secrets; when the sandbox
   * does not work on the host, CLI models answer 502 and the gateway logs why. `none` runs programs
   * as the gateway's own children, which can read its environment through `/proc`. Read at start.
   * @defaultValue bwrap
   */
  cli_sandbox: z
    .enum(CLI_SANDBOXES, {
      error:
        "use bwrap (the default: every CLI program in a sandbox) or none (only for programs you trust with the gateway's secrets)",
    })
    .default('bwrap')
    .meta({
      description:
        'How CLI programs run: `bwrap` (each in a bubblewrap sandbox that hides the gateway\'s secrets; when bwrap does not work on the host, CLI models answer 502 and the start-up log says why) or `none` (as the gateway\'s own children, which can read its secrets). Read at start (README "Security").',
    }),
});
