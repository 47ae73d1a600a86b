woolly-default-profile 1
class zen4
match x86_64 AuthenticAMD family 25 features avx512f
# AMD Zen 4: family 25 with AVX-512 (Zen 3 is family 25 without it). Not measured: taken as the Zen 5,
# whose measurements set the spec's AVX-512 defaults, with BF16 attention tiles first as there (it has
# AVX512-BF16 too).
attn-rounded bf16,f16,i16
#
# BF16 weights on BF16 activations, as on the Zen 5 (zen5.profile has the figures), which it has the
# instructions for. Not measured on a Zen 4, as the attention tiles above.
default BF16 avx512 tokens=1 kernel=bf16_bf16_gemv_avx512_r16_1x64
default BF16 avx512 tokens=2-16 kernel=bf16_bf16_gemm_avx512_r16_8x32
default BF16 avx512 tokens=17+ kernel=bf16_bf16_gemm_avx512_r16_8x32
end 4
