// The official OpenAI JavaScript client (npm package `openai`, pinned in package.json) on the fields
// agents use beyond plain generation: logprobs (chat and the completions' legacy form, whole and
// streamed), n > 1 choices (whole and streamed) and embeddings (the client asks for base64 unless told
// otherwise and decodes it). Run by tests/server/test_server_oai_js.c, which starts the server
// (stories260K, 2 slots) and passes WOOLLY_BASE_URL, WOOLLY_API_KEY and WOOLLY_MODEL.
// Exits 0 when every check passes; otherwise prints the failed check and exits 1.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.WOOLLY_BASE_URL;
const apiKey = process.env.WOOLLY_API_KEY;
const model = process.env.WOOLLY_MODEL;
assert.ok(baseURL && apiKey && model, 'WOOLLY_* variables missing');

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const checks = [];
const check = (name, fn) => checks.push([name, fn]);
const messages = [{ role: 'user', content: 'Tell me a story.' }];

check('chat: logprobs and top_logprobs', async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 4,
  });
  const c = r.choices[0];
  const content = c.logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  assert.equal(content.map((e) => e.token).join(''), c.message.content);
  for (const e of content) {
    assert.ok(e.logprob <= 0);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    assert.equal(e.top_logprobs.length, 4);
    assert.equal(e.top_logprobs[0].token, e.token); // greedy: the most likely
    for (let i = 1; i < 4; i++) assert.ok(e.top_logprobs[i].logprob <= e.top_logprobs[i - 1].logprob);
  }
});

check('chat: logprobs streamed with n = 2', async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 10, temperature: 1.3, seed: 9, n: 2, logprobs: true, top_logprobs: 2,
    stream: true, stream_options: { include_usage: true },
  });
  const text = ['', ''];
  const tokens = [[], []];
  const finish = [null, null];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.content) text[c.index] += c.delta.content;
      if (c.logprobs && c.logprobs.content) for (const e of c.logprobs.content) tokens[c.index].push(e.token);
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  for (const i of [0, 1]) {
    assert.ok(finish[i], `choice ${i} has no finish_reason`);
    assert.equal(tokens[i].join(''), text[i]);
  }
  assert.equal(usage.completion_tokens, tokens[0].length + tokens[1].length);
});

check('completions: legacy logprobs', async () => {
  const r = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 3,
  });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  assert.equal(lp.token_logprobs.length, 8);
  assert.equal(lp.top_logprobs.length, 8);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < 8; i++) {
    assert.equal(Object.keys(lp.top_logprobs[i]).length, 3);
    assert.equal(lp.top_logprobs[i][lp.tokens[i]], lp.token_logprobs[i]);
  }
});

check('n = 2: greedy choices equal, usage summed', async () => {
  const r = await client.completions.create({
    model, prompt: 'The little dog', max_tokens: 10, temperature: 0, n: 2,
  });
  assert.equal(r.choices.length, 2);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.equal(r.choices[0].text, r.choices[1].text);
  const one = await client.completions.create({ model, prompt: 'The little dog', max_tokens: 10, temperature: 0 });
  assert.equal(r.choices[0].text, one.choices[0].text);
  assert.equal(r.usage.prompt_tokens, one.usage.prompt_tokens);
  assert.equal(r.usage.completion_tokens, 2 * one.usage.completion_tokens);
});

check('embeddings: base64 (the client default) and float agree', async () => {
  const input = ['Once upon a time', 'Lily and Ben'];
  const b64 = await client.embeddings.create({ model, input });
  const flt = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assert.equal(b64.object, 'list');
  assert.equal(b64.data.length, 2);
  for (const i of [0, 1]) {
    assert.equal(b64.data[i].index, i);
    assert.equal(b64.data[i].embedding.length, flt.data[i].embedding.length);
    const norm = Math.hypot(...flt.data[i].embedding);
    assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
    for (let k = 0; k < flt.data[i].embedding.length; k++)
      assert.ok(Math.abs(b64.data[i].embedding[k] - flt.data[i].embedding[k]) < 1e-6);
  }
  assert.ok(b64.usage.prompt_tokens > 0);
  assert.equal(b64.usage.total_tokens, b64.usage.prompt_tokens);
  const one = await client.embeddings.create({ model, input: input[1], encoding_format: 'float' });
  for (let k = 0; k < one.data[0].embedding.length; k++)
    assert.ok(Math.abs(one.data[0].embedding[k] - flt.data[1].embedding[k]) < 1e-6);
});

check('errors: top_logprobs above 20, n above the slots, empty input', async () => {
  const param = (p) => (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, `${e}`);
    assert.equal(e.param, p);
    return true;
  };
  await assert.rejects(client.chat.completions.create({ model, messages, logprobs: true, top_logprobs: 21 }),
    param('top_logprobs'));
  await assert.rejects(client.chat.completions.create({ model, messages, n: 3 }), param('n'));
  await assert.rejects(client.embeddings.create({ model, input: [] }), param('input'));
});

let failed = 0;
for (const [name, fn] of checks) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}
console.log(`${checks.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
