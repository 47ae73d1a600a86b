// Structured output through the official OpenAI client against `woolly serve` on stories260K, a tiny
// model that never writes JSON by itself: every case below, seeded, at temperature 1 with no
// top-k/min-p/top-p cut, must give choices that end with finish_reason "stop", parse as JSON and
// validate against their schema (ajv, strict about the draft's rules). The schemas cover every keyword
// of the supported subset once or more; json_object, n > 1 choices with logprobs (whole and streamed), a
// GBNF `grammar`, a grammar no token can continue and the 400 errors naming the field are checked too.
// The cases run concurrently, as many at once as the server has slots (WOOLLY_SLOTS), so that they
// decode in the same batches. Run by tests/server/test_server_structured.c, which starts the server and
// passes WOOLLY_BASE_URL, WOOLLY_API_KEY, WOOLLY_MODEL and WOOLLY_SLOTS.
// Prints "N valid of M, K failed" and exits 0 only when every check passes.
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { runCases } from './run_cases.mjs';

const baseURL = process.env.WOOLLY_BASE_URL;
const apiKey = process.env.WOOLLY_API_KEY;
const model = process.env.WOOLLY_MODEL;
const slots = Number(process.env.WOOLLY_SLOTS);
assert.ok(baseURL && apiKey && model && slots > 0, 'WOOLLY_* variables missing');
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true });

const person = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' }, member: { type: 'boolean' } },
  required: ['name', 'age', 'member'],
  additionalProperties: false,
};
// Together: type (each of the seven, and a list), properties, required (all, some, none),
// additionalProperties false, items, minItems, maxItems, enum (of strings and of mixed values), const,
// anyOf, $ref to $defs (recursive) and to definitions, and the annotations.
const SCHEMAS = {
  person,
  optional_fields: {
    title: 'optional', description: 'only b is required',
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
      owner: { $ref: '#/definitions/owner' },
    },
    required: ['id', 'scores', 'owner'],
    additionalProperties: false,
    definitions: { owner: person },
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
const SEEDS = [1, 2];
const SAMPLING = { temperature: 1.0, top_p: 1, top_k: 0, min_p: 0, max_tokens: 1500 };

let valid = 0;
let total = 0;
let tokens = 0;
const failures = [];
const cases = [];

// A case: one check, counted once; its name says what failed.
const check = (name, fn) => cases.push([name, fn]);

async function chat(extra, seed) {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Answer in JSON.' }],
    seed,
    ...SAMPLING,
    ...extra,
  });
  tokens += r.usage.completion_tokens;
  return r;
}

function schemaFormat(name, schema) {
  return { type: 'json_schema', json_schema: { name, schema, strict: true } };
}

// A finished choice whose content is valid for validate.
function assertValid(choice, text, validate) {
  assert.equal(choice.finish_reason, 'stop', 'finish_reason');
  const value = JSON.parse(text);
  assert.ok(validate(value), JSON.stringify(validate.errors));
  return value;
}

for (const [name, schema] of Object.entries(SCHEMAS)) {
  const validate = ajv.compile(schema);
  for (const seed of SEEDS)
    check(`${name} seed ${seed}`, async () => {
      const r = await chat({ response_format: schemaFormat(name, schema) }, seed);
      assertValid(r.choices[0], r.choices[0].message.content, validate);
    });
}

// Whether text is the beginning of some JSON object (white space as JSON allows it): a scan that keeps
// the open containers and what may come next, and checks an unfinished number or literal as a prefix.
function isObjectPrefix(text) {
  const stack = [];
  let expect = 'object'; // object | value | first | key | keyOrEnd | colon | after
  let i = 0;
  const ws = /[ \t\n\r]/;
  const scalar = /^(?:true|false|null|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)$/;
  const scalarPrefix = /^(?:t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?|-|-?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?)$/;
  while (i < text.length) {
    const ch = text[i];
    if (ws.test(ch)) { i++; continue; }
    if (expect === 'object' && ch !== '{') return false;
    if (ch === '"' && expect !== 'after' && expect !== 'colon') { // a string: a key or a value
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text.charCodeAt(j) < 0x20) return false;
        if (text[j] === '\\') {
          const esc = text.slice(j + 1, j + 6);
          if (esc.length === 0) return true;
          if ('"\\/bfnrt'.includes(esc[0])) j++;
          else if (esc[0] === 'u') {
            if (!/^u[0-9a-fA-F]{0,4}$/.test(esc.slice(0, Math.min(5, esc.length)))) return false;
            if (esc.length < 5) return true;
            j += 5;
          } else return false;
        }
      }
      if (j >= text.length) return true; // cut inside the string
      expect = expect === 'key' || expect === 'keyOrEnd' ? 'colon' : 'after';
      i = j + 1;
    } else if (ch === '{' || ch === '[') {
      if (expect !== 'object' && expect !== 'value' && expect !== 'first') return false;
      stack.push(ch);
      expect = ch === '{' ? 'keyOrEnd' : 'first';
      i++;
    } else if (ch === '}' || ch === ']') {
      const open = ch === '}' ? '{' : '[';
      if (stack.at(-1) !== open || !(expect === 'after' || expect === (ch === '}' ? 'keyOrEnd' : 'first'))) return false;
      stack.pop();
      expect = stack.length ? 'after' : 'end';
      i++;
    } else if (ch === ',') {
      if (expect !== 'after' || !stack.length) return false;
      expect = stack.at(-1) === '{' ? 'key' : 'value';
      i++;
    } else if (ch === ':') {
      if (expect !== 'colon') return false;
      expect = 'value';
      i++;
    } else { // a number or a literal
      if (expect !== 'value' && expect !== 'first') return false;
      const m = /^[-+.0-9a-zA-Z]+/.exec(text.slice(i));
      if (!m) return false;
      if (i + m[0].length === text.length) return scalarPrefix.test(m[0]);
      if (!scalar.test(m[0])) return false;
      expect = 'after';
      i += m[0].length;
    }
    if (expect === 'end') return i === text.length || /^[ \t\n\r]*$/.test(text.slice(i));
  }
  return true;
}

// Any object: stories260K writes dialogue inside free strings and goes on from member to member, so a
// choice may be cut at max_tokens: then it must be the beginning of an object (and a finished one an
// object). The C test test_grammar_sampler has finished json_object outputs parse, on random logits.
const isObject = ajv.compile({ type: 'object' });
for (const seed of SEEDS)
  check(`json_object seed ${seed}`, async () => {
    const r = await chat({ response_format: { type: 'json_object' }, max_tokens: 300 }, seed);
    const c = r.choices[0];
    if (c.finish_reason === 'length') assert.ok(isObjectPrefix(c.message.content), 'not an object\'s beginning');
    else assertValid(c, c.message.content, isObject);
  });
check('the object-prefix check itself', async () => {
  for (const t of ['{', '{ "a', '{"a":', '{"a": [1, tr', '{"a": {"b": -0.5e', '{"a\\u00', '{"a": 1}', '{}  '])
    assert.ok(isObjectPrefix(t), t);
  for (const t of ['[', '{"a" 1', '{"a": 01', '{"a": 1,}', '{"a": [1}', '{} x', '{"a": tx', '{,', '{"a":1]'])
    assert.ok(!isObjectPrefix(t), t);
});

// n > 1 with logprobs: each choice walks the grammar with its own tokens and is valid on its own; its
// logprobs are its tokens, each the model's own probability (at most the best one's of that step).
check('n = 3 with logprobs, each choice valid', async () => {
  const validate = ajv.compile(person);
  const r = await chat({ response_format: schemaFormat('person', person), n: 3, logprobs: true, top_logprobs: 2 }, 7);
  assert.equal(r.choices.length, 3);
  const texts = new Set();
  for (const c of r.choices) {
    assertValid(c, c.message.content, validate);
    const content = c.logprobs.content;
    assert.equal(content.map((e) => e.token).join(''), c.message.content);
    for (const e of content) {
      assert.ok(e.logprob <= 0);
      assert.ok(e.top_logprobs[0].logprob >= e.logprob);
    }
    texts.add(c.message.content);
  }
  assert.ok(texts.size > 1, 'the choices differ (seeds 7, 8, 9)');
  assert.equal(r.usage.completion_tokens,
    r.choices.reduce((n, c) => n + c.logprobs.content.length, 0));
});

check('streamed, n = 2, each choice valid', async () => {
  const validate = ajv.compile(SCHEMAS.enum_and_const);
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'JSON' }], stream: true, seed: 5, ...SAMPLING, n: 2,
    response_format: schemaFormat('enum_and_const', SCHEMAS.enum_and_const),
  });
  const text = ['', ''];
  const finish = [null, null];
  for await (const chunk of stream)
    for (const c of chunk.choices) {
      if (c.delta?.content) text[c.index] += c.delta.content;
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  for (const i of [0, 1]) assertValid({ finish_reason: finish[i] }, text[i], validate);
});

check('completions with a GBNF grammar', async () => {
  const grammar = 'root ::= "The " animal " is " [0-9]{1,2} " years old."\nanimal ::= "cat" | "dog"\n';
  for (const seed of SEEDS) {
    const r = await client.completions.create({ model, prompt: 'Once upon a time', grammar, seed, ...SAMPLING });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.match(r.choices[0].text, /^The (cat|dog) is [0-9]{1,2} years old\.$/);
  }
});

check('a grammar no token can follow ends with stop', async () => {
  for (const ignore_eos of [false, true]) {
    const r = await chat({ grammar: 'root ::= "x" []', ignore_eos }, 1);
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.choices[0].message.content, 'x');
  }
});

function expect400(name, extra, param, needle) {
  check(name, async () => {
    await assert.rejects(chat(extra, 1), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, param);
      assert.ok(e.message.includes(needle), e.message);
      return true;
    });
  });
}
expect400('unsupported keyword', { response_format: schemaFormat('x', { type: 'string', pattern: '^a' }) },
  'response_format.json_schema.schema', "unsupported keyword 'pattern'");
expect400('unsupported nested keyword',
  { response_format: schemaFormat('x', { type: 'object', properties: { a: { type: 'string', minLength: 2 } } }) },
  'response_format.json_schema.schema', "unsupported keyword 'minLength'");
expect400('bad grammar', { grammar: 'root ::= "a" |\n  [b-' }, 'grammar', 'line 2, column 3');
expect400('bad response_format type', { response_format: { type: 'yaml' } }, 'response_format.type', 'yaml');
expect400('grammar and schema together', { grammar: 'root ::= "a"', response_format: { type: 'json_object' } },
  'grammar', 'exclude');

// As many cases at once as there are slots (a case of n choices takes n of them when it runs).
const run = await runCases(cases, slots);
total += run.total;
valid += run.valid;
failures.push(...run.failures);

for (const f of failures) console.log('FAILED', f);
console.log(`${valid} valid of ${total} (${tokens} tokens generated), ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
