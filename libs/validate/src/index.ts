export {
  type AdapterType,
  type CliSandboxMode,
  type EdgeConfigInput,
  type EdgeConfig,
  type GatewaySettings,
  type HealthSettings,
  type NodeConfig,
  type AdapterConfig,
  type HttpAdapterConfig,
  type CliAdapterConfig,
  type ProviderConfig,
  isPoolCategory,
  modelNames,
  edgeConfigSchema,
} from './schema';
export { DEFAULT_COMPLETION_TOKENS } from './provider-token-settings';
export { resolveProviderAdapter } from './adapter-resolution';
export { usablePoolProvider } from './pool-provider';
export { formatProblems } from './config-problem';
export { type LoadOptions, parseConfigText, loadConfigFile } from './load-config';
export { configDigest } from './config-digest';
export { GATEWAY_ONLY_SECRETS } from './secret-settings';
export { checkSemantics } from './semantic-rules';
export {
  type QueueBackendChoice,
  type QueueBackendOverrides,
  QueueBackendError,
  describeQueueBackend,
  resolveQueueBackend,
} from './queue-backend';
export { ConfigRuntime } from './config-runtime';
export {
  type ListenAddress,
  type RedisSentinelUrl,
  parseListenAddress,
  parseRedisSentinelUrl,
  isRedisUrl,
  redactUrl,
} from './listen-address';
export { KeySet, presentedKey } from './api-keys';
export { MIN_PRIORITY, MAX_PRIORITY } from './client-schema';
export {
  type ClientSettings,
  type FlowClient,
  ANONYMOUS_CLIENT,
  ClientKeys,
  anyTokenBudget,
  configuredClients,
  defaultClientMaxQueued,
  soleClient,
} from './client-keys';
export { providerPools } from './provider-pools';
export { type LibLogger, silentLibLogger, consoleLibLogger } from './lib-logger';
