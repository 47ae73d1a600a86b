#!/usr/bin/env bash
# Quantization quality: Woolly's quantizer beside llama.cpp's on one F16/F32 model. For each TYPE, the model
# is quantized by `woolly quantize` and (with --llama-quantize) by llama.cpp's llama-quantize; both files
# are then scored by `woolly perplexity --kl-divergence` against the unquantized model on the same text,
# so that the only difference between the two columns is the quantizer. Prints one markdown table: file
# size, mean KL divergence (nats per token) and top-token agreement per quantizer, and the ratio of the
# two KL divergences (below 1: Woolly's quantization is closer to the original). With --llama-quantize a
# last column gives what the quantizers minimize, each tensor's squared rounding error (weighed by the
# importance matrix if one is given): Woolly's over llama.cpp's, summed over the tensors of the same type
# in both files, and in how many of them Woolly's is the lower (bench_quant_error; the others may be the
# same in both, a fallback to F16, say). On a model of one or
# two layers the KL divergence moves with which errors a file happens to have by more than a quantizer's
# few percent (bench/RESULTS.md); this column does not.
#
#   bench/quant_kl.sh MODEL TYPE... [--llama-quantize BIN] [--imatrix FILE] [--text FILE] [--chunks N]
#                     [-c CTX] [-t THREADS] [--keep DIR] [--woolly-args "ARGS"]
#
# TYPE is any type `woolly quantize` takes (Q4_0, Q4_K_M, Q3_K_M, IQ4_XS, ...). --imatrix passes an
# importance matrix to both quantizers. --woolly-args adds flags to `woolly quantize` only (e.g.
# "--act-scales"); as those may change the tensors before rounding, the rounding error column is then "-". --text defaults to bench/kl_text.py's stories (stories260K's
# register); --chunks (default 8) and -c (default 512) set how much of it is scored. --keep DIR keeps the
# quantized files there (default: a temporary folder, removed). WOOLLY names the woolly binary (default:
# build/woolly beside this script's folder), QUANT_ERROR the bench_quant_error binary (default:
# build/bench/bench_quant_error).
set -euo pipefail

usage() {
  sed -n '/^#   bench\/quant_kl.sh/,/^#$/p' "$0" | sed '/^#$/d; s/^#  *//; s/^/usage: /' >&2
  exit 2
}

here=$(cd "$(dirname "$0")" && pwd)
woolly=${WOOLLY:-$here/../build/woolly}
quant_error=${QUANT_ERROR:-$here/../build/bench/bench_quant_error}
[ $# -ge 2 ] || usage
model=$1
shift
types=() llama_quantize="" imatrix="" text="" chunks=8 ctx=512 threads=2 keep="" woolly_args=""
while [ $# -gt 0 ]; do
  case $1 in
    --llama-quantize | --imatrix | --text | --chunks | -c | -t | --keep | --woolly-args)
      [ $# -ge 2 ] || { echo "quant_kl.sh: $1 needs a value" >&2; exit 2; }
      case $1 in
        --llama-quantize) llama_quantize=$2 ;;
        --imatrix) imatrix=$2 ;;
        --text) text=$2 ;;
        --chunks) chunks=$2 ;;
        -c) ctx=$2 ;;
        -t) threads=$2 ;;
        --keep) keep=$2 ;;
        --woolly-args) woolly_args=$2 ;;
      esac
      shift 2 ;;
    -*) echo "quant_kl.sh: unknown option '$1'" >&2; usage ;;
    *) types+=("$1"); shift ;;
  esac
done
[ ${#types[@]} -ge 1 ] || usage
for v in "--chunks:$chunks" "-c:$ctx" "-t:$threads"; do
  [[ ${v#*:} =~ ^[1-9][0-9]*$ ]] || { echo "quant_kl.sh: ${v%%:*} ${v#*:} is not a positive count" >&2; exit 2; }
done
[ -x "$woolly" ] || { echo "quant_kl.sh: $woolly is not an executable woolly (set WOOLLY)" >&2; exit 2; }
[ -f "$model" ] || { echo "quant_kl.sh: no model file $model" >&2; exit 2; }
[ -z "$llama_quantize" ] || [ -x "$llama_quantize" ] ||
  { echo "quant_kl.sh: $llama_quantize is not an executable llama-quantize" >&2; exit 2; }
[ -z "$imatrix" ] || [ -f "$imatrix" ] || { echo "quant_kl.sh: no importance matrix $imatrix" >&2; exit 2; }
[ -z "$llama_quantize" ] || [ -x "$quant_error" ] ||
  { echo "quant_kl.sh: $quant_error is not an executable bench_quant_error (set QUANT_ERROR)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${keep:-$tmp}
mkdir -p "$out"
if [ -z "$text" ]; then
  text=$tmp/text.txt
  python3 "$here/kl_text.py" >"$text"
fi

# The base: the unquantized model's predictions at every scored position.
"$woolly" perplexity -m "$model" -f "$text" -c "$ctx" --chunks "$chunks" -t "$threads" -q \
  --kl-divergence-base "$tmp/base.bin" >"$tmp/base.txt"

# "size_mib kld kld_err top1" of a quantized file.
score() {
  "$woolly" perplexity -m "$1" -f "$text" -t "$threads" -q --kl-divergence "$tmp/base.bin" >"$tmp/kl.txt"
  local size kld top
  size=$(stat -c %s "$1")
  kld=$(sed -n 's/^Mean KLD *: *\([^ ]*\) +\/- *\([^ ]*\).*/\1 \2/p' "$tmp/kl.txt")
  top=$(sed -n 's/^Same top token *: *\([^ ]*\).*/\1/p' "$tmp/kl.txt")
  [ -n "$kld" ] && [ -n "$top" ] || { echo "quant_kl.sh: no KL divergence for $1:" >&2; cat "$tmp/kl.txt" >&2; exit 1; }
  echo "$(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1048576 }') $kld $top"
}

woolly_imatrix=() llama_imatrix=()
[ -z "$imatrix" ] || { woolly_imatrix=(--imatrix "$imatrix"); llama_imatrix=(--imatrix "$imatrix"); }
echo "model: $(basename "$model"), text: $(basename "$text"), $chunks chunks of $ctx tokens, ${imatrix:+importance matrix $(basename "$imatrix"), }scored by woolly perplexity --kl-divergence"
echo
if [ -n "$llama_quantize" ]; then
  echo "| type | Woolly MiB | Woolly mean KLD | Woolly top-1 % | llama.cpp MiB | llama.cpp mean KLD | llama.cpp top-1 % | KLD Woolly / llama.cpp | rounding error Woolly / llama.cpp |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
else
  echo "| type | Woolly MiB | Woolly mean KLD | Woolly top-1 % |"
  echo "| --- | ---: | ---: | ---: |"
fi
for type in "${types[@]}"; do
  # shellcheck disable=SC2086 # the extra flags are words
  "$woolly" quantize "${woolly_imatrix[@]}" $woolly_args "$model" "$out/woolly-$type.gguf" "$type" >"$tmp/wq.log" 2>&1 ||
    { echo "quant_kl.sh: woolly quantize to $type failed:" >&2; tail -5 "$tmp/wq.log" >&2; exit 1; }
  res=$(score "$out/woolly-$type.gguf") || exit 1
  read -r ws wk we wt <<<"$res"
  if [ -n "$llama_quantize" ]; then
    if ! "$llama_quantize" "${llama_imatrix[@]}" "$model" "$out/llama-$type.gguf" "$type" "$threads" \
      >"$tmp/lq.log" 2>&1; then
      # e.g. a row length no block of the type divides, without a fallback type: say why, in the row
      why=$(grep -m1 -o 'failed to quantize: .*' "$tmp/lq.log" || tail -1 "$tmp/lq.log")
      echo "| $type | $ws | $wk ± $we | $wt | - | llama-quantize: ${why//|/\\|} | - | - | - |"
      continue
    fi
    res=$(score "$out/llama-$type.gguf") || exit 1
    read -r ls lk le lt <<<"$res"
    ratio=$(awk -v a="$wk" -v b="$lk" 'BEGIN { printf (b > 0 ? "%.2f" : "-"), a / b }')
    if [ -n "$woolly_args" ]; then
      echo "| $type | $ws | $wk ± $we | $wt | $ls | $lk ± $le | $lt | $ratio | - |"
      continue
    fi
    # bench_quant_error's summary: "... | 0.913 (tensors 0.905-0.985; closer in 16, the same in 0, of 16) |"
    "$quant_error" "$model" "$out/llama-$type.gguf" "$out/woolly-$type.gguf" "${woolly_imatrix[@]}" \
      >"$tmp/qe.txt" 2>&1 ||
      { echo "quant_kl.sh: bench_quant_error failed:" >&2; tail -3 "$tmp/qe.txt" >&2; exit 1; }
    n='\([0-9.]*\)'
    row="s/.*| $n (tensors [^;]*; closer in $n, the same in $n, of $n) |\$/"
    err=$(tail -1 "$tmp/qe.txt" | sed -n "$row\\1: lower in \\2, the same in \\3, of \\4/p")
    echo "| $type | $ws | $wk ± $we | $wt | $ls | $lk ± $le | $lt | $ratio | ${err:--} |"
  else
    echo "| $type | $ws | $wk ± $we | $wt |"
  fi
done
