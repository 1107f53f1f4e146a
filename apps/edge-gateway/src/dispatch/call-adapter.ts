import type { AdapterConfig } from '@iop/validate';
import type { Adapter, ChatRequest, DispatchContext, EmbeddingsRequest, ResponsesRequest } from '../adapters/adapter';
import { ADAPTER_LABEL } from '../adapters/adapter-registry';
import { endpointNotServed } from '../adapters/request-fields';
import type { CompletionEndpoint, DispatchBody } from './dispatcher-deps';

/**
 * Calls the adapter's method for `endpoint` with `body` (already carried by its field table).
 * @returns the adapter's answer (`UpstreamResponse`).
 * @throws ApiError 400 when the adapter has no such endpoint (embeddings on a CLI adapter).
 */
export function callAdapter(
  adapter: Adapter,
  config: AdapterConfig,
  endpoint: CompletionEndpoint,
  body: DispatchBody,
  ctx: DispatchContext,
) {
  if (endpoint === 'chat') return adapter.chat(body as ChatRequest, ctx);
  if (endpoint === 'responses') return adapter.responses(body as ResponsesRequest, ctx);
  if (!adapter.embeddings) throw endpointNotServed(endpoint, ADAPTER_LABEL[config.type]);
  return adapter.embeddings(body as EmbeddingsRequest, ctx);
}
