// The official OpenAI JavaScript client (npm package `openai`, pinned in package.json) against a running
// `woolly serve`: the models list, completions and chat completions, whole and streamed, and the errors,
// each checked through the objects the client parses. Run by tests/test_server_openai_js.c, which starts
// the server (stories260K, with an API key) and passes:
//   WOOLLY_BASE_URL  http://127.0.0.1:PORT/v1
//   WOOLLY_API_KEY   the key the server requires
//   WOOLLY_MODEL     the model's name
//   WOOLLY_EXPECT    what `woolly run -p "Once upon a time" -n 20 --temp 0` prints after the prompt
// Exits 0 when every check passes; otherwise prints the failed check and exits 1.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.WOOLLY_BASE_URL;
const apiKey = process.env.WOOLLY_API_KEY;
const model = process.env.WOOLLY_MODEL;
const expected = process.env.WOOLLY_EXPECT;
assert.ok(baseURL && apiKey && model && expected !== undefined, 'WOOLLY_* variables missing');

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const checks = [];
const check = (name, fn) => checks.push([name, fn]);

check('models.list and models.retrieve', async () => {
  const ids = [];
  for await (const m of client.models.list()) {
    assert.equal(m.object, 'model');
    assert.equal(typeof m.created, 'number');
    assert.equal(typeof m.owned_by, 'string');
    ids.push(m.id);
  }
  assert.deepEqual(ids, [model]);
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
});

check('completions: greedy text equals woolly run', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].text, expected);
  assert.equal(r.choices[0].index, 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.prompt_tokens, 5);
  assert.equal(r.usage.completion_tokens, 20);
  assert.equal(r.usage.total_tokens, 25);
});

check('completions: streamed', async () => {
  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length === 0) continue;
    chunks++;
    text += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(text, expected);
  assert.equal(finish, 'length');
  assert.equal(chunks, 21); // one per token, then the closing chunk
  assert.equal(usage.completion_tokens, 20);
});

const messages = [
  { role: 'system', content: 'You tell short stories.' },
  { role: 'user', content: 'Tell me about a cat.' },
];

check('chat.completions: whole and streamed agree', async () => {
  const whole = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
  assert.equal(whole.object, 'chat.completion');
  assert.match(whole.id, /^chatcmpl-/);
  const choice = whole.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);

  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let content = '';
  let role = null;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) content += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(content, choice.message.content);
  assert.equal(finish, choice.finish_reason);
  assert.deepEqual(usage.completion_tokens, whole.usage.completion_tokens);
  assert.deepEqual(usage.prompt_tokens, whole.usage.prompt_tokens);
});

check('chat.completions: stop strings and seeds', async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 40, temperature: 0.9, seed: 7, stop: ['.', '!'],
  });
  const again = await client.chat.completions.create({
    model, messages, max_tokens: 40, temperature: 0.9, seed: 7, stop: ['.', '!'],
  });
  assert.equal(r.choices[0].message.content, again.choices[0].message.content);
  assert.ok(!r.choices[0].message.content.includes('.'));
});

check('errors: unknown model, bad parameter, n above the slots, wrong key', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, `${e}`);
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    assert.match(e.message, /gpt-4o/);
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages, temperature: 5 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, `${e}`);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    return true;
  });
  await assert.rejects(client.completions.create({ model, prompt: 'x', n: 3 }), (e) => { // above the 2 slots
    assert.ok(e instanceof OpenAI.BadRequestError, `${e}`);
    assert.equal(e.param, 'n');
    return true;
  });
  const intruder = new OpenAI({ baseURL, apiKey: 'not-the-key', maxRetries: 0 });
  await assert.rejects(intruder.models.list(), (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError, `${e}`);
    assert.equal(e.status, 401);
    return true;
  });
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
