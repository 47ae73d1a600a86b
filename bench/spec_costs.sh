#!/usr/bin/env bash
# Speculative decoding's verification cost: what one forward pass over N tokens (the pending token and
# N - 1 guesses) costs against a one-token pass, on one model, and the speedup those costs allow.
#
#   bench/spec_costs.sh MODEL [-t THREADS] [-r ROUNDS] [-d DEPTH] [--sizes "1 2 4 8 16"] [--draft-cost C]
#                       [--woolly-args "..."]
#
# Each size is one `woolly bench -p N -n 0` (an N-token batch at DEPTH cached tokens, the decode path's
# kernels for N tokens), 3 repetitions after a warm-up; the sizes take turns, ROUNDS rounds (default 3),
# so that a machine whose speed drifts slows them alike. A pass's time is N / (tokens/s); its cost is
# the median over the rounds, over the one-token pass's median. The table then gives, at a per-guess
# acceptance rate a (each guess kept with probability a if the ones before it were), the best number of
# guesses k and its modeled speedup over plain decoding:
#   tokens per step  E(k) = (1 - a^(k+1)) / (1 - a)
#   cost per step    C(k) = cost(k + 1) + k * draft cost       (prompt lookup: draft cost 0)
# --draft-cost C is one draft guess in one-token target passes (a draft model's file size over the
# target's is a first estimate). WOOLLY names the woolly binary (default: build/woolly).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
woolly=${WOOLLY:-$here/../build/woolly}
usage() {
  sed -n '5,6p' "$0" | sed 's/^#  *//; s/^/usage: /' >&2
  exit 2
}
[ $# -ge 1 ] || usage
model=$1
shift
threads=2 rounds=3 depth=0 sizes="1 2 4 8 16" draft_cost=0 wargs=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "spec_costs.sh: $1 needs a value" >&2; exit 2; }
  case $1 in
    -t) threads=$2 ;;
    -r) rounds=$2 ;;
    -d) depth=$2 ;;
    --sizes) sizes=$2 ;;
    --draft-cost) draft_cost=$2 ;;
    --woolly-args) wargs=$2 ;;
    *) echo "spec_costs.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift 2
done
for v in "-t:$threads" "-r:$rounds"; do
  [[ ${v#*:} =~ ^[1-9][0-9]*$ ]] || { echo "spec_costs.sh: ${v%%:*} ${v#*:} is not a positive count" >&2; exit 2; }
done
[[ $depth =~ ^[0-9]+$ ]] || { echo "spec_costs.sh: -d $depth is not a token count" >&2; exit 2; }
[[ $draft_cost =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "spec_costs.sh: --draft-cost $draft_cost is not a number" >&2; exit 2; }
for n in $sizes; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "spec_costs.sh: size '$n' is not a positive count" >&2; exit 2; }
done
[[ " $sizes " == *" 1 "* ]] || { echo "spec_costs.sh: --sizes must include 1 (the reference pass)" >&2; exit 2; }
[ -x "$woolly" ] || { echo "spec_costs.sh: $woolly is not an executable woolly (set WOOLLY)" >&2; exit 2; }
[ -f "$model" ] || { echo "spec_costs.sh: no model file $model" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for n in $sizes; do
    # shellcheck disable=SC2086 # --woolly-args is a list of flags
    "$woolly" bench -m "$model" -p "$n" -n 0 -d "$depth" -t "$threads" -r 3 --format json -o "$tmp/$n.$r.json" $wargs 2>/dev/null
  done
done

python3 - "$tmp" "$draft_cost" "$model" "$threads" "$depth" "$rounds" <<'EOF'
import glob, json, os, statistics, sys

path, draft_cost, model, threads, depth, rounds = sys.argv[1], float(sys.argv[2]), *sys.argv[3:]
times = {}
for f in glob.glob(os.path.join(path, "*.json")):
    n = int(os.path.basename(f).split(".")[0])
    for o in json.load(open(f)):
        times.setdefault(n, []).append(n / o["avg_ts"])
t = {n: statistics.median(v) for n, v in times.items()}
print(f"model {model}, {threads} threads, depth {depth}, medians of {rounds} rounds\n")
print("| tokens in the pass | ms per pass | cost (one-token passes) |")
print("| ---: | ---: | ---: |")
for n in sorted(t):
    print(f"| {n} | {1e3 * t[n]:.2f} | {t[n] / t[1]:.2f} |")

def cost(n):
    """The measured cost of an n-token pass, linear between measured sizes (beyond the largest: none)."""
    known = sorted(t)
    if n in t:
        return t[n] / t[1]
    lo = max((m for m in known if m < n), default=None)
    hi = min((m for m in known if m > n), default=None)
    if lo is None or hi is None:
        return None
    f = (n - lo) / (hi - lo)
    return ((1 - f) * t[lo] + f * t[hi]) / t[1]

print(f"\nmodeled speedup over plain decoding (draft cost {draft_cost:g} one-token passes per guess):\n")
print("| acceptance | best guesses k | tokens per step | speedup |")
print("| ---: | ---: | ---: | ---: |")
for a in (0.4, 0.6, 0.8, 0.9):
    best = (1.0, 0, 1.0)
    for k in range(1, max(t)):
        c = cost(k + 1)
        if c is None:
            continue
        e = (1 - a ** (k + 1)) / (1 - a)
        s = e / (c + k * draft_cost)
        if s > best[0]:
            best = (s, k, e)
    print(f"| {a:.1f} | {best[1]} | {best[2]:.2f} | {best[0]:.2f}x |")
EOF
