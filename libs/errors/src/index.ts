export {
  type ErrorCatalogEntry,
  type ErrorCode,
  type ErrorMessageArgs,
  type ErrorSpec,
  type QueueFullFields,
  type UpstreamTimeoutFields,
  ERROR_CATALOG,
  catalogMessage,
  catalogRetryAfterS,
  isCatalogCode,
} from './error-catalog';
export { type ErrorParts, catalogAnswer, resolveError } from './error-answer';
export { MAX_ECHOED_CHARS, MAX_MESSAGE_CHARS, echoed, echoedParam, boundedMessage, echoedFields } from './echoed';
export { type RateLimitFields, type TokenBudgetFields, delayWords } from './rate-limit-message';
