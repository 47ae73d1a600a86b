// Replicas of `woolly serve` behind HAProxy on the loopback, for the scale test (scale.mjs) and the
// scaling benchmark (bench/scale.sh): starts and stops the processes, writes HAProxy's configuration
// from deploy/haproxy.cfg with the addresses replaced (the shipped file is the one tested), and reads
// HAProxy's counters from its stats socket.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A replica: `woolly serve ARGS --port PORT`, resolved once it prints the address it listens on.
export function startReplica(woolly, port, args, name) {
  return new Promise((resolve, reject) => {
    const p = spawn(woolly, ["serve", "--port", String(port), "--replica", name, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    p.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 30 s: ${err}`)), 30000);
    p.stdout.on("data", (d) => {
      if (String(d).includes("listening on")) {
        clearTimeout(timer);
        resolve({ name, port, proc: p, stderr: () => err, exited: exitOf(p) });
      }
    });
    p.on("exit", (code) => reject(new Error(`${name} exited (${code}) before listening: ${err}`)));
  });
}

function exitOf(p) {
  return new Promise((resolve) => p.on("exit", (code, signal) => resolve({ code, signal })));
}

// HAProxy on lbPort in front of the replicas' ports (deploy/haproxy.cfg has three servers, r1..r3:
// fewer ports drop the rest, more are added as r4...).
export async function startHaproxy(srcDir, lbPort, ports) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "woolly-lb-"));
  const sock = path.join(dir, "stats.sock");
  let cfg = readFileSync(path.join(srcDir, "deploy/haproxy.cfg"), "utf8");
  cfg = cfg.replace("/run/haproxy/woolly.sock", sock).replace("bind 127.0.0.1:8080", `bind 127.0.0.1:${lbPort}`);
  const lines = cfg.split("\n");
  const out = [];
  for (const line of lines) {
    const m = line.match(/^(\s*server r)1 127\.0\.0\.1:8081(.*)$/);
    if (m) {
      ports.forEach((p, i) => out.push(`${m[1]}${i + 1} 127.0.0.1:${p}${m[2].replace("/r1", `/r${i + 1}`)}`));
      continue;
    }
    if (/^\s*server r[23] 127\.0\.0\.1:808[23]/.test(line)) continue;
    out.push(line);
  }
  const file = path.join(dir, "haproxy.cfg");
  writeFileSync(file, out.join("\n"));
  const proc = spawn("haproxy", ["-db", "-f", file], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  proc.stdout.on("data", (d) => (log += d));
  proc.stderr.on("data", (d) => (log += d));
  const exited = exitOf(proc);
  for (let i = 0; i < 300; i++) {
    if (await healthy(lbPort)) return { proc, sock, dir, log: () => log, exited, stop: () => stopHaproxy(proc, dir) };
    if (proc.exitCode !== null) break;
    await sleep(50);
  }
  proc.kill("SIGKILL");
  throw new Error(`HAProxy did not come up: ${log}`);
}

async function stopHaproxy(proc, dir) {
  if (proc.exitCode === null) {
    proc.kill("SIGTERM");
    await Promise.race([exitOf(proc), sleep(3000)]);
    if (proc.exitCode === null) proc.kill("SIGKILL");
  }
  rmSync(dir, { recursive: true, force: true });
}

async function healthy(port) {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
    await r.text();
    return r.status === 200;
  } catch {
    return false;
  }
}

// HAProxy's `show stat`, as rows of objects (pxname, svname, wretr, wredis, ...).
export function haproxyStats(sock) {
  return new Promise((resolve, reject) => {
    const c = net.createConnection(sock);
    let text = "";
    c.on("connect", () => c.write("show stat\n"));
    c.on("data", (d) => (text += d));
    c.on("error", reject);
    c.on("end", () => {
      const [head, ...rows] = text.trim().split("\n");
      const keys = head.replace(/^# /, "").split(",");
      resolve(rows.map((r) => Object.fromEntries(r.split(",").map((v, i) => [keys[i], v]))));
    });
  });
}
