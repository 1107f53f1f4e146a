export { CloseList } from './close-list';
export { type CommandLineExit, type CommandLineOutput, readCommandLine } from './command-line';
export {
  type GatewayEnvironment,
  type ExporterEnvironment,
  EnvironmentError,
  gatewayEnvironmentSchema,
  exporterEnvironmentSchema,
  readEnvironment,
} from './environment';
export { listen, listenOrStop } from './listen';
export { createProcessLogger, flushLogs } from './process-logger';
export { type StartFlags, type ProcessStart, readProcessStart } from './process-start';
export { FATAL_CLOSE_MS, runMain } from './run-main';
export { type StopOptions, STOP_SIGNALS, closeAndLog, stopOnSignals } from './shutdown';
