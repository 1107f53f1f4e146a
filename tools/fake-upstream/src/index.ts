export { startFakeUpstream, type FakeUpstream, type FakeUpstreamOptions } from './fake-upstream';
export type { FakeStats, RequestCounts, RecordedRequest } from './stats';
export type { JournalCall, JournalUsage } from './call-journal';
export {
  certainInversions,
  grantWindows,
  inversionsWhileWaiting,
  judgedCalls,
  peakConcurrency,
  sharesBetween,
  type GrantWindow,
  type JudgedCall,
  type WaitingJudgement,
  type WaitingSample,
} from './flow-judge';
export type { KnobName } from './knobs';
export { ENGINE_DEFAULTS, type EngineOptions, type EngineStats } from './engine';
export { echoReply } from './prompt';
export { ECHO_LLM, fleetYaml, configPrefix, exporterYaml } from './fixtures';
export type { OpenAIErrorBody } from './errors';
export { ChatChunkFormat, chatCompletionJson } from './chat-completions';
export { ResponsesEventFormat, responseObject } from './responses';
export { embeddingsJson } from './embeddings';
