export {
  answerClientErrors,
  answerExpectationFailed,
  type ClientErrorLogger,
  type ClientErrorOptions,
} from './client-errors';
export { CloseList } from './close-list';
export { type GatewayEnvironment, gatewayEnvironmentSchema, exporterEnvironmentSchema } from './environment';
export { listen, listenOrStop } from './listen';
export { LOG_BUFFER_BYTES, LOG_FLUSH_MS } from './process-logger';
export type { ProcessStart } from './process-start';
export { announceListening, startService } from './service-start';
export { runMain } from './run-main';
