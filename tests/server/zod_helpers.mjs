// The official OpenAI client's zod helpers against `woolly serve` on stories260K, a tiny model that never
// writes JSON or a tool call by itself: zodResponseFormat with client.chat.completions.parse (and its
// stream helper), and zodFunction tools with tool_choice "required" or a named function, on several zod
// schemas and seeds. The helper parses the output with the zod schema itself (it throws when the output
// does not validate, or was cut at max_tokens); each case checks the parsed value again (safeParse) and
// against the content. Also parallel_tool_calls: false gives one call, true one or more (several at least
// once), each validated, and a parallel_tool_calls that is not a boolean is a 400 naming it.
// Run by tests/server/test_server_zod.c, which starts the server and passes WOOLLY_BASE_URL,
// WOOLLY_API_KEY, WOOLLY_MODEL and WOOLLY_SLOTS. Prints "N valid of M, K failed" and exits 0 only when
// every check passes.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { runCases } from './run_cases.mjs';

const baseURL = process.env.WOOLLY_BASE_URL;
const apiKey = process.env.WOOLLY_API_KEY;
const model = process.env.WOOLLY_MODEL;
const slots = Number(process.env.WOOLLY_SLOTS);
assert.ok(baseURL && apiKey && model && slots > 0, 'WOOLLY_* variables missing');
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 300_000 });

// Together: enums, numbers, integers (zod writes their safe range as minimum and maximum), booleans,
// null, nullable and optional-nullable fields, literals and unions of them, arrays with bounds, nested
// objects and a short free string.
const Step = z.object({ n: z.int(), done: z.boolean() });
const SCHEMAS = {
  weather: z.object({ city: z.enum(['Paris', 'Oslo', 'Lima']), temp: z.number(), sunny: z.boolean() }),
  plan: z.object({ steps: z.array(Step).min(1).max(2), total: z.number().int() }),
  unions: z.object({
    kind: z.union([z.literal('a'), z.literal('b'), z.literal(3)]),
    value: z.number().nullable(),
    tags: z.array(z.enum(['x', 'y', 'z'])).max(3),
    nothing: z.null(),
  }),
  optional_nullable: z.object({ flag: z.boolean().optional().nullable(), count: z.int().nullable() }),
  nested: z.object({ owner: z.object({ id: z.int(), admin: z.boolean() }), place: z.object({ lat: z.number(), lon: z.number() }) }),
  short_string: z.object({ mood: z.enum(['happy', 'sad']), word: z.string() }),
};
const SEEDS = [1, 2];
const SAMPLING = { temperature: 1.0, top_p: 1, top_k: 0, min_p: 0, max_tokens: 1500 };
const ASK = [{ role: 'system', content: 'Answer in JSON.' }, { role: 'user', content: 'Plan my day.' }];

let valid = 0;
let total = 0;
let parsed = 0;
const failures = [];
const cases = [];
const check = (name, f) => cases.push([name, f]);

// A value the zod schema accepts, as the helper gave it for this content.
function assertParsed(schema, value, content) {
  assert.ok(value !== null && value !== undefined, 'nothing parsed');
  const again = schema.safeParse(value);
  assert.ok(again.success, JSON.stringify(again.error?.issues));
  if (content !== undefined) assert.deepEqual(value, JSON.parse(content));
  parsed++;
}

for (const [name, schema] of Object.entries(SCHEMAS))
  for (const seed of SEEDS)
    check(`parse ${name}, seed ${seed}`, async () => {
      const r = await client.chat.completions.parse({
        model, messages: ASK, seed, ...SAMPLING, response_format: zodResponseFormat(schema, name),
      });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop');
      assert.equal(c.message.refusal, null);
      assertParsed(schema, c.message.parsed, c.message.content);
    });

check('the stream helper parses the streamed output', async () => {
  const schema = SCHEMAS.plan;
  const runner = client.chat.completions.stream({
    model, messages: ASK, seed: 3, ...SAMPLING, response_format: zodResponseFormat(schema, 'plan'),
  });
  const done = await runner.finalChatCompletion();
  assertParsed(schema, done.choices[0].message.parsed, done.choices[0].message.content);
});

// Tools whose parameters are zod schemas: each call's arguments parsed by the helper with its tool's.
const TOOLS = {
  get_weather: z.object({ city: z.enum(['Paris', 'Oslo', 'Lima']), unit: z.enum(['celsius', 'fahrenheit']) }),
  create_event: z.object({
    day: z.int(), all_day: z.boolean(), guests: z.array(z.int()).max(2), place: z.object({ lat: z.number(), lon: z.number() }).nullable(),
  }),
  walk: z.object({ path: z.array(z.array(z.number()).min(2).max(2)).min(1).max(2), speed: z.int().nullable() }),
  toggle: z.object({ on: z.boolean() }),
};
const tools = (names) => names.map((name) => zodFunction({ name, parameters: TOOLS[name], description: `The ${name} tool` }));

// A message's calls: at least one (exactly `count` when given), each a tool of `names` whose arguments
// the helper parsed and the zod schema accepts.
function assertCalls(choice, names, count) {
  assert.equal(choice.finish_reason, 'tool_calls');
  const calls = choice.message.tool_calls;
  assert.ok(Array.isArray(calls) && calls.length >= 1, 'no tool_calls');
  if (count !== undefined) assert.equal(calls.length, count, 'calls');
  for (const c of calls) {
    assert.ok(names.includes(c.function.name), `called ${c.function.name}`);
    assertParsed(TOOLS[c.function.name], c.function.parsed_arguments, c.function.arguments);
  }
  return calls.length;
}

// One seed for the tools: their definitions make long prompts, which this model reads slowly under the
// sanitizers.
const ALL = ['get_weather', 'create_event', 'walk'];
for (const seed of [1]) {
  check(`parse, tool_choice required, seed ${seed}`, async () => {
    const r = await client.chat.completions.parse({
      model, messages: ASK, seed, ...SAMPLING, tools: tools(ALL), tool_choice: 'required',
    });
    assertCalls(r.choices[0], ALL);
  });
  for (const name of ALL)
    check(`parse, ${name} named, seed ${seed}`, async () => {
      const r = await client.chat.completions.parse({
        model, messages: ASK, seed: seed + 10, ...SAMPLING, tools: tools([name]),
        tool_choice: { type: 'function', function: { name } },
      });
      assertCalls(r.choices[0], [name]);
    });
}

// parallel_tool_calls: with false the grammar of a required call holds one; with true 1 to 8 (this model
// goes on from call to call: the request must make several, checked at the end). Short calls (toggle)
// keep them cheap.
let several = 0;
const PARALLEL_SEEDS = [1];
for (const seed of PARALLEL_SEEDS) {
  check(`parallel_tool_calls false, seed ${seed}`, async () => {
    const r = await client.chat.completions.parse({
      model, messages: ASK, seed: seed + 20, ...SAMPLING, tools: tools(['toggle', 'get_weather']),
      tool_choice: 'required', parallel_tool_calls: false,
    });
    assertCalls(r.choices[0], ['toggle', 'get_weather'], 1);
  });
  check(`parallel_tool_calls true, seed ${seed}`, async () => {
    const r = await client.chat.completions.parse({
      model, messages: ASK, seed: seed + 20, ...SAMPLING, tools: tools(['toggle']),
      tool_choice: 'required', parallel_tool_calls: true,
    });
    if (assertCalls(r.choices[0], ['toggle']) > 1) several++;
  });
}

check('parallel_tool_calls not a boolean is a 400 naming it', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model, messages: ASK, tools: tools(['get_weather']), parallel_tool_calls: 'yes', max_tokens: 5,
    }),
    (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'parallel_tool_calls');
      return true;
    });
});

const run = await runCases(cases, slots);
total += run.total;
valid += run.valid;
failures.push(...run.failures);
total++;
if (several > 0) valid++;
else failures.push('parallel_tool_calls true: no request made several calls');

for (const f of failures) console.log('FAILED', f);
console.log(`parallel_tool_calls true: ${several} of ${PARALLEL_SEEDS.length} requests made several calls`);
console.log(`${valid} valid of ${total} (${parsed} values parsed), ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
