#!/usr/bin/env bash
# The thread checks: the woolly command of a ThreadSanitizer build (the `tsan` preset) under the loads
# where threads meet: the compute pool (-t 2) on a dense, a mixture-of-experts and a Gemma 3 model and
# with prompt lookup, then the server with several slots under mixed concurrent requests (plain, streamed
# with log-probabilities, chat with n = 2, grammars, JSON mode, embeddings, tokenize, metrics, and
# streams the client drops), with prompt lookup, and with context shifts. Fails on any report, or on a
# command that fails. Not a CI step (its build costs some 5 minutes); the Criterion tests do not run under
# ThreadSanitizer (their fixed-address arena collides with its shadow memory), so the load comes from
# here. Usage: run.sh [BUILD_DIR] (default build-tsan).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build-tsan}
woolly=$build/woolly
models=$src/../shared/testdata/models
logs=$(mktemp -d)
export TSAN_OPTIONS="halt_on_error=0 exitcode=66"
failed=0

check() { # name, log: the log must hold no report
  if grep -q "WARNING: ThreadSanitizer" "$2"; then
    echo "FAIL $1: $(grep -c 'WARNING: ThreadSanitizer' "$2") reports (in $2)"
    grep -A24 "WARNING: ThreadSanitizer" "$2" | head -80
    failed=1
  else
    echo "ok   $1"
  fi
}

run() { # name, woolly arguments...
  local name=$1
  shift
  if ! timeout 300 "$woolly" "$@" >/dev/null 2>"$logs/$name.log"; then
    echo "FAIL $name: woolly $* exited non-zero (in $logs/$name.log)"
    failed=1
  fi
  check "$name" "$logs/$name.log"
}

prompt="Once upon a time there was a little dog who ran and ran"
run dense run -m "$models/tiny-llama-q4_k_m.gguf" -p "$prompt" -n 24 -t 2 -b 4
run moe run -m "$models/tiny-qwen3moe-q4_k_m.gguf" -p "$prompt" -n 24 -t 2 -b 4
run gemma3 run -m "$models/tiny-gemma3-f16.gguf" -p "$prompt" -n 24 -t 2 -b 4
run lookup run -m "$models/tiny-llama-q4_k_m.gguf" -p "$prompt" -n 24 -t 2 --lookup 3

serve() { # name, port, load function, serve arguments...
  local name=$1 port=$2 load=$3
  shift 3
  "$woolly" serve -m "$models/stories260K.gguf" --port "$port" -t 2 "$@" >/dev/null 2>"$logs/$name.log" &
  local pid=$!
  for _ in $(seq 100); do
    curl -sf "localhost:$port/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  ("$load" "localhost:$port") # a subshell: its waits are for its requests, not for the server
  local answered
  answered=$(curl -s "localhost:$port/metrics" | awk '/^woolly_requests_total/ {n += $2} END {print n + 0}')
  echo "     $name: $answered requests answered"
  if [ "$answered" -lt 3 ]; then
    echo "FAIL $name: the load did not reach the server"
    failed=1
  fi
  kill -TERM "$pid"
  wait "$pid" || { echo "FAIL $name: the server exited non-zero (in $logs/$name.log)"; failed=1; }
  check "$name" "$logs/$name.log"
}

post() { curl -s -m 60 "$@" >/dev/null || true; }

mixed() {
  for i in 1 2 3 4; do
    post "$1/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 40, "seed": '$i'}' &
    post -N "$1/v1/completions" -d '{"prompt": "Once", "max_tokens": 40, "stream": true, "logprobs": 2}' &
    post "$1/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 20, "n": 2}' &
    post -N "$1/v1/completions" -d '{"prompt": "Once", "max_tokens": 30, "stream": true, "grammar": "root ::= [a-z ]+"}' &
    post "$1/v1/chat/completions" \
      -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 30, "response_format": {"type": "json_object"}}' &
    post -m 1 -N "$1/v1/completions" -d '{"prompt": "Once", "max_tokens": 400, "stream": true}' & # dropped
    post "$1/v1/embeddings" -d '{"input": ["Once upon", "a time"]}' &
    post "$1/tokenize" -d '{"content": "Once upon a time"}' &
    post "$1/metrics" &
    wait
  done
}

repeats() {
  for i in 1 2 3 4; do
    post "$1/v1/completions" -d '{"prompt": "Once upon a time Once upon a time", "max_tokens": 100, "seed": '$i', "temperature": 0}' &
    post -m 2 -N "$1/v1/completions" -d '{"prompt": "Once", "max_tokens": 400, "stream": true}' &
    wait
  done
}

long() {
  for i in 1 2 3; do post "$1/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 150, "seed": '$i'}' & done
  wait
}

serve serve-mixed 18791 mixed --parallel 3
serve serve-lookup 18792 repeats --parallel 2 --lookup 3
serve serve-shift 18793 long --parallel 2 --ctx-size 64 --context-shift

[ "$failed" = 0 ] && echo "no ThreadSanitizer reports" && rm -rf "$logs"
exit "$failed"
