// Server-Sent Events, parsed as the HTML standard's event-stream interpretation describes
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation): lines end in
// CRLF, LF or CR (a CRLF split across two chunks is one line end); a leading byte-order mark is dropped;
// lines starting with ":" are comments; "data" lines accumulate, joined by LF; an empty line dispatches the
// event; an event left unfinished when the stream ends is discarded. Reconnection is not this module's:
// the task and change streams are answered whole, and their callers decide what to do when one ends.

/** One dispatched event. */
export interface SseEvent {
  /** The event's name (`event:`), "message" when it had none. */
  event: string;
  /** Its `data:` lines, joined by "\n". */
  data: string;
  /** The last event id seen (`id:`), "" when none. */
  id: string;
  /** The reconnection time the stream asked for (`retry:`), if it did. */
  retry?: number;
}

/**
 * Yields the events of `body` as they complete. Returns when the stream ends; a read that fails (the
 * connection dropped, the request's signal aborted) rejects with the reader's error. The reader is
 * released (and the stream cancelled) when the caller stops early.
 */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");  // Drops a leading BOM (ignoreBOM is false).
  let buffer = "";
  let skipLineFeed = false;  // The previous chunk ended in CR: a LF opening the next one belongs to it.
  let data: string[] = [];
  let event = "";
  let id = "";
  let retry: number | undefined;
  let done = false;
  try {
    while (!done) {
      const chunk = await reader.read();
      done = chunk.done;
      let text = done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
      if (text.length === 0) continue;
      if (skipLineFeed && text.startsWith("\n")) text = text.slice(1);
      skipLineFeed = false;
      buffer += text;
      let start = 0;
      for (;;) {
        const cr = buffer.indexOf("\r", start);
        const lf = buffer.indexOf("\n", start);
        const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
        if (end === -1) break;
        const line = buffer.slice(start, end);
        if (buffer[end] === "\r") {
          if (end + 1 < buffer.length) {
            start = buffer[end + 1] === "\n" ? end + 2 : end + 1;
          } else {
            start = end + 1;
            skipLineFeed = true;
          }
        } else {
          start = end + 1;
        }
        if (line.length === 0) {
          if (data.length > 0) {
            const out: SseEvent = { event: event || "message", data: data.join("\n"), id };
            if (retry !== undefined) out.retry = retry;
            yield out;
          }
          data = [];
          event = "";
          continue;
        }
        if (line.startsWith(":")) continue;  // A comment (keep-alive).
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        switch (field) {
          case "event":
            event = value;
            break;
          case "data":
            data.push(value);
            break;
          case "id":
            if (!value.includes("\0")) id = value;
            break;
          case "retry":
            if (/^[0-9]+$/.test(value)) retry = Number(value);
            break;
          default:
            break;  // Unknown fields are ignored.
        }
      }
      buffer = buffer.slice(start);
    }
  } finally {
    if (!done) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
