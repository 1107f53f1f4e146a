import { z } from 'zod';
import { DEFAULT_IN_WORDS } from './schema-fields';

/** `default_completion_tokens` of a provider with `max_tokens_in_flight` that sets none (README "Token-aware provider limits"). */
export const DEFAULT_COMPLETION_TOKENS = 1024;

/**
 * The token-limit settings of a pool provider (README "Token-aware provider limits";
 * docs/architecture.md, "Token limits"), spread into `providerSchema`. `checkSemantics` refuses them on
 * `cli` providers, and `default_completion_tokens` without `max_tokens_in_flight`.
 */
export const providerTokenFields = {
  /**
   * Tokens the provider holds in flight at once across every replica (README "Token-aware provider
   * limits"): a request's estimated prompt tokens plus its completion allowance. None: no token limit.
   */
  max_tokens_in_flight: z
    .number({ error: 'write a whole number of tokens, 1 or more, e.g. max_tokens_in_flight: 32000' })
    .int('write a whole number of tokens, 1 or more, e.g. max_tokens_in_flight: 32000')
    .min(1, 'set max_tokens_in_flight to 1 or more, or remove it for no token limit')
    .optional()
    .meta({
      description:
        'Pools only: estimated tokens (prompt + completion allowance) the provider holds at once across every replica (README "Token-aware provider limits").',
      [DEFAULT_IN_WORDS]: 'no token limit',
    }),
  /**
   * The completion allowance, in tokens, of a request that names none (`max_tokens`,
   * `max_completion_tokens`, `max_output_tokens`), under `max_tokens_in_flight`. @defaultValue 1024
   */
  default_completion_tokens: z
    .number({ error: 'write a whole number of tokens, 0 or more, e.g. default_completion_tokens: 1024' })
    .int('write a whole number of tokens, 0 or more, e.g. default_completion_tokens: 1024')
    .nonnegative('set default_completion_tokens to 0 or more')
    .optional()
    .meta({
      description:
        "With `max_tokens_in_flight`: the completion allowance, in tokens, of a request that names none (`max_tokens`, `max_completion_tokens`, `max_output_tokens`); per choice, so a chat's `n` multiplies it.",
      [DEFAULT_IN_WORDS]: `\`${DEFAULT_COMPLETION_TOKENS}\``,
    }),
};
