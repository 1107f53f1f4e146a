import { table } from './markdown';
import type { TokenEstimateResults, TokenEstimateSample } from './token-estimate';

/** The estimate as a share of a real count: 1.33 is a third over, 0.8 a fifth under. */
export function estimateRatio(sample: Pick<TokenEstimateSample, 'estimate'>, real: number): number {
  return real > 0 ? sample.estimate / real : NaN;
}

/** `+33%` / `-20%`: the estimate's error relative to the real count. */
export function fmtError(ratio: number): string {
  if (!Number.isFinite(ratio)) return '—';
  const pct = Math.round((ratio - 1) * 100);
  return `${pct >= 0 ? '+' : ''}${pct}%`;
}

/** Markdown of the `token-estimate` scenario: one row per sample, then the cost comparison. */
export function tokenEstimateSection(r: TokenEstimateResults): string {
  const rows = r.samples.map((s) => [
    s.name,
    s.kind,
    s.bytes.toLocaleString('en-US'),
    s.o200k.toLocaleString('en-US'),
    s.cl100k.toLocaleString('en-US'),
    s.estimate.toLocaleString('en-US'),
    fmtError(estimateRatio(s, s.o200k)),
    fmtError(estimateRatio(s, s.cl100k)),
    s.estimateUs.toFixed(1),
    s.tokenizerUs.toFixed(0),
  ]);
  const under = r.samples.filter((s) => s.estimate < Math.max(s.o200k, s.cl100k)).map((s) => s.name);
  return [
    'Each sample sent as one user message of a Chat Completion; real counts are the chat as the OpenAI chat format encodes it ' +
      "(`encodeChat` of gpt-tokenizer 4.0.0: o200k_base for gpt-4o, cl100k_base for gpt-4); the estimate is the gateway's " +
      '(`estimateTokenWeight`: ⌈UTF-8 bytes / 3⌉ + 4 per message). Error = estimate ÷ real − 1: positive reserves more than the call ' +
      'takes (the limit errs on the safe side), negative less. µs: median of repeated calls in this process.',
    '',
    table(
      [
        'sample',
        'kind',
        'bytes',
        'o200k tokens',
        'cl100k tokens',
        'estimate',
        'error vs o200k',
        'error vs cl100k',
        'µs estimate',
        'µs o200k tokenizer',
      ],
      rows,
    ),
    '',
    `Loading the o200k vocabulary took ${r.vocabularyLoadMs.toFixed(0)} ms once. ` +
      (under.length
        ? `The estimate is under a real count for: ${under.join(', ')}.`
        : 'The estimate is at or over both real counts for every sample.'),
  ].join('\n');
}
