/* Logits against the references: the default dispatch through the C API on the smaller models
 * (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_default_api, stories260K)
{
    check_api_default(&MODELS[0]);
}
Test(logits_default_api, tiny_llama_q6_k)
{
    check_api_default(&MODELS[2]);
}
Test(logits_default_api, tiny_llama_q8_0)
{
    check_api_default(&MODELS[3]);
}
