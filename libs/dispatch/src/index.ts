export type { PoolCandidate, Route } from './route/route';
export { resolveRoute, listModels, queueProviders, queueClients, leaseAddresses } from './route/resolve-route';
export { entersQueue } from './route/admission';
export { type AdmissionErrorCode, AdmissionError } from './queue/admission-error';
export type {
  ClientCounts,
  QueueClient,
  QueueProvider,
  LeaseRequest,
  Lease,
  ProviderCounts,
  QueueCounts,
  ProviderQueue,
} from './queue/provider-queue';
export { MemoryProviderQueue } from './queue/memory-queue';
export type { TokenWeight } from './queue/token-limit';
export { BYTES_PER_TOKEN, TOKENS_PER_MESSAGE, estimateTokenWeight, type WeighedEndpoint } from './route/token-weight';
export { BUDGET_BUCKET_MS, BUDGET_WINDOW_MS, budgetWindows } from './queue/token-budget';
export { budgetWeight } from './queue/budget-weight';
export type { BudgetStanding, BudgetWindow, ClientBudgetWindow, TokenBudgets, UsedTokens } from './queue/token-budget';
export type { HealthEvent, HealthTransition } from './health/health-record';
export type { HealthView } from './health/health-view';
export type { HealthStore, ProbeDetail } from './health/health-store';
export { MemoryHealthStore } from './health/memory-health-store';
export { RedisHealthStore } from './health/redis-health-store';
export { LeaseKeys } from './queue/lease-keys';
export { type RedisClient, connectRedis } from './queue/redis-connection';
export { RedisProviderQueue } from './queue/redis';
export { readClientCounts, readLeaseCounts, readQueueCounts } from './queue/lease-store';
export { readTokenBudgets } from './queue/redis/lease-budget';
export {
  type BudgetBucketCharge,
  type BudgetWindowState,
  packBudgetCharge,
  packBudgetState,
  unpackBudgetCharge,
  unpackBudgetState,
} from './queue/redis/budget-hash';
export { type ResponseAffinity, MemoryResponseAffinity, RedisResponseAffinity } from './affinity/response-affinity';
