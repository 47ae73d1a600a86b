// The scaling benchmark behind bench/scale.sh: aggregate generation tokens/s of 1, 2 and 4 single-thread
// replicas of `woolly serve` behind HAProxy (deploy/haproxy.cfg, least connections: the requests name no
// session) against one replica alone, with the same number of clients per replica, each client
// sending greedy non-streamed requests of a fixed length one after another for a fixed time. Then
// what the balancer costs per request: the mean latency of one-token requests through HAProxy minus
// alone, sent one at a time. Prints a markdown table.
//
// Usage: node bench_scale.mjs --woolly BUILD/woolly --model MODEL [--replicas 1,2,4] [--clients 4]
//        [--tokens 128] [--seconds 10] [--np 4]
import path from "node:path";
import { startReplica, startHaproxy, freePort, sleep } from "./replicas.mjs";

const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const woolly = arg("woolly");
const model = arg("model");
const src = arg("src", path.resolve(path.dirname(new URL(import.meta.url).pathname), "../.."));
const LEVELS = arg("replicas", "1,2,4").split(",").map(Number);
const CLIENTS = Number(arg("clients", 4)); // per replica
const TOKENS = Number(arg("tokens", 128));
const SECONDS = Number(arg("seconds", 10));
const NP = arg("np", "4");
const ARGS = ["-m", model, "-t", "1", "-np", NP, "-c", "512", "--temp", "0", "--max-connections-per-address", "0"];

async function complete(port, maxTokens, i) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: `Story ${i}: Once upon a time`, max_tokens: maxTokens, temperature: 0, ignore_eos: true }),
  });
  const body = await r.json();
  if (r.status !== 200) throw new Error(`${r.status}: ${JSON.stringify(body)}`);
  return body.usage.completion_tokens;
}

// Tokens/s of `clients` clients for SECONDS on `port`.
async function load(port, clients) {
  let tokens = 0, requests = 0;
  const until = Date.now() + SECONDS * 1000;
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let i = 0; Date.now() < until; i++) {
        const n = await complete(port, TOKENS, c * 1000 + i); // not `tokens += await`: it would read tokens first
        tokens += n;
        requests++;
      }
    }),
  );
  const s = (Date.now() - t0) / 1000;
  return { tps: tokens / s, rps: requests / s };
}

async function latency(port, n) {
  for (let i = 0; i < 10; i++) await complete(port, 1, i); // warm
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await complete(port, 1, i);
  return (performance.now() - t0) / n;
}

const rows = [];
const stopAll = async (reps, lb) => {
  for (const r of reps) r.proc.kill("SIGTERM");
  await Promise.all(reps.map((r) => r.exited));
  if (lb) await lb.stop();
};

// one replica alone
{
  const rep = await startReplica(woolly, await freePort(), ARGS, "alone");
  const m = await load(rep.port, CLIENTS);
  const lat = await latency(rep.port, 200);
  rows.push({ name: "1 replica alone", ...m, lat });
  await stopAll([rep], null);
}
for (const n of LEVELS) {
  const ports = [];
  for (let i = 0; i < n; i++) ports.push(await freePort());
  const reps = [];
  for (let i = 0; i < n; i++) reps.push(await startReplica(woolly, ports[i], ARGS, `r${i + 1}`));
  const lbPort = await freePort();
  const lb = await startHaproxy(src, lbPort, ports);
  await sleep(500);
  const m = await load(lbPort, CLIENTS * n);
  const lat = n === 1 ? await latency(lbPort, 200) : null;
  rows.push({ name: `${n} replica${n > 1 ? "s" : ""} behind HAProxy`, ...m, lat });
  await stopAll(reps, lb);
}
const base = rows[0].tps;
console.log(`\n${CLIENTS} clients per replica, ${TOKENS} greedy tokens per request, ${SECONDS} s per row, -t 1 -np ${NP}\n`);
console.log("| setup | aggregate tokens/s | vs one alone | requests/s |");
console.log("| --- | --- | --- | --- |");
for (const r of rows)
  console.log(`| ${r.name} | ${r.tps.toFixed(0)} | ${(r.tps / base).toFixed(2)}x | ${r.rps.toFixed(1)} |`);
const alone = rows[0].lat, via = rows.find((r) => r.name.startsWith("1 replica behind")).lat;
console.log(
  `\none-token requests one at a time: ${alone.toFixed(2)} ms alone, ${via.toFixed(2)} ms through HAProxy: ` +
    `the balancer adds ${(via - alone).toFixed(2)} ms per request`,
);
