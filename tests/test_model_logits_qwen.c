/* Logits against the references, default dispatch through the C API: the qwen2 (Q/K/V biases, RoPE on
 * the halves) and qwen3 (per-head Q/K norms, a head dimension that is not n_embd / n_head) families, F16
 * weights and qwen3's Q4_K_M (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_default_api, tiny_qwen2_f16)
{
    check_api_default(model_named("tiny-qwen2-f16"));
}
Test(logits_default_api, tiny_qwen3_f16)
{
    check_api_default(model_named("tiny-qwen3-f16"));
}
Test(logits_default_api, tiny_qwen3_q4_k_m)
{
    check_api_default(model_named("tiny-qwen3-q4_k_m"));
}
