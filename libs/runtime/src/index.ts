export {
  answerClientErrors,
  answerExpectationFailed,
  type ClientErrorLogger,
  type ClientErrorOptions,
} from './client-errors';
export { CloseList } from './close-list';
export { type GatewayEnvironment, gatewayEnvironmentSchema, exporterEnvironmentSchema } from './environment';
export { listen, listenOrStop } from './listen';
export type { ProcessStart } from './process-start';
export { announceListening, startService } from './service-start';
export { runMain } from './run-main';
