export {
  type ErrorCatalogEntry,
  type ErrorCode,
  type ErrorFields,
  type ErrorMessageArgs,
  type ErrorSpec,
  type InvalidApiKeyFields,
  type QueueFullFields,
  type QueueUnavailableFields,
  type UpstreamTimeoutFields,
  ERROR_CATALOG,
  catalogMessage,
  catalogRetryAfterS,
  isCatalogCode,
} from './error-catalog';
export { type ErrorParts, type OpenAiErrorBody, catalogAnswer, resolveError } from './error-answer';
