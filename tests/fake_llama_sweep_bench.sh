#!/usr/bin/env bash
# A stand-in for ik_llama.cpp's llama-sweep-bench, for the test of bench/compare.sh's depth runs against a
# llama-bench without -d: takes the flags compare.sh passes (-m -c -b -ub -n -t --sweep-stride
# --output-format jsonl, and the common flags -fa N and -rtr), checks them, and prints a JSON line per
# timed step as the real one does, at depths 0, stride x ub, ... below the context: pp at 1000 t/s per
# thread, tg at 100. Like the real one it writes llama.log into its working directory.
set -euo pipefail
model="" c=0 b=0 ub=0 n=0 t=0 stride=1 fmt=""
while [ $# -gt 0 ]; do
  case $1 in
    --version) echo "version: 1 (stand-in)" >&2; exit 0 ;;
    -rtr) shift; continue ;;
    -m) model=$2 ;;
    -c) c=$2 ;;
    -b) b=$2 ;;
    -ub) ub=$2 ;;
    -n) n=$2 ;;
    -t) t=$2 ;;
    -fa) ;;
    --sweep-stride) stride=$2 ;;
    --output-format) fmt=$2 ;;
    *) echo "error: invalid argument: $1" >&2; exit 1 ;;
  esac
  shift 2
done
[ -f "$model" ] || { echo "error: failed to load model '$model'" >&2; exit 1; }
[ "$fmt" = jsonl ] || { echo "the stand-in prints jsonl only" >&2; exit 1; }
if [ "$ub" -le 0 ] || [ "$b" -lt "$ub" ] || [ "$t" -le 0 ] || [ "$stride" -le 0 ]; then
  echo "error: -ub, -b, -t and --sweep-stride must be positive (-b at least -ub)" >&2
  exit 1
fi
echo "stand-in log" >llama.log
for ((kv = 0; kv + ub <= c; kv += stride * ub)); do
  printf '{"n_kv_max": %d, "n_batch": %d, "n_ubatch": %d, "flash_attn": 1, "n_gpu_layers": -1, "n_threads": %d, "n_threads_batch": %d, "pp": %d, "tg": %d, "n_kv": %d, "t_pp": 1.0, "speed_pp": %d, "t_tg": 1.0, "speed_tg": %d }\n' \
    "$c" "$b" "$ub" "$t" "$t" "$ub" "$n" "$kv" $((1000 * t)) $((100 * t))
done
