woolly-default-profile 1
class intel-spr
match x86_64 GenuineIntel
# Intel Xeon cores with AVX-512 (Sapphire and Emerald Rapids): the kernels measured faster there than the
# spec's portable defaults, which were measured on the project's AMD Zen 5. The figures are from one
# Intel Xeon (family 6, model 207, 2 cores of a shared machine); the class takes every Intel core, since
# what no feature bit tells (how a core's prefetchers and load buffers meet a weight stream, which ports
# its vector instructions share) goes with the vendor. Cores without AVX-512 run none of these kernels.
#
# Q4_K x int8, one token: 1x64_pf4k. Four streams 4 KiB ahead win where one loses, e.g. 12800x4096 15.6
# GB/s on 1 thread, 33.4 on 2 against the default 1x16_s2pf2k's 12.7 / 26.3, 4096x12800 15.9 / 33.2
# against 12.5 / 25.7; only 512x2048 (calls of 12-22 us) is slower, by 2-6%. llama-1b tg128 22.6-23.2
# t/s on 1 thread, 43.3-44.1 on 2 against 20.4-20.8 / 38.7-39.0 (bench/journal/2026-11-26-intel-xeon.md).
default Q4_K avx512 tokens=1 kernel=q4k_q8_gemv_avx512_r16_1x64_pf4k
# Q4_K x int8, 2-16 tokens: 8x16_sbwpf4k ("w", wide: 1-2 tokens walk 4 row groups at once and 3-4
# tokens 2, as the GEMV streams several groups). 2 threads, two runs: 2 tokens on 2048x8192 267-268 us
# against 349-397 for 8x16_sbpf4k, 8192x2048 276-286 against 316-326, the output matrix 1083-1110
# against 1199-1260; 4 tokens 265-319 against 332-376 on the two FFN shapes; 8 and 12 tokens the same
# within 3%; only 2048x2048 at 2 tokens is slower (46-47 us against 41-43). 8x16_sbpf4k, the choice
# here before the wide variant, was 10-13% faster at 8 tokens than the default 8x16_sbpf2k on the four
# shapes of 2048x8192 and larger (8192x2048 358-382 us against 409-430, the output matrix 1401-1408
# against 1557-1589), the same on the small ones; pf8k no better than pf4k. 8 sequences of llama-1b
# decoding together (bench_decode_batch): 255-258 tokens/s -> 266-276.
default Q4_K avx512 tokens=2-16 kernel=q4k_q8_gemm_avx512_r16_8x16_sbwpf4k
# Q4_K x int8, 17 tokens and more: 8x16_sbpf4k (bench_matmul --preset all --threads 2 --tokens
# 160,512): ahead of the default 5x32 on 7 of the 10 shapes at 160 tokens, the feed-forward's pass
# (2048x8192 342.1 against 321.7 GMAC/s, 8192x2048 353.1 against 343.2); at 512 ahead on 2 of 10
# (2048x2048 336.9 against 298.2), behind by at most 3.3% on the others. Beside Q6_K's, in turns with
# Q6_K's alone: llama-1b pp512 median 291.50 -> 298.53 t/s (ahead in 4 rounds of 5), granite-8b 38.48 ->
# 38.85 (2 of 3).
# That was the choice until the decoded panels (2026-12-01). Now 6x32_panel
# (matmul/avx512/any_q8_r16_panel.c.j2, weights decoded once per panel for 128 tokens). bench_matmul
# --preset llama-1b --weights Q4_K --tokens 512 --threads 2: 8192x2048 361.4 GMAC/s against 239.9 for
# 8x16_sbpf4k, 2048x2048 277.8 against 178.7, 2048x8192 272.7 against 219.5, 512x2048 235.9 against 218.9,
# the output matrix 318.7 against 311.4. llama-1b pp512 with this and Q6_K's below against both on
# 8x16_sbpf4k, in turns (woolly bench -p 512 -n 0 -r 2 -t 2, 7 rounds): ahead in 6, by 9% at the median
# (bench/journal/2026-12-01-intel-xeon.md).
default Q4_K avx512 tokens=17+ kernel=q4k_q8_gemm_avx512_r16_6x32_panel
# Q6_K x int8, one token: 1x64_pf4k, as for Q4_K: 12800x4096 14.2-14.6 GB/s on 1 thread, 27.7-28.8 on
# 2 against the default 1x16_pf4k's 12.2-12.8 / 22.6-24.7, 49152x4096 15.0 / 29.4 against 12.7 / 25.1.
default Q6_K avx512 tokens=1 kernel=q6k_q8_gemv_avx512_r16_1x64_pf4k
# Q6_K x int8, 2-16 tokens: 8x16_sbwpf4k (2 threads, two runs): 2 tokens on 2048x8192 351-370 us
# against 425-474 for the default 8x16_sbpf4k, 8192x2048 384 against 439-457; 3 tokens 386-402 against
# 466-469; 4 tokens 395-424 against 479-505; 8 tokens within 4% either way.
default Q6_K avx512 tokens=2-16 kernel=q6k_q8_gemm_avx512_r16_8x16_sbwpf4k
# Q6_K x int8, 17 tokens and more: 8x16_sbpf4k (bench_matmul --preset all --weights Q6_K --threads 2
# --tokens 160,512) beat the default 4x32 on all 10 shapes at both token counts, GMAC/s e.g. 4096x12800
# 300.1 / 305.3 against 238.5 / 254.6, 2048x8192 292.0 / 291.2 against 213.5 / 244.5, 12800x4096 281.5
# / 269.5 against 214.6 / 253.1 (the smallest gain); llama-1b pp512 in bench/journal/2026-11-28-intel-xeon.md
# ("On the Intel Xeon a third time").
# Since the decoded panels: 6x32_panel (the same run as Q4_K's above): 8192x2048 252.4 against 218.8,
# 512x2048 262.9 against 179.1, 2048x8192 266.8 against 259.6, the output matrix 263.6 against 235.9;
# 2048x2048 194.5 against 225.6 (4x48_panel 234.7), the one shape it lost.
default Q6_K avx512 tokens=17+ kernel=q6k_q8_gemm_avx512_r16_6x32_panel
#
# Attention keeps the spec's order of rounded tiles (FP16 P V tiles where AVX512-FP16 runs): BF16 tiles
# lose here (at the avx512 level; where the amx level runs, its BF16 tile products come first:
# codegen/kernels.toml has their figures). `bench_attn --variants` (one thread, head dimension 64, group 4, n_kv 4096, prefill
# GFLOP/s, F16 cache): BF16 16x64 77.0, 32x64 79.5 against F32 16x64 89.3, 32x64 130.3.
# The other int8 formats, one token: 1x64_pf4k as for Q4_K, where it measured ahead. llama-1b in each type
# (woolly bench -p 0 -n 64 -r 2 -t 2, tg64 t/s, three rounds in turns with the spec's 1x16 defaults; the
# medians count on this noisy host):
# Q4_0 34.2 / 43.4 / 41.9 against 32.0 / 39.4 / 39.1, Q8_0 23.4 / 24.1 / 24.3 against 21.9 / 22.2 / 22.5,
# IQ4_NL 42.2 / 42.8 / 33.9 against 34.0 / 35.9 / 33.0, Q4_1 35.8 / 32.2 / 37.5 against 32.2 / 33.4 / 34.4,
# Q5_0 29.2 / 29.1 / 32.8 against 32.5 / 29.4 / 30.8, Q5_1 26.8 / 30.6 / 24.9 against 22.7 / 25.7 / 25.5,
# Q2_K 50.5 / 48.3 / 42.6 against 46.5 / 49.8 / 30.8. Q5_0, behind there, led on 4 of 5 shapes in
# bench_matmul and in 4 of 5 rounds of a second check (medians 28.58 against 26.38). IQ4_XS and Q3_K_M (the
# same runs) and Q5_K (bench_matmul) showed no gain and keep the defaults
# (bench/journal/2026-12-01-intel-xeon-4.md).
default Q8_0 avx512 tokens=1 kernel=q80_q8_gemv_avx512_r16_1x64_pf4k
default Q4_0 avx512 tokens=1 kernel=q40_q8_gemv_avx512_r16_1x64_pf4k
default Q4_1 avx512 tokens=1 kernel=q41_q8_gemv_avx512_r16_1x64_pf4k
default Q5_0 avx512 tokens=1 kernel=q50_q8_gemv_avx512_r16_1x64_pf4k
default Q5_1 avx512 tokens=1 kernel=q51_q8_gemv_avx512_r16_1x64_pf4k
default IQ4_NL avx512 tokens=1 kernel=iq4nl_q8_gemv_avx512_r16_1x64_pf4k
default Q2_K avx512 tokens=1 kernel=q2k_q8_gemv_avx512_r16_1x64_pf4k
# BF16 weights: BF16 activations (as llama.cpp takes them for these weights), so that prompts run on the
# AMX BF16 tiles where the core has them (TDPBF16PS, matmul/amx/float_bf16_tiles.c.j2); on a core
# without AMX, the vdpbf16ps GEMM. One token: the vdpbf16ps GEMV, as DRAM-bound as the F32 one. llama-1b
# in BF16, 2 threads, in turns with llama.cpp (bench/compare.sh, 3 runs): pp512 248.1 +- 42.3 t/s against
# 50.1 for llama.cpp and 52-58 for these weights on F32 activations (the spec's defaults, woolly bench in
# turns), tg128 12.3 against 7.5. 2-16 tokens take the tiles too: 8 tokens on 8192x2048, 64.9 GMAC/s
# against 47.0 for the best vdpbf16ps GEMM, 16 tokens 114.2 against 50.7; 2 tokens, DRAM-bound, 18.7
# against 17.6. The activations' rounding costs tiny-llama in BF16 1.1e-5 of NMSE beside the weights' own
# 1.8e-5 (test_model_logits_bf16.c).
default BF16 avx512 tokens=1 kernel=bf16_bf16_gemv_avx512_1x8
default BF16 avx512 tokens=17+ kernel=bf16_bf16_gemm_avx512_4x6
default BF16 amx tokens=17+ kernel=bf16_bf16_gemm_amx_32x32
# F16 weights, 17 tokens and more, on AMX: three BF16 tile products a step (each operand split into a BF16
# part and what it leaves, matmul/amx/float_bf16_tiles.c.j2), as near F32 as the F32 kernels (NMSE about
# 1e-11 in the generated tests), so the activations stay F32. bench_matmul --preset llama-1b --weights
# F16 --tokens 512 --threads 2: 114-175 GMAC/s on the four shapes against 61-82 for the avx512 level's
# f16_f32_gemm_avx512_4x6 (the arrangement 16x64 behind at 81-117).
default F16 amx tokens=17+ kernel=f16_f32_gemm_amx_32x32_x3
# F16 weights stay on GGUF rows here, which those tiles read: one token, 2-16, and 17+ where the amx level
# does not run, on the row kernels the spec defaulted to before its 16-row layout (f16_r16), which was
# measured on the Zen 5 only.
default F16 avx512 tokens=1 kernel=f16_f32_gemv_avx512_1x12
default F16 avx512 tokens=2-16 kernel=f16_f32_gemm_avx512_4x6
default F16 avx512 tokens=17+ kernel=f16_f32_gemm_avx512_4x6
end 20
