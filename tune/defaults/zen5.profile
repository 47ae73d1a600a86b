woolly-default-profile 1
class zen5
match x86_64 AuthenticAMD family 26
# AMD Zen 5. The spec's defaults at the AVX-512 level were measured on this class (the project's
# machine, family 26, 2 cores: codegen/kernels.toml gives the figures), so its matrix kernels are the
# spec's but one: Q4_K's small-batch tile (below). Q6_K on decoded panels for 17 tokens and more was
# measured here and did not pay (bench/journal/2026-12-02-zen5.md).
#
# Attention: BF16 tiles first, ahead of F32 ones by far. `bench_attn --variants` (one thread, head
# dimension 64, group 4, n_kv 4096, prefill GFLOP/s, one run), 32x64 tiles: F16 cache 266.8 BF16 against
# 157.2 F32, 16x64 260.1 against 152.2; Q8_0 cache 265.7 and 251.5.
attn-rounded bf16,f16,i16
#
# Q4_K for 2-16 tokens (a server step, a speculative verification): Intel's 8x16 with the weights
# streamed 4 KiB ahead, not the spec's 2 KiB. `woolly bench -m llama-1b.gguf -p N -n 0 -r 10 -t 2`
# (Q4_K_M), two runs of four rounds in turns, t/s, spec's 8x16_sbpf2k against 8x16_sbpf4k, medians:
# pp2 144.1 / 166.3 and 162.2 / 171.3, pp4 227.4 / 245.0 and 246.4 / 273.8, pp8 330.9 / 353.7 and
# 353.4 / 388.3, pp16 371.5 / 384.6 and 405.3 / 435.1. Intel's pair (Q4_K and Q6_K on the wide
# 8x16_sbwpf4k) lost at 2 tokens (129.6 against 144.1); Q6_K on 8x16_sbwpf4k beside this Q4_K tile lost
# at 2 and 16 tokens (163.6 and 419.9 against 171.3 and 435.1), so Q6_K keeps the spec's 8x16_sbpf4k.
default Q4_K avx512 tokens=2-16 kernel=q4k_q8_gemm_avx512_r16_8x16_sbpf4k
end 2
