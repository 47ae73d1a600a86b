#!/usr/bin/env node
// Aggregate and per-request generation speed of `woolly serve` at several numbers of concurrent
// clients. Starts the server (one slot per client of the largest level), then for each level runs that
// many clients at once, each streaming the same number of greedy tokens (ignore_eos) from a short
// prompt, and prints a markdown table:
//   aggregate tokens/s  all completion tokens of the level / its wall time
//   per request         completion tokens / time from sending the request to its last token (median)
//   decode per request  tokens after the first / time from first to last token (median)
//   first token         time to the first token (median), which includes the prompt and queueing
// One warm-up request runs first.
// Node built-ins only (fetch). Usage, from the repository root after building:
//   node bench/serve_concurrency.mjs --model PATH [--levels 1,2,4,8] [--tokens 8] [--requests 1]
//                                    [--threads T] [--ctx 256] [--prompt TEXT] [--woolly ./build/woolly]
// e.g. with the benchmark model of README "Speed today":
//   node bench/serve_concurrency.mjs --model llama-1b.gguf --tokens 4 --ctx 128 --prompt Hello
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const opts = { model: '', levels: '1,2,4,8', tokens: '8', requests: '1', threads: '',
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
const tokens = Number(opts.tokens), requests = Number(opts.requests);

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
console.log(`woolly serve ${opts.model}: ${tokens} tokens per request, ${requests} request(s) per client\n`);
console.log('| clients | aggregate tokens/s | per request tokens/s | decode per request tokens/s | first token s |');
console.log('| --- | --- | --- | --- | --- |');
for (const clients of levels) {
  const t0 = performance.now();
  const results = (await Promise.all(Array.from({ length: clients }, async () => {
    const mine = [];
    for (let r = 0; r < requests; r++) mine.push(await one(id++));
    return mine;
  }))).flat();
  const wall = (performance.now() - t0) / 1000;
  const total = results.reduce((s, r) => s + r.n, 0);
  const perReq = median(results.map((r) => r.n / ((r.last - r.t0) / 1000)));
  const decode = median(results.map((r) => (r.n - 1) / ((r.last - r.first) / 1000)));
  const ttft = median(results.map((r) => (r.first - r.t0) / 1000));
  console.log(`| ${clients} | ${(total / wall).toFixed(2)} | ${perReq.toFixed(2)} | ${decode.toFixed(2)} | ` +
    `${ttft.toFixed(2)} |`);
}
process.exit(0);
