export * from './schema';
export * from './adapter-resolution';
export { type PoolProviderUse, type UnusableReason, usablePoolProvider } from './pool-provider';
export { type ConfigProblem, ConfigError, formatProblems } from './config-problem';
export { type LoadResult, parseConfigText, loadConfigFile } from './load-config';
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
export { flushLogs } from './flush-logs';
export {
  type GatewayEnvironment,
  type ExporterEnvironment,
  EnvironmentError,
  gatewayEnvironmentSchema,
  exporterEnvironmentSchema,
  readEnvironment,
} from './environment';
export {
  type ErrorCatalogEntry,
  type ErrorCode,
  type OpenAiErrorBody,
  ERROR_CATALOG,
  isCatalogCode,
  catalogAnswer,
} from './error-catalog';
export { type LibLogger, silentLibLogger, consoleLibLogger } from './lib-logger';
export { type StartFlags, type ProcessStart, readProcessStart } from './process-start';
