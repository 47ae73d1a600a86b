/* Logits against the references, default dispatch through the C API: the phi3 family (fused attn_qkv
 * and gate+up ffn_up bound as views, RoPE on the halves) (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_default_api, tiny_phi3_f16)
{
    check_api_default(model_named("tiny-phi3-f16"));
}
