export { CloseList } from './close-list';
export { readCommandLine } from './command-line';
export { type GatewayEnvironment, gatewayEnvironmentSchema, exporterEnvironmentSchema } from './environment';
export { listen, listenOrStop } from './listen';
export { createProcessLogger } from './process-logger';
export { type ProcessStart, readProcessStart } from './process-start';
export { runMain } from './run-main';
export { stopOnSignals } from './shutdown';
