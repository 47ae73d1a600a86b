/* Logits against the references, default dispatch through the C API: F16 weights.
 * One model per executable keeps each test short under the sanitizers (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_default_api, tiny_llama_f16)
{
    check_api_default(&MODELS[4]);
}
