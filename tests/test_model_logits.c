/* Logits against the references: the reference kernels through `woolly logits` on every model, and
 * the default dispatch through the C API on the smaller models (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_scalar_cli, stories260K)
{
    check_cli_scalar(&MODELS[0]);
}
Test(logits_scalar_cli, tiny_llama_q4_k_m)
{
    check_cli_scalar(&MODELS[1]);
}
Test(logits_scalar_cli, tiny_llama_q6_k)
{
    check_cli_scalar(&MODELS[2]);
}
Test(logits_scalar_cli, tiny_llama_q8_0)
{
    check_cli_scalar(&MODELS[3]);
}
Test(logits_scalar_cli, tiny_llama_f16)
{
    check_cli_scalar(&MODELS[4]);
}
Test(logits_scalar_cli, tiny_granite_q4_k_m)
{
    check_cli_scalar(&MODELS[5]);
}

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
