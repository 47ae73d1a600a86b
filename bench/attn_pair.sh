#!/bin/sh
# bench/attn_pair.sh OLD_TREE [KERNEL] [N_KV ...]
#
# One attention kernel as another source tree generates it (OLD_TREE, a checkout such as
# `git worktree add ../old HEAD~1`) against the same kernel as this tree generates it, alternating in
# one process (bench/attn_pair.c): the way to tell a change to a kernel from the drift of a shared
# machine. Needs this tree's release build (`cmake --build --preset release`: the library the two link
# against) and the same attention contract (kernels.h) in both trees.
#   KERNEL  a generated attention kernel, e.g. attn_f16_flash_avx512_d64_b32x64_fp16 (the default)
#   N_KV    cache positions, one row of the table each (default: 512 4096 262144)
# Environment: OLD_KERNEL (the old side's kernel, default KERNEL: another kernel of the same head
# dimension, on another cache type if its name says so, each side then reading its own cache of the same
# values), ROUNDS (default 30), N_Q (queries: 1 = decode, the default; 512 = prefill), GROUP (query
# heads per KV head, default 4), KEEP (keep the build directory, for perf), NEW_CFLAGS (more compiler
# flags for the new kernel only: OLD_TREE may be this tree, to measure a flag), BUILD (the build
# directory, default build/: its compiler, flags and library are used).
# shellcheck disable=SC2046,SC2086 # compiler flags in variables are meant to split into words
set -eu
if [ $# -lt 1 ] || [ ! -d "$1/generated/kernels" ]; then
    echo "usage: bench/attn_pair.sh OLD_TREE [KERNEL] [N_KV ...]  (OLD_TREE: a source tree with generated/)" >&2
    exit 2
fi
new=$(cd "$(dirname "$0")/.." && pwd)
old=$(cd "$1" && pwd)
kernel=${2:-attn_f16_flash_avx512_d64_b32x64_fp16}
old_kernel=${OLD_KERNEL:-$kernel}
if [ $# -ge 2 ]; then shift 2; else shift $#; fi
sizes=${*:-512 4096 262144}
build=${BUILD:-$new/build}
groups=$build/runtime/kernels/CMakeFiles
for f in "$old/generated/kernels/$old_kernel.c" "$new/generated/kernels/$kernel.c" "$build/runtime/libwoolly.a" "$groups"; do
    [ -e "$f" ] || { echo "attn_pair: $f is missing (a kernel name, or this tree's release build?)" >&2; exit 1; }
done
# a kernel's cache type from its name: attn_<cache>_flash_<isa>_d<dim>_...
cache_of() {
    case $1 in
        attn_f16_*) echo WOOLLY_TYPE_F16 ;;
        attn_f32_*) echo WOOLLY_TYPE_F32 ;;
        attn_q80_*) echo WOOLLY_TYPE_Q8_0 ;;
        *) echo "attn_pair: $1 is not a tiled attention kernel" >&2; exit 2 ;;
    esac
}
hd=$(echo "$kernel" | sed -n 's/.*_d\([0-9]*\)_.*/\1/p')
cache=$(cache_of "$kernel")
old_cache=$(cache_of "$old_kernel")
[ -n "$hd" ] || { echo "attn_pair: no head dimension in $kernel" >&2; exit 2; }
[ "$(echo "$old_kernel" | sed -n 's/.*_d\([0-9]*\)_.*/\1/p')" = "$hd" ] || { echo "attn_pair: $old_kernel and $kernel differ in head dimension" >&2; exit 2; }
# the compiler, flags (optimization, sanitizers) and ISA options the build compiles this kernel with
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
# A generated file compiles with the flags of its group (an object library per ISA level and feature set,
# runtime/kernels/CMakeLists.txt) and the precompiled header the build gives it; a file this build does
# not compile (an old tree's), with the kernel's group's flags.
group_of() {
    f=$(grep -l "generated/kernels/$1.c.o:" "$groups"/woolly_kernels_*.dir/build.make 2>/dev/null | head -n 1)
    [ -z "$f" ] || dirname "$f"
}
group=$(group_of "$kernel")
[ -n "$group" ] || { echo "attn_pair: $build compiles no $kernel" >&2; exit 1; }
cflags=$(sed -n 's/^C_FLAGS = //p; s/^C_DEFINES = //p' "$group/flags.make" | tr '\n' ' ')
flags_of() {
    g=$(group_of "$1")
    if [ -z "$g" ]; then echo "$cflags"; return; fi
    sed -n 's/^C_FLAGS = //p; s/^C_DEFINES = //p' "$g/flags.make" | tr '\n' ' '
    grep "generated/kernels/$1.c.o_OPTIONS" "$g/flags.make" | sed 's/.*_OPTIONS = //; s/;/ /g' || true
}
out=$(mktemp -d "$build/attn_pair.XXXXXX") # one per run: runs side by side do not share objects
trap '[ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT
tree_inc() { echo "-I$1/runtime/kernels -I$1/generated -I$1/runtime/base"; }
# A tiled kernel's one-query path is a unit of its own (attn/decode.c.j2), which each side compiles from
# its tree under a name of its own, beside its kernel (none in a tree from before that).
decode_of() { sed -n 's/^int woolly_\(attn_[a-z0-9_]*_decode_[a-z0-9_]*\)(.*/\1/p' "$1"; }
old_decode=$(decode_of "$old/generated/kernels/$old_kernel.c")
new_decode=$(decode_of "$new/generated/kernels/$kernel.c")
old_def=${old_decode:+-Dwoolly_$old_decode=attn_pair_old_decode}
new_def=${new_decode:+-Dwoolly_$new_decode=attn_pair_new_decode}
$cc $(flags_of "$old_kernel") $(tree_inc "$old") "-Dwoolly_$old_kernel=attn_pair_old" $old_def -c "$old/generated/kernels/$old_kernel.c" -o "$out/old.o"
$cc $(flags_of "$kernel") $(tree_inc "$new") "-Dwoolly_$kernel=attn_pair_new" $new_def ${NEW_CFLAGS:-} -c "$new/generated/kernels/$kernel.c" -o "$out/new.o"
objs="$out/old.o $out/new.o"
if [ -n "$old_decode" ]; then
    $cc $(flags_of "$old_decode") $(tree_inc "$old") $old_def -c "$old/generated/kernels/$old_decode.c" -o "$out/old_decode.o"
    objs="$objs $out/old_decode.o"
fi
if [ -n "$new_decode" ]; then
    $cc $(flags_of "$new_decode") $(tree_inc "$new") $new_def ${NEW_CFLAGS:-} -c "$new/generated/kernels/$new_decode.c" -o "$out/new_decode.o"
    objs="$objs $out/new_decode.o"
fi
$cc $cflags $(tree_inc "$new") -I"$new/runtime/quant" -DHEAD_DIM="$hd" -DCACHE="$cache" -DOLD_CACHE="$old_cache" -DGROUP="${GROUP:-4}" "$new/bench/attn_pair.c" \
    $objs "$build/runtime/libwoolly.a" -lm -lpthread -o "$out/attn_pair"
old_label=$(basename "$old")
[ "$old_kernel" = "$kernel" ] || old_label="$old_kernel of $old_label"
echo "$kernel: $old_label (old) against $(basename "$new") (new), ${ROUNDS:-30} alternating rounds, medians"
echo "| n_kv | n_q | d | old $( [ "${N_Q:-1}" = 1 ] && echo GB/s || echo GFLOP/s) | new | new / old (quartiles) | max diff |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in $sizes; do
    "$out/attn_pair" "$n" "${ROUNDS:-30}" "${N_Q:-1}"
done
