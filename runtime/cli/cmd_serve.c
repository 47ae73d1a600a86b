/* woolly serve: the OpenAI-compatible HTTP server (runtime/server/). Listens first (/health says
 * "loading" while the model loads), loads the model and opens the slots, prints the address it listens
 * on (stdout, one line, for scripts: from then on requests are served) and serves until SIGINT or
 * SIGTERM. Then it drains: no new connections, /health says "draining", the requests in flight finish
 * (at most --drain-timeout seconds, or until a second signal), and what is left ends with a clean error;
 * every connection closes, everything is freed, and the exit status is 0. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"
#include "cli_common.h"
#include "cli_spec.h"
#include "cli_template.h"
#include "commands.h"
#include "server.h"

/* The model's name in the API: the file name without its folder and ".gguf". */
static void model_id_of(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(out, cap, "%s", base);
    const size_t n = strlen(out);
    if (n > 5 && !strcmp(out + n - 5, ".gguf"))
        out[n - 5] = 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* After the first stop signal: waits for the requests in flight, at most timeout_s seconds, or until
 * a second signal. */
static void drain(const char *cmd, woolly_server *s, const sigset_t *stop_signals, int timeout_s)
{
    const double until = now_s() + timeout_s;
    const struct timespec tick = {0, 50 * 1000000L};
    int left = woolly_server_in_flight(s);
    fprintf(stderr, "woolly %s: draining: %d requests in flight, waiting at most %d s\n", cmd, left, timeout_s);
    while ((left = woolly_server_in_flight(s)) > 0) {
        if (now_s() >= until) {
            fprintf(stderr, "woolly %s: the drain timeout passed: %d requests end with an error\n", cmd, left);
            return;
        }
        const int sig = sigtimedwait(stop_signals, NULL, &tick);
        if (sig > 0) {
            fprintf(stderr, "woolly %s: a second %s: %d requests end with an error\n", cmd,
                    sig == SIGINT ? "SIGINT" : "SIGTERM", left);
            return;
        }
    }
}

int woolly_cmd_serve(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL, *alias = NULL, *api_key = NULL;
    woolly_server_config sc = woolly_server_default_config();
    int drain_timeout = 30;
    int64_t max_body = (int64_t)sc.max_body, max_header = (int64_t)sc.max_header;
    cli_context_opts ctx_opts;
    cli_sampling_opts samp;
    cli_spec_opts spec;
    cli_table t = {
        .synopsis = "-m MODEL [--host ADDR] [--port N] [--parallel N] [options]",
        .about = "Serves the model over HTTP with the OpenAI API: POST /v1/chat/completions, POST "
                 "/v1/completions,\n"
                 "GET /v1/models, and GET /health, POST /tokenize, POST /detokenize, GET /metrics.\n"
                 "The sampling flags set the defaults of the requests' sampling fields.\n",
    };
    cli_add_model_flag(&t, &model_path);
    cli_add(&t, (cli_flag){NULL, "--host", CLI_STR, &sc.host, 0, 0, "ADDR",
                           "address to listen on (default 127.0.0.1: this machine only)", NULL});
    cli_add(&t, (cli_flag){NULL, "--port", CLI_INT, &sc.port, 0, 65535, "N",
                           "port (default 8080; 0: any free port, printed)", NULL});
    cli_add(&t, (cli_flag){NULL, "--alias", CLI_STR, &alias, 0, 0, "NAME",
                           "the model's name in the API (default: the file name without .gguf)", NULL});
    cli_add(&t, (cli_flag){"-np", "--parallel", CLI_INT, &sc.parallel, 1, 256, "N",
                           "requests served at once, each in its own slot (default: what fits in memory, at "
                           "most 4)",
                           NULL});
    cli_add(&t,
            (cli_flag){NULL, "--queue", CLI_INT, &sc.queue, 0, 1 << 16, "N",
                       "requests that may wait for a slot; past them the answer is 503 (default 32)", NULL});
    cli_add(&t, (cli_flag){NULL, "--api-key", CLI_STR, &api_key, 0, 0, "KEY",
                           "require 'Authorization: Bearer KEY' on every endpoint but /health (default: "
                           "$WOOLLY_API_KEY, else none)",
                           NULL});
    cli_add(&t, (cli_flag){NULL, "--max-body", CLI_I64, &max_body, 1024, 1 << 30, "BYTES",
                           "largest request body; larger ones get 413 (default 1048576)", NULL});
    cli_add(&t, (cli_flag){NULL, "--max-header", CLI_I64, &max_header, 4096, 1 << 20, "BYTES",
                           "largest request line and headers (default 65536)", NULL});
    cli_add(&t, (cli_flag){NULL, "--max-tokens", CLI_INT, &sc.max_tokens, 1, 1 << 24, "N",
                           "the most tokens one request generates, asked for or not (default: the context size)", NULL});
    cli_add(&t, (cli_flag){NULL, "--timeout", CLI_INT, &sc.timeout_s, 1, 86400, "S",
                           "close connections idle for S seconds (default 60)", NULL});
    cli_add(&t, (cli_flag){NULL, "--max-connections", CLI_INT, &sc.max_connections, 1, 65536, "N",
                           "open connections at most (default 128)", NULL});
    cli_add(&t, (cli_flag){NULL, "--max-connections-per-address", CLI_INT, &sc.max_per_address, 0, 65536, "N",
                           "open connections from one client address at most (default 32; 0: no limit; "
                           "behind a load balancer: 0)",
                           NULL});
    cli_add(&t, (cli_flag){NULL, "--head-timeout", CLI_INT, &sc.head_timeout_s, 0, 86400, "S",
                           "close a connection whose request line and headers are not complete within S "
                           "seconds (default 10; 0: no deadline)",
                           NULL});
    cli_add(&t, (cli_flag){NULL, "--drain-timeout", CLI_INT, &drain_timeout, 0, 86400, "S",
                           "after SIGTERM or SIGINT, wait at most S seconds for the requests in flight "
                           "(default 30; a second signal ends the wait)",
                           NULL});
    cli_add(&t, (cli_flag){NULL, "--affinity-header", CLI_STR, &sc.affinity_header, 0, 0, "NAME",
                           "the header that names a conversation, for a load balancer to hash on (default "
                           "X-Session-Id)",
                           NULL});
    cli_add(&t, (cli_flag){NULL, "--replica", CLI_STR, &sc.replica, 0, 0, "NAME",
                           "this replica's name in /metrics (default: host name:port) and, given, in each "
                           "response's X-Woolly-Replica header", NULL});
    cli_add(&t, (cli_flag){NULL, "--context-shift", CLI_BOOL, &sc.context_shift, 0, 0, NULL,
                           "when a request's context is full, forget the oldest half of what follows its "
                           "system message (or the request's n_keep tokens) and go on, instead of ending it "
                           "with finish_reason \"length\"",
                           NULL});
    cli_template_opts tmpl_opts;
    cli_add_template_flags(&t, &tmpl_opts, "the chat format (default: recognized from the model)");
    cli_add_sampling_flags(&t, &samp);
    cli_add_context_flags(&t, &ctx_opts);
    cli_add_spec_flags(&t, &spec);
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    bool bad_spec;
    const bool speculate = cli_spec_wanted(cmd, &spec, sc.context_shift, &bad_spec);
    if (bad_spec)
        return 2;
    sc.lookup = spec.lookup;
    sc.draft_max = spec.draft_max;
    /* For the tests of speculation: guesses at every step, whatever they cost or how few are kept. */
    const char *fixed = getenv("WOOLLY_TEST_SPEC_FIXED");
    sc.draft_fixed = fixed && atoi(fixed) > 0;
    const char *key_from = "--api-key";
    if (!api_key && (api_key = getenv("WOOLLY_API_KEY")))
        key_from = "WOOLLY_API_KEY";
    if (api_key && !*api_key) { /* an empty key would silently turn authentication off */
        fprintf(stderr,
                "woolly %s: %s is empty: give a key, or leave %s out to serve without one\n", cmd, key_from,
                key_from);
        return 2;
    }
    char id[256];
    model_id_of(model_path, id, sizeof id);
    sc.model_id = alias ? alias : id;
    sc.api_key = api_key;
    sc.max_body = (size_t)max_body;
    sc.max_header = (size_t)max_header;
    if (cli_sampling_finish(cmd, &samp, false))
        return 2;
    sc.defaults = samp.p;
    sc.fixed_seed = samp.seed_given > 0;
    sc.bias_ids = samp.bias_id;
    sc.bias = samp.bias;
    sc.n_bias = samp.n_bias;
    char *tmpl_text = NULL;
    if (!cli_template_finish(cmd, &tmpl_opts, &sc.chat_family, &tmpl_text))
        return 2;
    sc.chat_template = tmpl_text;

    /* The signals are taken by sigwait below: blocked here, before any thread starts, in every thread. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that left is noticed by the write's error instead */

    const char *bracket_l = strchr(sc.host, ':') ? "[" : "", *bracket_r = strchr(sc.host, ':') ? "]" : "";
    woolly_error err = {{0}};
    woolly_server *s = woolly_server_listen(&sc, &err);
    if (!s) {
        fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
        free(tmpl_text);
        return 1;
    }
    const int port = woolly_server_port(s);
    fprintf(stderr, "woolly %s: http://%s%s%s:%d answers /health with \"loading\" while the model loads\n", cmd,
            bracket_l, sc.host, bracket_r, port);
    /* For the tests of the loading state: a model this small loads before anyone could ask. */
    const char *delay = getenv("WOOLLY_TEST_SERVE_LOAD_DELAY_MS");
    if (delay && atoi(delay) > 0)
        nanosleep(&(struct timespec){atoi(delay) / 1000, (atoi(delay) % 1000) * 1000000L}, NULL);
    woolly_model *m = cli_open_model(cmd, model_path, &ctx_opts, NULL);
    if (!m) {
        woolly_server_close(s);
        free(tmpl_text);
        return 1;
    }
    sc.model = m;
    cli_context_params(cmd, &ctx_opts, m, &sc.ctx);
    woolly_model *dm = NULL;
    if (speculate && spec.draft && !(dm = sc.draft = cli_open_model(cmd, spec.draft, NULL, NULL))) {
        woolly_server_close(s);
        woolly_model_close(m);
        free(tmpl_text);
        return 1;
    }
    if (woolly_server_start(s, &sc, &err)) {
        fprintf(stderr, "woolly %s: %s%s%s%s\n", cmd, dm ? "--draft " : "", dm ? spec.draft : "",
                dm ? ": " : "", err.msg);
        woolly_server_close(s);
        woolly_model_close(dm);
        woolly_model_close(m);
        free(tmpl_text);
        return 1;
    }
    fprintf(stderr, "woolly %s: model '%s', %d slots of %d tokens, %d threads%s\n", cmd, sc.model_id,
            woolly_server_parallel(s), (int)woolly_server_n_ctx(s), ctx_opts.n_threads,
            sc.api_key && *sc.api_key ? ", API key required" : "");
    printf("listening on http://%s%s%s:%d\n", bracket_l, sc.host, bracket_r, port);
    fflush(stdout);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    fprintf(stderr, "woolly %s: %s: shutting down\n", cmd, sig == SIGINT ? "SIGINT" : "SIGTERM");
    woolly_server_drain(s);
    drain(cmd, s, &stop_signals, drain_timeout);
    woolly_server_close(s);
    woolly_model_close(dm);
    woolly_model_close(m);
    free(tmpl_text);
    return 0;
}
