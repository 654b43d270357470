// The gateway's API as the page calls it: the API key (kept in this tab's session storage, sent
// as the X-API-Key header, never in a URL), JSON errors as ApiError, and Server-Sent Events read
// from a fetch() body (EventSource can neither POST nor send a header).

const KEY_NAME = 'ragstack.apiKey';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY_NAME) || '';
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_NAME, key);
  else sessionStorage.removeItem(KEY_NAME);
}

let unauthorized = () => {};

/** What to do when the gateway answers 401 (the login again, with its message). */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

function url(path, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== '') query.set(name, String(value));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

async function failure(response) {
  let code = 'HTTP_' + response.status;
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // not JSON: keep the status line
  }
  const error = new ApiError(response.status, code, message);
  if (response.status === 401) unauthorized(message);
  return error;
}

/** One request; a response outside 2xx throws ApiError with the gateway's code and message. */
export async function request(method, path, {params, json, form, accept} = {}) {
  const headers = new Headers();
  const key = apiKey();
  if (key) headers.set('X-API-Key', key);
  if (accept) headers.set('Accept', accept);
  let body;
  if (json !== undefined) {
    headers.set('Content-Type', 'application/json');
    body = JSON.stringify(json);
  } else if (form !== undefined) {
    body = form; // the browser sets the multipart boundary
  }
  const response = await fetch(url(path, params), {
    method,
    headers,
    body,
    credentials: 'omit',
    cache: 'no-store',
    redirect: 'error',
    referrerPolicy: 'no-referrer',
  });
  if (!response.ok) throw await failure(response);
  return response;
}

export async function getJson(path, params) {
  return (await request('GET', path, {params})).json();
}

export async function postJson(path, json) {
  return (await request('POST', path, {json})).json();
}

export async function remove(path, params) {
  return (await request('DELETE', path, {params})).json();
}

/** A picture (or any body) as a blob: URL the page may show (img-src 'self' blob:). */
export async function blobUrl(path, params) {
  const blob = await (await request('GET', path, {params})).blob();
  return URL.createObjectURL(blob);
}

/** The events of a Server-Sent Events response, as {event, data} with data parsed as JSON. */
export async function* events(method, path, {json, form} = {}) {
  const response = await request(method, path, {json, form, accept: 'text/event-stream'});
  for await (const {event, data} of readSse(response.body)) {
    let parsed;
    try {
      parsed = JSON.parse(data);
    } catch {
      parsed = {text: data};
    }
    yield {event, data: parsed};
  }
}

const BOUNDARY = /\r\n\r\n|\n\n|\r\r/;

/** SSE as the spec reads it: blocks split by a blank line, `event:` and `data:` fields, comments
 * (sse-starlette's pings) skipped, several data lines joined by a newline. */
export async function* readSse(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const {value, done} = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), {stream: !done});
    for (let match = BOUNDARY.exec(buffer); match; match = BOUNDARY.exec(buffer)) {
      const block = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      const event = parseBlock(block);
      if (event) yield event;
    }
    if (done) {
      const event = parseBlock(buffer);
      if (event) yield event;
      return;
    }
  }
}

function parseBlock(block) {
  let event = 'message';
  const data = [];
  for (const line of block.split(/\r\n|\r|\n/)) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  return data.length ? {event, data: data.join('\n')} : null;
}
