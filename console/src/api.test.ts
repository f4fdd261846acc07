import { describe, expect, it } from 'vitest';
import { ApiError, EventStreamParser, SessionExpired, errorOf } from './api';

describe('server-sent events', () => {
  it('parses events cut anywhere, with CRLF, comments and multi-line data', () => {
    const parser = new EventStreamParser();
    const stream = ': hello\r\nevent: text\r\ndata: {"text":"a"}\r\n\r\nevent: citation\ndata: {"x":\ndata: 1}\n\nevent: answer\ndata: {}\n\n';
    const events = [];
    for (let i = 0; i < stream.length; i += 7) events.push(...parser.push(stream.slice(i, i + 7)));
    expect(events).toEqual([
      { event: 'text', data: '{"text":"a"}' },
      { event: 'citation', data: '{"x":\n1}' },
      { event: 'answer', data: '{}' },
    ]);
  });
});

describe('errors', () => {
  it('carry the API’s message, code and request id; a 401 is an expired session', async () => {
    const body = { error: { code: 'VALIDATION_ERROR', message: 'no parser for .exe', request_id: 'r-1' } };
    const error = await errorOf(new Response(JSON.stringify(body), { status: 400 }));
    expect([error.message, error.code, error.requestId, error.status]).toEqual(['no parser for .exe', 'VALIDATION_ERROR', 'r-1', 400]);
    expect(error).not.toBeInstanceOf(SessionExpired);
    const expired = await errorOf(new Response('{"error":{"message":"the token has expired"}}', { status: 401 }));
    expect(expired).toBeInstanceOf(SessionExpired);
    expect(expired).toBeInstanceOf(ApiError);
  });

  it('say the status when the body is no API error', async () => {
    const error = await errorOf(new Response('<html>', { status: 502, statusText: 'Bad Gateway' }));
    expect(error.message).toBe('HTTP 502 Bad Gateway');
  });
});
