export * from './schema';
export * from './adapter-resolution';
export { type PoolProviderUse, type UnusableReason, usablePoolProvider } from './pool-provider';
export { type ConfigProblem, ConfigError, formatProblems } from './config-problem';
export { type LoadResult, type LoadOptions, parseConfigText, loadConfigFile } from './load-config';
export { configDigest } from './config-digest';
export {
  type SettingPattern,
  GATEWAY_ONLY_SECRETS,
  SECRET_SETTINGS,
  URL_SETTINGS,
  matchesSetting,
} from './secret-settings';
export { type SemanticProblem, checkSemantics } from './semantic-rules';
export {
  type QueueBackendChoice,
  type QueueBackendOverrides,
  type RedisUrlSource,
  DEFAULT_REDIS_URL,
  QueueBackendError,
  describeQueueBackend,
  resolveQueueBackend,
} from './queue-backend';
export { edgeConfigJsonSchema } from './json-schema';
export {
  type LoadedConfig,
  type ReloadResult,
  type ConfigRuntimeOptions,
  type RuntimeLogger,
  ConfigRuntime,
} from './config-runtime';
export {
  type ListenAddress,
  type RedisSentinelUrl,
  parseListenAddress,
  parseRedisSentinelUrl,
  isRedisUrl,
  redactUrl,
} from './listen-address';
export { KeySet, presentedKey } from './api-keys';
export * from './client-schema';
export { type FlowClient, ANONYMOUS_CLIENT, ClientKeys, configuredClients, flatKeyClientId } from './client-keys';
export { providerPools } from './provider-pools';
export { type LibLogger, silentLibLogger, consoleLibLogger } from './lib-logger';
