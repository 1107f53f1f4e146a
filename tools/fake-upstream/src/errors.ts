/** OpenAI error body: `{"error":{"message","type","param","code"}}` (docs/architecture.md, "Errors"). */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

const CODE_BY_STATUS: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'invalid_api_key',
  403: 'permission_denied',
  404: 'model_not_found',
  408: 'request_timeout',
  413: 'request_too_large',
  429: 'rate_limit_exceeded',
  500: 'server_error',
  502: 'bad_gateway',
  503: 'service_unavailable',
  504: 'gateway_timeout',
};

/**
 * Builds the error body the fake answers with. `code` defaults to a conventional code for the
 * status (`fake_status_<status>` when there is none); `type` is `invalid_request_error` below 500
 * and `server_error` from 500 on.
 */
export function openAIError(
  status: number,
  message: string,
  code?: string,
  param: string | null = null,
): OpenAIErrorBody {
  return {
    error: {
      message,
      type: status < 500 ? 'invalid_request_error' : 'server_error',
      param,
      code: code ?? CODE_BY_STATUS[status] ?? `fake_status_${status}`,
    },
  };
}

/** The in-band error a stream ends with under the `error_event_after` knob. */
export const STREAM_ERROR = openAIError(500, 'fake-upstream: forced in-band stream error', 'fake_stream_error');

/** The in-band error about the request itself (`error_event_status` below 500): a context too long. */
export const STREAM_CLIENT_ERROR = openAIError(
  400,
  "fake-upstream: this model's maximum context length is 8 tokens",
  'context_length_exceeded',
  'messages',
);
