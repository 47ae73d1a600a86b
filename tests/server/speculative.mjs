// Speculative decoding in `woolly serve` (--draft, --lookup), through the official OpenAI client: the same
// requests to a server without speculation (WOOLLY_PLAIN_URL) and to one with it (WOOLLY_BASE_URL) give
// the same text, token for token: greedy and seeded sampling, completions and chat, whole and streamed,
// n = 2, logprobs; and several requests at once, so that the slots' guesses are checked in one batch.
// The speculating server's responses carry timings.draft_n and draft_n_accepted, and its /metrics the
// totals. The speculating server guesses at every step (its length fixed): the same request has the same
// guesses alone and beside others (the draft model's batches across slots give each slot's tokens the
// same arithmetic), and with WOOLLY_SPEC_DRAFT_ONLY (every guess the draft model's) the slots' guesses
// take fewer draft passes than there are guesses (one pass per round of guesses of all slots). Run by tests/server/test_server_spec.c. Exits 0 when every check passes; otherwise prints the
// failed check and exits 1.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const specURL = process.env.WOOLLY_BASE_URL;
const plainURL = process.env.WOOLLY_PLAIN_URL;
const apiKey = process.env.WOOLLY_API_KEY;
const model = process.env.WOOLLY_MODEL;
const slots = Number(process.env.WOOLLY_SLOTS || '2');
assert.ok(specURL && plainURL && apiKey && model, 'WOOLLY_* variables missing');

const spec = new OpenAI({ baseURL: specURL, apiKey, maxRetries: 0, timeout: 60_000 });
const plain = new OpenAI({ baseURL: plainURL, apiKey, maxRetries: 0, timeout: 60_000 });
const checks = [];
const check = (name, fn) => checks.push([name, fn]);

const PROMPTS = [
  'Once upon a time, there was a little girl named Lily. She',
  'The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog',
  'Tom and Sam went to the park. They played with a ball. Tom and Sam went to the',
];

let drafted = 0;
let accepted = 0;
function countDrafts(r) {
  assert.ok(r.timings, 'a speculating server\'s response has timings');
  assert.ok(Number.isInteger(r.timings.draft_n) && Number.isInteger(r.timings.draft_n_accepted));
  assert.ok(r.timings.draft_n_accepted <= r.timings.draft_n);
  drafted += r.timings.draft_n;
  accepted += r.timings.draft_n_accepted;
}

const texts = (r) => r.choices.map((c) => c.text ?? c.message.content);

check('completions, greedy: the plain text', async () => {
  for (const prompt of PROMPTS) {
    const body = { model, prompt, max_tokens: 48, temperature: 0 };
    const [a, b] = [await plain.completions.create(body), await spec.completions.create(body)];
    assert.equal(a.timings, undefined, 'no timings without speculation');
    assert.deepEqual(texts(b), texts(a), prompt);
    assert.equal(b.usage.completion_tokens, a.usage.completion_tokens);
    countDrafts(b);
  }
});

check('completions, seeded sampling with penalties: the plain text', async () => {
  for (const [i, prompt] of PROMPTS.entries()) {
    const body = {
      model, prompt, max_tokens: 40, temperature: 0.9, seed: 100 + i, presence_penalty: 0.5,
      frequency_penalty: 0.3,
    };
    const [a, b] = [await plain.completions.create(body), await spec.completions.create(body)];
    assert.deepEqual(texts(b), texts(a), prompt);
    countDrafts(b);
  }
});

check('chat, greedy and n = 2 sampled, with logprobs: the plain choices', async () => {
  const messages = [{ role: 'user', content: 'Tell me a story about a cat and a dog.' }];
  for (const extra of [{ temperature: 0 }, { temperature: 1.1, seed: 7, n: 2 }]) {
    const body = { model, messages, max_tokens: 32, logprobs: true, top_logprobs: 2, ...extra };
    const [a, b] = [await plain.chat.completions.create(body), await spec.chat.completions.create(body)];
    assert.deepEqual(texts(b), texts(a));
    for (const [k, c] of b.choices.entries()) {
      const want = a.choices[k].logprobs.content;
      const got = c.logprobs.content;
      assert.deepEqual(got.map((e) => e.token), want.map((e) => e.token));
      for (let t = 0; t < got.length; t++) assert.ok(Math.abs(got[t].logprob - want[t].logprob) < 1e-4);
    }
    countDrafts(b);
  }
});

check('streamed with usage: the plain text, timings in the usage chunk', async () => {
  const body = {
    model, prompt: PROMPTS[1], max_tokens: 40, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  };
  const want = texts(await plain.completions.create({ ...body, stream: false, stream_options: undefined }))[0];
  let text = '';
  let last = null;
  for await (const chunk of await spec.completions.create(body)) {
    for (const c of chunk.choices) text += c.text ?? '';
    if (chunk.usage) last = chunk;
  }
  assert.equal(text, want);
  assert.ok(last, 'a usage chunk');
  countDrafts(last);
});

check('several requests at once: each the plain text', async () => {
  const bodies = [];
  for (let i = 0; i < 2 * slots; i++)
    bodies.push({
      model, prompt: PROMPTS[i % PROMPTS.length], max_tokens: 36 + 4 * i,
      temperature: i % 2 ? 0.8 : 0, seed: 40 + i,
    });
  const want = [];
  const alone = [];
  for (const body of bodies) {
    want.push(texts(await plain.completions.create(body)));
    alone.push(await spec.completions.create(body));
    countDrafts(alone.at(-1));
  }
  const got = await Promise.all(bodies.map((body) => spec.completions.create(body)));
  for (let i = 0; i < bodies.length; i++) {
    assert.deepEqual(texts(got[i]), want[i], `request ${i}`);
    assert.deepEqual(got[i].timings, alone[i].timings, `request ${i}: the guesses it had alone`);
    countDrafts(got[i]);
  }
});

const metric = async (name) => {
  const base = specURL.replace(/\/v1$/, '');
  const m = await (await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${apiKey}` } })).text();
  return Number((m.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1]);
};

if (process.env.WOOLLY_SPEC_DRAFT_ONLY)
  check(`n = ${slots}: the draft model guesses for all slots in one batch per round`, async () => {
    // The choices take the slots together and decode in step: each step's k guesses per slot cost
    // about k draft passes in all, where drafting slot after slot costs k per slot (passes >= guesses).
    const before = await metric('woolly_draft_passes_total');
    const body = { model, prompt: PROMPTS[0], max_tokens: 40, temperature: 1, seed: 5, n: slots };
    const r = await spec.completions.create(body);
    assert.deepEqual(texts(r), texts(await plain.completions.create(body)));
    countDrafts(r);
    const passes = (await metric('woolly_draft_passes_total')) - before;
    assert.ok(passes > 0 && 2 * passes < r.timings.draft_n,
      `${passes} draft passes for ${r.timings.draft_n} guesses of ${slots} slots`);
  });

check('guesses were checked and some kept; /metrics has the totals', async () => {
  assert.ok(drafted > 0, 'nothing was drafted');
  assert.ok(accepted > 0, 'no guess was kept');
  const base = specURL.replace(/\/v1$/, '');
  const m = await (await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${apiKey}` } })).text();
  const value = (name) => Number((m.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1]);
  assert.equal(value('woolly_draft_tokens_total'), drafted);
  assert.equal(value('woolly_draft_tokens_accepted_total'), accepted);
  assert.ok(value('woolly_draft_passes_total') >= 0, 'the draft passes counter');
  const p = await (await fetch(`${plainURL.replace(/\/v1$/, '')}/metrics`, {
    headers: { Authorization: `Bearer ${apiKey}` },
  })).text();
  assert.ok(!p.includes('woolly_draft_tokens_total'), 'no draft counters without speculation');
});

let failed = 0;
for (const [name, fn] of checks) {
  try {
    await fn();
    console.error(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.error(`FAIL ${name}: ${e.stack || e}`);
  }
}
console.error(`speculative: ${checks.length - failed} passed, ${failed} failed (${drafted} drafted, ${accepted} accepted)`);
process.exit(failed ? 1 : 0);
