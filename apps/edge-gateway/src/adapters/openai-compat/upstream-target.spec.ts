import { upstreamTarget } from './upstream-target';

describe('upstreamTarget (README "Adapters")', () => {
  it('logs the URL a request goes to: base path, then the endpoint, then the query string, redacted', () => {
    const t = upstreamTarget({ type: 'vllm', base_url: 'http://user:pw@127.0.0.1:8000/v1?api-version=SECRETQ' });
    expect(t.logUrl('/chat/completions')).toBe('http://***@127.0.0.1:8000/v1/chat/completions?api-version=***');
    expect(t.basePath + '/chat/completions' + t.query).toBe('/v1/chat/completions?api-version=SECRETQ');
  });

  it('logs the /v1 an Ollama base URL is given, as sent', () => {
    const t = upstreamTarget({ type: 'ollama', base_url: 'http://127.0.0.1:11434' });
    expect(t.logUrl('/chat/completions')).toBe('http://127.0.0.1:11434/v1/chat/completions');
  });

  it.each([
    ['its api_key', { api_key: 'sk-UPSTREAM-SECRET' }, 'http://h:1/v1', 'sk-UPSTREAM-SECRET'],
    ['the password of base_url', {}, 'http://user:p%40ssw0rd@h:1/v1', 'p@ssw0rd'],
    ['a query value of base_url', {}, 'http://h:1/v1?api-version=SECRETQ', 'SECRETQ'],
  ])('redacts %s from an upstream text that quotes it', (_w, extra, base_url, secret) => {
    const t = upstreamTarget({ type: 'openai_compat', base_url, ...extra });
    const quoted = `forced status 400 (you sent authorization=Bearer ${secret} and ${secret})`;
    expect(t.redactSecrets(quoted)).toBe('forced status 400 (you sent authorization=Bearer *** and ***)');
  });

  it('leaves a text without secrets as it is', () => {
    const t = upstreamTarget({ type: 'vllm', base_url: 'http://h:1/v1', api_key: 'sk-abcdef' });
    expect(t.redactSecrets('context length exceeded')).toBe('context length exceeded');
  });
});
