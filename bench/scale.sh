#!/usr/bin/env bash
# Replicas behind a load balancer: aggregate tokens/s of 1, 2 and 4 single-thread replicas of
# `woolly serve` behind HAProxy (deploy/haproxy.cfg) against one replica alone, and what the balancer
# costs per request. Needs haproxy and node (tests/scale/bench_scale.mjs does the work).
#
#   bench/scale.sh [MODEL] [--replicas 1,2,4] [--clients 4] [--tokens 128] [--seconds 10] [--np 4]
#
# MODEL defaults to ../shared/testdata/models/stories260K.gguf; WOOLLY names the binary (default
# build/woolly). --clients is per replica: every row loads each replica alike.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
model=$src/../shared/testdata/models/stories260K.gguf
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  model=$1
  shift
fi
exec node "$src/tests/scale/bench_scale.mjs" --woolly "${WOOLLY:-$src/build/woolly}" --model "$model" \
  --src "$src" "$@"
