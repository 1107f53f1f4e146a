export { CliAdapter, estimateTokens } from './cli-adapter';
export { CliProcess, type CliProcessOptions, STDERR_TAIL_BYTES } from './cli-process';
export { renderPrompt } from './prompt-rendering';
