/* Logits against the references, default dispatch through the C API: the Granite architecture
 * (scales, tied embeddings, a 49152-token vocabulary).
 * One model per executable keeps each test short under the sanitizers (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_default_api, tiny_granite_q4_k_m)
{
    check_api_default(&MODELS[5]);
}
