import { AdmissionError } from './admission-error';

/** `queue_unavailable`: Redis did not answer; `cause` says how (an error's message, or a sentence). */
export function queueUnavailable(cause: unknown): AdmissionError {
  return new AdmissionError('queue_unavailable', `The provider queue (Redis) is unavailable: ${message(cause)}`, 1);
}

/** `queue_unavailable` for a request refused or failed because the queue is closing. */
export function shuttingDown(): AdmissionError {
  return new AdmissionError('queue_unavailable', 'The gateway is shutting down.', 1);
}

/** `client_aborted`: the caller's signal fired while the request waited. */
export function clientAborted(): AdmissionError {
  return new AdmissionError('client_aborted', 'The client closed the request while it waited for a provider.');
}

/** `no_available_provider`: no candidate of `model` is configured (all disabled, invalid or removed). */
export function noAvailableProvider(model: string): AdmissionError {
  return new AdmissionError('no_available_provider', `No enabled provider can serve model "${model}" right now.`, 5);
}

/** `queue_full`: every candidate of `model` holds `max_queued` waiting requests. */
export function queueFull(model: string): AdmissionError {
  return new AdmissionError('queue_full', `Every provider of model "${model}" has a full queue.`, 1);
}

/** `queue_timeout`: no candidate of `model` freed a slot within `maxWaitMs`. */
export function queueTimeout(model: string, maxWaitMs: number): AdmissionError {
  return new AdmissionError('queue_timeout', `No provider of model "${model}" freed a slot within ${maxWaitMs} ms.`, 1);
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
