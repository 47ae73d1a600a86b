/* Logits against the references, default dispatch through the C API: the gemma3 family (scaled
 * embeddings, Q/K norms, post-norms, a GELU-gated FFN, sliding-window layers with their own RoPE base,
 * a sequence longer than the window) (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_default_api, tiny_gemma3_f16)
{
    check_api_default(model_named("tiny-gemma3-f16"));
}
