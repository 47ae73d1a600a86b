/* The parts under logprobs and embeddings on their own: srv_logprobs_compute against a full sort and a
 * float64 log-sum-exp (ties, k above the vocabulary, -inf logits), and srv_base64 on RFC 4648's
 * vectors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "embeddings.h"
#include "logprobs.h"

static const float *sort_key;

static int by_logit(const void *a, const void *b)
{
    const int i = *(const int *)a, j = *(const int *)b;
    if (sort_key[i] != sort_key[j])
        return sort_key[i] > sort_key[j] ? -1 : 1;
    return i - j; /* ties: the lower id first */
}

static void check(const float *logits, int n, int tok, int k)
{
    srv_token_lp lp;
    srv_logprobs_compute(logits, n, tok, k, &lp);
    int *order = malloc(sizeof *order * (size_t)n);
    for (int i = 0; i < n; i++)
        order[i] = i;
    sort_key = logits;
    qsort(order, (size_t)n, sizeof *order, by_logit);
    long double mx = -INFINITY, sum = 0.0L;
    for (int i = 0; i < n; i++)
        mx = fmaxl(mx, logits[i]);
    for (int i = 0; i < n; i++)
        sum += expl((long double)logits[i] - mx);
    const double lse = (double)(mx + logl(sum));
    const int want_k = k < n ? k : n;
    cr_assert_eq(lp.n_top, want_k);
    cr_expect_eq(lp.id, tok);
    cr_expect_float_eq(lp.logprob, (float)(logits[tok] - lse), 1e-5);
    for (int i = 0; i < want_k; i++) {
        cr_expect_eq(lp.top[i].id, order[i], "rank %d: %d, expected %d", i, lp.top[i].id, order[i]);
        cr_expect_float_eq(lp.top[i].logprob, (float)(logits[order[i]] - lse), 1e-5);
    }
    free(order);
}

Test(server_logprobs, top_k_equals_a_full_sort)
{
    enum { N = 5000 };
    float *x = malloc(sizeof *x * N);
    srand(7);
    for (int i = 0; i < N; i++)
        x[i] = (float)(rand() % 2000) / 100.0f - 10.0f; /* many ties */
    for (int k = 0; k <= SRV_MAX_TOP_LOGPROBS; k += 5)
        check(x, N, 123, k);
    check(x, 7, 3, 20); /* k above the vocabulary */
    x[10] = -INFINITY;
    check(x, N, 42, 20);
    srv_token_lp lp;
    srv_logprobs_compute(x, N, 10, 3, &lp);
    cr_expect(isinf(lp.logprob) && lp.logprob < 0, "a ruled-out token has probability 0");
    free(x);
}

Test(server_logprobs, base64_rfc4648_vectors)
{
    static const char *const IN[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const OUT[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        srv_buf b = {0};
        cr_assert_eq(srv_base64((const unsigned char *)IN[i], strlen(IN[i]), &b), 0);
        cr_expect_str_eq(b.p ? b.p : "", OUT[i]);
        srv_buf_free(&b);
    }
    const unsigned char high[] = {0xff, 0xfe, 0x80};
    srv_buf b = {0};
    srv_base64(high, 3, &b);
    cr_expect_str_eq(b.p, "//6A");
    srv_buf_free(&b);
}
