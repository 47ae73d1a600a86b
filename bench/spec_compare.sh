#!/usr/bin/env bash
# Speculative decoding side by side: Woolly (`woolly run --draft/--lookup`) and llama.cpp's examples
# (llama-speculative with a draft model, llama-lookup for prompt lookup) on the same model files and the
# same prompt, greedy, plus each engine without speculation. The runs alternate engine by engine, ROUNDS
# times; the table gives the median generation tokens/s and the drafted and accepted counts of the last
# round (greedy runs repeat them). A llama-speculative run that exits without its statistics (it does,
# now and then) is left out of its median.
#
#   bench/spec_compare.sh LLAMA_BIN_DIR MODEL (--draft DRAFT | --lookup N) [-n TOKENS] [-p PROMPT]
#                         [-t THREADS] [-r ROUNDS] [--draft-max K]
#
# LLAMA_BIN_DIR holds llama.cpp's llama-speculative, llama-lookup and llama-completion (its shared
# libraries beside them). llama-lookup's n-gram sizes are its own (1-4) and fixed: --lookup N sets
# Woolly's only. --draft-max K (default 8) is Woolly's --draft-max and llama.cpp's --spec-draft-n-max.
# WOOLLY names the woolly binary (default: build/woolly).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
woolly=${WOOLLY:-$here/../build/woolly}
usage() {
  sed -n '8,9p' "$0" | sed 's/^#  *//; s/^/usage: /' >&2
  exit 2
}
[ $# -ge 2 ] || usage
bin=$1 model=$2
shift 2
draft="" lookup="" n=128 threads=2 rounds=3 kmax=8
prompt="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big red ball. She ran to the ball and kicked it high in the sky. Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "spec_compare.sh: $1 needs a value" >&2; exit 2; }
  case $1 in
    --draft) draft=$2 ;;
    --lookup) lookup=$2 ;;
    -n) n=$2 ;;
    -p) prompt=$2 ;;
    -t) threads=$2 ;;
    -r) rounds=$2 ;;
    --draft-max) kmax=$2 ;;
    *) echo "spec_compare.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift 2
done
{ [ -n "$draft" ] && [ -z "$lookup" ]; } || { [ -z "$draft" ] && [ -n "$lookup" ]; } ||
  { echo "spec_compare.sh: give one of --draft DRAFT and --lookup N" >&2; exit 2; }
for v in "-n:$n" "-t:$threads" "-r:$rounds" "--draft-max:$kmax" ${lookup:+"--lookup:$lookup"}; do
  [[ ${v#*:} =~ ^[1-9][0-9]*$ ]] || { echo "spec_compare.sh: ${v%%:*} ${v#*:} is not a positive count" >&2; exit 2; }
done
for f in "$model" ${draft:+"$draft"}; do
  [ -f "$f" ] || { echo "spec_compare.sh: no model file $f" >&2; exit 2; }
done
[ -x "$woolly" ] || { echo "spec_compare.sh: $woolly is not an executable woolly (set WOOLLY)" >&2; exit 2; }
tool=$([ -n "$draft" ] && echo llama-speculative || echo llama-lookup)
for b in "$tool" llama-completion; do
  [ -x "$bin/$b" ] || { echo "spec_compare.sh: no $bin/$b" >&2; exit 2; }
done
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wspec=(${draft:+--draft "$draft"} ${lookup:+--lookup "$lookup"} --draft-max "$kmax")
lspec=(${draft:+-md "$draft"} --spec-draft-n-max "$kmax")
for ((r = 1; r <= rounds; r++)); do
  "$woolly" run -m "$model" -p "$prompt" -n "$n" -t "$threads" --temp 0 >/dev/null 2>"$tmp/w-plain.$r"
  "$woolly" run -m "$model" -p "$prompt" -n "$n" -t "$threads" --temp 0 "${wspec[@]}" >/dev/null 2>"$tmp/w-spec.$r"
  "$bin/llama-completion" -m "$model" -p "$prompt" -n "$n" -t "$threads" --temp 0 -no-cnv --no-warmup \
    </dev/null >/dev/null 2>"$tmp/l-plain.$r"
  "$bin/$tool" -m "$model" -p "$prompt" -n "$n" -t "$threads" --temp 0 "${lspec[@]}" >/dev/null 2>"$tmp/l-spec.$r"
done

python3 - "$tmp" "$rounds" "$tool" <<'EOF'
import re, statistics, sys

tmp, rounds, tool = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def woolly(path):
    s = open(path).read()
    ts = float(re.search(r"^generation .*\(\s*([0-9.]+) tokens/s\)", s, re.M).group(1))
    m = re.search(r"^speculative (\d+) drafted, (\d+) accepted", s, re.M)
    return ts, (int(m.group(1)), int(m.group(2))) if m else None

def llama(path, spec):
    s = open(path).read()
    if spec:
        m = re.search(r"decoded\s+\d+ tokens in\s+[0-9.]+ seconds, speed:\s+([0-9.]+) t/s", s)
        if not m:  # llama-speculative now and then exits without its statistics: that round is left out
            return None
        ts = float(m.group(1))
        d = int(re.search(r"n_drafted\s+=\s+(\d+)", s).group(1))
        a = int(re.search(r"n_accept\s+=\s+(\d+)", s).group(1))
        return ts, (d, a)
    m = re.search(r"_print:\s+eval time =\s+[0-9.]+ ms /\s+\d+ runs\s+\(\s*[0-9.]+ ms per token,\s+([0-9.]+) tokens per second\)", s)
    return float(m.group(1)), None

rows = [("Woolly", "plain", lambda r: woolly(f"{tmp}/w-plain.{r}")),
        ("Woolly", "speculative", lambda r: woolly(f"{tmp}/w-spec.{r}")),
        ("llama.cpp", "plain (llama-completion)", lambda r: llama(f"{tmp}/l-plain.{r}", False)),
        ("llama.cpp", f"speculative ({tool})", lambda r: llama(f"{tmp}/l-spec.{r}", True))]
print(f"| engine | run | generation t/s (median of {rounds}) | drafted | accepted | acceptance |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for engine, run, parse in rows:
    got = [g for g in (parse(r) for r in range(1, rounds + 1)) if g]
    if not got:
        print(f"| {engine} | {run} | no round printed its figures | - | - | - |")
        continue
    med = statistics.median(g[0] for g in got)
    da = got[-1][1]
    if da:
        acc = f"{100.0 * da[1] / da[0]:.1f}%" if da[0] else "-"
        print(f"| {engine} | {run} | {med:.2f} | {da[0]} | {da[1]} | {acc} |")
    else:
        print(f"| {engine} | {run} | {med:.2f} | - | - | - |")
EOF
