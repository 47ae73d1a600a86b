woolly-default-profile 1
class zen5
match x86_64 AuthenticAMD family 26
# AMD Zen 5. The spec's defaults at the AVX-512 level were measured on this class (the project's
# machine, family 26, 2 cores: codegen/kernels.toml gives the figures), so its matrix kernels are the
# spec's but the prompt tiles of Q4_0, Q4_1, Q8_0, IQ4_NL, IQ4_XS and Q6_K and the GEMV of the 32-value
# formats (below).
#
# Attention: BF16 tiles first, ahead of F32 ones by far. `bench_attn --variants` (one thread, head
# dimension 64, group 4, n_kv 4096, prefill GFLOP/s, one run), 32x64 tiles: F16 cache 266.8 BF16 against
# 157.2 F32, 16x64 260.1 against 152.2; Q8_0 cache 265.7 and 251.5.
attn-rounded bf16,f16,i16
#
# Decode attention (one query over the cache): no prefetch of K and V into L2 beside the L1 one of the
# next block. Its instructions cost the path a fifth of its speed with the cache near and bought nothing
# from DRAM: `bench_attn --decode 128,4,N` (one thread) 32.8-33.2 GB/s against 25.1-25.9 at 512
# positions, 17.4-20.9 against 17.3-18.0 at 262144; group 1 30.1-30.5 against 22.1-23.1 from DRAM.
# `woolly bench -p 0 -n N -d 4096 -t 2`, nine rounds in turns: qwen3-4b 17.10 -> 18.57 t/s (medians,
# 9 of 9 ahead), llama-1b 67.35 -> 69.65 (7 of 9) (bench/journal/2026-12-07-zen5-3.md).
attn-decode-l2-ahead none
#
# 2-16 tokens (a server step, a speculative verification): the spec's 8x16 streaming 8 KiB ahead, for
# every format (codegen/kernels.toml gives the figures). The 4 KiB tile this row chose over the spec's
# 2 KiB one on 2026-12-04 lost to it: spec_costs.sh on llama-1b, three runs, a 4-token pass 1.35-1.43
# one-token passes against 1.08-1.11 (bench/journal/2026-12-05-zen5-2.md).
#
# The 4-bit and 8-bit 32-value formats and IQ4_XS for 17 tokens and more: the 4x32 tile on the weights as
# stored, not the spec's 6x32 on decoded panels. Their decode (a mask and a shift, IQ4's vpshufb, none for
# Q8_0) runs beside vpdpbusd on this core (bench/bench_vnni_ports.c), so decoding it once per panel saves
# little and the panel's stores and fill cost more.
# `woolly bench -m llama-1b-T.gguf -p 512 -n 0 -r 3 -t 2` (files: `woolly quantize` of `woolly synth
# --preset llama-1b --type F16`), four rounds with the spec's choice in turns, medians: Q4_0 508.6 ->
# 549.7 t/s (4 of 4 rounds faster), Q4_1 500.9 -> 528.1 (4 of 4), Q8_0 512.9 -> 523.4 (4 of 4), IQ4_NL
# 529.9 -> 542.9 (3 of 4), IQ4_XS 534.4 -> 547.7 (4 of 4). Kept on the panel: Q5_0 (530.6 -> 513.9, 0 of
# 4), Q5_1 (493.4 -> 486.0, 2 of 4) and Q3_K (Q3_K_M 492.6 -> 421.0, 0 of 4), whose decode is longer.
# Below 512 tokens (Q4_0 only, pp32 to pp256, three rounds in turns): 4x32 ahead in all 12 pairs, by
# 4-22% (bench/journal/2026-12-04-zen5-2.md).
# Since 2026-12-05 their variant that streams the weights 8 KiB ahead in calls of at most 64 tokens (a
# short prompt; codegen/kernels.toml gives the figures), Q8_0 excepted (it lost with the prefetch).
default Q4_0 avx512 tokens=17+ kernel=q40_q8_gemm_avx512_r16_4x32_pf8kt64
default Q4_1 avx512 tokens=17+ kernel=q41_q8_gemm_avx512_r16_4x32_pf8kt64
default Q8_0 avx512 tokens=17+ kernel=q80_q8_gemm_avx512_r16_4x32
default IQ4_NL avx512 tokens=17+ kernel=iq4nl_q8_gemm_avx512_r16_4x32_pf8kt64
default IQ4_XS avx512 tokens=17+ kernel=iq4xs_q8_gemm_avx512_r16_4x32_pf8kt64
#
# One token, the 32-value formats: the GEMV that prefetches a line a 4 KiB page, 16 KiB ahead, with its
# block loop not unrolled, not the spec's that prefetches every line (unrolled 8 times). tg128 on
# llama-1b's shape in each of them and on gemma3-1b, with and without these rows in turns, 3-4 rounds:
# ahead in 24 of 25 rounds, medians Q5_0 +14%, Q4_0 +10%, Q4_1 +9%, IQ4_NL +14%, Q8_0 +5%, gemma3-1b +8%
# (codegen/kernels.toml, the pg entry, gives the figures).
default Q4_0 avx512 tokens=1 kernel=q40_q8_gemv_avx512_r16_1x16_s2pf16kpg
default Q4_1 avx512 tokens=1 kernel=q41_q8_gemv_avx512_r16_1x16_s2pf16kpg
default Q5_0 avx512 tokens=1 kernel=q50_q8_gemv_avx512_r16_1x16_s2pf16kpg
default Q5_1 avx512 tokens=1 kernel=q51_q8_gemv_avx512_r16_1x16_s2pf16kpg
default Q8_0 avx512 tokens=1 kernel=q80_q8_gemv_avx512_r16_1x16_s2pf16kpg
default IQ4_NL avx512 tokens=1 kernel=iq4nl_q8_gemv_avx512_r16_1x16_s2pf16kpg
#
# Q6_K for 17 tokens and more: 4 tokens x 48 rows on decoded panels, not the spec's 4x32 that decodes
# per tile. `bench_matmul --shape S --weights Q6_K --tokens 512 --threads 2 --filter q8_gemm` (one run
# each, calm host, int8 limit 903-929 GMAC/s): 8192x2048 529.2 against 462.6 GMAC/s, 2048x8192 537.5
# against 476.8. In llama-1b (Q4_K_M: Q6_K is half the layers' ffn_down and attn_v, 13% of a prompt's
# time) `woolly bench -m llama-1b.gguf -p 512 -n 0 -r 2 -t 2`, five rounds in turns with the profile
# before: ahead in 5 of 5, medians 494.4 against 488.8 t/s; pp32 and pp128 (3 rounds) level. On
# 2026-12-02, with a quantization running beside, the same pair had not moved (journal 2026-12-02-zen5).
# It runs from 128 tokens, its min_tokens in the spec; fewer take the 2-16 step's 8x16_sbpf8k, ahead of
# it there (llama-1b pp17 +11%, pp32 +4-9%: bench/journal/2026-12-05-zen5-5.md).
default Q6_K avx512 tokens=17+ kernel=q6k_q8_gemm_avx512_r16_4x48_panel
#
# BF16 weights: BF16 activations (as llama.cpp takes them), on the 16-row layout's column pairs with
# vdpbf16ps (matmul/avx512/bf16_r16_dot.c.j2), not the spec's F32 activations and FMAs. The weights are
# BF16, so only the activations' rounding to 8 significant bits changes the results (the prompts' and
# decode's alike). bench_matmul --shape S --weights BF16 --threads 2 --no-reference, GMAC/s at 512
# tokens: 8192x2048 365.3 (8x32) against 152.6 for the spec's 4x48 on F32 activations, 2048x8192 355.5
# against 143.4; 16 tokens 8x32 ahead of the other tiles on every shape of llama-1b; one token (GB/s)
# 66.7 and 63.0 against 60.9 and 61.3 (codegen/kernels.toml; llama-1b in bench/journal/2026-12-06-zen5-7.md).
default BF16 avx512 tokens=1 kernel=bf16_bf16_gemv_avx512_r16_1x64
default BF16 avx512 tokens=2-16 kernel=bf16_bf16_gemm_avx512_r16_8x32
default BF16 avx512 tokens=17+ kernel=bf16_bf16_gemm_avx512_r16_8x32
end 17
