/* si-eval: quality, speed and memory of SelectInfer configurations against
 * the dense model, on the held-out prompts of one or more prompt sets.
 *
 *   si-eval -m MODEL -P profile.siprof --prompts qa.jsonl --prompts chat.jsonl \
 *           -c selectinfer,gamma=0.7,phi=0.4 -c coreinfer,phi=0.4 --limit 20 \
 *           --csv out.csv --json out.json
 *
 * For every task of the prompt sets (records grouped by their "task") and
 * every configuration, and for the dense model as the reference:
 *
 *   perplexity   of the first reference answer, teacher-forced after the
 *                chat-templated prompt, closed by the end-of-turn token. The
 *                prompt is one eval (with phi: the prefill that picks the
 *                request's dynamic neurons), the reference a second one, so
 *                its positions run as decode does.
 *   agreement    share of those positions where the configuration's top-1
 *                token equals the dense model's.
 *   task metric  on greedy generations (first non-empty line): F1 and exact
 *                match for qa*, corpus BLEU for translate*, ROUGE-L for
 *                summar*, none otherwise (--metric overrides).
 *   ratio        metric / dense metric.
 *   speed        prefill and decode tok/s summed over the generations;
 *                --bench N adds a separate run (first task's first prompt,
 *                then N decode steps, best of 3): the figure to quote on a
 *                shared machine.
 *   memory       resident weight bytes of the plan (FFN and the rest), the
 *                VmRSS the load added, their ratio, and the session's RSS.
 *
 * A configuration is MODE[,key=value...]: MODE one of dense, load-only,
 * random-load, coreinfer, selectinfer; keys gamma, delta, phi, alpha,
 * rank (abs|signed), dense_first (df), dense_last (dl), pick (request|token|
 * exact: per token by a sketch the plan then keeps, or by every loaded
 * neuron's own activation), copy (yes|no: the session's
 * contiguous copy of its dynamic neurons, in rss_session), kv (f16|q8_0: the
 * session's KV cache; the dense reference keeps f16), task (the profile task for
 * base neurons; default: the prompt set's), seed, budget_mb, name.
 * Defaults: gamma 0.7, delta 0.3, alpha 0.2, rank abs, 0 dense layers, and
 * phi 0.4 for coreinfer and selectinfer, 0 (everything loaded) otherwise.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "metrics.h"
#include "promptset.h"
#include "si-util.h"

#define MAX_SETS 32
#define MAX_CONFIGS 256
#define MAX_TASKS 64
#define MAX_PROMPT_TOKENS 3072
#define MAX_REF_TOKENS 256
#define MAX_GEN_BYTES 8192

typedef enum metric_kind { MET_NONE = 0, MET_F1, MET_BLEU, MET_ROUGE } metric_kind;
static const char *const metric_names[] = { "none", "f1", "bleu", "rougeL" };
/* the second figure of each metric: exact match, mean smoothed sentence BLEU */
static const char *const metric2_names[] = { "none", "em", "sbleu", "none" };

typedef struct config {
    char name[160];
    eng_select_mode mode;
    float gamma, delta, phi, alpha;
    eng_rank rank;
    eng_score score;
    eng_layer_budget layer_budget;
    eng_comp comp;
    eng_pick pick;
    float cand;        /* cand=: eng_compute_params.cand (pick=exact) */
    bool copy_dynamic; /* copy=yes|no: eng_compute_params.copy_dynamic */
    eng_kv_type kv;    /* kv=f16|q8_0: eng_session_params.kv_type */
    float sens[512]; /* lb=sens: per-layer sensitivities, from sens=FILE */
    int n_sens;
    int dense_first, dense_last;
    char task[64]; /* "" = the prompt set's task */
    uint64_t seed;
    uint64_t budget_bytes;
} config;

typedef struct item {
    const ek_prompt *rec;
    int32_t *prompt;
    size_t n_prompt;
    int32_t *ref; /* first reference + end of turn; NULL when none */
    size_t n_ref;
    int32_t *dense_top; /* [n_ref] the dense model's argmax per position */
} item;

typedef struct task {
    char name[64];
    metric_kind metric;
    int max_tokens;
    item *items;
    size_t n_items;
} task;

/* One (configuration, task) measurement. */
typedef struct result {
    double ppl, agree, metric, score2;
    /* per item (task item index) the metric's input, for the bootstrap:
     * scored or not, the score (F1, ROUGE-L) or the BLEU statistics */
    bool *item_ok;
    double *item_v;
    double *item_v2;                  /* the second score (exact match, sentence BLEU) */
    ek_bleu_stats *item_bleu;
    double ratio_lo, ratio_hi;        /* 95 % interval of score / dense score */
    double ratio2_lo, ratio2_hi;      /* ... of score2 / dense score2 */
    uint64_t n_pos, n_items;
    uint64_t n_prefill, prefill_ns, n_decode, decode_ns;
    double bench_prefill_tps, bench_decode_tps;
    double share;
} result;

typedef struct mem {
    uint64_t bytes_weights, bytes_ffn, neurons_loaded, neurons_total;
    uint64_t rss_model, rss_session, rss_total;
    float gamma; /* as planned (a budget sets it) */
} mem;

typedef struct opts {
    const char *model_path, *profile_path;
    const char *sets[MAX_SETS];
    int n_sets;
    int split; /* -1 all */
    long limit;
    int threads;
    int max_tokens; /* 0: per task */
    metric_kind force_metric;
    bool force_metric_set, no_generate, quiet;
    bool q8; /* every model, the reference too, with q8_matrices */
    bool prefill_q8; /* every model, the reference too, with prefill_q8 */
    int bench;
    const task *bench_task; /* the task --bench times */
    const char *csv, *json;
} opts;

/* ---- configurations ------------------------------------------------------ */

static const char *rank_name(eng_rank r)
{
    return r == ENG_RANK_SIGNED ? "signed" : r == ENG_RANK_CONTRIB ? "contrib" :
           r == ENG_RANK_MASS ? "mass" : "abs";
}

static int parse_config(const char *spec, config *c, char *why, size_t cap)
{
    memset(c, 0, sizeof(*c));
    c->gamma = 0.7f;
    c->delta = 0.3f;
    c->alpha = 0.2f;
    c->copy_dynamic = true;
    c->rank = ENG_RANK_ABS;
    c->seed = 1;
    c->phi = -1; /* set below from the mode */
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) {
        snprintf(why, cap, "too long");
        return -EINVAL;
    }
    char *save = NULL;
    char *tok = strtok_r(buf, ",", &save);
    if (!tok || eng_select_mode_parse(tok, &c->mode) < 0) {
        snprintf(why, cap, "'%s' is not a mode (dense, load-only, random-load, coreinfer, "
                 "selectinfer)", tok ? tok : "");
        return -EINVAL;
    }
    bool named = false;
    while ((tok = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(why, cap, "'%s' is not key=value", tok);
            return -EINVAL;
        }
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        char *end;
        double d = strtod(v, &end);
        bool num = end != v && *end == 0 && isfinite(d);
        if (!strcmp(k, "name")) {
            snprintf(c->name, sizeof c->name, "%s", v);
            named = true;
        } else if (!strcmp(k, "task")) {
            snprintf(c->task, sizeof c->task, "%s", v);
        } else if (!strcmp(k, "rank")) {
            if (!strcmp(v, "abs"))
                c->rank = ENG_RANK_ABS;
            else if (!strcmp(v, "signed"))
                c->rank = ENG_RANK_SIGNED;
            else if (!strcmp(v, "contrib"))
                c->rank = ENG_RANK_CONTRIB;
            else if (!strcmp(v, "mass"))
                c->rank = ENG_RANK_MASS;
            else {
                snprintf(why, cap, "rank must be abs, signed, contrib or mass");
                return -EINVAL;
            }
        } else if (!strcmp(k, "lb")) {
            if (!strcmp(v, "uniform"))
                c->layer_budget = ENG_BUDGET_UNIFORM;
            else if (!strcmp(v, "mass"))
                c->layer_budget = ENG_BUDGET_MASS;
            else if (!strcmp(v, "sens"))
                c->layer_budget = ENG_BUDGET_SENS;
            else {
                snprintf(why, cap, "lb must be uniform, mass or sens");
                return -EINVAL;
            }
        } else if (!strcmp(k, "sens")) {
            /* one number per layer ('#' comments) */
            FILE *f = fopen(v, "r");
            if (!f) {
                snprintf(why, cap, "sens=%s: %s", v, strerror(errno));
                return -EINVAL;
            }
            char line[256];
            c->n_sens = 0;
            while (fgets(line, sizeof line, f)) {
                char *h = strchr(line, '#'), *e;
                if (h)
                    *h = 0;
                for (char *q = line;; q = e) {
                    double x = strtod(q, &e);
                    if (e == q)
                        break;
                    if (c->n_sens == (int)(sizeof c->sens / sizeof c->sens[0])) {
                        fclose(f);
                        snprintf(why, cap, "sens=%s: too many values", v);
                        return -EINVAL;
                    }
                    c->sens[c->n_sens++] = (float)x;
                }
            }
            fclose(f);
            c->layer_budget = ENG_BUDGET_SENS;
        } else if (!strcmp(k, "comp")) {
            if (eng_comp_parse(v, &c->comp) < 0) {
                snprintf(why, cap, "comp must be none, mean or linear");
                return -EINVAL;
            }
        } else if (!strcmp(k, "pick")) {
            if (!strcmp(v, "request"))
                c->pick = ENG_PICK_REQUEST;
            else if (!strcmp(v, "token"))
                c->pick = ENG_PICK_TOKEN;
            else if (!strcmp(v, "exact"))
                c->pick = ENG_PICK_EXACT;
            else {
                snprintf(why, cap, "pick must be request, token or exact");
                return -EINVAL;
            }
        } else if (!strcmp(k, "kv")) {
            if (eng_kv_type_parse(v, &c->kv) < 0) {
                snprintf(why, cap, "kv must be f16 or q8_0");
                return -EINVAL;
            }
        } else if (!strcmp(k, "copy")) {
            if (strcmp(v, "yes") && strcmp(v, "no")) {
                snprintf(why, cap, "copy must be yes or no");
                return -EINVAL;
            }
            c->copy_dynamic = !strcmp(v, "yes");
        } else if (!strcmp(k, "score")) {
            if (!strcmp(v, "act"))
                c->score = ENG_SCORE_ACT;
            else if (!strcmp(v, "contrib"))
                c->score = ENG_SCORE_CONTRIB;
            else {
                snprintf(why, cap, "score must be act or contrib");
                return -EINVAL;
            }
        } else if (!num) {
            snprintf(why, cap, "'%s' needs a number, not '%s'", k, v);
            return -EINVAL;
        } else if (!strcmp(k, "gamma") && d > 0 && d <= 1) {
            c->gamma = (float)d;
        } else if (!strcmp(k, "delta") && d >= 0 && d <= 1) {
            c->delta = (float)d;
        } else if (!strcmp(k, "phi") && d >= 0 && d <= 1) {
            c->phi = (float)d;
        } else if (!strcmp(k, "alpha") && d > 0 && d <= 1) {
            c->alpha = (float)d;
        } else if (!strcmp(k, "cand") && d >= 0 && d <= 1) {
            c->cand = (float)d;
        } else if ((!strcmp(k, "dense_first") || !strcmp(k, "df")) && d >= 0 && d <= 4096) {
            c->dense_first = (int)d;
        } else if ((!strcmp(k, "dense_last") || !strcmp(k, "dl")) && d >= 0 && d <= 4096) {
            c->dense_last = (int)d;
        } else if (!strcmp(k, "seed") && d >= 0) {
            c->seed = (uint64_t)d;
        } else if (!strcmp(k, "budget_mb") && d > 0 && d < 1e9) {
            c->budget_bytes = (uint64_t)(d * 1024 * 1024);
        } else {
            snprintf(why, cap, "unknown key or value out of range: %s=%s", k, v);
            return -EINVAL;
        }
    }
    if (c->phi < 0)
        c->phi = c->mode == ENG_SELECT_COREINFER || c->mode == ENG_SELECT_SELECTINFER ? 0.4f : 0;
    if (c->mode == ENG_SELECT_DENSE || c->mode == ENG_SELECT_COREINFER) {
        c->gamma = 1;
        c->delta = 0;
    }
    if (c->mode == ENG_SELECT_DENSE)
        c->phi = 0;
    if (!named) {
        char extra[80] = "";
        if (c->task[0])
            snprintf(extra, sizeof extra, " task=%s", c->task);
        char pick[32] = "";
        if (c->pick == ENG_PICK_TOKEN)
            snprintf(pick, sizeof pick, " pick");
        else if (c->pick == ENG_PICK_EXACT && c->cand > 0)
            snprintf(pick, sizeof pick, " exact c%.2g", c->cand);
        else if (c->pick == ENG_PICK_EXACT)
            snprintf(pick, sizeof pick, " exact");
        snprintf(c->name, sizeof c->name, "%s g%.2g d%.2g p%.2g a%.2g %s%s%s%s%s%s %d/%d%s",
                 eng_select_mode_name(c->mode), c->gamma, c->delta, c->phi, c->alpha,
                 rank_name(c->rank), c->score == ENG_SCORE_CONTRIB ? " contrib" :
                 c->layer_budget == ENG_BUDGET_MASS ? " mass" :
                 c->layer_budget == ENG_BUDGET_SENS ? " sens" : "",
                 c->comp == ENG_COMP_MEAN ? " comp" : c->comp == ENG_COMP_LINEAR ? " lincomp" : "",
                 pick,
                 c->copy_dynamic ? "" : " nocopy", c->kv == ENG_KV_Q8_0 ? " kvq8" : "",
                 c->dense_first, c->dense_last, extra);
    }
    return 0;
}

/* ---- prompts ------------------------------------------------------------- */

static metric_kind metric_for(const char *task)
{
    if (!strncmp(task, "qa", 2))
        return MET_F1;
    if (!strncmp(task, "translate", 9))
        return MET_BLEU;
    if (!strncmp(task, "summar", 6))
        return MET_ROUGE;
    return MET_NONE;
}

static int max_tokens_for(metric_kind k)
{
    return k == MET_F1 ? 16 : k == MET_BLEU ? 48 : k == MET_ROUGE ? 40 : 32;
}

/* The token that closes an assistant turn, or -1. */
static int32_t end_of_turn(const eng_model *m)
{
    const char *txt = NULL;
    switch (eng_model_chat_template(m)) {
    case ENG_CHAT_CHATML: txt = "<|im_end|>"; break;
    case ENG_CHAT_LLAMA3: txt = "<|eot_id|>"; break;
    case ENG_CHAT_PHI3: txt = "<|end|>"; break;
    case ENG_CHAT_GEMMA: txt = "<end_of_turn>"; break;
    case ENG_CHAT_GEMMA4: txt = "<turn|>"; break;
    case ENG_CHAT_ERNIE: txt = "<|end_of_sentence|>"; break;
    case ENG_CHAT_GLM4: txt = "<|user|>"; break; /* (the next turn's header ends one) */
    /* (gpt-oss: its final answer's end; <|end|>, which ends a message,
     * does not end generation) */
    case ENG_CHAT_GPT_OSS: txt = "<|return|>"; break;
    case ENG_CHAT_NEMOTRON: txt = "<SPECIAL_12>"; break;
    default: break; /* Llama 2, Mistral, Zephyr: EOS */
    }
    int32_t t[4];
    size_t n = 0;
    if (txt && eng_tokenize(m, txt, strlen(txt), ENG_TOK_PARSE_SPECIAL, t, 4, &n) == 0 &&
        n == 1 && eng_token_is_eog(m, t[0]))
        return t[0];
    return eng_token_eos(m);
}

static void free_tasks(task *tasks, int n)
{
    for (int i = 0; i < n; i++) {
        for (size_t j = 0; j < tasks[i].n_items; j++) {
            free(tasks[i].items[j].prompt);
            free(tasks[i].items[j].ref);
            free(tasks[i].items[j].dense_top);
        }
        free(tasks[i].items);
    }
}

static int build_tasks(const opts *o, ek_promptset **sets, const eng_model *m, task *tasks,
                       int *ret_n)
{
    int n_tasks = 0;
    int32_t eot = end_of_turn(m);
    for (int si = 0; si < o->n_sets; si++) {
        for (size_t i = 0; i < ek_promptset_size(sets[si]); i++) {
            const ek_prompt *p = ek_promptset_get(sets[si], i);
            if (o->split >= 0 && (int)p->split != o->split)
                continue;
            int k = 0;
            while (k < n_tasks && strcmp(tasks[k].name, p->task))
                k++;
            if (k == n_tasks) {
                if (n_tasks == MAX_TASKS) {
                    fprintf(stderr, "more than %d tasks\n", MAX_TASKS);
                    return -E2BIG;
                }
                task *t = &tasks[n_tasks++];
                memset(t, 0, sizeof(*t));
                snprintf(t->name, sizeof t->name, "%s", p->task);
                t->metric = o->force_metric_set ? o->force_metric : metric_for(p->task);
                t->max_tokens = o->max_tokens > 0 ? o->max_tokens : max_tokens_for(t->metric);
            }
            task *t = &tasks[k];
            if (o->limit >= 0 && (long)t->n_items >= o->limit)
                continue;
            item it = { .rec = p };
            int r = si_render_prompt(m, p->system, p->prompt, MAX_PROMPT_TOKENS, &it.prompt,
                                     &it.n_prompt);
            if (r < 0) {
                fprintf(stderr, "%s: %s: skipped (%s)\n", o->sets[si], p->id,
                        r == -E2BIG ? "prompt too long" : strerror(-r));
                continue;
            }
            if (p->n_references > 0) {
                const char *ref = p->references[0];
                r = si_tokenize(m, ref, strlen(ref), 0, MAX_REF_TOKENS - 1, &it.ref, &it.n_ref);
                if (r == 0 && eot >= 0)
                    it.ref[it.n_ref++] = eot; /* si_tokenize leaves room for one */
                if (r < 0)
                    it.ref = NULL, it.n_ref = 0;
            }
            if (it.n_ref && !(it.dense_top = malloc(it.n_ref * sizeof(int32_t)))) {
                free(it.prompt);
                free(it.ref);
                return -ENOMEM;
            }
            item *grown = realloc(t->items, (t->n_items + 1) * sizeof(item));
            if (!grown) {
                free(it.prompt);
                free(it.ref);
                free(it.dense_top);
                return -ENOMEM;
            }
            t->items = grown;
            t->items[t->n_items++] = it;
        }
    }
    *ret_n = n_tasks;
    return 0;
}

/* ---- measuring ------------------------------------------------------------ */

typedef struct gen_buf {
    char text[MAX_GEN_BYTES];
    size_t len;
} gen_buf;

/* Collects the text; stops once a line with content has ended, since the
 * metrics read only the first non-empty line. */
static int on_text(void *ud, const char *text, size_t len)
{
    gen_buf *g = ud;
    size_t n = len < sizeof(g->text) - 1 - g->len ? len : sizeof(g->text) - 1 - g->len;
    memcpy(g->text + g->len, text, n);
    g->len += n;
    g->text[g->len] = 0;
    const char *nl = strchr(g->text, '\n');
    while (nl) {
        for (const char *q = g->text; q < nl; q++)
            if (*q != ' ' && *q != '\t' && *q != '\r')
                return 1;
        nl = strchr(nl + 1, '\n');
    }
    return g->len >= sizeof(g->text) - 1;
}

/* The first non-empty line of s, trimmed, in place. */
static char *first_line(char *s)
{
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (*s != '\n')
            break;
        s++;
    }
    char *e = strchr(s, '\n');
    if (e)
        *e = 0;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

/* Teacher-forced pass over one item: adds to st; with store, records the
 * argmax per position as the dense reference, else counts agreement. */
static int teacher_forced(eng_session *s, int n_vocab, item *it, bool store, ek_lm_stats *st)
{
    if (!it->n_ref)
        return 0;
    eng_session_reset(s);
    int r = eng_session_eval(s, it->prompt, it->n_prompt, 0);
    if (r < 0)
        return r;
    for (size_t j = 0; j < it->n_ref; j++) {
        if (j == 1 && (r = eng_session_eval(s, it->ref, it->n_ref - 1, ENG_EVAL_ALL_LOGITS)) < 0)
            return r;
        const float *l = eng_session_logits(s, j == 0 ? -1 : (int)j - 1);
        if (!l)
            return -EIO;
        double lp;
        int32_t am;
        if ((r = ek_logprob(l, (size_t)n_vocab, it->ref[j], &lp, &am)) < 0)
            return r;
        if (store)
            it->dense_top[j] = am;
        if ((r = ek_lm_stats_add(st, lp, am == it->dense_top[j])) < 0)
            return r;
    }
    return 0;
}

static double best_of(double a, double b)
{
    return a > b ? a : b;
}

/* Decode speed on its own: one prompt, then n greedy steps whatever token
 * comes (no early stop), best of three. */
static int bench(eng_session *s, int n_vocab, const item *it, int n, result *res)
{
    for (int rep = 0; rep < 3; rep++) {
        eng_session_reset(s);
        uint64_t t0 = eng_time_ns();
        int r = eng_session_eval(s, it->prompt, it->n_prompt, 0);
        if (r < 0)
            return r;
        uint64_t t1 = eng_time_ns();
        for (int i = 0; i < n; i++) {
            int32_t t = si_argmax(eng_session_logits(s, -1), n_vocab);
            if ((r = eng_session_eval(s, &t, 1, 0)) < 0)
                return r;
        }
        uint64_t t2 = eng_time_ns();
        res->bench_prefill_tps = best_of(res->bench_prefill_tps, it->n_prompt * 1e9 / (t1 - t0));
        res->bench_decode_tps = best_of(res->bench_decode_tps, n * 1e9 / (t2 - t1));
    }
    return 0;
}

static int run_task(const opts *o, eng_model *m, const eng_compute_params *cp, eng_kv_type kv,
                    task *t, bool is_reference, result *res, uint64_t *rss_session)
{
    eng_model_info info;
    eng_model_get_info(m, &info);
    memset(res, 0, sizeof(*res));
    eng_session_params sp = eng_session_params_default();
    /* the context the longest request needs, no more: the KV cache is part
     * of the resident memory we report */
    size_t need = 16;
    for (size_t i = 0; i < t->n_items; i++) {
        const item *it = &t->items[i];
        size_t tail = it->n_ref > (size_t)t->max_tokens ? it->n_ref : (size_t)t->max_tokens;
        if (i == 0 && (size_t)o->bench > tail)
            tail = (size_t)o->bench;
        if (it->n_prompt + tail + 8 > need)
            need = it->n_prompt + tail + 8;
    }
    sp.n_ctx = (int)need;
    sp.kv_type = kv;
    uint64_t rss0 = si_proc_status_bytes("VmRSS");
    eng_session *s;
    int r = eng_session_new(m, &sp, &s);
    if (r < 0)
        return r;
    if (cp && (r = eng_session_set_compute(s, cp)) < 0)
        goto out;
    ek_lm_stats lm;
    ek_lm_stats_init(&lm);
    ek_bleu_stats bleu;
    ek_bleu_stats_init(&bleu);
    res->item_ok = calloc(t->n_items ? t->n_items : 1, sizeof(*res->item_ok));
    res->item_v = calloc(t->n_items ? t->n_items : 1, sizeof(*res->item_v));
    res->item_v2 = calloc(t->n_items ? t->n_items : 1, sizeof(*res->item_v2));
    res->item_bleu = calloc(t->n_items ? t->n_items : 1, sizeof(*res->item_bleu));
    if (!res->item_ok || !res->item_v || !res->item_v2 || !res->item_bleu) {
        r = -ENOMEM;
        goto out;
    }
    double msum = 0, emsum = 0;
    uint64_t n_gen_items = 0;
    gen_buf *g = malloc(sizeof(*g));
    if (!g) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < t->n_items; i++) {
        item *it = &t->items[i];
        if ((r = teacher_forced(s, info.n_vocab, it, is_reference, &lm)) < 0)
            break;
        if (i == 0 && rss_session) /* KV cache and scratch touched by now */
            *rss_session = si_proc_status_bytes("VmRSS") - rss0;
        if (o->no_generate || (t->metric == MET_NONE && o->bench == 0 && i > 0))
            continue;
        if (t->metric == MET_NONE && o->bench > 0)
            continue;
        /* one generation per task gives a speed figure even without a metric */
        eng_gen_params gp = eng_gen_params_default();
        gp.max_tokens = t->max_tokens;
        eng_gen_stats st;
        g->len = 0;
        g->text[0] = 0;
        if ((r = eng_generate(s, it->prompt, it->n_prompt, &gp, on_text, g, &st)) < 0)
            break;
        res->n_prefill += (uint64_t)st.n_prompt;
        res->prefill_ns += st.prefill_ns;
        res->n_decode += (uint64_t)(st.n_generated > 0 ? st.n_generated - 1 : 0);
        res->decode_ns += st.decode_ns;
        res->share = eng_session_ffn_share(s);
        if (t->metric == MET_NONE || it->rec->n_references == 0)
            continue;
        char *hyp = first_line(g->text);
        const char *const *refs = it->rec->references;
        size_t nr = it->rec->n_references;
        double v = 0, em = 0;
        switch (t->metric) {
        case MET_F1:
            if ((r = ek_squad_f1(hyp, refs, nr, &v)) == 0)
                r = ek_squad_em(hyp, refs, nr, &em);
            break;
        case MET_BLEU:
            ek_bleu_stats_init(&res->item_bleu[i]);
            if ((r = ek_bleu_add(&bleu, hyp, refs, nr)) == 0 &&
                (r = ek_bleu_add(&res->item_bleu[i], hyp, refs, nr)) == 0)
                r = ek_bleu_sentence(hyp, refs, nr, &em);
            break;
        case MET_ROUGE: r = ek_rouge_l(hyp, refs, nr, &v, NULL, NULL); break;
        default: break;
        }
        if (r < 0) {
            fprintf(stderr, "%s: metric failed: %s\n", it->rec->id, strerror(-r));
            r = 0;
            continue;
        }
        msum += v;
        emsum += em;
        n_gen_items++;
        res->item_ok[i] = true;
        res->item_v[i] = v;
        res->item_v2[i] = em;
        if (!o->quiet && getenv("SI_EVAL_SHOW"))
            fprintf(stderr, "  %s: %s\n", it->rec->id, hyp);
    }
    free(g);
    if (r < 0)
        goto out;
    res->n_items = t->n_items;
    res->n_pos = lm.n_tokens;
    res->ppl = ek_lm_stats_perplexity(&lm);
    res->agree = ek_lm_stats_agreement(&lm);
    if (o->no_generate)
        res->metric = NAN;
    else if (t->metric == MET_BLEU)
        res->metric = ek_bleu_score(&bleu);
    else if (t->metric != MET_NONE)
        res->metric = n_gen_items ? msum / n_gen_items : 0;
    else
        res->metric = NAN;
    res->score2 = (t->metric == MET_F1 || t->metric == MET_BLEU) && n_gen_items && !o->no_generate
                      ? emsum / n_gen_items : NAN;
    /* speed does not depend on the task: time the first task only */
    if (o->bench > 0 && t->n_items > 0 && t == o->bench_task)
        r = bench(s, info.n_vocab, &t->items[0], o->bench, res);
    if (!res->share) {
        /* no generation ran: one decode step to read the computed share */
        res->share = eng_session_ffn_share(s);
    }
out:
    eng_session_free(s);
    return r;
}

static void result_free_items(result *res)
{
    free(res->item_ok);
    free(res->item_v);
    free(res->item_v2);
    free(res->item_bleu);
    res->item_ok = NULL;
    res->item_v = NULL;
    res->item_v2 = NULL;
    res->item_bleu = NULL;
}

/* The 95 % intervals of x's score ratios to the dense run d on the same
 * task: a paired bootstrap over the items both scored (eval/metrics.h), for
 * the metric and, where the task has one, the second score (exact match,
 * mean sentence BLEU: per-item means). NAN where there is no metric or the
 * ratio is undefined. */
static void score_interval(const task *t, result *x, const result *d)
{
    x->ratio_lo = x->ratio_hi = x->ratio2_lo = x->ratio2_hi = NAN;
    if (t->metric == MET_NONE || !x->item_ok || !d->item_ok || t->n_items == 0)
        return;
    const size_t m = t->n_items;
    double *xv = malloc(m * sizeof(*xv)), *dv = malloc(m * sizeof(*dv));
    double *xv2 = malloc(m * sizeof(*xv2)), *dv2 = malloc(m * sizeof(*dv2));
    ek_bleu_stats *xb = malloc(m * sizeof(*xb)), *db = malloc(m * sizeof(*db));
    size_t n = 0;
    if (xv && dv && xv2 && dv2 && xb && db) {
        for (size_t i = 0; i < m; i++) {
            if (!x->item_ok[i] || !d->item_ok[i])
                continue;
            xv[n] = x->item_v[i];
            dv[n] = d->item_v[i];
            xv2[n] = x->item_v2[i];
            dv2[n] = d->item_v2[i];
            xb[n] = x->item_bleu[i];
            db[n] = d->item_bleu[i];
            n++;
        }
        /* a fixed seed: the same run gives the same interval */
        if (t->metric == MET_BLEU)
            ek_boot_bleu_ratio(xb, db, n, 2000, 1, &x->ratio_lo, &x->ratio_hi);
        else
            ek_boot_mean_ratio(xv, dv, n, 2000, 1, &x->ratio_lo, &x->ratio_hi);
        if (t->metric == MET_BLEU || t->metric == MET_F1)
            ek_boot_mean_ratio(xv2, dv2, n, 2000, 1, &x->ratio2_lo, &x->ratio2_hi);
    }
    free(xv);
    free(dv);
    free(xv2);
    free(dv2);
    free(xb);
    free(db);
}

/* ---- output ---------------------------------------------------------------- */

typedef struct row {
    const config *cfg;
    const task *t;
    char plan_task[64];
    result res;
    mem mem;
} row;

static double tps(uint64_t n, uint64_t ns)
{
    return ns ? n * 1e9 / ns : 0;
}

static double ratio(double a, double b)
{
    return b > 0 && isfinite(a) ? a / b : NAN;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* Counts and byte sizes exactly, measurements to 6 digits. */
static void put_num(FILE *f, double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        fprintf(f, "%.0f", v);
    else
        fprintf(f, "%.6g", v);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        put_num(f, v);
    else
        fputs("null", f);
}

static void csv_num(FILE *f, double v)
{
    if (isfinite(v))
        put_num(f, v);
}

static const char *const fields[] = {
    "config", "mode", "task", "plan_task", "gamma", "delta", "phi", "alpha", "rank",
    "dense_first", "dense_last", "n_prompts", "n_positions", "ppl", "ppl_dense", "ppl_ratio",
    "agreement", "metric", "score", "score_dense", "score_ratio", "metric2", "score2",
    "score2_dense", "score2_ratio", "ffn_share",
    "prefill_tps", "decode_tps", "decode_ratio", "bench_prefill_tps", "bench_decode_tps",
    "bench_decode_ratio", "bytes_weights", "bytes_ffn", "bytes_other", "mem_ratio",
    "neurons_loaded", "rss_model", "rss_vs_plan", "rss_session", "rss_total", "pick",
    "score_ratio_lo", "score_ratio_hi", "score2_ratio_lo", "score2_ratio_hi", "comp", "cand",
};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

/* Writes one row's value i: as text (quote for CSV/JSON strings) or number. */
static void put_field(FILE *f, bool json, size_t i, const row *rw, const row *dense)
{
    const config *c = rw->cfg;
    const result *x = &rw->res, *d = &dense->res;
    const char *s = NULL;
    double v = NAN;
    switch (i) {
    case 0: s = c->name; break;
    case 1: s = eng_select_mode_name(c->mode); break;
    case 2: s = rw->t->name; break;
    case 3: s = rw->plan_task; break;
    case 4: v = rw->mem.gamma; break;
    case 5: v = c->delta; break;
    case 6: v = c->phi; break;
    case 7: v = c->alpha; break;
    case 8: s = rank_name(c->rank); break;
    case 9: v = c->dense_first; break;
    case 10: v = c->dense_last; break;
    case 11: v = (double)x->n_items; break;
    case 12: v = (double)x->n_pos; break;
    case 13: v = x->ppl; break;
    case 14: v = d->ppl; break;
    case 15: v = ratio(x->ppl, d->ppl); break;
    case 16: v = x->agree; break;
    case 17: s = metric_names[rw->t->metric]; break;
    case 18: v = x->metric; break;
    case 19: v = d->metric; break;
    case 20: v = ratio(x->metric, d->metric); break;
    case 21: s = metric2_names[rw->t->metric]; break;
    case 22: v = x->score2; break;
    case 23: v = d->score2; break;
    case 24: v = ratio(x->score2, d->score2); break;
    case 25: v = x->share; break;
    case 26: v = tps(x->n_prefill, x->prefill_ns); break;
    case 27: v = tps(x->n_decode, x->decode_ns); break;
    case 28: v = ratio(tps(x->n_decode, x->decode_ns), tps(d->n_decode, d->decode_ns)); break;
    case 29: v = x->bench_prefill_tps ? x->bench_prefill_tps : NAN; break;
    case 30: v = x->bench_decode_tps ? x->bench_decode_tps : NAN; break;
    case 31: v = ratio(x->bench_decode_tps, d->bench_decode_tps); break;
    case 32: v = (double)rw->mem.bytes_weights; break;
    case 33: v = (double)rw->mem.bytes_ffn; break;
    case 34: v = (double)(rw->mem.bytes_weights - rw->mem.bytes_ffn); break;
    case 35: v = ratio((double)rw->mem.bytes_weights, (double)dense->mem.bytes_weights); break;
    case 36: v = (double)rw->mem.neurons_loaded; break;
    case 37: v = (double)rw->mem.rss_model; break;
    case 38: v = ratio((double)rw->mem.rss_model, (double)rw->mem.bytes_weights); break;
    case 39: v = (double)rw->mem.rss_session; break;
    case 40: v = (double)rw->mem.rss_total; break;
    case 41: s = eng_pick_name(c->pick); break;
    case 42: v = x->ratio_lo; break;
    case 43: v = x->ratio_hi; break;
    case 44: v = x->ratio2_lo; break;
    case 45: v = x->ratio2_hi; break;
    case 46: s = eng_comp_name(c->comp); break;
    case 47: v = c->cand; break;
    }
    if (s) {
        if (json)
            json_str(f, s);
        else if (strpbrk(s, ",\"\n"))
            fprintf(f, "\"%s\"", s); /* names never hold '"': parse_config splits on ',' */
        else
            fputs(s, f);
    } else if (json) {
        json_num(f, v);
    } else {
        csv_num(f, v);
    }
}

static int write_csv(const char *path, const row *rows, size_t n, const row *const *dense_of)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    for (size_t i = 0; i < N_FIELDS; i++)
        fprintf(f, "%s%s", i ? "," : "", fields[i]);
    fputc('\n', f);
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < N_FIELDS; i++) {
            if (i)
                fputc(',', f);
            put_field(f, false, i, &rows[r], dense_of[r]);
        }
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : -EIO;
}

static int write_json(const char *path, const opts *o, const eng_model_info *info,
                      const row *rows, size_t n, const row *const *dense_of)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fprintf(f, "{\n  \"model\": ");
    json_str(f, o->model_path);
    fprintf(f, ",\n  \"model_name\": ");
    json_str(f, info->name);
    fprintf(f, ",\n  \"profile\": ");
    json_str(f, o->profile_path ? o->profile_path : "");
    fprintf(f, ",\n  \"prompt_sets\": [");
    for (int i = 0; i < o->n_sets; i++) {
        fputs(i ? ", " : "", f);
        json_str(f, o->sets[i]);
    }
    fprintf(f, "],\n  \"split\": \"%s\",\n  \"limit\": %ld,\n  \"threads\": %d,\n"
               "  \"matrices\": \"%s\",\n  \"prefill_q8\": %s,\n  \"bench_tokens\": %d,\n"
               "  \"rows\": [\n",
            o->split < 0 ? "all" : ek_split_name((ek_split)o->split), o->limit, info->n_threads,
            o->q8 ? "q8_0" : "f16", o->prefill_q8 ? "true" : "false", o->bench);
    for (size_t r = 0; r < n; r++) {
        fprintf(f, "    {");
        for (size_t i = 0; i < N_FIELDS; i++) {
            fprintf(f, "%s\"%s\": ", i ? ", " : "", fields[i]);
            put_field(f, true, i, &rows[r], dense_of[r]);
        }
        fprintf(f, "}%s\n", r + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0 ? 0 : -EIO;
}

/* "name score" and "ratio [lo,hi]" (the interval where defined), or "-"
 * where the ratio is undefined */
static void fmt_score(char *score, size_t ns, char *rt, size_t nr, const char *name, double v,
                      double q, double lo, double hi)
{
    snprintf(score, ns, "%s %.3g", name, v);
    if (isfinite(q) && isfinite(lo))
        snprintf(rt, nr, "%.3f [%.2f,%.2f]", q, lo, hi);
    else if (isfinite(q))
        snprintf(rt, nr, "%.3f", q);
}

static void print_row(const row *rw, const row *dense)
{
    const result *x = &rw->res;
    char score[32] = "-", rt[48] = "-";
    if (isfinite(x->metric)) {
        const double q = ratio(x->metric, dense->res.metric);
        const double q2 = ratio(x->score2, dense->res.score2);
        /* a metric whose dense score is 0 (corpus BLEU of a small model)
         * says nothing: the second score, with its interval, instead */
        if (!isfinite(q) && isfinite(q2))
            fmt_score(score, sizeof score, rt, sizeof rt, metric2_names[rw->t->metric],
                      x->score2, q2, x->ratio2_lo, x->ratio2_hi);
        else
            fmt_score(score, sizeof score, rt, sizeof rt, metric_names[rw->t->metric],
                      x->metric, q, x->ratio_lo, x->ratio_hi);
    }
    double dec = x->bench_decode_tps ? x->bench_decode_tps : tps(x->n_decode, x->decode_ns);
    printf("%-44.44s %-16.16s %8.2f %6.3f %-14s %-18s %6.3f %7.1f %7.1f %6.3f\n", rw->cfg->name,
           rw->t->name, x->ppl, x->agree, score, rt, x->share,
           tps(x->n_prefill, x->prefill_ns), dec,
           ratio((double)rw->mem.bytes_weights, (double)dense->mem.bytes_weights));
    fflush(stdout);
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: si-eval [-m MODEL] [-P PROFILE] --prompts FILE.jsonl [...] [-c CONFIG ...]\n"
            "  -m, --model PATH       GGUF model (default: $SI_MODEL or the cache)\n"
            "  -P, --profile PATH     profile (needed by load-only and selectinfer)\n"
            "      --prompts FILE     prompt set (repeatable), docs/prompt-sets.md\n"
            "      --split S          heldout (default), profile or all\n"
            "      --limit N          at most N prompts per task\n"
            "  -c, --config SPEC      MODE[,gamma=,delta=,phi=,alpha=,rank=abs|signed,comp=none|mean|linear,df=,dl=,\n"
            "                         lb=uniform|mass|sens,sens=FILE,pick=request|token|exact,copy=yes|no,\n"
            "                         kv=f16|q8_0,\n"
            "                         task=,seed=,budget_mb=,name=]\n"
            "                         (repeatable)\n"
            "      --configs FILE     one SPEC per line ('#' comments)\n"
            "      --max-tokens N     generation budget (default: qa 16, translate 48,\n"
            "                         summarize 40)\n"
            "      --metric M         f1, bleu, rougeL or none for every task\n"
            "      --no-generate      perplexity and agreement only\n"
            "      --bench N          also time N decode steps per config (first task)\n"
            "  -t, --threads N        worker threads (default 2)\n"
            "      --q8               every model (the dense reference too) with its matrices\n"
            "                         and FFN in Q8_0 (CPU; daemon matrices = q8_0)\n"
            "      --prefill-q8       every model (the reference too) with x in 8 bits in its\n"
            "                         prompts' Q8_0/Q4_1/Q4_0/Q4_K/Q5_K products (AVX-512 VNNI)\n"
            "      --csv FILE, --json FILE\n"
            "  -q, --quiet            no table\n");
}

static int add_config(config *cfgs, int *n, const char *spec)
{
    if (*n == MAX_CONFIGS) {
        fprintf(stderr, "more than %d configurations\n", MAX_CONFIGS);
        return -1;
    }
    char why[160];
    if (parse_config(spec, &cfgs[*n], why, sizeof why) < 0) {
        fprintf(stderr, "bad configuration '%s': %s\n", spec, why);
        return -1;
    }
    (*n)++;
    return 0;
}

static int read_configs(const char *path, config *cfgs, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open '%s': %s\n", path, strerror(errno));
        return -1;
    }
    char line[512];
    int r = 0;
    while (r == 0 && fgets(line, sizeof line, f)) {
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        s[strcspn(s, "\r\n#")] = 0;
        size_t k = strlen(s);
        while (k && (s[k - 1] == ' ' || s[k - 1] == '\t'))
            s[--k] = 0;
        if (*s)
            r = add_config(cfgs, n, s);
    }
    fclose(f);
    return r;
}

static int load_model(const opts *o, const eng_load_plan_params *pp, eng_model **ret, mem *mm,
                      eng_error *err)
{
    const char *path = o->model_path;
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = o->threads;
    mp.q8_matrices = o->q8;
    mp.prefill_q8 = o->prefill_q8;
    mp.plan = pp;
    uint64_t rss0 = si_proc_status_bytes("VmRSS");
    int r = eng_model_load(path, &mp, ret, err);
    if (r < 0)
        return r;
    memset(mm, 0, sizeof(*mm));
    mm->rss_model = si_proc_status_bytes("VmRSS") - rss0;
    return 0;
}

static void fill_mem(const eng_model *m, mem *mm)
{
    eng_model_info info;
    eng_plan_info pi;
    eng_model_get_info(m, &info);
    eng_model_get_plan(m, &pi);
    mm->bytes_weights = info.bytes_weights;
    mm->bytes_ffn = pi.bytes_ffn;
    mm->neurons_loaded = pi.neurons_loaded;
    mm->neurons_total = pi.neurons_total;
    mm->gamma = pi.gamma;
    mm->rss_total = si_proc_status_bytes("VmRSS");
}

int main(int argc, char **argv)
{
    /* a fixed mmap threshold: freed weights go back to the kernel at once,
     * so the VmRSS a load adds is the load's own (glibc's dynamic threshold
     * would otherwise keep freed models in the heap) */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);

    opts o = { .split = EK_SPLIT_HELDOUT, .limit = -1, .threads = 2 };
    static config cfgs[MAX_CONFIGS];
    int n_cfg = 0;
    enum { O_PROMPTS = 256, O_SPLIT, O_LIMIT, O_CONFIGS, O_MAXTOK, O_METRIC, O_NOGEN, O_BENCH,
           O_CSV, O_JSON, O_Q8, O_PREFILL_Q8 };
    static const struct option lopts[] = {
        { "model", required_argument, 0, 'm' },     { "profile", required_argument, 0, 'P' },
        { "prompts", required_argument, 0, O_PROMPTS }, { "split", required_argument, 0, O_SPLIT },
        { "limit", required_argument, 0, O_LIMIT }, { "config", required_argument, 0, 'c' },
        { "configs", required_argument, 0, O_CONFIGS }, { "max-tokens", required_argument, 0, O_MAXTOK },
        { "metric", required_argument, 0, O_METRIC }, { "no-generate", no_argument, 0, O_NOGEN },
        { "bench", required_argument, 0, O_BENCH }, { "threads", required_argument, 0, 't' },
        { "csv", required_argument, 0, O_CSV },     { "json", required_argument, 0, O_JSON },
        { "quiet", no_argument, 0, 'q' },           { "help", no_argument, 0, 'h' },
        { "q8", no_argument, 0, O_Q8 },
        { "prefill-q8", no_argument, 0, O_PREFILL_Q8 },
        { 0, 0, 0, 0 },
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "m:P:c:t:qh", lopts, NULL)) != -1) {
        switch (ch) {
        case 'm': o.model_path = optarg; break;
        case 'P': o.profile_path = optarg; break;
        case O_PROMPTS:
            if (o.n_sets == MAX_SETS) {
                fprintf(stderr, "at most %d prompt sets\n", MAX_SETS);
                return 2;
            }
            o.sets[o.n_sets++] = optarg;
            break;
        case O_SPLIT:
            if (!strcmp(optarg, "heldout"))
                o.split = EK_SPLIT_HELDOUT;
            else if (!strcmp(optarg, "profile"))
                o.split = EK_SPLIT_PROFILE;
            else if (!strcmp(optarg, "all"))
                o.split = -1;
            else {
                fprintf(stderr, "--split must be heldout, profile or all\n");
                return 2;
            }
            break;
        case O_LIMIT: o.limit = atol(optarg); break;
        case 'c':
            if (add_config(cfgs, &n_cfg, optarg) < 0)
                return 2;
            break;
        case O_CONFIGS:
            if (read_configs(optarg, cfgs, &n_cfg) < 0)
                return 2;
            break;
        case O_MAXTOK: o.max_tokens = atoi(optarg); break;
        case O_METRIC: {
            int k = 0;
            while (k < 4 && strcmp(optarg, metric_names[k]))
                k++;
            if (k == 4) {
                fprintf(stderr, "--metric must be none, f1, bleu or rougeL\n");
                return 2;
            }
            o.force_metric = (metric_kind)k;
            o.force_metric_set = true;
            break;
        }
        case O_NOGEN: o.no_generate = true; break;
        case O_BENCH: o.bench = atoi(optarg); break;
        case 't': o.threads = atoi(optarg); break;
        case O_CSV: o.csv = optarg; break;
        case O_JSON: o.json = optarg; break;
        case 'q': o.quiet = true; break;
        case O_Q8: o.q8 = true; break;
        case O_PREFILL_Q8: o.prefill_q8 = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (o.n_sets == 0 || optind != argc || o.bench < 0 || o.bench > 4096 || o.max_tokens < 0 ||
        o.max_tokens > 4096) {
        usage(stderr);
        return 2;
    }
    char mbuf[4096];
    if (!o.model_path)
        o.model_path = si_default_model(mbuf, sizeof mbuf);

    int ret = 1;
    ek_promptset *sets[MAX_SETS] = { 0 };
    static task tasks[MAX_TASKS];
    int n_tasks = 0;
    eng_profile *prof = NULL;
    eng_model *dense = NULL;
    row *rows = NULL;
    const row **dense_of = NULL;
    row *dense_rows = NULL;
    eng_error err;
    ek_error ekerr;
    for (int i = 0; i < o.n_sets; i++) {
        if (ek_promptset_load(o.sets[i], NULL, &sets[i], &ekerr) < 0) {
            fprintf(stderr, "%s:%zu: %s\n", o.sets[i], ekerr.line, ekerr.msg);
            goto out;
        }
    }

    /* the dense reference: its top-1 per position, perplexity, metric, speed */
    mem dense_mem;
    if (load_model(&o, NULL, &dense, &dense_mem, &err) < 0) {
        fprintf(stderr, "Failed to load model '%s': %s\n", o.model_path, err.msg);
        goto out;
    }
    fill_mem(dense, &dense_mem);
    eng_model_info info;
    eng_model_get_info(dense, &info);
    if (o.profile_path && eng_profile_load(o.profile_path, dense, &prof, &err) < 0) {
        fprintf(stderr, "Failed to load profile '%s': %s\n", o.profile_path, err.msg);
        goto out;
    }
    if (build_tasks(&o, sets, dense, tasks, &n_tasks) < 0)
        goto out;
    if (n_tasks == 0) {
        fprintf(stderr, "no prompts selected\n");
        goto out;
    }
    o.bench_task = &tasks[0];
    static const config dense_cfg = { .name = "dense (reference)", .mode = ENG_SELECT_DENSE,
                                      .gamma = 1, .alpha = 0.2f };
    dense_rows = calloc((size_t)n_tasks, sizeof(row));
    size_t max_rows = (size_t)n_tasks * (size_t)(n_cfg + 1);
    rows = calloc(max_rows, sizeof(row));
    dense_of = calloc(max_rows, sizeof(row *));
    if (!dense_rows || !rows || !dense_of)
        goto out;
    if (!o.quiet)
        printf("%-44s %-16s %8s %6s %-14s %-18s %6s %7s %7s %6s\n", "config", "task", "ppl", "agree",
               "score", "ratio [95% CI]", "share", "pre t/s", "dec t/s", "mem");
    size_t n_rows = 0;
    for (int k = 0; k < n_tasks; k++) {
        row *rw = &dense_rows[k];
        rw->cfg = &dense_cfg;
        rw->t = &tasks[k];
        rw->mem = dense_mem;
        int r = run_task(&o, dense, NULL, ENG_KV_F16, &tasks[k], true, &rw->res,
                         k == 0 ? &dense_mem.rss_session : NULL);
        if (r < 0) {
            fprintf(stderr, "dense run on %s failed: %s\n", tasks[k].name, strerror(-r));
            goto out;
        }
        score_interval(&tasks[k], &rw->res, &rw->res);
        rw->mem = dense_mem;
        if (!o.quiet)
            print_row(rw, rw);
        rows[n_rows] = *rw;
        dense_of[n_rows++] = rw;
    }
    for (int k = 0; k < n_tasks; k++)
        dense_rows[k].mem = dense_mem;
    /* every configuration loads its own model: free the reference first so
     * the VmRSS a load adds is measured on its own */
    int n_layer_model;
    {
        eng_model_info di;
        eng_model_get_info(dense, &di);
        n_layer_model = di.n_layer;
    }
    eng_model_free(dense);
    dense = NULL;

    int failures = 0;
    for (int ci = 0; ci < n_cfg; ci++) {
        const config *c = &cfgs[ci];
        eng_model *m = NULL;
        mem mm = { 0 };
        const char *cur_task = NULL;
        bool per_task = c->mode == ENG_SELECT_LOAD_ONLY || c->mode == ENG_SELECT_SELECTINFER;
        for (int k = 0; k < n_tasks; k++) {
            eng_load_plan_params pp = eng_load_plan_params_default();
            pp.mode = c->mode;
            pp.profile = prof;
            pp.task = c->task[0] ? c->task : tasks[k].name;
            pp.gamma = c->gamma;
            pp.delta = c->delta;
            pp.dense_first = c->dense_first;
            pp.dense_last = c->dense_last;
            pp.budget_bytes = c->budget_bytes;
            pp.seed = c->seed;
            pp.score = c->score;
            pp.layer_budget = c->layer_budget;
            pp.layer_sens = c->n_sens ? c->sens : NULL;
            pp.sketch = c->pick == ENG_PICK_TOKEN; /* what per-token picking reads */
            int r = 0;
            if (c->n_sens && c->n_sens != n_layer_model) {
                r = -EINVAL;
                snprintf(err.msg, sizeof err.msg, "sens=FILE needs %d values (one per layer), "
                         "it has %d", n_layer_model, c->n_sens);
            } else
            if (!m) {
                r = load_model(&o, &pp, &m, &mm, &err);
                cur_task = pp.task;
            } else if (per_task && strcmp(cur_task, pp.task)) {
                /* another task's base neurons: hot-swap instead of reloading */
                eng_swap_stats sw;
                r = eng_model_swap(m, &pp, &sw, &err);
                cur_task = pp.task;
            }
            if (r < 0) {
                fprintf(stderr, "%s, task %s: %s\n", c->name, tasks[k].name, err.msg);
                failures++;
                continue;
            }
            eng_compute_params cp = eng_compute_params_default();
            cp.phi = c->phi;
            cp.alpha = c->alpha;
            cp.rank = c->rank;
            cp.comp = c->comp;
            cp.pick = c->pick;
            cp.cand = c->cand;
            cp.copy_dynamic = c->copy_dynamic;
            row *rw = &rows[n_rows];
            rw->cfg = c;
            rw->t = &tasks[k];
            snprintf(rw->plan_task, sizeof rw->plan_task, "%s", per_task ? pp.task : "");
            uint64_t rss_session = 0;
            r = run_task(&o, m, &cp, c->kv, &tasks[k], false, &rw->res, &rss_session);
            if (r == 0)
                score_interval(&tasks[k], &rw->res, &dense_rows[k].res);
            result_free_items(&rw->res); /* the dense rows keep theirs */
            if (r < 0) {
                fprintf(stderr, "%s, task %s: %s\n", c->name, tasks[k].name,
                        r == -EINVAL ? "compute parameters rejected (phi below delta?)"
                                     : strerror(-r));
                failures++;
                continue;
            }
            fill_mem(m, &mm);
            mm.rss_session = rss_session;
            rw->mem = mm;
            dense_of[n_rows] = &dense_rows[k];
            n_rows++;
            if (!o.quiet)
                print_row(rw, &dense_rows[k]);
        }
        eng_model_free(m);
    }

    if (o.csv && write_csv(o.csv, rows, n_rows, dense_of) < 0) {
        fprintf(stderr, "cannot write '%s'\n", o.csv);
        goto out;
    }
    if (o.json && write_json(o.json, &o, &info, rows, n_rows, dense_of) < 0) {
        fprintf(stderr, "cannot write '%s'\n", o.json);
        goto out;
    }
    ret = failures ? 1 : 0;
out:
    eng_model_free(dense);
    eng_profile_free(prof);
    free_tasks(tasks, n_tasks);
    for (int k = 0; dense_rows && k < n_tasks; k++)
        result_free_items(&dense_rows[k].res); /* rows[] holds copies of these */
    free(rows);
    free(dense_of);
    free(dense_rows);
    for (int i = 0; i < o.n_sets; i++)
        ek_promptset_free(sets[i]);
    return ret;
}
