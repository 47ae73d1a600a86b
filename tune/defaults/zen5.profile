woolly-default-profile 1
class zen5
match x86_64 AuthenticAMD family 26
# AMD Zen 5. The spec's defaults at the AVX-512 level were measured on this class (the project's
# machine, family 26, 2 cores: codegen/kernels.toml gives the figures), so its matrix kernels are the
# spec's. Some of Intel's choices were not measured here: Q4_K's small-batch 8x16_sbpf4k (the default
# 8x16_sbpf2k was measured against the others, not against it), Q6_K's 8x16_sbpf4k for 17 tokens and
# more and its wide 8x16_sbwpf4k for 2-16.
#
# Attention: BF16 tiles first, ahead of F32 ones by far. `bench_attn --variants` (one thread, head
# dimension 64, group 4, n_kv 4096, prefill GFLOP/s, one run), 32x64 tiles: F16 cache 266.8 BF16 against
# 157.2 F32, 16x64 260.1 against 152.2; Q8_0 cache 265.7 and 251.5.
attn-rounded bf16,f16,i16
end 1
