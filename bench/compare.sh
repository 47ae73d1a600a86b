#!/usr/bin/env bash
# Woolly beside llama.cpp on one GGUF file: runs llama.cpp's llama-bench (the binary given) and
# `woolly bench` with the same tests, alternating the engines run by run (so that a machine that gets
# busier or cooler affects both alike), and prints one markdown table with both engines' tokens/s
# (mean ± std over the runs) and the ratio woolly/llama per test.
#
#   bench/compare.sh LLAMA_BENCH MODEL [-p 512] [-n 128] [-t 2[,4...]] [-r 3] [-d 0]
#                    [--llama-args "ARGS"] [--woolly-args "ARGS"]
#
# Each of the -r runs is one `llama-bench -r 1 -o json` and one `woolly bench -r 1 --format json` (each
# with its own warm-up), in alternating order. --llama-args and --woolly-args add flags to one engine
# only (e.g. --llama-args "-fa 1 -rtr 1" for ik_llama.cpp). WOOLLY names the woolly binary (default:
# build/woolly beside this script's folder); PYTHON the Python 3 that makes the table (default python3).
# With -d, a llama-bench without -d (ik_llama.cpp's) is stood in for by the llama-sweep-bench beside it:
# see run_sweep below.
set -euo pipefail

usage() {
  sed -n '7,8p' "$0" | sed 's/^#  *//; s/^/usage: /' >&2
  exit 2
}

[ $# -ge 2 ] || usage
llama_bench=$1 model=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
woolly=${WOOLLY:-$here/../build/woolly}
python=${PYTHON:-python3}
n_prompt=512 n_gen=128 threads=2 reps=3 depth=0 llama_args="" woolly_args=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "compare.sh: $1 needs a value" >&2; exit 2; }
  case $1 in
    -p) n_prompt=$2 ;;
    -n) n_gen=$2 ;;
    -t) threads=$2 ;;
    -r) reps=$2 ;;
    -d) depth=$2 ;;
    --llama-args) llama_args=$2 ;;
    --woolly-args) woolly_args=$2 ;;
    *) echo "compare.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift 2
done
for v in "-p:$n_prompt" "-n:$n_gen" "-r:$reps" "-d:$depth"; do
  [[ ${v#*:} =~ ^[0-9]+$ ]] || { echo "compare.sh: ${v%%:*} ${v#*:} is not a count" >&2; exit 2; }
done
[[ $threads =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "compare.sh: -t $threads is not a list of thread counts" >&2; exit 2; }
[ "$reps" -ge 1 ] || { echo "compare.sh: -r must be at least 1" >&2; exit 2; }
[ -x "$llama_bench" ] || { echo "compare.sh: $llama_bench is not an executable llama-bench" >&2; exit 2; }
[ -x "$woolly" ] || { echo "compare.sh: $woolly is not an executable woolly (set WOOLLY)" >&2; exit 2; }
[ -f "$model" ] || { echo "compare.sh: no model file $model" >&2; exit 2; }

model_path=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# llama-bench takes -d only in newer versions: pass it only when asked for. For one without it
# (ik_llama.cpp's), its llama-sweep-bench measures both tests at depth when it sits beside it and the depth
# is a whole number of prompts (run_sweep); otherwise its -gp PP,TG, generation timed after an untimed
# prompt of PP tokens, gives tgN at depth PP, and ppN at depth has no figure (the table shows "-").
depth_args=() sweep_bench=""
if [ "$depth" -gt 0 ]; then
  llama_help=$("$llama_bench" --help 2>&1 || true) # not piped into grep -q: under pipefail its early exit fails the pipe
  if [[ $llama_help == *--n-depth* ]]; then
    depth_args=(-d "$depth")
  elif [ -x "$(dirname "$llama_bench")/llama-sweep-bench" ] && [ "$n_prompt" -gt 0 ] && [ "$n_gen" -gt 0 ] &&
    ((depth % n_prompt == 0)); then
    sweep_bench=$(dirname "$llama_bench")/llama-sweep-bench
    echo "compare.sh: $llama_bench has no -d: pp$n_prompt and tg$n_gen @ d$depth from $sweep_bench" >&2
  else
    echo "compare.sh: $llama_bench has no -d: its tg$n_gen @ d$depth from -gp $depth,$n_gen, no pp$n_prompt @ d$depth" >&2
    depth_args=(-gp "$depth,$n_gen")
  fi
fi

# ik_llama.cpp's llama-sweep-bench fills the context in steps of one prompt (-ub) and, at every
# --sweep-stride-th step, times tgN then the next prompt, both at that step's depth: with a context of
# depth + prompt and a stride of depth / prompt it times depth 0 and the depth asked for, and the table
# takes the latter. Its flags are the common ones, where -rtr takes no value and fused MoE is on by
# default, so llama-bench's "-rtr 1" and "-fmoe 1" become "-rtr" and nothing.
run_sweep() {
  local args t
  args=$(sed -E 's/(^| )-rtr 1( |$)/\1-rtr\2/; s/(^| )-fmoe 1( |$)/\1\2/' <<<"$llama_args")
  : >"$tmp/llama.$1.sweep"
  "$sweep_bench" --version 2>&1 | sed -n 's/^version: [0-9]* (\(.*\))$/\1/p' >"$tmp/sweep.build" || true
  for t in ${threads//,/ }; do
    # in $tmp, since it writes a llama.log into its working directory
    # shellcheck disable=SC2086 # --llama-args is a list of flags
    (cd "$tmp" && "$sweep_bench" -m "$model_path" -c $((depth + n_prompt)) -b "$n_prompt" -ub "$n_prompt" -n "$n_gen" -t "$t" \
      --sweep-stride $((depth / n_prompt)) $args --output-format jsonl >"$tmp/sweep.out" 2>&1) ||
      { cat "$tmp/sweep.out" >&2; echo "compare.sh: llama-sweep-bench failed (its messages above)" >&2; exit 1; }
    grep '^{"n_kv_max"' "$tmp/sweep.out" >>"$tmp/llama.$1.sweep" || true
  done
}

run_llama() {
  [ -z "$sweep_bench" ] || { run_sweep "$1"; return; }
  local p=$n_prompt n=$n_gen
  [ "${depth_args[0]:-}" != -gp ] || p=0 n=0 # the -gp test alone
  # shellcheck disable=SC2086 # --llama-args is a list of flags
  "$llama_bench" -m "$model" -p "$p" -n "$n" -t "$threads" -r 1 "${depth_args[@]}" $llama_args \
    -o json >"$tmp/llama.$1.json" 2>"$tmp/llama.err" ||
    { cat "$tmp/llama.err" >&2; echo "compare.sh: llama-bench failed (its messages above)" >&2; exit 1; }
}
run_woolly() {
  # shellcheck disable=SC2086 # --woolly-args is a list of flags
  "$woolly" bench -m "$model" -p "$n_prompt" -n "$n_gen" -t "$threads" -r 1 -d "$depth" $woolly_args \
    --format json >"$tmp/woolly.$1.json" 2>"$tmp/woolly.err" ||
    { cat "$tmp/woolly.err" >&2; echo "compare.sh: woolly bench failed (its messages above)" >&2; exit 1; }
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
for ((i = 1; i <= reps; i++)); do
  echo "compare.sh: run $i of $reps" >&2
  if ((i % 2)); then run_llama "$i"; run_woolly "$i"; else run_woolly "$i"; run_llama "$i"; fi
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

"$python" - "$tmp" "$reps" "$depth" "${sweep_bench:-$llama_bench}" "$woolly" "$model" "$load_before" "$load_after" <<'EOF'
import json, math, os, re, sys

tmp, reps, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llama_path, woolly_path, model, load_before, load_after = sys.argv[4:]

def test_name(o):
    """llama-bench's test names: ppN, tgN, ppN+tgM, with ' @ dD' after a depth; woolly's speculative
    generation test (--draft, --lookup in --woolly-args) is 'tgN spec'. A -gp test ('tgN@ppD', generation
    after an untimed prompt of D tokens) is tgN at depth D."""
    p, g, d = o.get("n_prompt", 0), o.get("n_gen", 0), o.get("n_depth", 0)
    if re.fullmatch(r"tg\d+@pp\d+", str(o.get("test", ""))):
        p, d = 0, o["n_prompt"]
    name = f"pp{p}+tg{g}" if p and g else f"pp{p}" if p else f"tg{g}"
    if o.get("speculative"):
        name += " spec"
    return f"{name} @ d{d}" if d else name

def sweep_tests(path):
    """llama-sweep-bench's rows at the depth asked for, as llama-bench's objects of its two tests (with
    the build its --version gives and the CPU's model name, which llama-bench reports)."""
    build = open(os.path.join(tmp, "sweep.build")).read().strip() or "?"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    objs = []
    for line in open(path):
        r = json.loads(line)
        if r["n_kv"] == depth:
            common = {"n_threads": r["n_threads"], "n_depth": depth, "build_commit": build, "cpu_info": cpu}
            objs += [dict(common, n_prompt=r["pp"], n_gen=0, avg_ts=r["speed_pp"]),
                     dict(common, n_prompt=0, n_gen=r["tg"], avg_ts=r["speed_tg"])]
    if not objs:
        sys.exit(f"compare.sh: {path} has no row at depth {depth}")
    return objs

def load(engine):
    """(threads, test) -> tokens/s of each run, in the order the tests first appear; and one object."""
    runs, order, first = {}, [], None
    for i in range(1, reps + 1):
        path = os.path.join(tmp, f"{engine}.{i}.json")
        try:
            sweep = os.path.join(tmp, f"{engine}.{i}.sweep")
            objs = sweep_tests(sweep) if os.path.exists(sweep) else json.load(open(path))
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"compare.sh: {engine}'s output of run {i} is not JSON: {e}")
        for o in objs:
            key = (o["n_threads"], test_name(o))
            if key not in runs:
                runs[key] = []
                order.append(key)
            runs[key] += o["samples_ts"] if o.get("samples_ts") else [o["avg_ts"]]
            first = first or o
            if o.get("speculative"):
                sp = spec.setdefault(key, dict(o["speculative"], drafted=0, accepted=0, steps=0, tokens=0))
                for f in ("drafted", "accepted", "steps", "tokens"):
                    sp[f] += o["speculative"][f]
    return runs, order, first

spec = {}  # (threads, test) -> woolly's speculative counts, summed over the runs

def stats(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd

def size(b):
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.2f} MiB"

def count(n):
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M" if n >= 1e6 else f"{n / 1e3:.2f} K"

llama, llama_order, lo = load("llama")
woolly, woolly_order, wo = load("woolly")
if not wo:
    sys.exit("compare.sh: woolly bench gave no tests")
print(f"model: {model}")
lo = lo or {}
print(f"llama.cpp: {llama_path} (build {lo.get('build_commit', '?')}, CPU {lo.get('cpu_info', '?')})")
print(f"woolly: {woolly_path} ({wo['isa']}, tuning profile: {wo['tune_profile']})")
print(f"runs: {reps}, alternating; t/s mean ± std over the runs; load average {load_before} before, {load_after} after\n")
print("| model | size | params | threads | test | llama.cpp t/s | woolly t/s | woolly/llama |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
keys = woolly_order + [k for k in llama_order if k not in woolly]
for key in keys:
    w = stats(woolly[key]) if key in woolly else None
    l = stats(llama[key]) if key in llama else None
    fmt = lambda s: f"{s[0]:.2f} ± {s[1]:.2f}" if s else "-"
    ratio = f"{w[0] / l[0]:.2f}" if w and l and l[0] > 0 else "-"
    print(f"| {wo['model']} | {size(wo['model_size'])} | {count(wo['model_n_params'])} | {key[0]} | {key[1]} "
          f"| {fmt(l)} | {fmt(w)} | {ratio} |")
for key, sp in spec.items():
    src = " and ".join(x for x in (f"draft {sp['draft']}" if sp["draft"] else "",
                                   f"lookup {sp['lookup']}" if sp["lookup"] else "") if x)
    acc = 100.0 * sp["accepted"] / sp["drafted"] if sp["drafted"] else 0.0
    per = sp["tokens"] / sp["steps"] if sp["steps"] else 0.0
    print(f"\nwoolly {key[1]}, {key[0]} threads ({src}, draft-max {sp['draft_max']}, after a {sp['prompt']}-token "
          f"prompt): {sp['drafted']} drafted, {sp['accepted']} accepted ({acc:.1f}%), {per:.2f} tokens per step")
EOF
