// The viewer's only way to the server: the JSON API under api/v1, relative to the page (so a path prefix
// in front of the server just works), with the key from this tab's session storage.

const kKeyName = "strata.apiKey";

export function apiKey() {
  return sessionStorage.getItem(kKeyName) ?? "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(kKeyName, key);
  else sessionStorage.removeItem(kKeyName);
}

// An error answered by the server ({"status":"error","error":{code,message,request_id}}) or a failed fetch.
export class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

function urlFor(path, query) {
  const url = new URL(path.replace(/^\/+/, ""), document.baseURI);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
  }
  return url;
}

function headers(json) {
  const out = {};
  const key = apiKey();
  if (key) out.authorization = `Bearer ${key}`;
  if (json) out["content-type"] = "application/json";
  return out;
}

// Calls `method path` ("api/v1/..."); resolves to the envelope's result, or throws ApiError.
export async function api(method, path, { query, body } = {}) {
  let response;
  try {
    response = await fetch(urlFor(path, query), {
      method,
      headers: headers(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    throw new ApiError(0, "unavailable", `the server cannot be reached (${e.message})`);
  }
  let payload;
  try {
    payload = await response.json();
  } catch {
    throw new ApiError(response.status, "invalid_response", `HTTP ${response.status} without a JSON answer`);
  }
  if (payload?.status !== "ok") {
    const error = payload?.error ?? {};
    throw new ApiError(response.status, error.code ?? "unknown", error.message ?? `HTTP ${response.status}`,
                       error.request_id);
  }
  return payload.result;
}

// Reads a Server-Sent Events stream (fetch, so that the key can be sent as a header, which EventSource
// cannot) and calls onEvent(name, data) per event until `signal` aborts or the stream ends. Resolves when it
// ends; rejects with ApiError when the server refuses it.
export async function readEvents(path, onEvent, signal) {
  const response = await fetch(urlFor(path), { headers: headers(false), signal, cache: "no-store" });
  if (!response.ok) {
    let error = {};
    try {
      error = (await response.json()).error ?? {};
    } catch { /* Not JSON: the status says enough. */ }
    throw new ApiError(response.status, error.code ?? "unknown", error.message ?? `HTTP ${response.status}`);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") name = text;
        else if (field === "data") data.push(text);
      }
      if (data.length) onEvent(name, data.join("\n"));
    }
  }
}
