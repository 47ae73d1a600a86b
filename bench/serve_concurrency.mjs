#!/usr/bin/env node
// Aggregate and per-request generation speed of `woolly serve` at several numbers of concurrent
// clients. Starts the server (one slot per client of the largest level), then for each level runs that
// many clients at once, each streaming the same number of greedy tokens (ignore_eos) from a short
// prompt, and prints a markdown table:
//   aggregate tokens/s  all completion tokens of the level / its wall time
//   per request         completion tokens / time from sending the request to its last token (median)
//   decode per request  tokens after the first / time from first to last token (median)
//   first token         time to the first token (median), which includes the prompt and queueing
//   x 1 client      aggregate tokens/s over the first level's (the lowest, normally 1 client)
//   of 1 client     per request tokens/s over the first level's
// One warm-up request runs first. With --rounds N the levels run N times in turn (1, 2, 4, 8, then 1,
// 2, 4, 8 again, ...) and each cell is the median over the rounds; the two ratios are taken within each
// round, then their median (with the lowest and highest), so that a shared machine's speed drifting
// between rounds falls on both sides of a ratio alike.
// Node built-ins only (fetch). Usage, from the repository root after building:
//   node bench/serve_concurrency.mjs --model PATH [--levels 1,2,4,8] [--tokens 8] [--requests 1]
//                                    [--rounds 1] [--threads T] [--ctx 256] [--prompt TEXT]
//                                    [--woolly ./build/woolly]
// e.g. with the benchmark model of bench/RESULTS.md:
//   node bench/serve_concurrency.mjs --model llama-1b.gguf --tokens 4 --ctx 128 --prompt Hello
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const opts = { model: '', levels: '1,2,4,8', tokens: '8', requests: '1', rounds: '1', threads: '',
  ctx: '256', woolly: './build/woolly', prompt: 'Once upon a time, in a small village by the sea' };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  if (!(key in opts) || i + 1 >= process.argv.length) {
    console.error(`unknown or incomplete option ${process.argv[i]}`);
    process.exit(2);
  }
  opts[key] = process.argv[i + 1];
}
if (!opts.model) {
  console.error('usage: node bench/serve_concurrency.mjs --model MODEL.gguf [options] (see the top of this file)');
  process.exit(2);
}
const levels = opts.levels.split(',').map(Number);
const tokens = Number(opts.tokens), requests = Number(opts.requests), rounds = Number(opts.rounds);
for (const [name, v] of [['levels', Math.min(...levels)], ['tokens', tokens], ['requests', requests], ['rounds', rounds]]) {
  if (!Number.isInteger(v) || v < 1) {
    console.error(`--${name} ${opts[name]}: positive integers only`);
    process.exit(2);
  }
}

const args = ['serve', '-m', opts.model, '--port', '0', '-c', opts.ctx, '--parallel', String(Math.max(...levels)),
  '--timeout', '3600'];
if (opts.threads) args.push('-t', opts.threads);
const server = spawn(opts.woolly, args, { stdio: ['ignore', 'pipe', 'inherit'] });
process.on('exit', () => server.kill('SIGTERM')); // also when this script fails or is stopped
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(1));
const line = await new Promise((resolve, reject) => {
  createInterface({ input: server.stdout }).once('line', resolve);
  server.once('exit', (code) => reject(new Error(`woolly serve exited (${code})`)));
});
const base = line.replace(/^listening on /, '');

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// One streamed request: times of sending, first and last token, and the completion tokens.
async function one(id) {
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: `${opts.prompt} (${id})`, max_tokens: tokens, temperature: 0, ignore_eos: true,
      stream: true, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  let first = 0, last = 0, n = 0, buf = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buf += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, end);
      buf = buf.slice(end + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const chunk = JSON.parse(ev.slice(6));
      if (chunk.usage) n = chunk.usage.completion_tokens;
      if (chunk.choices.length && chunk.choices[0].finish_reason === null) { // one chunk per token
        last = performance.now();
        if (!first) first = last;
      }
    }
  }
  return { t0, first, last, n };
}

let id = 0;
await one(id++); // warm-up: the model's pages are read in by the first request

// One level: its clients at once, each sending `requests` requests one after the other.
async function level(clients) {
  const t0 = performance.now();
  const results = (await Promise.all(Array.from({ length: clients }, async () => {
    const mine = [];
    for (let r = 0; r < requests; r++) mine.push(await one(id++));
    return mine;
  }))).flat();
  const wall = (performance.now() - t0) / 1000;
  const total = results.reduce((s, r) => s + r.n, 0);
  return {
    aggregate: total / wall,
    perReq: median(results.map((r) => r.n / ((r.last - r.t0) / 1000))),
    decode: median(results.map((r) => (r.n - 1) / ((r.last - r.first) / 1000))),
    ttft: median(results.map((r) => (r.first - r.t0) / 1000)),
  };
}

const byRound = []; // byRound[round][level index]
for (let r = 0; r < rounds; r++) {
  const row = [];
  for (const clients of levels) row.push(await level(clients));
  byRound.push(row);
}
const ratio = (key, i) => {
  const xs = byRound.map((row) => row[i][key] / row[0][key]);
  const m = median(xs).toFixed(2);
  return rounds > 1 ? `${m} (${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)})` : m;
};
const med = (key, i, digits) => median(byRound.map((row) => row[i][key])).toFixed(digits);
console.log(`woolly serve ${opts.model}: ${tokens} tokens per request, ${requests} request(s) per client, ` +
  `${rounds} round(s)${rounds > 1 ? ' (medians over the rounds)' : ''}\n`);
const first = `${levels[0]} client${levels[0] === 1 ? '' : 's'}`;
console.log(`| clients | aggregate tokens/s | x ${first} | per request tokens/s | of ${first} ` +
  '| decode per request tokens/s | first token s |');
console.log('| --- | --- | --- | --- | --- | --- | --- |');
levels.forEach((clients, i) => {
  console.log(`| ${clients} | ${med('aggregate', i, 2)} | ${ratio('aggregate', i)} | ${med('perReq', i, 2)} | ` +
    `${ratio('perReq', i)} | ${med('decode', i, 2)} | ${med('ttft', i, 2)} |`);
});
process.exit(0);
