import { ApiError, echoed, invalidRequest } from '../errors';

/** The OpenAI endpoints the gateway serves; each adapter has a field table per endpoint. */
export type Endpoint = 'chat' | 'responses' | 'embeddings';

/** The public path of an endpoint, for messages. */
export const ENDPOINT_PATH: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  responses: '/v1/responses',
  embeddings: '/v1/embeddings',
};

/**
 * What an adapter does with one request field (README "Request fields per adapter"):
 * - `pass`: sent to the upstream as it is;
 * - `rename`: sent under another name (`max_completion_tokens` → `max_tokens` for Ollama); a request
 *   that also sets the other name to a different value is refused;
 * - `ignore`: not sent, because it has no effect on the answer (OpenAI platform metadata such as
 *   `store` or `user`); the reason is the documentation;
 * - `refuse`: a 400 naming the field, unless its value is one of `neutral` (the API's own default,
 *   e.g. `n: 1`, `tools: []`), which is then not sent.
 * A `null` value means "unset" in the OpenAI API: it is kept for `pass`, dropped otherwise; an
 * empty object or list carries nothing either, so a refused field set to `{}` or `[]` is dropped too.
 */
export type FieldRule =
  { pass: true } | { rename: string } | { ignore: string } | { refuse: string; neutral?: readonly unknown[] };

/** How one adapter carries one endpoint's request fields. */
export interface FieldTable {
  /** Rules by top-level field; `model` is always passed (the adapter renames it for the upstream). */
  fields: Readonly<Record<string, FieldRule>>;
  /**
   * Fields the table does not name: `pass` for HTTP servers (fields outside the OpenAI reference may
   * be the server's own extensions, e.g. vLLM's `top_k`); refused where nothing could read them.
   */
  others: 'pass' | { refuse: string };
}

/** An adapter's tables; an endpoint without a table is not served by the adapter (400 naming it). */
export type AdapterFieldTables = Readonly<Partial<Record<Endpoint, FieldTable>>>;

export const PASS = { pass: true } as const;

/** OpenAI platform fields with no effect on a self-hosted model's answer, for tables that do not send them. */
export const PLATFORM_METADATA: Readonly<Record<string, FieldRule>> = {
  user: { ignore: 'an end-user id for OpenAI abuse monitoring; no effect on the answer' },
  metadata: { ignore: 'OpenAI dashboard tags; no effect on the answer' },
  store: { ignore: 'OpenAI stored completions; no effect on the answer' },
  service_tier: { ignore: 'OpenAI billing tier; no effect on the answer' },
  prompt_cache_key: { ignore: 'OpenAI prompt-cache routing; no effect on the answer' },
  safety_identifier: { ignore: 'an end-user id for OpenAI safety systems; no effect on the answer' },
};

/**
 * Chat fields of OpenAI's own platform that a self-hosted server (`server`, as its refusals name it)
 * has nothing to do with: refused (400), `modalities` only unless `["text"]`; the deprecated
 * `functions` and `function_call` point at `tools` and `tool_choice`.
 */
export function openAiOnlyChatFields(server: string): Readonly<Record<string, FieldRule>> {
  return {
    modalities: { refuse: `${server} answers text only`, neutral: [['text']] },
    audio: { refuse: `${server} produces no audio` },
    prediction: { refuse: `${server} has no predicted outputs` },
    web_search_options: { refuse: `${server} has no web search` },
    verbosity: { refuse: `${server} has no verbosity control` },
    functions: { refuse: 'deprecated by OpenAI; send tools' },
    function_call: { refuse: 'deprecated by OpenAI; send tool_choice' },
  };
}

/** Every field passed on: the table of a server that implements the OpenAI API itself. */
export const PASS_ALL: FieldTable = { fields: {}, others: 'pass' };

const isEmpty = (value: unknown) =>
  Array.isArray(value)
    ? value.length === 0
    : typeof value === 'object' && value !== null && Object.keys(value).length === 0;
const sameValue = (a: unknown, b: unknown) => a === b || JSON.stringify(a) === JSON.stringify(b);

/**
 * Applies `table` to a request body: the body to send (a new object when anything changed, else
 * `body` itself), or a 400 naming the first field that cannot be carried.
 * @throws ApiError 400 `invalid_request_error` with `param` the field's name.
 */
export function applyFieldTable<T extends Record<string, unknown>>(
  table: FieldTable,
  body: T,
  adapterLabel: string,
  endpoint: Endpoint,
): T {
  if (table === PASS_ALL) return body;
  let out: Record<string, unknown> | undefined;
  const edit = () => (out ??= { ...body });
  for (const [field, value] of Object.entries(body)) {
    if (field === 'model' || value === undefined) continue;
    const rule: FieldRule = table.fields[field] ?? (table.others === 'pass' ? PASS : table.others);
    if ('pass' in rule) continue;
    if (value === null) {
      delete edit()[field];
      continue;
    }
    if ('ignore' in rule) {
      delete edit()[field];
    } else if ('rename' in rule) {
      const other = body[rule.rename];
      if (other != null && !sameValue(other, value)) {
        throw invalidRequest(
          `Send either ${echoed(field)} or ${rule.rename}, not both with different values: ${adapterLabel} has only ${rule.rename}.`,
          field,
        );
      }
      const o = edit();
      delete o[field];
      o[rule.rename] = value;
    } else if (rule.neutral?.some((n) => sameValue(n, value)) || isEmpty(value)) {
      delete edit()[field];
    } else {
      throw refused(field, rule.refuse, adapterLabel, endpoint);
    }
  }
  return (out ?? body) as T;
}

function refused(field: string, reason: string, adapterLabel: string, endpoint: Endpoint): ApiError {
  return invalidRequest(
    `${echoed(field)} is not supported on ${ENDPOINT_PATH[endpoint]} for this model: ${reason} (${adapterLabel}). Remove it and retry.`,
    field,
  );
}

/** The 400 for an endpoint an adapter does not serve at all (CLI models and embeddings). */
export function endpointNotServed(endpoint: Endpoint, adapterLabel: string): ApiError {
  return invalidRequest(
    `${ENDPOINT_PATH[endpoint]} is not served for this model: its provider is ${adapterLabel}, which has no ${endpoint} endpoint.`,
    'model',
  );
}
