// Tool calls through the official OpenAI client against `woolly serve` on stories260K, a tiny model
// that never writes a tool call by itself: with tool_choice "required" or a named function the output is
// held to a call, and every call must come back as message.tool_calls (finish_reason "tool_calls") whose
// name is a tool's and whose arguments parse and validate against the tool's parameter schema (ajv),
// for several schemas and seeds, whole and streamed (read chunk by chunk, and through the client's own
// stream helper, which assembles the tool_calls deltas), and parallel_tool_calls false (one call) and true
// (several). Also: "auto" and "none", a conversation that carries calls and their results back, n = 2,
// and the 400s that name the field.
// Run by tests/server/test_server_tools.c, which starts the server (with --chat-template FAMILY for the
// families other than the model's own) and passes WOOLLY_BASE_URL, WOOLLY_API_KEY, WOOLLY_MODEL,
// WOOLLY_SLOTS, WOOLLY_TOOLS_QUICK (1: one required and one named call, and the parallel_tool_calls
// cases, only) and WOOLLY_TOOLS_FAMILY (the built-in forced, if any).
// Prints "N valid of M, K failed" and exits 0 only when every check passes.
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { runCases } from './run_cases.mjs';

const baseURL = process.env.WOOLLY_BASE_URL;
const apiKey = process.env.WOOLLY_API_KEY;
const model = process.env.WOOLLY_MODEL;
const slots = Number(process.env.WOOLLY_SLOTS);
const quick = process.env.WOOLLY_TOOLS_QUICK === '1';
// Llama 3's templates document one call a turn: its grammar holds one even with parallel_tool_calls.
const oneCallAlways = process.env.WOOLLY_TOOLS_FAMILY === 'llama3';
assert.ok(baseURL && apiKey && model && slots > 0, 'WOOLLY_* variables missing');
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 400_000 });
const ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true });

const fn = (name, description, parameters) => ({ type: 'function', function: { name, description, parameters } });
// Together: enums, integers, numbers, booleans, null, nested objects, arrays with bounds, optional
// properties, anyOf, $ref to $defs, and a tool without parameters. No free strings: this model writes
// stories inside them for hundreds of tokens (the structured output tests cover strings).
const TOOLS = [
  fn('get_weather', 'The weather in a city', {
    type: 'object',
    properties: { city: { enum: ['Paris', 'Oslo', 'Lima'] }, unit: { enum: ['celsius', 'fahrenheit'] } },
    required: ['city', 'unit'],
    additionalProperties: false,
  }),
  fn('create_event', 'Put an event in the calendar', {
    type: 'object',
    properties: {
      day: { type: 'integer' },
      all_day: { type: 'boolean' },
      guests: { type: 'array', items: { type: 'integer' }, maxItems: 2 },
      place: {
        type: 'object',
        properties: { lat: { type: 'number' }, lon: { type: 'number' } },
        required: ['lat', 'lon'],
        additionalProperties: false,
      },
    },
    required: ['day', 'all_day', 'guests'],
    additionalProperties: false,
  }),
  fn('walk', 'Walk a path', {
    $defs: { point: { type: 'array', items: { type: 'number' }, minItems: 2, maxItems: 2 } },
    type: 'object',
    properties: {
      path: { type: 'array', items: { $ref: '#/$defs/point' }, minItems: 1, maxItems: 3 },
      speed: { anyOf: [{ type: 'null' }, { type: 'integer' }] },
    },
    required: ['path', 'speed'],
    additionalProperties: false,
  }),
  fn('now', 'The time'),
];
const validators = Object.fromEntries(TOOLS.map((t) =>
  [t.function.name, ajv.compile(t.function.parameters ?? { type: 'object', additionalProperties: false })]));
const SEEDS = quick ? [1] : [1, 2];
const SAMPLING = { temperature: 1.0, top_p: 1, top_k: 0, min_p: 0, max_tokens: 1500 };
const ASK = [{ role: 'system', content: 'You call tools.' }, { role: 'user', content: 'Plan my day.' }];

let valid = 0;
let total = 0;
let calls = 0;
const failures = [];
const cases = [];
const check = (name, f) => cases.push([name, f]);

// A message's calls: each a tool's, its arguments valid; names must be in `names`.
function assertCalls(message, finish, names) {
  assert.equal(finish, 'tool_calls', 'finish_reason');
  assert.ok(Array.isArray(message.tool_calls) && message.tool_calls.length >= 1, 'no tool_calls');
  const ids = new Set();
  for (const c of message.tool_calls) {
    assert.equal(c.type, 'function');
    assert.ok(typeof c.id === 'string' && c.id.length > 0 && !ids.has(c.id), `id ${c.id}`);
    ids.add(c.id);
    assert.ok(names.includes(c.function.name), `called ${c.function.name}`);
    const args = JSON.parse(c.function.arguments);
    const validate = validators[c.function.name];
    assert.ok(validate(args), `${c.function.name}(${c.function.arguments}): ${JSON.stringify(validate.errors)}`);
    calls++;
  }
}

// The tools a named call is offered: the one named (the tool definitions are most of the prompt, and
// this model reads it slowly under the sanitizers).
const only = (name) => ({ tools: TOOLS.filter((t) => t.function.name === name) });

async function whole(extra, seed, messages = ASK) {
  return client.chat.completions.create({ model, messages, tools: TOOLS, seed, ...SAMPLING, ...extra });
}

// A streamed request read chunk by chunk: the deltas assembled as the API defines them (the first delta
// of call `index` carries id, type and name; arguments arrive in fragments to concatenate).
async function streamed(extra, seed) {
  const stream = await client.chat.completions.create({
    model, messages: ASK, tools: TOOLS, seed, ...SAMPLING, ...extra, stream: true,
  });
  const message = { content: '', tool_calls: [] };
  let finish = null;
  for await (const chunk of stream)
    for (const c of chunk.choices) {
      assert.equal(c.index, 0);
      if (c.delta?.content) message.content += c.delta.content;
      for (const d of c.delta?.tool_calls ?? []) {
        if (!message.tool_calls[d.index]) {
          assert.ok(d.id && d.type === 'function' && d.function?.name, 'a call\'s first delta names it');
          message.tool_calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } };
        }
        message.tool_calls[d.index].function.arguments += d.function?.arguments ?? '';
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  return { message, finish };
}

// "required" among all the tools, whole for the first seed and streamed for the second; each tool named,
// whole for the first seed and streamed for the second (quick: "required" whole and one tool named,
// streamed).
const NAMES = TOOLS.map((t) => t.function.name);
for (const seed of SEEDS) {
  if (seed === 1)
    check(`required, seed ${seed}`, async () => {
      const r = await whole({ tool_choice: 'required' }, seed);
      assertCalls(r.choices[0].message, r.choices[0].finish_reason, NAMES);
    });
  else
    check(`required, streamed, seed ${seed}`, async () => {
      const { message, finish } = await streamed({ tool_choice: 'required' }, seed);
      assertCalls(message, finish, NAMES);
    });
  for (const name of quick ? ['walk'] : NAMES) {
    const choice = { type: 'function', function: { name } };
    if (seed === 1 && !quick)
      check(`named ${name}, seed ${seed}`, async () => {
        const r = await whole({ tool_choice: choice, ...only(name) }, seed);
        assertCalls(r.choices[0].message, r.choices[0].finish_reason, [name]);
      });
    else
      check(`named ${name}, streamed, seed ${seed}`, async () => {
        const { message, finish } = await streamed({ tool_choice: choice, ...only(name) }, seed + 10);
        assertCalls(message, finish, [name]);
        assert.equal(message.content, '', 'no content around a required call');
      });
  }
}

// parallel_tool_calls: false gives one call; true lets the grammar go on to several (this model does,
// from call to call, so the request must give several), in each family's syntax but Llama 3's. The tool
// without parameters keeps the calls short.
let several = 0;
check('parallel_tool_calls false', async () => {
  const r = await whole({ tool_choice: 'required', parallel_tool_calls: false, ...only('now') }, 31);
  assertCalls(r.choices[0].message, r.choices[0].finish_reason, ['now']);
  assert.equal(r.choices[0].message.tool_calls.length, 1, 'calls');
});
check('parallel_tool_calls true', async () => {
  const r = await whole({ tool_choice: 'required', parallel_tool_calls: true, ...only('now') }, 31);
  assertCalls(r.choices[0].message, r.choices[0].finish_reason, ['now']);
  several = r.choices[0].message.tool_calls.length;
  if (oneCallAlways) assert.equal(several, 1, 'calls');
});

if (!quick) {
  check('the client\'s stream helper assembles the calls', async () => {
    const runner = client.chat.completions.stream({
      model, messages: ASK, ...only('walk'), tool_choice: { type: 'function', function: { name: 'walk' } }, seed: 4,
      ...SAMPLING,
    });
    const done = await runner.finalChatCompletion();
    assertCalls(done.choices[0].message, done.choices[0].finish_reason, ['walk']);
  });

  check('n = 2, each choice calls', async () => {
    const r = await whole({ tool_choice: 'required', n: 2, tools: TOOLS.slice(2) }, 5);
    assert.equal(r.choices.length, 2);
    for (const c of r.choices) assertCalls(c.message, c.finish_reason, ['walk', 'now']);
  });

  // The tiny model writes stories, not calls: "auto" answers with text (the output is parsed, nothing
  // found); "none" never has tool_calls.
  for (const tool_choice of ['auto', 'none', undefined])
    check(`tool_choice ${tool_choice}`, async () => {
      const r = await whole({ tool_choice, max_tokens: 40, ...only('now') }, 1);
      const c = r.choices[0];
      assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
      assert.equal(c.message.tool_calls, undefined);
      assert.equal(typeof c.message.content, 'string');
    });
  check('tool_choice auto, streamed: text arrives as content', async () => {
    const { message, finish } = await streamed({ tool_choice: 'auto', max_tokens: 40, ...only('now') }, 2);
    assert.ok(['stop', 'length'].includes(finish), finish);
    assert.equal(message.tool_calls.length, 0);
    assert.ok(message.content.length > 0);
  });

  // An agent's next step: the call and its result go back, then another required call.
  check('a call and its result sent back', async () => {
    const first = await whole({ tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...only('get_weather') }, 6);
    const m = first.choices[0].message;
    assertCalls(m, first.choices[0].finish_reason, ['get_weather']);
    const messages = [...ASK, { role: 'assistant', content: null, tool_calls: m.tool_calls },
      { role: 'tool', tool_call_id: m.tool_calls[0].id, content: '{"temp": 21}' }];
    const r = await whole({ tool_choice: 'required', ...only('get_weather') }, 7, messages);
    assertCalls(r.choices[0].message, r.choices[0].finish_reason, ['get_weather']);
    const prompt = r.usage.prompt_tokens;
    assert.ok(prompt > first.usage.prompt_tokens, 'the call and result are in the prompt');
  });

  function expect400(name, extra, param, needle) {
    check(name, async () => {
      await assert.rejects(whole(extra, 1), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, param);
        assert.ok(e.message.includes(needle), e.message);
        return true;
      });
    });
  }
  expect400('a schema the compiler refuses',
    { tools: [fn('f', 'x', { type: 'object', properties: { a: { type: 'string', pattern: '^a' } } })] },
    'tools', 'pattern');
  expect400('an unknown function named', { tool_choice: { type: 'function', function: { name: 'fly' } } },
    'tool_choice', 'fly');
  expect400('a malformed tool_choice', { tool_choice: 'sometimes' }, 'tool_choice', 'sometimes');
  expect400('required without tools', { tools: undefined, tool_choice: 'required' }, 'tool_choice', 'tools');
}

const run = await runCases(cases, slots);
total += run.total;
valid += run.valid;
failures.push(...run.failures);
total++;
if (several > 1 || oneCallAlways) valid++;
else failures.push('parallel_tool_calls true: no request gave several calls');

for (const f of failures) console.log('FAILED', f);
console.log(`${valid} valid of ${total} (${calls} calls validated), ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
