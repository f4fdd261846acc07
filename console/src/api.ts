// The API client: JSON calls, the streamed answer (server-sent events over fetch, since EventSource cannot
// POST or send a token), and the presigned PUT of an upload (XMLHttpRequest: fetch reports no upload
// progress). Every error carries the API's message and request id for the page to show.

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly requestId: string | null,
  ) {
    super(message);
  }
}

/** The token was refused (expired, revoked): the page goes back to sign-in. */
export class SessionExpired extends ApiError {}

export interface StreamEvent {
  event: string;
  data: string;
}

/** Splits a text/event-stream into events as its pieces arrive (the WHATWG parsing rules we need). */
export class EventStreamParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];

  push(text: string): StreamEvent[] {
    this.buffer += text;
    const out: StreamEvent[] = [];
    let newline: number;
    while ((newline = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      // A CR that ends the piece may be half of a CRLF: wait for the next piece to know.
      if (newline === this.buffer.length - 1 && this.buffer.endsWith('\r')) break;
      const line = this.buffer.slice(0, newline);
      const width = this.buffer.startsWith('\r\n', newline) ? 2 : 1;
      this.buffer = this.buffer.slice(newline + width);
      if (line === '') {
        if (this.data.length) out.push({ event: this.event || 'message', data: this.data.join('\n') });
        this.event = '';
        this.data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') this.event = value;
      else if (field === 'data') this.data.push(value);
    }
    return out;
  }
}

export async function errorOf(response: Response): Promise<ApiError> {
  const body = (await response.json().catch(() => null)) as { error?: Record<string, string> } | null;
  const error = body?.error;
  const requestId = error?.request_id ?? response.headers.get('x-amzn-RequestId');
  const message = error?.message ?? `HTTP ${response.status} ${response.statusText}`.trim();
  const kind = response.status === 401 ? SessionExpired : ApiError;
  return new kind(message, response.status, error?.code ?? 'HTTP_ERROR', requestId);
}

export class Api {
  constructor(
    readonly baseUrl: string,
    private readonly token: () => Promise<string>,
    private readonly onExpired: () => void,
  ) {}

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await this.send(method, path, body, 'application/json');
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  /** POST `path` asking for server-sent events; `onEvent` gets each parsed event's name and JSON data. */
  async stream(path: string, body: unknown, onEvent: (event: string, data: any) => void, signal?: AbortSignal) {
    const response = await this.send('POST', path, body, 'text/event-stream', signal);
    if (!response.body) throw new ApiError('the answer stream is empty', 502, 'HTTP_ERROR', null);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new EventStreamParser();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const { event, data } of parser.push(value)) onEvent(event, JSON.parse(data));
    }
  }

  private async send(method: string, path: string, body: unknown, accept: string, signal?: AbortSignal) {
    const headers: Record<string, string> = { Accept: accept, Authorization: `Bearer ${await this.token()}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    if (!response.ok) {
      const error = await errorOf(response);
      if (error instanceof SessionExpired) this.onExpired();
      throw error;
    }
    return response;
  }
}

/** A presigned PUT, with progress (0-1); rejects with the storage's own error message. */
export function putFile(
  url: string,
  headers: Record<string, string>,
  file: Blob,
  onProgress: (fraction: number) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open('PUT', url);
    for (const [name, value] of Object.entries(headers)) {
      // The browser sets these itself and refuses to be told.
      if (!['content-length', 'host'].includes(name.toLowerCase())) request.setRequestHeader(name, value);
    }
    request.upload.onprogress = (event) => event.lengthComputable && onProgress(event.loaded / event.total);
    request.onload = () => {
      if (request.status >= 200 && request.status < 300) return resolve();
      // S3 (and the local store) answer errors in XML: <Error><Code/><Message/><RequestId/></Error>.
      const xml = request.responseText;
      const pick = (tag: string) => xml.match(new RegExp(`<${tag}>([^<]*)</${tag}>`))?.[1] ?? null;
      reject(
        new ApiError(pick('Message') ?? `upload failed (HTTP ${request.status})`, request.status, pick('Code') ?? 'UPLOAD_FAILED', pick('RequestId')),
      );
    };
    request.onerror = () => reject(new ApiError('the upload could not reach the storage', 0, 'NETWORK', null));
    request.send(file);
  });
}
