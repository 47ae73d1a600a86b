woolly-default-profile 1
class zen4
match x86_64 AuthenticAMD family 25 features avx512f
# AMD Zen 4: family 25 with AVX-512 (Zen 3 is family 25 without it). Not measured: taken as the Zen 5,
# whose measurements set the spec's AVX-512 defaults, with BF16 attention tiles first as there (it has
# AVX512-BF16 too).
attn-rounded bf16,f16,i16
end 1
