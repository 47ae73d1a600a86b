/* Logits against the references, default dispatch through the C API: Q4_K_M weights (Q4_K and Q6_K matrices).
 * One model per executable keeps each test short under the sanitizers (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_default_api, tiny_llama_q4_k_m)
{
    check_api_default(&MODELS[1]);
}
