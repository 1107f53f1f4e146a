/**
 * The chaos run (README "Tests": chaos): 3 gateway replicas, the status exporter and a private
 * Redis, on one fake upstream that records its concurrency per provider. Clients send mixed
 * requests (chat and Responses, streamed or not, pooled and CLI, some dropped at a random point);
 * a random replica is SIGKILLed and replaced every few seconds, and Redis is killed and restarted
 * empty once. Everything on 127.0.0.1.
 *
 * What must hold ({@link ChaosReport.violations} lists every breach): no provider ever sees more
 * calls at once than its `max_concurrency`; no lease or waiting job is left once the load drains;
 * every client gets an answer, complete, or an OpenAI-shaped error (a client whose replica was
 * SIGKILLed under it loses its connection: counted apart, not a breach).
 */
export interface ChaosOptions {
  /** How long the load runs, in s. */
  seconds: number;
  /** Concurrent clients. */
  clients: number;
  /** A replica is SIGKILLed (and a new one started) this often, in ms. */
  killEveryMs: number;
  /** Seed of every random choice. */
  seed: number;
  /** Kill and restart Redis once, halfway. @defaultValue true */
  redisRestart?: boolean;
  /** Share of requests the client drops at a random point. @defaultValue 0.15 */
  dropShare?: number;
  /** Progress lines (a kill, the Redis restart); silent when absent. */
  log?: (line: string) => void;
}
