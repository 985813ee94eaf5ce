/* sictl: command-line client of selectinferd.
 *
 * Exit status (sysexits.h where one fits):
 *   0   success
 *   1   the daemon answered with an error not listed below
 *   64  usage error
 *   65  the request was invalid (INVALID_ARGUMENT, PROMPT_TOO_LONG)
 *   69  the daemon is not reachable, or its model failed to load
 *   75  temporary: OVERLOADED, SHUTTING_DOWN, TOO_MANY_CONNECTIONS; retry later
 *   76  protocol error or connection lost
 *   77  permission denied (admin operations)
 *   130 interrupted (Ctrl-C cancelled the generation)
 */
#include "selectinfer-client.h"
#include "pb-json.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    EXIT_DAEMON_ERROR = 1,
    EXIT_USAGE = 64,
    EXIT_DATAERR = 65,
    EXIT_UNAVAILABLE = 69,
    EXIT_TEMPFAIL = 75,
    EXIT_PROTOCOL = 76,
    EXIT_NOPERM = 77,
    EXIT_INTERRUPTED = 130,
};

static struct {
    const char *socket;
    bool json;
    int timeout_ms;
} opt = {.timeout_ms = -1};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: sictl [--socket PATH] [--json] [--timeout SEC] COMMAND [ARGS]\n"
        "\n"
        "Commands:\n"
        "  generate [OPTIONS] TEXT...  send TEXT as a user message and stream the answer\n"
        "                              (TEXT \"-\": read it from stdin; after \"--\" every\n"
        "                              argument is text, \"-v\" too)\n"
        "  chat [OPTIONS]              interactive chat (/reset forgets, /exit quits; with\n"
        "                              --tools, each call's result is asked for in turn)\n"
        "  tokenize [OPTIONS] TEXT...  the tokens generate would evaluate: count and ids\n"
        "                              (--raw, --parse-special, --system, --no-think and\n"
        "                              --tools and \"--\" as for generate; --pieces: each\n"
        "                              token's text)\n"
        "  embed [OPTIONS] TEXT...     one embedding per TEXT (\"-\": one per line of stdin),\n"
        "                              printed as a JSON array per line; --pooling mean|last,\n"
        "                              --no-normalize, --no-truncate, --parse-special, --stats\n"
        "                              (after \"--\" every argument is an input)\n"
        "  status                      model, backend, memory, profile, queue, counters\n"
        "  profiles                    list the tasks of the daemon's profile (* active)\n"
        "  use TASK [OPTIONS]          hot-swap to TASK (\"dense\": load everything) (admin)\n"
        "  reload                      re-read the daemon's configuration (admin)\n"
        "  shutdown                    stop the daemon (admin)\n"
        "\n"
        "Generate and chat options:\n"
        "  --raw                 TEXT is a raw prompt, not a chat message\n"
        "  --parse-special       raw prompt: \"<|im_start|>\" etc. become control tokens\n"
        "  --system TEXT         a system message first\n"
        "  --max-tokens N (-n N)  --temperature T  --top-k N  --top-p P  --min-p P\n"
        "  --repeat-penalty R  --repeat-last-n N  --seed N  --stop STRING (repeatable)\n"
        "  --frequency-penalty F  --presence-penalty F  (OpenAI's, in [-2, 2])\n"
        "  --logit-bias ID:BIAS  add BIAS (-100..100) to token ID's logit (repeatable)\n"
        "  --task NAME  --phi F  --alpha F  --no-stream  --stats (statistics on stderr)\n"
        "  --format json         the answer is one JSON object (ask for JSON in the text too)\n"
        "  --format SCHEMA       ... one matching this JSON Schema (\"$(cat schema.json)\";\n"
        "                        docs/protocol.md lists the keywords followed)\n"
        "  --tools JSON          functions the model may call (\"$(cat tools.json)\": a JSON\n"
        "                        array, OpenAI's form; Qwen2.5, Qwen3, Llama 3.1+, Granite 4,\n"
        "                        EXAONE 4);\n"
        "                        each call is printed after the answer as\n"
        "                        \"tool call: NAME ARGS\"\n"        "  --no-think            a model with a thinking switch (Qwen3, SmolLM3) answers\n"
        "                        without reasoning first\n"
        "  --logprobs N          after the answer, each token's log-probability and the N\n"
        "                        (0-20) most likely tokens at its step, on stderr\n"
        "  --no-cache            evaluate the whole prompt (default: reuse the prefix the\n"
        "                        daemon holds from the request before)\n"
        "  --no-shift            stop when the context is full (default: drop the older half\n"
        "                        of the conversation after its system messages and go on)\n"
        "  --no-truncate         a chat too long for the context is refused (default: its\n"
        "                        oldest turns are left out, system messages kept)\n"
        "\n"
        "Use options: --profile PATH (another profile file)  --mode MODE  --gamma G\n"
        "  --delta D  --phi P (new default)  --dense-first N  --dense-last N  --budget BYTES\n"
        "\n"
        "The socket: --socket, else $" SI_SOCKET_ENV ", else " SI_SOCKET_SYSTEM "\n"
        "(or $XDG_RUNTIME_DIR/selectinfer.sock for non-root users when that is absent).\n"
        "--json prints every reply as one JSON object per line.\n"
        "Exit status: 0 ok, 1 daemon error, 64 usage, 65 invalid request, 69 unreachable,\n"
        "75 try again later, 76 protocol error, 77 permission denied, 130 interrupted.\n");
}

static int exit_for_error(int code)
{
    switch (code) {
    case SELECTINFER__ERROR_CODE__INVALID_ARGUMENT:
    case SELECTINFER__ERROR_CODE__PROMPT_TOO_LONG:
        return EXIT_DATAERR;
    case SELECTINFER__ERROR_CODE__NOT_READY:
        return EXIT_UNAVAILABLE;
    case SELECTINFER__ERROR_CODE__OVERLOADED:
    case SELECTINFER__ERROR_CODE__SHUTTING_DOWN:
    case SELECTINFER__ERROR_CODE__TOO_MANY_CONNECTIONS:
        return EXIT_TEMPFAIL;
    case SELECTINFER__ERROR_CODE__PERMISSION_DENIED:
        return EXIT_NOPERM;
    case SELECTINFER__ERROR_CODE__FRAME_TOO_LARGE:
    case SELECTINFER__ERROR_CODE__MALFORMED_FRAME:
        return EXIT_PROTOCOL;
    default:
        return EXIT_DAEMON_ERROR;
    }
}

static int report_error(const Selectinfer__Response *r)
{
    const Selectinfer__Error *e = r->error;
    int code = e && e->has_code ? (int)e->code : 0;
    if (opt.json) {
        si_json_message(stdout, &r->base);
        fputc('\n', stdout);
        fflush(stdout);
    }
    fprintf(stderr, "sictl: %s: %s\n", si_error_code_name(code), e && e->message ? e->message : "");
    return exit_for_error(code);
}

static int transport_error(int rc)
{
    if (rc == -ETIMEDOUT)
        fprintf(stderr, "sictl: no reply from the daemon within the timeout\n");
    else
        fprintf(stderr, "sictl: connection to the daemon lost: %s\n", strerror(-rc));
    return EXIT_PROTOCOL;
}

static int connect_daemon(si_client **ret)
{
    char path[256];
    const char *p = opt.socket;
    if (!p) {
        int rc = si_socket_default(path, sizeof(path));
        if (rc < 0) {
            fprintf(stderr, "sictl: no socket: pass --socket or set " SI_SOCKET_ENV "\n");
            return EXIT_UNAVAILABLE;
        }
        p = path;
    }
    int rc = si_client_connect(p, ret);
    if (rc < 0) {
        fprintf(stderr, "sictl: cannot connect to %s: %s\n", p, strerror(-rc));
        return rc == -EACCES ? EXIT_NOPERM : EXIT_UNAVAILABLE;
    }
    return 0;
}

/* ---- simple requests --------------------------------------------------- */

static void print_status(const Selectinfer__Status *s)
{
    double mib = 1024.0 * 1024.0;
    printf("state:            %s\n", si_state_name(s->has_state ? (int)s->state : 0));
    if (s->load_error)
        printf("load error:       %s\n", s->load_error);
    printf("version:          %s (protocol %u)\n", s->version ? s->version : "?", s->protocol_version);
    printf("model:            %s\n", s->model_path ? s->model_path : "");
    if (s->model_arch)
        printf("model name:       %s (%s, %.1f M parameters)\n", s->model_name ? s->model_name : "",
               s->model_arch, (double)s->model_params / 1e6);
    if (s->has_experts && s->has_shared_expert_ff)
        printf("experts:          %u a layer, %u of them per token, and a shared one of %u "
               "neurons\n", s->experts, s->experts_used, s->shared_expert_ff);
    else if (s->has_experts)
        printf("experts:          %u a layer, %u of them per token\n", s->experts,
               s->experts_used);
    if (s->has_ssm_layers)
        printf("recurrent layers: %u (Mamba-2 or delta nets: a state each, in the KV "
               "cache's bytes)\n", s->ssm_layers);
    if (s->has_shared_kv_layers)
        printf("shared caches:    %u layers attend over an earlier layer's keys and values\n",
               s->shared_kv_layers);
    if (s->has_per_layer_embd)
        printf("per-layer embd:   %u a layer, its table read from the model file as tokens "
               "come\n", s->per_layer_embd);
    if (s->backend)
        printf("backend:          %s, %u threads, context %u\n", s->backend, s->n_threads, s->n_ctx);
    if (s->decode_graphs) {
        const Selectinfer__DecodeGraphs *g = s->decode_graphs;
        printf("decode graphs:    %s, %llu steps (%llu replayed), %llu built, %llu fallbacks\n",
               g->enabled ? "on" : "off", (unsigned long long)g->steps,
               (unsigned long long)g->replayed, (unsigned long long)g->instantiated,
               (unsigned long long)g->fallbacks);
    }
    if (s->has_weight_bytes)
        printf("weights:          %.1f MiB%s%s%s\n", (double)s->weight_bytes / mib,
               s->weight_type ? " (FFN in " : "", s->weight_type ? s->weight_type : "",
               s->weight_type ? ")" : "");
    if (s->kv_cache_type)
        printf("KV cache:         %.1f MiB in %s (%u slot%s of %u tokens)\n",
               (double)s->kv_bytes / mib, s->kv_cache_type, s->slots, s->slots == 1 ? "" : "s",
               s->n_ctx);
    printf("resident memory:  %.1f MiB\n", (double)s->rss_bytes / mib);
    if (s->profile) {
        const Selectinfer__ProfileInfo *p = s->profile;
        printf("profile:          %s, mode %s (gamma %.2f, delta %.2f", p->name ? p->name : "",
               p->mode ? p->mode : "?", (double)p->gamma, (double)p->delta);
        /* a dense plan sparsifies nothing: its dense ends say nothing */
        if (!p->mode || strcmp(p->mode, "dense") != 0)
            printf(", layers dense %u + %u", p->dense_first, p->dense_last);
        printf(")\n");
        if (p->path && p->path[0])
            printf("profile file:     %s\n", p->path);
        printf("FFN neurons:      %llu of %llu loaded; requests compute phi %.2f (0: all loaded), "
               "alpha %.2f, rank %s, picked per %s\n", (unsigned long long)p->neurons_loaded,
               (unsigned long long)p->neurons_total, (double)p->phi, (double)p->alpha,
               p->rank ? p->rank : "?",
               !p->pick                       ? "request"
               : strcmp(p->pick, "exact") == 0 ? "token (exact)"
                                              : p->pick);
        if (p->pick && strcmp(p->pick, "exact") == 0 && p->has_candidates && p->candidates > 0)
            printf("exact pick among: %.2f of the FFN neurons, chosen per request\n",
                   (double)p->candidates);
        if (p->comp && strcmp(p->comp, "linear") == 0)
            printf("left out:         a linear map of each layer's input, fitted on the prompt, "
                   "added (comp)\n");
        else if (p->comp && strcmp(p->comp, "none") != 0)
            printf("left out:         %s activation of the prompt added (comp)\n", p->comp);
    }
    if (s->has_load_ns)
        printf("cold start:       %.1f ms\n", (double)s->load_ns / 1e6);
    if (s->last_swap) {
        const Selectinfer__SwapStats *w = s->last_swap;
        printf("last swap:        %s -> %s in %.1f ms, %llu neurons in, %llu out\n", w->from_task ? w->from_task : "",
               w->to_task ? w->to_task : "", (double)w->swap_ns / 1e6, (unsigned long long)w->neurons_in,
               (unsigned long long)w->neurons_out);
    }
    printf("queue:            %u waiting of %u, %u running\n", s->queue_length, s->queue_capacity, s->running);
    printf("connections:      %u\n", s->connections);
    printf("requests:         %llu served, %llu failed, %llu cancelled, %llu refused (overloaded)\n",
           (unsigned long long)s->requests_served, (unsigned long long)s->requests_failed,
           (unsigned long long)s->requests_cancelled, (unsigned long long)s->rejected_overloaded);
    printf("tokens:           %llu prompt (%llu of them cached), %llu generated\n",
           (unsigned long long)s->prompt_tokens, (unsigned long long)s->cached_tokens,
           (unsigned long long)s->generated_tokens);
    if (s->has_slots && s->slots > 1) {
        /* the prompt cache's contexts: what each holds for reuse */
        printf("context slots:    %u, holding", s->slots);
        for (size_t i = 0; i < s->n_slot_tokens; i++)
            printf("%s %u", i ? "," : "", s->slot_tokens[i]);
        printf(" tokens\n");
    }
    uint64_t copies = 0;
    for (size_t i = 0; i < s->n_slot_copy_bytes; i++)
        copies += s->slot_copy_bytes[i];
    if (copies > 0) {
        /* each context's contiguous copy of its dynamic neurons (copy_dynamic) */
        printf("dynamic copies:   %.1f MiB (", (double)copies / (1 << 20));
        for (size_t i = 0; i < s->n_slot_copy_bytes; i++)
            printf("%s%.1f", i ? ", " : "", (double)s->slot_copy_bytes[i] / (1 << 20));
        printf(" by slot)\n");
    }
    printf("swaps, reloads:   %llu (%llu failed; task switch: %s), %llu\n", (unsigned long long)s->swaps,
           (unsigned long long)s->swaps_failed, s->task_switch ? s->task_switch : "?",
           (unsigned long long)s->reloads);
    printf("clients dropped:  %llu\n", (unsigned long long)s->clients_dropped);
    printf("uptime:           %.1f s\n", (double)s->uptime_ns / 1e9);
}

static bool embed_stats; /* sictl embed --stats */

static int simple_call(Selectinfer__Request *req);

/* One request, its reply printed. wait_ms: the timeout without --timeout
 * (-1: none). */
static int call_and_print(Selectinfer__Request *req, int wait_ms)
{
    si_client *c;
    int rc = connect_daemon(&c);
    if (rc)
        return rc;
    Selectinfer__Response *r;
    rc = si_client_call(c, req, opt.timeout_ms >= 0 ? opt.timeout_ms : wait_ms, &r);
    si_client_close(c);
    if (rc < 0)
        return transport_error(rc);
    int ret = 0;
    if (r->body_case == SELECTINFER__RESPONSE__BODY_ERROR) {
        ret = report_error(r);
    } else if (opt.json) {
        si_json_message(stdout, &r->base);
        fputc('\n', stdout);
    } else if (r->body_case == SELECTINFER__RESPONSE__BODY_STATUS) {
        print_status(r->status);
    } else if (r->body_case == SELECTINFER__RESPONSE__BODY_PROFILES) {
        for (size_t i = 0; i < r->profiles->n_profiles; i++) {
            const Selectinfer__ProfileInfo *p = r->profiles->profiles[i];
            printf("%c %-16s mode %-11s gamma %.2f delta %.2f phi %.2f", p->active ? '*' : ' ',
                   p->name ? p->name : "", p->mode ? p->mode : "-", (double)p->gamma, (double)p->delta,
                   (double)p->phi);
            if (p->has_n_prompts)
                printf(" (%llu prompts)", (unsigned long long)p->n_prompts);
            printf("\n");
        }
    } else if (r->body_case == SELECTINFER__RESPONSE__BODY_TOKENS) {
        const Selectinfer__Tokens *t = r->tokens;
        printf("%zu tokens (context %u)\n", t->n_ids, t->n_ctx);
        if (t->n_pieces == t->n_ids && t->n_ids > 0) {
            /* id, then the piece as a JSON string: control bytes and
             * partial UTF-8 stay readable */
            for (size_t i = 0; i < t->n_ids; i++) {
                printf("%d\t", t->ids[i]);
                si_json_string(stdout, (const char *)t->pieces[i].data, t->pieces[i].len);
                printf("\n");
            }
        } else {
            for (size_t i = 0; i < t->n_ids; i++)
                printf("%s%d", i ? " " : "", t->ids[i]);
            if (t->n_ids)
                printf("\n");
        }
    } else if (r->body_case == SELECTINFER__RESPONSE__BODY_EMBEDDINGS) {
        const Selectinfer__Embeddings *em = r->embeddings;
        for (size_t i = 0; i < em->n_embeddings; i++) {
            const Selectinfer__Embedding *e = em->embeddings[i];
            for (size_t j = 0; j < e->n_values; j++)
                printf("%s%.7g", j ? ", " : "[", (double)e->values[j]);
            printf("]\n");
        }
        if (embed_stats)
            fprintf(stderr, "%zu embeddings of %zu values: %u tokens (%u inputs truncated) in %.1f ms, queued %.1f ms; %s\n",
                    em->n_embeddings, em->n_embeddings ? em->embeddings[0]->n_values : 0, em->prompt_tokens,
                    em->truncated, (double)em->embed_ns / 1e6, (double)em->queue_ns / 1e6,
                    em->profile ? em->profile : "");
    } else if (r->body_case == SELECTINFER__RESPONSE__BODY_DONE) {
        /* an embed that was cancelled (the daemon shutting down) */
        fprintf(stderr, "sictl: cancelled\n");
        ret = EXIT_DAEMON_ERROR;
    } else if (r->body_case == SELECTINFER__RESPONSE__BODY_ACK) {
        printf("%s\n", r->ack->message ? r->ack->message : "ok");
        const Selectinfer__SwapStats *w = r->ack->swap;
        if (w && w->swap_ns > 0)
            printf("swap %.1f ms vs cold start %.1f ms (%.0fx faster); %.1f MiB of weights resident\n",
                   (double)w->swap_ns / 1e6, (double)w->load_ns / 1e6, (double)w->load_ns / (double)w->swap_ns,
                   (double)w->weight_bytes / (1024.0 * 1024.0));
    }
    si_response_free(r);
    return ret;
}

/* ---- generate and chat -------------------------------------------------- */

typedef struct gen_opts {
    bool raw, parse_special, no_stream, stats, no_cache, no_truncate, no_think, no_shift;
    const char *system, *task, *format, *tools;
    Selectinfer__Sampling sampling;
    bool has_sampling;
    uint32_t max_tokens;
    bool has_phi, has_alpha;
    float phi, alpha;
    int logprobs; /* -1: none; else alternatives per token */
    char *stop[16];
    size_t n_stop;
    Selectinfer__LogitBias bias[64];
    Selectinfer__LogitBias *bias_p[64];
    size_t n_bias;
} gen_opts;

static bool parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > max)
        return false;
    *ret = v;
    return true;
}

static bool parse_f(const char *s, float *ret)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return false;
    *ret = v;
    return true;
}

/* Parses one generate option at argv[*i]; returns 1 consumed, 0 not an
 * option of ours, -1 bad value. */
static int parse_gen_opt(gen_opts *g, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    uint64_t u;
    Selectinfer__Sampling *s = &g->sampling;
    if (!strcmp(a, "-n"))
        a = "--max-tokens"; /* llama.cpp's and si-generate's short form */
    if (!strcmp(a, "--raw")) { g->raw = true; return 1; }
    if (!strcmp(a, "--parse-special")) { g->parse_special = true; return 1; }
    if (!strcmp(a, "--no-stream")) { g->no_stream = true; return 1; }
    if (!strcmp(a, "--stats")) { g->stats = true; return 1; }
    if (!strcmp(a, "--no-cache")) { g->no_cache = true; return 1; }
    if (!strcmp(a, "--no-truncate")) { g->no_truncate = true; return 1; }
    if (!strcmp(a, "--no-shift")) { g->no_shift = true; return 1; }
    if (!strcmp(a, "--no-think")) { g->no_think = true; return 1; }
    static const char *with_value[] = {"--system", "--task", "--format", "--tools", "--logprobs", "--max-tokens", "--temperature", "--top-k",
        "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--seed", "--stop", "--phi", "--alpha",
        "--frequency-penalty", "--presence-penalty", "--logit-bias"};
    bool known = false;
    for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++)
        known |= !strcmp(a, with_value[k]);
    if (!known)
        return 0;
    if (!v) {
        fprintf(stderr, "sictl: %s needs a value\n", a);
        return -1;
    }
    (*i)++;
    bool ok = true, samp = true;
    u = 0;
    if (!strcmp(a, "--system")) samp = false, g->system = v;
    else if (!strcmp(a, "--task")) samp = false, g->task = v;
    else if (!strcmp(a, "--format")) samp = false, g->format = v;
    else if (!strcmp(a, "--tools")) samp = false, g->tools = v;
    else if (!strcmp(a, "--logprobs")) {
        samp = false;
        ok = parse_u64(v, 20, &u);
        g->logprobs = (int)u;
    }
    else if (!strcmp(a, "--max-tokens")) {
        samp = false;
        ok = parse_u64(v, UINT32_MAX, &u);
        g->max_tokens = (uint32_t)u;
    } else if (!strcmp(a, "--temperature")) ok = (s->has_temperature = parse_f(v, &s->temperature));
    else if (!strcmp(a, "--top-k")) {
        ok = (s->has_top_k = parse_u64(v, UINT32_MAX, &u));
        s->top_k = (uint32_t)u;
    } else if (!strcmp(a, "--top-p")) ok = (s->has_top_p = parse_f(v, &s->top_p));
    else if (!strcmp(a, "--min-p")) ok = (s->has_min_p = parse_f(v, &s->min_p));
    else if (!strcmp(a, "--repeat-penalty")) ok = (s->has_repeat_penalty = parse_f(v, &s->repeat_penalty));
    else if (!strcmp(a, "--frequency-penalty")) ok = (s->has_frequency_penalty = parse_f(v, &s->frequency_penalty));
    else if (!strcmp(a, "--presence-penalty")) ok = (s->has_presence_penalty = parse_f(v, &s->presence_penalty));
    else if (!strcmp(a, "--repeat-last-n")) {
        ok = (s->has_repeat_last_n = parse_u64(v, UINT32_MAX, &u));
        s->repeat_last_n = (uint32_t)u;
    } else if (!strcmp(a, "--seed")) {
        ok = (s->has_seed = parse_u64(v, UINT64_MAX, &u));
        s->seed = u;
    } else if (!strcmp(a, "--phi")) {
        samp = false;
        ok = (g->has_phi = parse_f(v, &g->phi));
    } else if (!strcmp(a, "--alpha")) {
        samp = false;
        ok = (g->has_alpha = parse_f(v, &g->alpha));
    } else if (!strcmp(a, "--logit-bias")) {
        /* TOKEN:BIAS */
        const char *colon = strchr(v, ':');
        char id[24];
        ok = colon && colon > v && (size_t)(colon - v) < sizeof(id) && g->n_bias < 64;
        if (ok) {
            memcpy(id, v, (size_t)(colon - v));
            id[colon - v] = 0;
            Selectinfer__LogitBias *b = &g->bias[g->n_bias];
            selectinfer__logit_bias__init(b);
            ok = parse_u64(id, INT32_MAX, &u) && parse_f(colon + 1, &b->bias);
            b->has_token = b->has_bias = true;
            b->token = (int32_t)u;
            g->bias_p[g->n_bias++] = b;
        }
    } else if (!strcmp(a, "--stop")) {
        samp = false;
        if (g->n_stop == 16) {
            fprintf(stderr, "sictl: at most 16 --stop strings\n");
            return -1;
        }
        g->stop[g->n_stop++] = (char *)v;
    }
    if (!ok) {
        fprintf(stderr, "sictl: %s: bad value '%s'\n", a, v);
        return -1;
    }
    if (samp)
        g->has_sampling = true;
    return 1;
}

static void fill_generate(const gen_opts *o, Selectinfer__Generate *g, Selectinfer__Sampling *s)
{
    if (o->has_sampling) {
        *s = o->sampling;
        s->n_logit_bias = o->n_bias;
        s->logit_bias = (Selectinfer__LogitBias **)o->bias_p;
        g->sampling = s;
    }
    if (o->max_tokens) {
        g->has_max_tokens = true;
        g->max_tokens = o->max_tokens;
    }
    if (o->task)
        g->task = (char *)o->task;
    if (o->format)
        g->format = (char *)o->format;
    if (o->tools)
        g->tools = (char *)o->tools;
    if (o->has_phi) {
        g->has_phi = true;
        g->phi = o->phi;
    }
    if (o->has_alpha) {
        g->has_alpha = true;
        g->alpha = o->alpha;
    }
    g->n_stop = o->n_stop;
    g->stop = (char **)o->stop;
    if (o->no_stream) {
        g->has_stream = true;
        g->stream = false;
    }
    if (o->parse_special) {
        g->has_parse_special = true;
        g->parse_special = true;
    }
    if (o->no_cache) {
        g->has_cache_prompt = true;
        g->cache_prompt = false;
    }
    if (o->no_truncate) {
        g->has_truncate = true;
        g->truncate = false;
    }
    if (o->no_shift) {
        g->has_shift = true;
        g->shift = false;
    }
    if (o->no_think) {
        g->has_think = true;
        g->think = false;
    }
    if (o->logprobs >= 0) {
        g->has_logprobs = g->logprobs = true;
        g->has_top_logprobs = true;
        g->top_logprobs = (uint32_t)o->logprobs;
    }
}

static int simple_call(Selectinfer__Request *req)
{
    return call_and_print(req, 60000);
}

typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

static void text_append(text_buf *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *nd = realloc(t->data, cap);
        if (!nd)
            return;
        t->data = nd;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = '\0';
}

static void print_stats(const Selectinfer__Done *d)
{
    double pre = (double)d->prefill_ns / 1e9, dec = (double)d->decode_ns / 1e9;
    /* the rate of what was evaluated: cached tokens took no time */
    uint32_t cached = d->cached_tokens < d->prompt_tokens ? d->cached_tokens : d->prompt_tokens;
    fprintf(stderr, "[%s: %u prompt tokens (%u cached) in %.3f s (%.1f tok/s), %u generated in %.3f s (%.1f tok/s), "
            "queued %.3f s, FFN share %.3f (phi %.2f), profile %s]\n",
            si_stop_reason_name(d->stop_reason), d->prompt_tokens, cached, pre,
            pre > 0 ? (d->prompt_tokens - cached) / pre : 0.0,
            d->generated_tokens, dec, dec > 0 ? d->generated_tokens / dec : 0.0, (double)d->queue_ns / 1e9,
            (double)d->ffn_share, (double)d->phi, d->profile ? d->profile : "");
    if (d->dropped_messages)
        fprintf(stderr, "[the %u oldest messages left out to fit the context]\n", d->dropped_messages);
    if (d->context_shifts)
        fprintf(stderr, "[the context was full %u times: its older half went each time]\n", d->context_shifts);
    if (d->swap)
        fprintf(stderr, "[swapped %s -> %s first: %.1f ms, %llu neurons in, %llu out]\n",
                d->swap->from_task ? d->swap->from_task : "", d->swap->to_task ? d->swap->to_task : "",
                (double)d->swap->swap_ns / 1e6, (unsigned long long)d->swap->neurons_in,
                (unsigned long long)d->swap->neurons_out);
}

/* A token's bytes for a terminal: control bytes and quotes escaped. */
static void put_token(text_buf *b, const ProtobufCBinaryData *t)
{
    char e[8];
    text_append(b, "\"", 1);
    for (size_t i = 0; i < t->len; i++) {
        const unsigned char ch = t->data[i];
        if (ch == '\n')
            snprintf(e, sizeof(e), "\\n");
        else if (ch == '"' || ch == '\\')
            snprintf(e, sizeof(e), "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            snprintf(e, sizeof(e), "\\x%02x", ch);
        else
            snprintf(e, sizeof(e), "%c", ch);
        text_append(b, e, strlen(e));
    }
    text_append(b, "\"", 1);
}

/* --logprobs: one line per token, printed on stderr after the answer. */
static void format_logprobs(text_buf *b, Selectinfer__TokenLogprob **v, size_t n)
{
    char num[32];
    for (size_t i = 0; i < n; i++) {
        snprintf(num, sizeof(num), "%9.4f ", (double)v[i]->logprob);
        text_append(b, num, strlen(num));
        put_token(b, &v[i]->token);
        for (size_t j = 0; j < v[i]->n_top; j++) {
            text_append(b, j ? ", " : "   top: ", j ? 2 : 8);
            put_token(b, &v[i]->top[j]->token);
            snprintf(num, sizeof(num), " %.3f", (double)v[i]->top[j]->logprob);
            text_append(b, num, strlen(num));
        }
        text_append(b, "\n", 1);
    }
}

/* Runs one generate request, streaming to stdout; the answer's text goes
 * to *answer when not NULL, and done.dropped_messages to *dropped. Ctrl-C
 * cancels it. Returns an exit status. */
/* An answer's tool calls (done.tool_calls) and the text without them
 * (done.content), owned: what a chat sends back. */
typedef struct turn_calls {
    char *content;
    Selectinfer__ToolCall **calls;
    size_t n;
} turn_calls;

static void turn_calls_free(turn_calls *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->calls[i]->name);
        free(t->calls[i]->arguments);
        free(t->calls[i]);
    }
    free(t->calls);
    free(t->content);
    memset(t, 0, sizeof(*t));
}

static int generate_call(si_client *c, Selectinfer__Generate *g, const gen_opts *o, text_buf *answer,
                         uint32_t *dropped, text_buf *lps, turn_calls *tc);

static int run_generate(si_client *c, Selectinfer__Generate *g, const gen_opts *o, text_buf *answer,
                        uint32_t *dropped, turn_calls *tc)
{
    text_buf lps = {0};
    const int rc = generate_call(c, g, o, answer, dropped, o->logprobs >= 0 && !opt.json ? &lps : NULL, tc);
    if (lps.len)
        fputs(lps.data, stderr);
    free(lps.data);
    return rc;
}

/* run_generate's request; the log-probabilities go to *lps when not NULL. */
static int generate_call(si_client *c, Selectinfer__Generate *g, const gen_opts *o, text_buf *answer,
                         uint32_t *dropped, text_buf *lps, turn_calls *tc)
{
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.has_id = true;
    req.id = si_client_next_id(c);
    req.body_case = SELECTINFER__REQUEST__BODY_GENERATE;
    req.generate = g;
    int rc = si_client_send(c, &req);
    if (rc < 0)
        return transport_error(rc);
    bool cancel_sent = false;
    interrupted = 0;
    for (;;) {
        if (interrupted && !cancel_sent) {
            cancel_sent = true;
            if ((rc = si_client_cancel(c, req.id)) < 0)
                return transport_error(rc);
        }
        Selectinfer__Response *r;
        rc = si_client_recv(c, opt.timeout_ms, &r);
        if (rc == -EINTR)
            continue;
        if (rc == 0)
            return transport_error(-ETIMEDOUT);
        if (rc < 0)
            return transport_error(rc);
        if (r->id != req.id && r->id != 0) { /* the ack of our cancel */
            si_response_free(r);
            continue;
        }
        if (opt.json) {
            si_json_message(stdout, &r->base);
            fputc('\n', stdout);
            fflush(stdout);
        }
        switch (r->body_case) {
        case SELECTINFER__RESPONSE__BODY_CHUNK:
            if (!opt.json) {
                fwrite(r->chunk->text.data, 1, r->chunk->text.len, stdout);
                fflush(stdout);
            }
            if (answer)
                text_append(answer, (const char *)r->chunk->text.data, r->chunk->text.len);
            if (lps)
                format_logprobs(lps, r->chunk->logprobs, r->chunk->n_logprobs);
            si_response_free(r);
            continue;
        case SELECTINFER__RESPONSE__BODY_DONE: {
            const Selectinfer__Done *d = r->done;
            if (d->has_text) {
                if (!opt.json)
                    fwrite(d->text.data, 1, d->text.len, stdout);
                if (answer)
                    text_append(answer, (const char *)d->text.data, d->text.len);
            }
            if (!opt.json) {
                fputc('\n', stdout);
                for (size_t i = 0; i < d->n_tool_calls; i++)
                    printf("tool call: %s %s\n", d->tool_calls[i]->name ? d->tool_calls[i]->name : "",
                           d->tool_calls[i]->arguments ? d->tool_calls[i]->arguments : "{}");
                fflush(stdout);
            }
            if (lps)
                format_logprobs(lps, d->logprobs, d->n_logprobs);
            if (o->stats)
                print_stats(d);
            if (dropped)
                *dropped = d->dropped_messages;
            if (tc && d->n_tool_calls) { /* copied: r is freed below */
                tc->calls = calloc(d->n_tool_calls, sizeof(*tc->calls));
                tc->content = strndup(d->has_content ? (const char *)d->content.data : "",
                                      d->has_content ? d->content.len : 0);
                for (size_t i = 0; tc->calls && tc->content && i < d->n_tool_calls; i++) {
                    Selectinfer__ToolCall *x = malloc(sizeof(*x));
                    if (!x)
                        break;
                    selectinfer__tool_call__init(x);
                    x->name = strdup(d->tool_calls[i]->name ? d->tool_calls[i]->name : "");
                    x->arguments = strdup(d->tool_calls[i]->arguments ? d->tool_calls[i]->arguments : "{}");
                    tc->calls[tc->n++] = x;
                    if (!x->name || !x->arguments)
                        break;
                }
                if (!tc->calls || !tc->content || tc->n < d->n_tool_calls) {
                    turn_calls_free(tc);
                    si_response_free(r);
                    fprintf(stderr, "sictl: out of memory\n");
                    return EXIT_PROTOCOL;
                }
            }
            int ret = cancel_sent ? EXIT_INTERRUPTED : 0;
            si_response_free(r);
            return ret;
        }
        case SELECTINFER__RESPONSE__BODY_ERROR: {
            int ret = report_error(r);
            si_response_free(r);
            return ret;
        }
        default:
            si_response_free(r);
            continue;
        }
    }
}

static char *read_all(FILE *f)
{
    text_buf t = {0};
    char buf[4096];
    size_t n;
    text_append(&t, "", 0);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        text_append(&t, buf, n);
    return t.data;
}

/* A one-turn chat: an optional system message, then the user's text. */
typedef struct one_turn {
    Selectinfer__ChatMessage sys, user, *msgs[2];
    Selectinfer__ChatMessages chat;
} one_turn;

static Selectinfer__ChatMessages *one_turn_init(one_turn *t, const char *system, char *text)
{
    selectinfer__chat_message__init(&t->sys);
    selectinfer__chat_message__init(&t->user);
    selectinfer__chat_messages__init(&t->chat);
    size_t n = 0;
    if (system) {
        t->sys.role = "system";
        t->sys.content = (char *)system;
        t->msgs[n++] = &t->sys;
    }
    t->user.role = "user";
    t->user.content = text;
    t->msgs[n++] = &t->user;
    t->chat.n_messages = n;
    t->chat.messages = t->msgs;
    return &t->chat;
}

static int cmd_generate(int argc, char **argv)
{
    gen_opts o;
    memset(&o, 0, sizeof(o));
    o.logprobs = -1;
    selectinfer__sampling__init(&o.sampling);
    text_buf text = {0};
    bool opts = true;
    for (int i = 0; i < argc; i++) {
        if (opts && !strcmp(argv[i], "--")) {
            opts = false; /* the rest is text, dashes and all */
            continue;
        }
        int k = opts ? parse_gen_opt(&o, argc, argv, &i) : 0;
        if (k < 0)
            return EXIT_USAGE;
        if (k > 0)
            continue;
        /* "-x" or "--xyz" that is none of ours: a typo or another tool's
         * option, refused rather than sent to the model as text ("-" is
         * stdin; "-5" and "- item" stay text) */
        if (opts && argv[i][0] == '-' &&
            ((argv[i][1] == '-' && argv[i][2]) || (isalpha((unsigned char)argv[i][1]) && !strchr(argv[i], ' ')))) {
            fprintf(stderr, "sictl generate: unknown option %s (text that begins with '-': after --)\n",
                    argv[i]);
            return EXIT_USAGE;
        }
        if (text.len)
            text_append(&text, " ", 1);
        if (!strcmp(argv[i], "-")) {
            char *in = read_all(stdin);
            if (in)
                text_append(&text, in, strlen(in));
            free(in);
        } else {
            text_append(&text, argv[i], strlen(argv[i]));
        }
    }
    if (!text.data) {
        fprintf(stderr, "sictl generate: no text\n");
        return EXIT_USAGE;
    }
    si_client *c;
    int rc = connect_daemon(&c);
    if (rc) {
        free(text.data);
        return rc;
    }
    Selectinfer__Generate g = SELECTINFER__GENERATE__INIT;
    Selectinfer__Sampling s;
    fill_generate(&o, &g, &s);
    one_turn t;
    if (o.raw) {
        g.input_case = SELECTINFER__GENERATE__INPUT_PROMPT;
        g.prompt = text.data;
    } else {
        g.input_case = SELECTINFER__GENERATE__INPUT_CHAT;
        g.chat = one_turn_init(&t, o.system, text.data);
    }
    rc = run_generate(c, &g, &o, NULL, NULL, NULL);
    si_client_close(c);
    free(text.data);
    return rc;
}

/* sictl tokenize: the tokens generate would evaluate for the same input. */
static int cmd_tokenize(int argc, char **argv)
{
    bool raw = false, parse_special = false, pieces = false, no_think = false;
    const char *system = NULL, *tools = NULL;
    text_buf text = {0};
    bool opts = true;
    for (int i = 0; i < argc; i++) {
        if (opts && !strcmp(argv[i], "--")) {
            opts = false; /* the rest is text, dashes and all, as for generate */
            continue;
        }
        if (opts && argv[i][0] == '-' && argv[i][1] == '-' && argv[i][2]) {
            if (!strcmp(argv[i], "--raw")) {
                raw = true;
            } else if (!strcmp(argv[i], "--parse-special")) {
                parse_special = true;
            } else if (!strcmp(argv[i], "--pieces")) {
                pieces = true;
            } else if (!strcmp(argv[i], "--no-think")) {
                no_think = true;
            } else if (!strcmp(argv[i], "--system") && i + 1 < argc) {
                system = argv[++i];
            } else if (!strcmp(argv[i], "--tools") && i + 1 < argc) {
                tools = argv[++i];
            } else {
                fprintf(stderr, "sictl tokenize: unknown option %s (text that begins with '--': after --)\n",
                        argv[i]);
                free(text.data);
                return EXIT_USAGE;
            }
            continue;
        }
        if (text.len)
            text_append(&text, " ", 1);
        char *in = !strcmp(argv[i], "-") ? read_all(stdin) : NULL;
        const char *t = in ? in : !strcmp(argv[i], "-") ? "" : argv[i];
        text_append(&text, t, strlen(t));
        free(in);
    }
    if (!text.data) {
        fprintf(stderr, "sictl tokenize: no text\n");
        return EXIT_USAGE;
    }
    Selectinfer__Tokenize t = SELECTINFER__TOKENIZE__INIT;
    one_turn turn;
    if (raw) {
        t.input_case = SELECTINFER__TOKENIZE__INPUT_PROMPT;
        t.prompt = text.data;
        t.has_parse_special = parse_special;
        t.parse_special = parse_special;
    } else {
        t.input_case = SELECTINFER__TOKENIZE__INPUT_CHAT;
        t.chat = one_turn_init(&turn, system, text.data);
        t.tools = (char *)tools;
    }
    t.has_pieces = pieces;
    t.pieces = pieces;
    t.has_think = no_think;
    t.think = false;
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.body_case = SELECTINFER__REQUEST__BODY_TOKENIZE;
    req.tokenize = &t;
    int rc = simple_call(&req);
    free(text.data);
    return rc;
}

/* Appends s to the inputs, growing the array; false when out of memory. */
static bool push_input(char ***inputs, size_t *n, size_t *cap, char *s)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        char **ni = realloc(*inputs, nc * sizeof(char *));
        if (!ni)
            return false;
        *inputs = ni;
        *cap = nc;
    }
    (*inputs)[(*n)++] = s;
    return true;
}

/* sictl embed: one embedding per argument, or per line of stdin ("-"). */
static int cmd_embed(int argc, char **argv)
{
    Selectinfer__Embed e = SELECTINFER__EMBED__INIT;
    char **inputs = NULL;
    char *in = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    bool opts = true;
    for (int i = 0; rc == 0 && i < argc; i++) {
        if (!opts) {
            /* after "--" every argument is an input, "-" too */
            if (!push_input(&inputs, &n, &cap, argv[i]))
                rc = EXIT_DAEMON_ERROR;
        } else if (!strcmp(argv[i], "--")) {
            opts = false;
        } else if (!strcmp(argv[i], "--pooling") && i + 1 < argc) {
            e.pooling = argv[++i];
        } else if (!strcmp(argv[i], "--no-normalize")) {
            e.has_normalize = true;
            e.normalize = false;
        } else if (!strcmp(argv[i], "--no-truncate")) {
            e.has_truncate = true;
            e.truncate = false;
        } else if (!strcmp(argv[i], "--parse-special")) {
            e.has_parse_special = true;
            e.parse_special = true;
        } else if (!strcmp(argv[i], "--stats")) {
            embed_stats = true;
        } else if (argv[i][0] == '-' && argv[i][1] == '-' && argv[i][2]) {
            fprintf(stderr, "sictl embed: unknown option %s (text that begins with '--': after --)\n", argv[i]);
            rc = EXIT_USAGE;
        } else if (!strcmp(argv[i], "-") && !in) {
            /* stdin: each non-empty line one input */
            in = read_all(stdin);
            for (char *line = in, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                    *next++ = 0;
                else
                    next = line + strlen(line);
                if (*line && !push_input(&inputs, &n, &cap, line)) {
                    rc = EXIT_DAEMON_ERROR;
                    break;
                }
            }
        } else if (!push_input(&inputs, &n, &cap, argv[i])) {
            rc = EXIT_DAEMON_ERROR;
        }
    }
    if (rc == 0 && n == 0) {
        fprintf(stderr, "sictl embed: no text\n");
        rc = EXIT_USAGE;
    }
    if (rc == 0) {
        e.n_input = n;
        e.input = inputs;
        Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
        req.body_case = SELECTINFER__REQUEST__BODY_EMBED;
        req.embed = &e;
        /* Ctrl-C ends sictl; the daemon stops the request when we go */
        signal(SIGINT, SIG_DFL);
        rc = call_and_print(&req, -1);
    }
    free(inputs);
    free(in);
    return rc;
}

typedef struct history {
    Selectinfer__ChatMessage *msgs;
    size_t n, cap;
} history;

static int history_add(history *h, const char *role, char *content)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        Selectinfer__ChatMessage *nm = realloc(h->msgs, cap * sizeof(*nm));
        if (!nm)
            return -ENOMEM;
        h->msgs = nm;
        h->cap = cap;
    }
    Selectinfer__ChatMessage *m = &h->msgs[h->n++];
    selectinfer__chat_message__init(m);
    m->role = (char *)role;
    m->content = content;
    return 0;
}

static void history_clear(history *h, size_t keep)
{
    for (size_t i = keep; i < h->n; i++) {
        free(h->msgs[i].content);
        turn_calls t = {NULL, h->msgs[i].tool_calls, h->msgs[i].n_tool_calls};
        turn_calls_free(&t);
    }
    h->n = keep;
}

static int cmd_chat(int argc, char **argv)
{
    gen_opts o;
    memset(&o, 0, sizeof(o));
    o.logprobs = -1;
    selectinfer__sampling__init(&o.sampling);
    for (int i = 0; i < argc; i++) {
        int k = parse_gen_opt(&o, argc, argv, &i);
        if (k <= 0) {
            if (k == 0)
                fprintf(stderr, "sictl chat: unknown argument %s\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (o.raw) {
        fprintf(stderr, "sictl chat: --raw makes no sense for a chat\n");
        return EXIT_USAGE;
    }
    si_client *c;
    int rc = connect_daemon(&c);
    if (rc)
        return rc;
    history h = {0};
    size_t keep = 0;
    if (o.system) {
        history_add(&h, "system", strdup(o.system));
        keep = 1;
    }
    bool tty = isatty(STDIN_FILENO);
    uint32_t shown_dropped = 0;
    char *line = NULL;
    size_t lcap = 0;
    int ret = 0;
    bool follow = false; /* tool results just came: the model goes on */
    for (;;) {
        const size_t turn_start = h.n;
        if (!follow) {
            if (tty) {
                fputs("> ", stdout);
                fflush(stdout);
            }
            interrupted = 0;
            ssize_t n = getline(&line, &lcap, stdin);
            if (n < 0)
                break;
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                line[--n] = '\0';
            if (n == 0)
                continue;
            if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
                break;
            if (!strcmp(line, "/reset")) {
                history_clear(&h, keep);
                shown_dropped = 0;
                continue;
            }
            if (history_add(&h, "user", strdup(line)) < 0)
                break;
        }
        follow = false;
        Selectinfer__Generate g = SELECTINFER__GENERATE__INIT;
        Selectinfer__Sampling s;
        Selectinfer__ChatMessages chat = SELECTINFER__CHAT_MESSAGES__INIT;
        Selectinfer__ChatMessage **ptrs = malloc(h.n * sizeof(*ptrs));
        if (!ptrs)
            break;
        for (size_t i = 0; i < h.n; i++)
            ptrs[i] = &h.msgs[i];
        chat.n_messages = h.n;
        chat.messages = ptrs;
        fill_generate(&o, &g, &s);
        g.input_case = SELECTINFER__GENERATE__INPUT_CHAT;
        g.chat = &chat;
        text_buf answer = {0};
        uint32_t dropped = 0;
        turn_calls tc = {0};
        ret = run_generate(c, &g, &o, &answer, &dropped, &tc);
        /* said once per new cut, not with every later turn that keeps it */
        if (ret == 0 && dropped > shown_dropped && !o.stats)
            fprintf(stderr, "[the %u oldest messages no longer fit the context and are left out]\n", dropped);
        if (ret == 0)
            shown_dropped = dropped;
        free(ptrs);
        if (ret == EXIT_INTERRUPTED) {
            ret = 0; /* Ctrl-C ends the answer, not the chat */
        } else if (ret != 0) {
            free(answer.data);
            if (ret == EXIT_PROTOCOL)
                break;
            history_clear(&h, turn_start); /* forget the turn that failed */
            continue;
        }
        if (tc.n == 0) {
            history_add(&h, "assistant", answer.data ? answer.data : strdup(""));
            continue;
        }
        /* calls (printed with the answer): the turn keeps them, then each
         * result is asked for, and the model goes on with them */
        free(answer.data);
        if (history_add(&h, "assistant", tc.content) < 0) {
            turn_calls_free(&tc);
            break;
        }
        h.msgs[h.n - 1].tool_calls = tc.calls;
        h.msgs[h.n - 1].n_tool_calls = tc.n;
        for (size_t i = 0; i < tc.n; i++) {
            if (tty) {
                printf("result of %s> ", tc.calls[i]->name);
                fflush(stdout);
            }
            ssize_t n = getline(&line, &lcap, stdin);
            if (n < 0)
                goto out;
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                line[--n] = '\0';
            if (history_add(&h, "tool", strdup(line)) < 0)
                goto out;
        }
        follow = true;
    }
out:
    free(line);
    history_clear(&h, 0);
    free(h.msgs);
    si_client_close(c);
    return ret;
}

static int cmd_use(int argc, char **argv)
{
    Selectinfer__UseProfile u = SELECTINFER__USE_PROFILE__INIT;
    for (int i = 0; i < argc; i++) {
        float *dst = NULL;
        protobuf_c_boolean *has = NULL;
        uint64_t num;
        if (!strcmp(argv[i], "--gamma")) dst = &u.gamma, has = &u.has_gamma;
        else if (!strcmp(argv[i], "--delta")) dst = &u.delta, has = &u.has_delta;
        else if (!strcmp(argv[i], "--phi")) dst = &u.phi, has = &u.has_phi;
        if ((!strcmp(argv[i], "--profile") || !strcmp(argv[i], "--mode")) && i + 1 < argc) {
            if (!strcmp(argv[i], "--profile"))
                u.path = argv[++i];
            else
                u.mode = argv[++i];
        } else if (!strcmp(argv[i], "--dense-first") || !strcmp(argv[i], "--dense-last") ||
                   !strcmp(argv[i], "--budget")) {
            bool budget = !strcmp(argv[i], "--budget");
            if (i + 1 >= argc || !parse_u64(argv[i + 1], budget ? UINT64_MAX : 1024, &num)) {
                fprintf(stderr, "sictl use: %s needs a number\n", argv[i]);
                return EXIT_USAGE;
            }
            if (budget)
                u.has_budget_bytes = true, u.budget_bytes = num;
            else if (!strcmp(argv[i], "--dense-first"))
                u.has_dense_first = true, u.dense_first = (uint32_t)num;
            else
                u.has_dense_last = true, u.dense_last = (uint32_t)num;
            i++;
        } else if (dst) {
            if (i + 1 >= argc || !parse_f(argv[i + 1], dst)) {
                fprintf(stderr, "sictl use: %s needs a number\n", argv[i]);
                return EXIT_USAGE;
            }
            *has = true;
            i++;
        } else if (!u.name && argv[i][0] != '-') {
            u.name = argv[i];
        } else {
            fprintf(stderr, "sictl use: unexpected argument %s\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!u.name) {
        fprintf(stderr, "sictl use: which task?\n");
        return EXIT_USAGE;
    }
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.body_case = SELECTINFER__REQUEST__BODY_USE_PROFILE;
    req.use_profile = &u;
    /* the swap waits for the running request: allow a long one */
    if (opt.timeout_ms < 0)
        opt.timeout_ms = 600000;
    return simple_call(&req);
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            opt.json = true;
        } else if ((!strcmp(a, "--socket") || !strcmp(a, "-s")) && i + 1 < argc) {
            opt.socket = argv[++i];
        } else if (!strncmp(a, "--socket=", 9)) {
            opt.socket = a + 9;
        } else if (!strcmp(a, "--timeout") && i + 1 < argc) {
            float t;
            if (!parse_f(argv[++i], &t) || t < 0 || t > 1e6) {
                fprintf(stderr, "sictl: bad --timeout\n");
                return EXIT_USAGE;
            }
            opt.timeout_ms = (int)(t * 1000);
        } else {
            fprintf(stderr, "sictl: unknown option %s\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint; /* no SA_RESTART: poll returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    const char *cmd = argv[i++];
    int n = argc - i;
    char **rest = argv + i;
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    if (!strcmp(cmd, "generate"))
        return cmd_generate(n, rest);
    if (!strcmp(cmd, "chat"))
        return cmd_chat(n, rest);
    if (!strcmp(cmd, "use"))
        return cmd_use(n, rest);
    if (!strcmp(cmd, "tokenize"))
        return cmd_tokenize(n, rest);
    if (!strcmp(cmd, "embed"))
        return cmd_embed(n, rest);
    if (n > 0) {
        fprintf(stderr, "sictl %s: unexpected argument %s\n", cmd, rest[0]);
        return EXIT_USAGE;
    }
    Selectinfer__StatusRequest st = SELECTINFER__STATUS_REQUEST__INIT;
    Selectinfer__ListProfiles lp = SELECTINFER__LIST_PROFILES__INIT;
    Selectinfer__Reload rl = SELECTINFER__RELOAD__INIT;
    Selectinfer__Shutdown sd = SELECTINFER__SHUTDOWN__INIT;
    if (!strcmp(cmd, "status")) {
        req.body_case = SELECTINFER__REQUEST__BODY_STATUS;
        req.status = &st;
    } else if (!strcmp(cmd, "profiles")) {
        req.body_case = SELECTINFER__REQUEST__BODY_LIST_PROFILES;
        req.list_profiles = &lp;
    } else if (!strcmp(cmd, "reload")) {
        req.body_case = SELECTINFER__REQUEST__BODY_RELOAD;
        req.reload = &rl;
    } else if (!strcmp(cmd, "shutdown")) {
        req.body_case = SELECTINFER__REQUEST__BODY_SHUTDOWN;
        req.shutdown = &sd;
    } else {
        fprintf(stderr, "sictl: unknown command '%s'\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
    }
    return simple_call(&req);
}
