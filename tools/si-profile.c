/* si-profile: builds, merges and inspects SelectInfer neuron profiles.
 *
 *   si-profile run -m MODEL --prompts qa.jsonl [--task NAME] [--split profile]
 *                  [--generate N] [--limit N] [-o qa.siprof] [-t THREADS]
 *   si-profile merge -o all.siprof qa.siprof translate.siprof ...
 *   si-profile info FILE [-m MODEL]
 *
 * run: the dense model reads every selected prompt of a prompt set
 * (docs/prompt-sets.md), rendered with its chat template exactly as
 * si-eval and the daemon render it, optionally followed by N greedy tokens
 * of its own; for each prompt the engine's FFN hook sums |a_n(t)| over its
 * tokens and the profile keeps s_n(p) = that sum / |T_p| (SELECTINFER.md,
 * "Definitions"). Records go under their own "task" field unless --task
 * names one task for all. Progress goes to stderr.
 *
 * merge: adds the tasks of several profiles (same model) into one; a task
 * present in two inputs has its prompts pooled.
 *
 * info: header, tasks and counts, how far each task's top neurons agree
 * with the model-wide ranking, and with -m whether the profile belongs to
 * that model (fingerprint).
 *
 * File format: docs/profile-format.md.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "promptset.h"
#include "si-util.h"

#define MAX_PROMPT_TOKENS 4096
#define MAX_INPUTS 64
#define MAX_TASKS_PER_SET 256

static void usage(FILE *f)
{
    fprintf(f,
            "usage: si-profile run -m MODEL --prompts FILE.jsonl [options]\n"
            "         --task NAME      record every prompt under this task (default: the\n"
            "                          records' own \"task\" field)\n"
            "         --split S        profile (default), heldout or all\n"
            "         --generate N     also score N greedy tokens per prompt (default 0)\n"
            "         --limit N        at most N prompts per task\n"
            "         -o FILE          output (default: TASK.siprof)\n"
            "         -t THREADS       worker threads (default: all CPUs)\n"
            "         -q               no progress\n"
            "       si-profile merge -o OUT.siprof IN.siprof...\n"
            "       si-profile info FILE.siprof [-m MODEL]\n");
}

/* ---- run ---------------------------------------------------------------- */

typedef struct progress {
    bool tty, quiet;
    uint64_t t0, last;
    size_t total;
    uint64_t tokens;
} progress;

static void progress_show(progress *p, size_t done, const char *task, bool final)
{
    if (p->quiet)
        return;
    uint64_t now = eng_time_ns();
    /* on a terminal redraw often; in a log, one line every 10 s */
    uint64_t every = p->tty ? 200000000ull : 10000000000ull;
    if (!final && now - p->last < every)
        return;
    p->last = now;
    double el = (now - p->t0) / 1e9;
    double tps = el > 0 ? p->tokens / el : 0;
    char eta[32];
    si_fmt_duration(eta, sizeof eta, done ? el / done * (p->total - done) : -1);
    char elapsed[32];
    si_fmt_duration(elapsed, sizeof elapsed, el);
    fprintf(stderr, "%s[%s] %zu/%zu prompts, %llu tokens, %.0f tok/s, %s %s%s", p->tty ? "\r" : "",
            task, done, p->total, (unsigned long long)p->tokens, tps, final ? "took" : "ETA",
            final ? elapsed : eta, p->tty && !final ? "   " : "\n");
    fflush(stderr);
}

static int cmd_run(int argc, char **argv)
{
    const char *model_path = NULL, *prompts = NULL, *task = NULL, *out = NULL;
    const char *split_name = "profile";
    int n_gen = 0, threads = 0;
    long limit = -1;
    bool quiet = false;
    enum { O_PROMPTS = 256, O_TASK, O_SPLIT, O_GEN, O_LIMIT };
    static const struct option opts[] = {
        { "model", required_argument, 0, 'm' },     { "prompts", required_argument, 0, O_PROMPTS },
        { "task", required_argument, 0, O_TASK },   { "split", required_argument, 0, O_SPLIT },
        { "generate", required_argument, 0, O_GEN }, { "limit", required_argument, 0, O_LIMIT },
        { "output", required_argument, 0, 'o' },    { "threads", required_argument, 0, 't' },
        { "quiet", no_argument, 0, 'q' },           { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "m:o:t:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case O_PROMPTS: prompts = optarg; break;
        case O_TASK: task = optarg; break;
        case O_SPLIT: split_name = optarg; break;
        case O_GEN: n_gen = atoi(optarg); break;
        case O_LIMIT: limit = atol(optarg); break;
        case 'o': out = optarg; break;
        case 't': threads = atoi(optarg); break;
        case 'q': quiet = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!prompts || optind != argc || n_gen < 0 || n_gen > 4096) {
        usage(stderr);
        return 2;
    }
    int split = -1; /* -1: all */
    if (!strcmp(split_name, "profile"))
        split = EK_SPLIT_PROFILE;
    else if (!strcmp(split_name, "heldout"))
        split = EK_SPLIT_HELDOUT;
    else if (strcmp(split_name, "all")) {
        fprintf(stderr, "--split must be profile, heldout or all, not '%s'\n", split_name);
        return 2;
    }
    char mbuf[4096];
    if (!model_path)
        model_path = si_default_model(mbuf, sizeof mbuf);

    ek_promptset *ps;
    ek_error ekerr;
    if (ek_promptset_load(prompts, NULL, &ps, &ekerr) < 0) {
        fprintf(stderr, "%s:%zu: %s\n", prompts, ekerr.line, ekerr.msg);
        return 1;
    }
    /* which records, and how many per task (for --limit) */
    size_t n_all = ek_promptset_size(ps), total = 0;
    const char *seen_name[MAX_TASKS_PER_SET];
    long seen_count[MAX_TASKS_PER_SET];
    size_t n_seen = 0;
    bool *use = calloc(n_all ? n_all : 1, sizeof(bool));
    if (!use) {
        ek_promptset_free(ps);
        return 1;
    }
    for (size_t i = 0; i < n_all; i++) {
        const ek_prompt *p = ek_promptset_get(ps, i);
        if (split >= 0 && (int)p->split != split)
            continue;
        if (limit >= 0) {
            /* per-task counts; a set holds few tasks, so a short list will do */
            const char *ti = task ? task : p->task;
            size_t k = 0;
            while (k < n_seen && strcmp(seen_name[k], ti))
                k++;
            if (k == n_seen) {
                if (n_seen == MAX_TASKS_PER_SET) {
                    fprintf(stderr, "%s: more than %d tasks\n", prompts, MAX_TASKS_PER_SET);
                    free(use);
                    ek_promptset_free(ps);
                    return 1;
                }
                seen_name[n_seen] = ti;
                seen_count[n_seen++] = 0;
            }
            if (seen_count[k] >= limit)
                continue;
            seen_count[k]++;
        }
        use[i] = true;
        total++;
    }
    const char *first_task = NULL;
    for (size_t i = 0; i < n_all && !first_task; i++)
        if (use[i])
            first_task = task ? task : ek_promptset_get(ps, i)->task;
    if (total == 0) {
        fprintf(stderr, "%s: no %s prompts\n", prompts, split_name);
        free(use);
        ek_promptset_free(ps);
        return 1;
    }
    char obuf[128];
    if (!out) {
        snprintf(obuf, sizeof obuf, "%s.siprof", first_task);
        out = obuf;
    }

    eng_model_params mp = eng_model_params_default();
    mp.n_threads = threads;
    eng_model *m = NULL;
    eng_error err;
    int r = eng_model_load(model_path, &mp, &m, &err);
    if (r < 0) {
        fprintf(stderr, "Failed to load model '%s': %s\n", model_path, err.msg);
        free(use);
        ek_promptset_free(ps);
        return 1;
    }
    eng_model_info info;
    eng_model_get_info(m, &info);
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = MAX_PROMPT_TOKENS + n_gen + 1;
    if (info.n_ctx_train > 0 && sp.n_ctx > info.n_ctx_train)
        sp.n_ctx = info.n_ctx_train;
    eng_session *s = NULL;
    eng_profile *prof = NULL;
    size_t n_scores = (size_t)info.n_layer * info.n_ff;
    double *sums = malloc(n_scores * sizeof(double));
    int ret = 1;
    if (!sums || (r = eng_session_new(m, &sp, &s)) < 0 || (r = eng_profile_new(m, &prof)) < 0) {
        fprintf(stderr, "cannot set up profiling: %s\n",
                r == -ENOTSUP && info.n_expert > 0
                    ? "neuron scores of mixture-of-experts layers are not supported"
                    : strerror(r < 0 ? -r : ENOMEM));
        goto out;
    }

    progress pg = { .tty = isatty(2), .quiet = quiet, .t0 = eng_time_ns(), .total = total };
    size_t done = 0, skipped = 0;
    for (size_t i = 0; i < n_all; i++) {
        if (!use[i])
            continue;
        const ek_prompt *p = ek_promptset_get(ps, i);
        const char *tname = task ? task : p->task;
        int32_t *toks = NULL;
        size_t nt = 0;
        int room = sp.n_ctx - n_gen;
        r = si_render_prompt(m, p->system, p->prompt, (size_t)(room > 1 ? room : 1), &toks, &nt);
        if (r < 0) {
            /* one over-long prompt should not sink a whole profile */
            fprintf(stderr, "%s%s:%zu: %s: skipped (%s)\n", pg.tty ? "\n" : "", prompts, p->line,
                    p->id, r == -E2BIG ? "prompt too long" : strerror(-r));
            skipped++;
            done++;
            continue;
        }
        memset(sums, 0, n_scores * sizeof(double));
        eng_session_reset(s);
        eng_session_observe_ffn(s, sums);
        uint64_t n_tok = 0;
        r = eng_session_eval(s, toks, nt, 0);
        if (r == 0)
            n_tok = nt;
        for (int g = 0; r == 0 && g < n_gen; g++) {
            int32_t t = si_argmax(eng_session_logits(s, -1), info.n_vocab);
            if (eng_token_is_eog(m, t))
                break;
            if ((r = eng_session_eval(s, &t, 1, 0)) == 0)
                n_tok++;
        }
        eng_session_observe_ffn(s, NULL);
        free(toks);
        if (r < 0 && r != -ENOSPC) {
            fprintf(stderr, "\n%s: eval failed: %s\n", p->id, strerror(-r));
            goto out;
        }
        if (n_tok == 0) { /* the context could not take even the prompt */
            fprintf(stderr, "%s%s: skipped (context full)\n", pg.tty ? "\n" : "", p->id);
            skipped++;
            done++;
            continue;
        }
        if ((r = eng_profile_add_prompt(prof, tname, sums, n_tok)) < 0) {
            fprintf(stderr, "\n%s: cannot add to task '%s': %s\n", p->id, tname,
                    r == -EINVAL ? "invalid task name" : strerror(-r));
            goto out;
        }
        pg.tokens += n_tok;
        done++;
        progress_show(&pg, done, tname, false);
    }
    progress_show(&pg, done, task ? task : first_task, true);
    if ((r = eng_profile_save(prof, out)) < 0) {
        fprintf(stderr, "cannot write '%s': %s\n", out, strerror(-r));
        goto out;
    }
    if (!quiet) {
        for (int i = 0; i < eng_profile_n_tasks(prof); i++) {
            uint64_t np, ntk;
            const char *name = eng_profile_task(prof, i, &np, &ntk);
            fprintf(stderr, "task %s: %llu prompts, %llu tokens\n", name,
                    (unsigned long long)np, (unsigned long long)ntk);
        }
        fprintf(stderr, "wrote %s (%zu prompts skipped)\n", out, skipped);
    }
    ret = 0;
out:
    eng_profile_free(prof);
    eng_session_free(s);
    eng_model_free(m);
    free(sums);
    free(use);
    ek_promptset_free(ps);
    return ret;
}

/* ---- merge -------------------------------------------------------------- */

static int cmd_merge(int argc, char **argv)
{
    const char *out = NULL;
    int c;
    static const struct option opts[] = {
        { "output", required_argument, 0, 'o' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int n_in = argc - optind;
    if (!out || n_in < 1 || n_in > MAX_INPUTS) {
        usage(stderr);
        return 2;
    }
    eng_profile *dst = NULL;
    eng_error err;
    int ret = 1;
    for (int i = 0; i < n_in; i++) {
        const char *path = argv[optind + i];
        eng_profile *p;
        if (eng_profile_load(path, NULL, &p, &err) < 0) {
            fprintf(stderr, "%s: %s\n", path, err.msg);
            goto out;
        }
        if (!dst) {
            dst = p;
            continue;
        }
        for (int k = 0; k < eng_profile_n_tasks(p); k++) {
            const char *name = eng_profile_task(p, k, NULL, NULL);
            for (int j = 0; j < eng_profile_n_tasks(dst); j++)
                if (!strcmp(name, eng_profile_task(dst, j, NULL, NULL)))
                    fprintf(stderr, "%s: task '%s' is already present: pooling its prompts\n",
                            path, name);
        }
        int r = eng_profile_merge(dst, p, &err);
        eng_profile_free(p);
        if (r < 0) {
            fprintf(stderr, "%s: cannot merge: %s\n", path, err.msg);
            goto out;
        }
    }
    int r = eng_profile_save(dst, out);
    if (r < 0) {
        fprintf(stderr, "cannot write '%s': %s\n", out, strerror(-r));
        goto out;
    }
    fprintf(stderr, "wrote %s: %d tasks\n", out, eng_profile_n_tasks(dst));
    ret = 0;
out:
    eng_profile_free(dst);
    return ret;
}

/* ---- info --------------------------------------------------------------- */

/* The fixed header of docs/profile-format.md, read directly: the engine's
 * API exposes tasks and scores but not the recorded shapes. */
typedef struct prof_header {
    uint32_t version, n_layer, n_ff, n_embd, n_vocab, n_tasks;
    uint64_t fingerprint;
    char arch[33];
} prof_header;

static uint64_t le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static int read_header(const char *path, prof_header *h)
{
    unsigned char b[72];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n != sizeof b)
        return -EINVAL;
    h->version = (uint32_t)le(b + 8, 4);
    h->n_layer = (uint32_t)le(b + 12, 4);
    h->n_ff = (uint32_t)le(b + 16, 4);
    h->n_embd = (uint32_t)le(b + 20, 4);
    h->n_vocab = (uint32_t)le(b + 24, 4);
    h->n_tasks = (uint32_t)le(b + 28, 4);
    h->fingerprint = le(b + 32, 8);
    memcpy(h->arch, b + 40, 32);
    h->arch[32] = 0;
    return 0;
}

static int cmp_desc(const void *a, const void *b, void *ctx)
{
    const double *s = ctx;
    double x = s[*(const int *)a], y = s[*(const int *)b];
    return x > y ? -1 : x < y ? 1 : *(const int *)a - *(const int *)b;
}

/* Share of the top-k neurons of a that are also in the top-k of b. */
static double top_overlap(const double *a, const double *b, int n, int k, int *ia, int *ib,
                          char *mark)
{
    for (int i = 0; i < n; i++)
        ia[i] = ib[i] = i, mark[i] = 0;
    qsort_r(ia, n, sizeof(int), cmp_desc, (void *)a);
    qsort_r(ib, n, sizeof(int), cmp_desc, (void *)b);
    for (int i = 0; i < k; i++)
        mark[ia[i]] = 1;
    int both = 0;
    for (int i = 0; i < k; i++)
        both += mark[ib[i]];
    return k ? (double)both / k : 0;
}

static int cmd_info(int argc, char **argv)
{
    const char *model_path = NULL;
    int c;
    static const struct option opts[] = {
        { "model", required_argument, 0, 'm' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 1 != argc) {
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    eng_profile *p;
    eng_error err;
    if (eng_profile_load(path, NULL, &p, &err) < 0) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    prof_header h;
    if (read_header(path, &h) < 0) { /* cannot happen after a good load, but be sure */
        fprintf(stderr, "%s: cannot read the header\n", path);
        eng_profile_free(p);
        return 1;
    }
    printf("profile      %s\n", path);
    printf("version      %u\n", h.version);
    printf("model        %s, %u layers, n_ff %u, n_embd %u, vocab %u\n", h.arch, h.n_layer,
           h.n_ff, h.n_embd, h.n_vocab);
    printf("fingerprint  %016llx\n", (unsigned long long)h.fingerprint);
    printf("tasks        %d\n", eng_profile_n_tasks(p));
    int F = (int)h.n_ff, L = (int)h.n_layer;
    double *a = malloc(F * sizeof(double)), *b = malloc(F * sizeof(double));
    int *ia = malloc(F * sizeof(int)), *ib = malloc(F * sizeof(int));
    char *mark = malloc(F);
    int ret = 1;
    if (!a || !b || !ia || !ib || !mark)
        goto out;
    /* how task-specific each task's base neurons are: overlap of its top 30 %
     * with the model-wide top 30 %, mean over layers */
    printf("%-20s %9s %10s %8s %12s\n", "task", "prompts", "tokens", "tok/p", "top30%~all");
    for (int i = 0; i < eng_profile_n_tasks(p); i++) {
        uint64_t np, ntk;
        const char *name = eng_profile_task(p, i, &np, &ntk);
        double ov = 0;
        for (int l = 0; l < L; l++) {
            eng_profile_scores(p, name, l, a);
            eng_profile_scores(p, "*", l, b);
            ov += top_overlap(a, b, F, (int)lround(0.3 * F), ia, ib, mark);
        }
        printf("%-20s %9llu %10llu %8.1f %11.1f%%\n", name, (unsigned long long)np,
               (unsigned long long)ntk, np ? (double)ntk / np : 0, 100 * ov / L);
    }
    ret = 0;
    if (model_path) {
        eng_model_params mp = eng_model_params_default();
        mp.n_threads = 1;
        eng_model *m;
        if (eng_model_load(model_path, &mp, &m, &err) < 0) {
            fprintf(stderr, "Failed to load model '%s': %s\n", model_path, err.msg);
            ret = 1;
            goto out;
        }
        eng_profile *q;
        int r = eng_profile_load(path, m, &q, &err);
        if (r < 0) {
            printf("model check  FAIL: %s\n", err.msg);
            ret = 1;
        } else {
            printf("model check  ok (%s)\n", model_path);
            eng_profile_free(q);
        }
        eng_model_free(m);
    }
out:
    free(a);
    free(b);
    free(ia);
    free(ib);
    free(mark);
    eng_profile_free(p);
    return ret;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    /* getopt sees the subcommand's arguments as its own argv */
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "merge"))
        return cmd_merge(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "si-profile: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
