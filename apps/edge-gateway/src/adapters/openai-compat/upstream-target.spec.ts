import { upstreamTarget } from './upstream-target';

describe('upstreamTarget (README "Adapters")', () => {
  it('logs the URL a request goes to: base path, then the endpoint, then the query string, redacted', () => {
    const t = upstreamTarget({
      id: 'a1',
      type: 'vllm',
      base_url: 'http://user:pw@127.0.0.1:8000/v1?api-version=SECRETQ',
    });
    expect(t.logUrl('/chat/completions')).toBe('http://***@127.0.0.1:8000/v1/chat/completions?api-version=***');
    expect(t.basePath + '/chat/completions' + t.query).toBe('/v1/chat/completions?api-version=SECRETQ');
  });

  it('logs the /v1 an Ollama base URL is given, as sent', () => {
    const t = upstreamTarget({ id: 'a1', type: 'ollama', base_url: 'http://127.0.0.1:11434' });
    expect(t.logUrl('/chat/completions')).toBe('http://127.0.0.1:11434/v1/chat/completions');
  });

  it.each([
    ['its api_key', { api_key: 'sk-UPSTREAM-SECRET' }, 'http://h:1/v1', 'sk-UPSTREAM-SECRET'],
    ['the password of base_url', {}, 'http://user:p%40ssw0rd@h:1/v1', 'p@ssw0rd'],
    ['a query value of base_url', {}, 'http://h:1/v1?api-version=SECRETQ', 'SECRETQ'],
  ])('redacts %s from an upstream text that quotes it', (_w, extra, base_url, secret) => {
    const t = upstreamTarget({ id: 'a1', type: 'openai_compat', base_url, ...extra });
    const quoted = `forced status 400 (you sent authorization=Bearer ${secret} and ${secret})`;
    expect(t.redactForClient(quoted)).toBe('forced status 400 (you sent authorization=Bearer *** and ***)');
  });

  const KEY = 'sk/SECRET+slash=key/0008';
  it.each([
    ['plain', KEY],
    ['JSON-escaped with \\/', 'sk\\/SECRET+slash=key\\/0008'],
    ['percent-encoded', encodeURIComponent(KEY)],
    ['percent-encoded, lowercase hex', encodeURIComponent(KEY).toLowerCase()],
    ['form-encoded', new URLSearchParams({ k: KEY }).toString().slice(2)],
    ['lowercased', KEY.toLowerCase()],
    ['uppercased', KEY.toUpperCase()],
    ['JSON-escaped twice', JSON.stringify(KEY.replace(/\//g, '\\/')).slice(1, -1)],
  ])('redacts an api_key quoted %s', (_w, quoted) => {
    const t = upstreamTarget({ id: 'a1', type: 'vllm', base_url: 'http://h:1/v1', api_key: KEY });
    expect(t.redactForClient(`auth=Bearer ${quoted}.`)).toBe('auth=Bearer ***.');
  });

  it('redacts Basic auth in every form: the base64 credential, user:password, the password as written', () => {
    const t = upstreamTarget({ id: 'a1', type: 'openai_compat', base_url: 'http://rt%40user:p%2Fss0006@h:1/v1' });
    const basic = Buffer.from('rt@user:p/ss0006').toString('base64');
    expect(t.authorization).toBe(`Basic ${basic}`);
    for (const quoted of [basic, basic.toLowerCase(), encodeURIComponent(basic), 'rt@user:p/ss0006', 'p%2Fss0006']) {
      expect(t.redactForClient(`got ${quoted}!`)).toBe('got ***!');
    }
  });

  it('redacts a query value as written (percent-encoded) and decoded', () => {
    const t = upstreamTarget({ id: 'a1', type: 'vllm', base_url: 'http://h:1/v1?a=SECRETq0007&k2=SECRET%2Fenc0009' });
    expect(t.redactForClient('q=SECRET%2Fenc0009 SECRET/enc0009 secret%2fenc0009')).toBe('q=*** *** ***');
  });

  it('names the adapter instead of the upstream: base URL, origin, host:port, dotted host name', () => {
    const t = upstreamTarget({ id: 'a1', type: 'vllm', base_url: 'http://10.1.2.3:8000/v1', api_key: 'sk-abcdef' });
    expect(t.redactForClient('POST http://10.1.2.3:8000/v1/chat/completions host=10.1.2.3:8000 ip 10.1.2.3')).toBe(
      'POST [adapter a1]/chat/completions host=[adapter a1] ip [adapter a1]',
    );
    const single = upstreamTarget({ id: 'a1', type: 'vllm', base_url: 'http://vllm:8000' });
    expect(single.redactForClient('vllm says no to vllm:8000')).toBe('vllm says no to [adapter a1]');
  });

  it('leaves a text without secrets as it is', () => {
    const t = upstreamTarget({ id: 'a1', type: 'vllm', base_url: 'http://h:1/v1', api_key: 'sk-abcdef' });
    expect(t.redactForClient('context length exceeded')).toBe('context length exceeded');
  });
});
