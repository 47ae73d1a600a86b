#!/usr/bin/env bash
# A stand-in for llama.cpp's llama-bench, for the test of bench/compare.sh: takes the flags compare.sh
# passes (-m -p -n -t -r -d -o json, and -x as an extra flag), checks them as llama-bench would, and
# prints llama-bench-shaped JSON with fixed figures: pp at 1000 t/s per thread, tg at 100 per thread.
# FAKE_LLAMA_FAIL=1 makes it fail the way a llama-bench with a bad flag does. FAKE_LLAMA_NO_DEPTH=1 makes
# it one without -d (as ik_llama.cpp's): --help lists -gp instead, and -gp PP,TG gives a "tgTG@ppPP" test.
set -euo pipefail
model="" p=512 n=128 t=2 r=5 d=0 o=md gp=""
no_depth=${FAKE_LLAMA_NO_DEPTH:-0}
while [ $# -gt 0 ]; do
  case $1 in
    --help)
      echo "usage: llama-bench [options]"
      if [ "$no_depth" = 1 ]; then echo "  -gp <pp,tg>"; else echo "  -d, --n-depth <n>"; fi
      exit 0 ;;
    -m) model=$2 ;;
    -p) p=$2 ;;
    -n) n=$2 ;;
    -t) t=$2 ;;
    -r) r=$2 ;;
    -d) [ "$no_depth" = 0 ] || { echo "error: invalid parameter for argument: -d" >&2; exit 1; }; d=$2 ;;
    -gp) [ "$no_depth" = 1 ] || { echo "error: invalid parameter for argument: -gp" >&2; exit 1; }; gp=$2 ;;
    -o) o=$2 ;;
    -x) shift; continue ;;
    *) echo "error: invalid parameter for argument: $1" >&2; exit 1 ;;
  esac
  shift 2
done
if [ "${FAKE_LLAMA_FAIL:-0}" = 1 ]; then
  echo "error: invalid parameter for argument: -d" >&2
  exit 1
fi
[ -f "$model" ] || { echo "error: failed to load model '$model'" >&2; exit 1; }
[ "$o" = json ] || { echo "the stand-in prints json only" >&2; exit 1; }
objs=()
object() { # threads n_prompt n_gen t/s [test name]
  local samples="" i test=""
  for ((i = 0; i < r; i++)); do samples+="$4, "; done
  [ -z "${5:-}" ] || test=$(printf '"test": "%s", ' "$5")
  objs+=("$(printf '  {"build_commit": "stand-in", "build_number": 0, "cpu_info": "test", "model_filename": "%s", "model_size": 1, "model_n_params": 1, "n_threads": %d, "n_prompt": %d, "n_gen": %d, "n_depth": %d, %s"avg_ts": %s, "stddev_ts": 0.0, "samples_ts": [%s]}' \
    "$model" "$1" "$2" "$3" "$d" "$test" "$4" "${samples%, }")")
}
IFS=, read -ra counts <<<"$t"
for c in "${counts[@]}"; do
  [ "$p" -eq 0 ] || object "$c" "$p" 0 $((1000 * c))
  [ "$n" -eq 0 ] || object "$c" 0 "$n" $((100 * c))
  [ -z "$gp" ] || object "$c" "${gp%,*}" "${gp#*,}" $((100 * c)) "tg${gp#*,}@pp${gp%,*}"
done
printf '[\n'
for ((i = 0; i < ${#objs[@]}; i++)); do
  printf '%s%s\n' "${objs[i]}" "$([ $((i + 1)) -lt ${#objs[@]} ] && echo ,)"
done
printf ']\n'
