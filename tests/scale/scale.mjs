// The scale test: HAProxy (deploy/haproxy.cfg) in front of three single-thread replicas of `woolly serve`
// on stories260K, 24 clients holding conversations through it (the official OpenAI client, half of
// them streaming), while one replica is drained (SIGTERM), another killed (SIGKILL) and a new one
// started in its place. Every answer must be whole and exactly the greedy text one replica gives
// alone; the only failures allowed are requests that were running on the killed replica; nothing
// hangs; the drained replica exits 0. A request counts as running on the killed replica when it was
// outstanding at the kill and either its stream had begun there (its X-Woolly-Replica header) or no
// replica had answered it yet (HAProxy retries those elsewhere, so they rarely fail). Prints the
// counts and the affinity hit rate (a conversation's later turns that found their beginning cached).
//
// Usage: node scale.mjs --woolly BUILD/woolly --model MODEL --src SOURCE_DIR
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";
import { startReplica, startHaproxy, freePort, haproxyStats, sleep } from "./replicas.mjs";

const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const woolly = arg("woolly");
const model = arg("model");
const src = arg("src", path.resolve(path.dirname(new URL(import.meta.url).pathname), "../.."));
const CLIENTS = Number(arg("clients", 24));
const TURNS = Number(arg("turns", 6));
const TOKENS = Number(arg("tokens", 48));
const DEADLINE_MS = Number(arg("deadline", 100000));

const require = createRequire(path.join(src, "tests/server/package.json"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")));

const started = Date.now();
const watchdog = setTimeout(() => {
  console.error(`scale: not done within ${DEADLINE_MS / 1000} s: something hangs`);
  cleanup().finally(() => process.exit(1));
}, DEADLINE_MS);

// 24 slots: a replica can hold every conversation when the others are gone (fewer slots than live
// conversations evict in turn, and the hit rate measures that instead of the balancer). Behind the
// balancer every connection comes from its one address: no per-address limit (HAProxy bounds
// the connections and its own request timeout guards against slow heads)
const REPLICA_ARGS = ["-m", model, "-t", "1", "-np", "24", "-c", "512", "--temp", "0", "--drain-timeout", "30",
  "--max-connections-per-address", "0"];
const replicas = [];
let lb = null;
async function cleanup() {
  for (const r of replicas) if (r.proc.exitCode === null && r.proc.signalCode === null) r.proc.kill("SIGKILL");
  if (lb) await lb.stop();
}

const OPENINGS = ["Once upon a time", "The little dog", "Lily and Ben", "One day, a bird"];
const NAMES = ["Tom", "Sue", "Max", "Amy", "Sam", "Kim", "Leo", "Zoe", "Ben", "Eve", "Tim", "Ann"];

const counts = { sent: 0, completed: 0, failed: 0, failedElsewhere: 0, wrong: 0, later: 0, cached: 0, laterCalm: 0, cachedCalm: 0 };
let faulted = false; // set at the first fault: turns before it measure affinity undisturbed
const failures = [];
const outstanding = new Set(); // the requests sent and not yet answered or failed
let atKill = null; // the outstanding set when the SIGKILL was sent
let killedName = null;
const onKilled = (req) => atKill?.has(req) && (req.replica === null || req.replica === killedName);
const done = []; // {prompt, text} of every completed request, checked at the end

async function one(client, req, prompt) {
  counts.sent++;
  const opts = { headers: { "X-Session-Id": req.sid }, timeout: 30000, maxRetries: 0 };
  const body = { model: "stories260K", prompt, max_tokens: TOKENS, temperature: 0 };
  if (!req.stream) {
    const r = await client.completions.create(body, opts);
    return { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
  }
  const { data: s, response } = await client.completions
    .create({ ...body, stream: true, stream_options: { include_usage: true } }, opts)
    .withResponse();
  req.replica = response.headers.get("x-woolly-replica");
  let text = "", finish = null, usage = null;
  for await (const chunk of s) {
    if (chunk.choices?.length) {
      text += chunk.choices[0].text ?? "";
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  if (!finish || !usage) throw new Error("the stream ended without its finish and usage: cut");
  return { text, finish, usage };
}

async function conversation(c, baseURL) {
  const client = new OpenAI({ apiKey: "none", baseURL });
  const sid = `conv-${c}`;
  let prompt = `${NAMES[c % NAMES.length]} ${c}. ${OPENINGS[c % OPENINGS.length]}`;
  let before = 0; // the previous answered turn's prompt tokens
  for (let t = 0; t < TURNS; t++) {
    const req = { sid, stream: c % 2 === 0, replica: null };
    outstanding.add(req);
    try {
      const r = await one(client, req, prompt);
      counts.completed++;
      done.push({ prompt, text: r.text });
      // a hit: most of the previous turn's prompt came from the cache (not just a beginning that
      // another conversation shares)
      if (before > 0) {
        const hit = (r.usage.prompt_tokens_details?.cached_tokens ?? 0) > before / 2;
        counts.later++;
        counts.cached += hit;
        if (!faulted) (counts.laterCalm++, (counts.cachedCalm += hit));
      }
      before = r.usage.prompt_tokens;
      prompt = `${prompt}${r.text} Then`;
    } catch (e) {
      await sleep(300); /* as a client would before it tries again: the turn is asked anew */
      counts.failed++;
      counts.failedElsewhere += !onKilled(req);
      const where = onKilled(req) ? "on the killed replica" : `not on the killed replica (${req.replica ?? "none"})`;
      failures.push(`${sid} turn ${t}, ${where}: ${e.status ?? ""} ${e.message} ${e.cause?.message ?? ""}`.replace(/\s+/g, " ").slice(0, 200));
    } finally {
      outstanding.delete(req);
    }
  }
}

async function waitFor(pred) {
  while (!pred()) await sleep(20);
}

try {
  const ports = [await freePort(), await freePort(), await freePort()];
  for (let i = 0; i < 3; i++) replicas.push(await startReplica(woolly, ports[i], REPLICA_ARGS, `r${i + 1}`));
  const lbPort = await freePort();
  lb = await startHaproxy(src, lbPort, ports);
  const baseURL = `http://127.0.0.1:${lbPort}/v1`;
  const total = CLIENTS * TURNS;
  const run = Promise.all(Array.from({ length: CLIENTS }, (_, c) => conversation(c, baseURL)));

  // the faults, at fixed fractions of the work
  await waitFor(() => counts.completed >= total * 0.25);
  const [drained, killed] = replicas;
  faulted = true;
  drained.proc.kill("SIGTERM");
  const tDrain = Date.now();
  await waitFor(() => counts.completed >= total * 0.45);
  killedName = killed.name;
  atKill = new Set(outstanding); // no client step runs between this and the kill
  killed.proc.kill("SIGKILL");
  await sleep(1000);
  const fresh = await startReplica(woolly, killed.port, REPLICA_ARGS, "r2b");
  replicas.push(fresh);
  await run;
  // counted now: a stream's headers may have been on their way (or not yet read) at the kill
  const streamsThere = [...atKill].filter((r) => r.replica === killedName).length;
  const unplaced = [...atKill].filter((r) => r.replica === null).length;
  const drainExit = await drained.exited;
  const drainSeconds = (Date.now() - tDrain) / 1000;

  // every answer against the greedy text of one replica alone, asked directly
  const ref = new OpenAI({ apiKey: "none", baseURL: `http://127.0.0.1:${replicas[2].port}/v1`, maxRetries: 0 });
  for (let i = 0; i < done.length; i += 8) {
    await Promise.all(
      done.slice(i, i + 8).map(async (d) => {
        const r = await ref.completions.create({ model: "stories260K", prompt: d.prompt, max_tokens: TOKENS, temperature: 0 });
        if (r.choices[0].text !== d.text) {
          counts.wrong++;
          failures.push(`wrong text for '${d.prompt.slice(0, 60)}...': '${d.text.slice(0, 60)}' vs '${r.choices[0].text.slice(0, 60)}'`);
        }
      }),
    );
  }
  const stats = await haproxyStats(lb.sock);
  const backends = stats.filter((r) => r.svname === "BACKEND");
  const retried = backends.reduce((n, r) => n + Number(r.wretr || 0) + Number(r.wredis || 0), 0);
  const hitRate = counts.later ? counts.cached / counts.later : 0;
  const seconds = (Date.now() - started) / 1000;
  console.log(
    `scale: ${counts.sent} requests sent, ${counts.completed} completed (${counts.wrong} with wrong text), ` +
      `${counts.failed} failed, ${retried} retried by HAProxy; of the ${atKill.size} outstanding at the kill, ` +
      `${streamsThere} streamed from the killed replica and ${unplaced} were answered by none`,
  );
  console.log(
    `scale: affinity: ${counts.cached} of ${counts.later} later turns found most of the previous turn cached ` +
      `(${(100 * hitRate).toFixed(1)}%); before the first fault ${counts.cachedCalm} of ${counts.laterCalm}`,
  );
  console.log(`scale: the drained replica exited with ${drainExit.code} after ${drainSeconds.toFixed(1)} s; ${seconds.toFixed(1)} s in all`);
  for (const f of failures) console.log(`scale:   ${f}`);
  for (const l of lb.log().split("\n")) if (/ is (UP|DOWN)|Health check/.test(l)) console.log(`scale: haproxy: ${l.slice(0, 160)}`);
  const checks = [
    [counts.sent === total, `${counts.sent} of ${total} requests were sent`],
    [counts.completed + counts.failed === counts.sent, "a request neither completed nor failed"],
    [counts.wrong === 0, `${counts.wrong} answers differ from one replica's greedy text`],
    [counts.failedElsewhere === 0, `${counts.failedElsewhere} of the failed requests were not running on the killed replica`],
    [drainExit.code === 0, `the drained replica exited with ${JSON.stringify(drainExit)}`],
    [hitRate >= 0.5, `affinity hit rate ${hitRate}`],
    [counts.laterCalm > 0 && counts.cachedCalm >= 0.9 * counts.laterCalm,
      `before the faults only ${counts.cachedCalm} of ${counts.laterCalm} later turns hit the cache`],
  ];
  let bad = 0;
  for (const [ok, msg] of checks) if (!ok) (bad++, console.log(`scale: FAIL: ${msg}`));
  console.log(`${checks.length - bad} passed, ${bad} failed`);
  await cleanup();
  clearTimeout(watchdog);
  process.exit(bad ? 1 : 0);
} catch (e) {
  console.error(`scale: ${e.stack}`);
  await cleanup();
  process.exit(1);
}
