export { responsesToChat } from './responses-to-chat';
export { chatCompletionToResponse } from './chat-completion-to-response';
export { chatStreamToResponsesStream } from './chat-stream-to-responses-stream';
export { type ChatCall, responsesViaChat } from './responses-via-chat';
export { newId } from './response-object';
export type {
  OutputItem,
  OutputMessageItem,
  OutputTextPart,
  ReasoningItem,
  ResponseObject,
  ResponseUsage,
} from './response-object';
export type { ResponseEcho, TextConfig, TextFormat } from './request-echo';
