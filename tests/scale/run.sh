#!/usr/bin/env bash
# Runs the scale test (scale.mjs) with the build's woolly on stories260K. Usage: run.sh BUILD_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
exec timeout 150 node "$here/scale.mjs" --woolly "$build/woolly" \
  --model "$src/../shared/testdata/models/stories260K.gguf" --src "$src"
