woolly-default-profile 1
class zen3
match x86_64 AuthenticAMD family 25 lacks avx512f
# AMD Zen 3: family 25 without AVX-512 (Zen 4 is family 25 with it). No overrides: the spec's defaults
# at the AVX2 level were measured on a Zen 3 (2 cores, AVX2 only; codegen/kernels.toml gives the
# figures), but for F16 and BF16 weights', measured at that level on a Zen 5 (their 16-row kernels, not
# yet on a Zen 3), and attention's rounded tiles are the AVX2 level's int16 ones, the spec's order.
end 0
