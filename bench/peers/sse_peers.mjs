// Peers for the streaming-path benchmark (bench/llm_bench.cc): the same OpenAI chat-completions stream,
// delivered in 1 KiB chunks from memory, through
//   (a) eventsource-parser + JSON.parse per event + merging text and tool-call fragments (a minimal client);
//   (b) the official OpenAI Node SDK: client.chat.completions.create({stream: true}) with a fetch that
//       serves the bytes, iterating the chunks and merging them the same way.
// Usage: node sse_peers.mjs STREAM_FILE   (written by `strata_llm_bench --write-streams DIR`)
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const cache = process.env.STRATA_NPM_CACHE || `${process.env.HOME}/.cache/strata/npm`;
const require = createRequire(`${cache}/package.json`);
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const { createParser } = await load('eventsource-parser');
const { default: OpenAI } = await load('openai');

const sdkVersion = JSON.parse(readFileSync(`${cache}/node_modules/openai/package.json`, 'utf8')).version;
const bytes = readFileSync(process.argv[2]);
const CHUNK = 1024;

function newMerge() {
  return { text: '', calls: [] };
}
function mergeChunk(m, chunk) {
  const choice = chunk.choices?.[0];
  if (!choice) return;
  const d = choice.delta ?? {};
  if (d.content) m.text += d.content;
  for (const tc of d.tool_calls ?? []) {
    const c = (m.calls[tc.index] ??= { id: tc.id, name: '', arguments: '' });
    if (tc.function?.name) c.name += tc.function.name;
    if (tc.function?.arguments) c.arguments += tc.function.arguments;
  }
}

async function minimal() {
  const m = newMerge();
  let events = 0;
  const decoder = new TextDecoder();
  const parser = createParser({
    onEvent(e) {
      events++;
      if (e.data !== '[DONE]') mergeChunk(m, JSON.parse(e.data));
    },
  });
  for (let i = 0; i < bytes.length; i += CHUNK) {
    parser.feed(decoder.decode(bytes.subarray(i, i + CHUNK), { stream: true }));
  }
  return { events, m };
}

function bodyStream() {
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(i, i + CHUNK));
      i += CHUNK;
    },
  });
}
const client = new OpenAI({
  apiKey: 'bench',
  baseURL: 'http://bench.invalid/v1',
  maxRetries: 0,
  fetch: async () => new Response(bodyStream(), { status: 200, headers: { 'content-type': 'text/event-stream' } }),
});
async function sdk() {
  const m = newMerge();
  let events = 0;
  const stream = await client.chat.completions.create({
    model: 'bench-model',
    stream: true,
    messages: [{ role: 'user', content: 'Find where retries are implemented.' }],
  });
  for await (const chunk of stream) {
    events++;
    mergeChunk(m, chunk);
  }
  return { events, m };
}

async function measure(name, fn) {
  let r;
  for (let i = 0; i < 3; i++) r = await fn();  // warm-up (JIT)
  const times = [];
  for (let i = 0; i < 10; i++) {
    const t0 = process.hrtime.bigint();
    r = await fn();
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const ms = times[Math.floor(times.length / 2)];
  console.log(`${name.padEnd(52)} ${ms.toFixed(2)} ms  ${(bytes.length / 1e6 / (ms / 1e3)).toFixed(0)} MB/s  ` +
              `${((ms * 1e6) / r.events).toFixed(0)} ns/event  (${r.events} events, ${r.m.text.length} chars, ` +
              `${r.m.calls.length} tool calls)`);
}

console.log(`Node ${process.version}, ${bytes.length} bytes, median of 10 after 3 warm-ups`);
await measure('eventsource-parser + JSON.parse + merge', minimal);
await measure(`openai SDK ${sdkVersion} chat.completions stream + merge`, sdk);
