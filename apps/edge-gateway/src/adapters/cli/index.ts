export { CliAdapter, estimateTokens } from './cli-adapter';
export { defaultCliHost, gatewayCliHost, type CliHost } from './cli-host';
export { CliProcess, type CliProcessOptions, STDERR_TAIL_BYTES, SURVIVOR_WAIT_MS } from './cli-process';
export { CliSandbox, type CliSandboxOptions, type SandboxCheck } from './cli-sandbox';
export { EscapedProcessSweeper, type SweepResult } from './escaped-processes';
export { renderPrompt } from './prompt-rendering';
export { RunLimit } from './run-limit';
