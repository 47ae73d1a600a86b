// Structured output through the official OpenAI client against `woolly serve` on a random-weight model
// (stories260K, which never writes JSON by itself): every schema below, under several seeds at
// temperature 1 with no top-k/min-p/top-p cut, must give a choice that ends with finish_reason "stop",
// parses as JSON and validates against its schema (ajv, strict about the draft's rules). Also: json_object,
// a GBNF `grammar`, and the 400 errors naming the field. Run by tests/test_server_structured.c, which
// starts the server and passes WOOLLY_BASE_URL, WOOLLY_API_KEY and WOOLLY_MODEL.
// Prints "N valid of M, K failed" and exits 0 only when every check passes.
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import OpenAI from 'openai';

const baseURL = process.env.WOOLLY_BASE_URL;
const apiKey = process.env.WOOLLY_API_KEY;
const model = process.env.WOOLLY_MODEL;
assert.ok(baseURL && apiKey && model, 'WOOLLY_* variables missing');
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true });

const person = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' }, member: { type: 'boolean' } },
  required: ['name', 'age', 'member'],
  additionalProperties: false,
};
const SCHEMAS = {
  person,
  optional_fields: {
    type: 'object',
    properties: { a: { type: 'integer' }, b: { type: 'string' }, c: { type: 'null' } },
    required: ['b'],
    additionalProperties: false,
  },
  nested_and_arrays: {
    type: 'object',
    properties: {
      id: { type: 'integer' },
      scores: { type: 'array', items: { type: 'number' }, minItems: 1, maxItems: 3 },
      owner: person,
    },
    required: ['id', 'scores', 'owner'],
    additionalProperties: false,
  },
  enum_and_const: {
    type: 'object',
    properties: {
      color: { enum: ['red', 'green', 'blue', 7, null] },
      version: { const: 'v1.2' },
      flags: { type: 'array', items: { enum: [true, false] }, maxItems: 2 },
    },
    required: ['color', 'version', 'flags'],
    additionalProperties: false,
  },
  any_of: {
    type: 'object',
    properties: { v: { anyOf: [{ type: 'integer' }, { type: 'null' }, { type: 'array', items: { type: 'boolean' }, maxItems: 2 }] } },
    required: ['v'],
    additionalProperties: false,
  },
  ref_defs_recursive: {
    $defs: {
      node: {
        type: 'object',
        properties: { value: { type: 'integer' }, next: { anyOf: [{ type: 'null' }, { $ref: '#/$defs/node' }] } },
        required: ['value', 'next'],
        additionalProperties: false,
      },
    },
    $ref: '#/$defs/node',
  },
  top_level_array: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 4 },
  type_list: { type: ['integer', 'boolean', 'null'] },
  number: { type: 'number' },
  short_string_enum: { type: 'string', enum: ['yes', 'no', 'maybe'] },
  empty_object: { type: 'object', properties: {}, additionalProperties: false },
};
const SEEDS = [1, 2, 3];
const SAMPLING = { temperature: 1.0, top_p: 1, top_k: 0, min_p: 0, max_tokens: 3000 };

let valid = 0;
let total = 0;
let tokens = 0;
const failures = [];

async function generate(extra, seed) {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Answer in JSON.' }],
    seed,
    ...SAMPLING,
    ...extra,
  });
  tokens += r.usage.completion_tokens;
  return r.choices[0];
}

async function checkSchema(name, schema) {
  const validate = ajv.compile(schema);
  for (const seed of SEEDS) {
    total++;
    const choice = await generate(
      { response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } } }, seed);
    const text = choice.message.content;
    try {
      assert.equal(choice.finish_reason, 'stop', 'finish_reason');
      const value = JSON.parse(text);
      assert.ok(validate(value), JSON.stringify(validate.errors));
      valid++;
    } catch (e) {
      failures.push(`${name} seed ${seed}: ${e.message}\n  output: ${JSON.stringify(text).slice(0, 400)}`);
    }
  }
}

async function checkOther(name, fn) {
  total++;
  try {
    await fn();
    valid++;
  } catch (e) {
    failures.push(`${name}: ${e.message}`);
  }
}

for (const [name, schema] of Object.entries(SCHEMAS))
  await checkSchema(name, schema);

// Any object: stories260K (trained on stories) writes story text inside free strings, so some seeds run
// long; these are cut at 400 tokens. A cut choice ('length') is not judged, a finished one must be an
// object, and at least one must finish.
let finished = 0;
for (const seed of SEEDS)
  await checkOther(`json_object seed ${seed}`, async () => {
    const c = await generate({ response_format: { type: 'json_object' }, max_tokens: 400 }, seed);
    if (c.finish_reason === 'length') return;
    assert.equal(c.finish_reason, 'stop');
    const v = JSON.parse(c.message.content);
    assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), 'an object');
    finished++;
  });
await checkOther('json_object: some choice finished', async () => assert.ok(finished > 0));

await checkOther('completions with a GBNF grammar', async () => {
  const grammar = 'root ::= "The " animal " is " [0-9]{1,2} " years old."\nanimal ::= "cat" | "dog"\n';
  for (const seed of SEEDS) {
    const r = await client.completions.create({ model, prompt: 'Once upon a time', grammar, seed, ...SAMPLING });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.match(r.choices[0].text, /^The (cat|dog) is [0-9]{1,2} years old\.$/);
  }
});

await checkOther('streamed structured output', async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'JSON' }], stream: true, seed: 5, ...SAMPLING,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } },
  });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta?.content) text += chunk.choices[0].delta.content;
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(finish, 'stop');
  assert.ok(ajv.compile(person)(JSON.parse(text)));
});

await checkOther('a grammar no token can follow ends with stop', async () => {
  const c = await generate({ grammar: 'root ::= "x" []' }, 1);
  assert.equal(c.finish_reason, 'stop');
  assert.equal(c.message.content, 'x');
});

async function expect400(name, extra, param, needle) {
  await checkOther(name, async () => {
    await assert.rejects(generate(extra, 1), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, param);
      assert.ok(e.message.includes(needle), e.message);
      return true;
    });
  });
}
await expect400('unsupported keyword', {
  response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a' } } },
}, 'response_format.json_schema.schema', "unsupported keyword 'pattern'");
await expect400('bad grammar', { grammar: 'root ::= "a" |\n  [b-' }, 'grammar', 'line 2, column 3');
await expect400('bad response_format type', { response_format: { type: 'yaml' } }, 'response_format.type', 'yaml');
await expect400('grammar and schema together', { grammar: 'root ::= "a"', response_format: { type: 'json_object' } },
  'grammar', 'exclude');

for (const f of failures) console.log('FAILED', f);
console.log(`${valid} valid of ${total} (${tokens} tokens generated), ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
