/* si-bench: speed and memory of the engine on one model, and how far decode
 * is from what this machine's memory bandwidth allows.
 *
 * Figures (docs/benchmark.md explains each):
 *   load time        eng_model_load() wall time (read + convert to storage)
 *   prefill tok/s    one eval of n_prompt tokens from an empty context
 *   time to 1st tok  that eval plus choosing the first token (argmax)
 *   decode tok/s     n_gen single-token evals after the prompt, greedy
 *   VmRSS / VmHWM    from /proc/self/status after the runs (before the
 *                    bandwidth probe, which would inflate them)
 *   weight bytes     eng_model_info.bytes_weights (resident after conversion)
 *   bandwidth        best of several streaming reads of a buffer much larger
 *                    than the caches, split over the same number of threads
 *   step bytes       weight bytes one decode step reads at this setting:
 *                    eng_model_info.bytes_per_token with the FFN counted at
 *                    the share decode computes (phi; a mixture of experts:
 *                    the experts a step picks), KV cache left out, Mamba-2
 *                    states (read and written: twice their bytes) counted
 *   achieved         step bytes x decode tok/s, in GB/s
 *   roofline         bandwidth / step bytes: the decode rate if every step
 *                    only had to stream its weights once
 *   --llama-bench    runs llama.cpp's llama-bench -p N -n M -t T -o json on
 *                    --llama-model (an F16 GGUF reads the same bytes per token
 *                    as our f16 storage) and prints ours / llama.cpp; with
 *                    --kv-type q8_0 also -ctk q8_0 -ctv q8_0 -fa on. Its
 *                    decode runs from an empty context, ours after the
 *                    prompt (llama-bench -d N is the like for like one).
 *   --prefill-q8     the prompt's products with Q8_0, Q4_1, Q4_0, Q4_K and
 *                    Q5_K rows against x rounded to 8 bits per block of 32
 *                    (Q6_K's stay f32), where the CPU's kernels have it
 *                    (eng_model_params.prefill_q8; AVX-512 VNNI), as
 *                    llama.cpp's; without it x in f32.
 *   --backend        cpu (default), cuda or auto: where the forward pass runs.
 *                    On a GPU the bandwidth is the device's nominal one
 *                    (memory clock x bus width; no probe), and the counters
 *                    of decode graphs are reported (ENG_CUDA_GRAPHS=0 in
 *                    the environment launches op by op instead).
 *   --phi F          selective decode: the prompt's prefill picks phi * n_ff
 *                    neurons per layer, decode computes only those (coreinfer
 *                    plan: everything loaded, no profile needed; with
 *                    --profile FILE --task T a selectinfer plan, --gamma and
 *                    --delta, default 0.7 and 0.3). ffn_share reports the
 *                    share decode computed.
 *   --swap T         with --profile: hot-swap the loaded plan to task T
 *                    before measuring (eng_model_swap), as a daemon serves
 *                    a task after a profile change.
 *   --pick token     with --phi: every decode token picks its own neurons by
 *                    the plan's 4-bit sketch (ENG_PICK_TOKEN; the plan keeps
 *                    one); the sketch's bytes count in ffn_share.
 *   --pick exact     the same by every loaded neuron's own activation
 *                    (ENG_PICK_EXACT: all gate and up rows read, the down
 *                    rows of the picked; those bytes count in ffn_share).
 *   --cand F         with --pick exact: pick among F * n_ff candidates a
 *                    layer chosen per request (eng_compute_params.cand).
 *   --comp mean      with --phi: the neurons a request leaves out stand in
 *                    by their mean activation over the prompt (ENG_COMP_MEAN;
 *                    pick request, or exact with --cand); linear: by a map of
 *                    each layer's input fitted on the prompt (ENG_COMP_LINEAR,
 *                    its bytes counted in phi).
 *   --sample         decode samples instead of greedy, as a chat client
 *                    would (temperature 0.8, top-k 40, top-p 0.95, repeat
 *                    penalty 1.1 over the last 64), as eng_generate does:
 *                    on a GPU each step brings back the row's candidates
 *                    (eng_sampler_eval_flags), on the CPU the sampler reads
 *                    the row. Against a greedy run of the same model, what
 *                    sampling costs a token.
 *   --sample-row     as --sample, but every step brings back the row of
 *                    logits (what a GPU did before the candidates): their
 *                    difference on a GPU is what the candidates save.
 *
 *   --kv-type T      the KV cache in f16 (default) or q8_0 (eng_kv_type;
 *                    the CPU backend offers q8_0). Long prompts (-p 1500)
 *                    show what it does to decode attention.
 *
 * Prompt tokens are deterministic pseudo-random ids (llama-bench also feeds
 * random ids); speed of a dense model does not depend on which.
 *
 * Usage: si-bench [-m MODEL] [-p 128] [-n 64] [-t THREADS] [-r REPS] [--f32] [--q8] [--prefill-q8]
 *                 [--bw-mb 512] [--llama-bench PATH --llama-model GGUF] [--json]
 *                 [--backend cpu|cuda|auto] [--device N]
 *                 [--phi F [--profile FILE --task T [--gamma G] [--delta D] [--swap T]]
 *                 [--pick token|exact]] [--sample | --sample-row] [--kv-type f16|q8_0]
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "si-util.h"

static void usage(FILE *f) {
    fprintf(f, "usage: si-bench [-m MODEL] [-p N_PROMPT (128)] [-n N_GEN (64)] [-t THREADS] "
               "[-r REPS (3)] [--f32] [--q8] [--prefill-q8] [--bw-mb MB (512)]\n"
               "                [--llama-bench PATH --llama-model GGUF] [--json]\n"
               "                [--backend cpu|cuda|auto] [--device N]\n"
               "                [--phi F [--profile FILE --task T [--gamma G] [--delta D] [--swap T]]\n"
               "                [--pick token|exact [--cand F]] [--comp mean|linear] [--no-copy]]\n"
               "                [--sample | --sample-row] [--kv-type f16|q8_0]\n");
}

/* ---- memory bandwidth ---------------------------------------------------- */

typedef struct bw_job {
    const uint64_t *p;
    size_t n; /* uint64 words */
    uint64_t sum;
} bw_job;

static volatile uint64_t bw_sink;

/* Four independent sums keep several loads in flight; the result is kept so
 * the reads cannot be elided. */
static uint64_t bw_sum_plain(const uint64_t *p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < n; i++)
        s0 += p[i];
    return s0 + s1 + s2 + s3;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* 32-byte loads: on x86 the 16-byte loop reads measurably slower (4.3 vs
 * 5.5 GB/s on the development VM), and the engine's kernels use AVX2 too. */
typedef uint64_t bw_v4 __attribute__((vector_size(32)));
__attribute__((target("avx2"))) static uint64_t bw_sum_avx2(const uint64_t *p, size_t n) {
    bw_v4 a = {0}, b = {0}, c = {0}, d = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a += *(const bw_v4 *)(p + i);
        b += *(const bw_v4 *)(p + i + 4);
        c += *(const bw_v4 *)(p + i + 8);
        d += *(const bw_v4 *)(p + i + 12);
    }
    a += b + c + d;
    return a[0] + a[1] + a[2] + a[3] + bw_sum_plain(p + i, n - i);
}
#endif

static void *bw_read(void *arg) {
    bw_job *j = arg;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2")) {
        j->sum = bw_sum_avx2(j->p, j->n);
        return NULL;
    }
#endif
    j->sum = bw_sum_plain(j->p, j->n);
    return NULL;
}

/* Best-of-passes read bandwidth in bytes/s over mb MiB with n_threads. */
static double measure_bandwidth(size_t mb, int n_threads) {
    size_t bytes = mb << 20;
    uint64_t *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return 0;
    /* Huge pages where the kernel allows them: TLB misses would otherwise
     * be part of what we measure. */
    madvise(buf, bytes, MADV_HUGEPAGE);
    /* Write every page: untouched anonymous pages all map the zero page,
     * which would be read from the cache. */
    memset(buf, 1, bytes);
    if (n_threads < 1)
        n_threads = 1;
    if (n_threads > 256)
        n_threads = 256;
    size_t words = bytes / sizeof(uint64_t), per = words / (size_t)n_threads / 4 * 4;
    double best = 0;
    for (int pass = 0; pass < 6; pass++) {
        bw_job jobs[256];
        pthread_t th[256];
        uint64_t t0 = eng_time_ns();
        for (int t = 0; t < n_threads; t++) {
            jobs[t].p = buf + (size_t)t * per;
            jobs[t].n = t == n_threads - 1 ? words - (size_t)t * per : per;
            if (t > 0)
                pthread_create(&th[t], NULL, bw_read, &jobs[t]);
        }
        bw_read(&jobs[0]);
        for (int t = 1; t < n_threads; t++)
            pthread_join(th[t], NULL);
        uint64_t dt = eng_time_ns() - t0;
        for (int t = 0; t < n_threads; t++)
            bw_sink += jobs[t].sum;
        double bw = (double)bytes / ((double)dt / 1e9);
        if (pass > 0 && bw > best) /* pass 0 warms the TLB and the threads */
            best = bw;
    }
    munmap(buf, bytes);
    return best;
}

/* ---- llama-bench ------------------------------------------------------- */

/* Finds "key": number inside [p, end); returns NAN when absent. */
static double json_num(const char *p, const char *end, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    size_t pl = strlen(pat);
    for (const char *q = p; q + pl < end; q++)
        if (!memcmp(q, pat, pl)) {
            q += pl;
            while (q < end && (*q == ' ' || *q == ':'))
                q++;
            return strtod(q, NULL);
        }
    return NAN;
}

/* How a command that popen ran ended, from pclose's status, into why: a
 * crashed llama-bench (its AMX build on a VM that does not grant the
 * tiles, for one) is not "no child". */
static void describe_exit(int status, char *why, size_t cap) {
    if (WIFSIGNALED(status))
        snprintf(why, cap, "killed by signal %d, %s", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status) && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 160)
        /* the shell popen runs says a signal as 128 + its number */
        snprintf(why, cap, "exit status %d: signal %d, %s", WEXITSTATUS(status),
                 WEXITSTATUS(status) - 128, strsignal(WEXITSTATUS(status) - 128));
    else
        snprintf(why, cap, "exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Runs llama-bench and fills its prefill and decode tok/s (NAN when absent);
 * where it fails, why says how. */
static int run_llama_bench(const char *bin, const char *model, int n_prompt, int n_gen,
                           int n_threads, int reps, bool kv_q8, double *ret_pp, double *ret_tg,
                           char *why, size_t why_cap) {
    if (strchr(bin, '\'') || strchr(model, '\''))
        return -EINVAL;
    char cmd[8192];
    /* a Q8_0 cache there too (its quantized V needs flash attention) */
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -p %d -n %d -t %d -r %d%s -o json 2>/dev/null", bin,
             model, n_prompt, n_gen, n_threads, reps, kv_q8 ? " -ctk q8_0 -ctv q8_0 -fa on" : "");
    FILE *f = popen(cmd, "r");
    if (!f)
        return -errno;
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    size_t n;
    while (out && (n = fread(out + len, 1, cap - 1 - len, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            if (cap >= (16u << 20))
                break;
            char *nb = realloc(out, cap * 2);
            if (!nb)
                break;
            out = nb;
            cap *= 2;
        }
    }
    int status = pclose(f);
    if (!out)
        return -ENOMEM;
    out[len] = 0;
    *ret_pp = *ret_tg = NAN;
    /* llama-bench -o json prints an array of flat objects, one per test. */
    for (char *o = strchr(out, '{'); o; o = strchr(o + 1, '{')) {
        char *e = strchr(o, '}');
        if (!e)
            break;
        double np = json_num(o, e, "n_prompt"), ng = json_num(o, e, "n_gen");
        double ts = json_num(o, e, "avg_ts");
        if (np > 0 && ng == 0)
            *ret_pp = ts;
        else if (ng > 0 && np == 0)
            *ret_tg = ts;
        o = e;
    }
    free(out);
    if (status != 0) {
        describe_exit(status, why, why_cap);
        return -ECHILD;
    }
    return 0;
}

/* ---- the engine ---------------------------------------------------------- */

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

typedef struct run_result {
    double prefill_s, ttft_s, decode_s;
} run_result;

static int one_run(eng_session *s, eng_sampler *sp, bool row, const int32_t *prompt, int n_prompt,
                   int n_gen, int n_vocab, run_result *r) {
    eng_session_reset(s);
    if (sp)
        eng_sampler_reset(sp);
    uint64_t t0 = eng_time_ns();
    int rc = eng_session_eval(s, prompt, (size_t)n_prompt, 0);
    if (rc < 0)
        return rc;
    uint64_t t1 = eng_time_ns();
    int32_t tok = argmax(eng_session_logits(s, -1), n_vocab);
    uint64_t t2 = eng_time_ns();
    /* greedy as eng_generate does it: the backend picks the token (a GPU
     * then sends back 4 bytes, not a row of logits); sampled: the row's
     * candidates (a GPU) or the row and the sampler, as eng_generate does it
     * then; row: the row whatever the backend */
    const unsigned flags = !sp ? ENG_EVAL_ARGMAX : row ? 0 : eng_sampler_eval_flags(sp, s);
    for (int i = 0; i < n_gen; i++) {
        if ((rc = eng_session_eval(s, &tok, 1, flags)) < 0)
            return rc;
        if (sp) {
            if ((tok = eng_sampler_sample_session(sp, s)) < 0)
                return tok;
            eng_sampler_accept(sp, tok);
        } else if ((tok = eng_session_argmax(s)) < 0) {
            return tok;
        }
    }
    uint64_t t3 = eng_time_ns();
    r->prefill_s = (double)(t1 - t0) / 1e9;
    r->ttft_s = (double)(t2 - t0) / 1e9;
    r->decode_s = (double)(t3 - t2) / 1e9;
    return 0;
}

int main(int argc, char **argv) {
    const char *model_path = NULL; /* argv's, or def_model */
    char def_model[4096];
    const char *llama_bench = NULL, *llama_model = NULL;
    int n_prompt = 128, n_gen = 64, n_threads = 0, reps = 3, bw_mb = 512;
    bool json = false, f32 = false, q8 = false, pq8 = false;
    eng_backend_kind backend = ENG_BACKEND_CPU;
    int device = 0;
    float phi = 0, gamma = 0.7f, delta = 0.3f;
    const char *swap_task = NULL; /* hot-swap to this task after the load */
    double swap_ms = 0;
    unsigned long long swap_in = 0; /* neurons the swap loaded */
    const char *profile_path = NULL, *task = NULL;
    eng_pick pick = ENG_PICK_REQUEST;
    float cand = 0.0f;
    eng_comp comp = ENG_COMP_NONE;
    bool sample = false, sample_row = false, copy_dynamic = true;
    eng_kv_type kv_type = ENG_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "-m") && has) {
            model_path = argv[++i];
        } else if (!strcmp(a, "-p") && has)
            n_prompt = atoi(argv[++i]);
        else if (!strcmp(a, "-n") && has)
            n_gen = atoi(argv[++i]);
        else if (!strcmp(a, "-t") && has)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "-r") && has)
            reps = atoi(argv[++i]);
        else if (!strcmp(a, "--bw-mb") && has)
            bw_mb = atoi(argv[++i]);
        else if (!strcmp(a, "--llama-bench") && has)
            llama_bench = argv[++i];
        else if (!strcmp(a, "--llama-model") && has)
            llama_model = argv[++i];
        else if (!strcmp(a, "--json"))
            json = true;
        else if (!strcmp(a, "--f32"))
            f32 = true;
        else if (!strcmp(a, "--q8"))
            q8 = true;
        else if (!strcmp(a, "--prefill-q8"))
            pq8 = true; /* the prompt's products against x in 8 bits */
        else if (!strcmp(a, "--backend") && has) {
            if (si_backend_parse(argv[++i], &backend) < 0) {
                fprintf(stderr, "unknown backend '%s' (cpu, cuda, auto)\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--device") && has)
            device = atoi(argv[++i]);
        else if (!strcmp(a, "--phi") && has)
            phi = strtof(argv[++i], NULL);
        else if (!strcmp(a, "--swap") && has)
            swap_task = argv[++i];
        else if (!strcmp(a, "--gamma") && has)
            gamma = strtof(argv[++i], NULL);
        else if (!strcmp(a, "--delta") && has)
            delta = strtof(argv[++i], NULL);
        else if (!strcmp(a, "--profile") && has)
            profile_path = argv[++i];
        else if (!strcmp(a, "--task") && has)
            task = argv[++i];
        else if (!strcmp(a, "--pick") && has) {
            const char *v = argv[++i];
            if (eng_pick_parse(v, &pick) < 0) {
                fprintf(stderr, "--pick takes request, token or exact, not '%s'\n", v);
                return 2;
            }
        }
        else if (!strcmp(a, "--sample"))
            sample = true;
        else if (!strcmp(a, "--sample-row"))
            sample = sample_row = true;
        else if (!strcmp(a, "--kv-type") && has) {
            if (eng_kv_type_parse(argv[++i], &kv_type) < 0) {
                fprintf(stderr, "--kv-type takes f16 or q8_0, not '%s'\n", argv[i]);
                return 2;
            }
        }
        else if (!strcmp(a, "--cand") && has)
            cand = strtof(argv[++i], NULL);
        else if (!strcmp(a, "--comp") && has) {
            const char *v = argv[++i];
            if (eng_comp_parse(v, &comp) < 0) {
                fprintf(stderr, "--comp takes none, mean or linear, not '%s'\n", v);
                return 2;
            }
        }
        else if (!strcmp(a, "--no-copy"))
            copy_dynamic = false;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (n_prompt < 1 || n_prompt > 16384 || n_gen < 1 || n_gen > 16384 || reps < 1 || reps > 100 ||
        bw_mb < 16 || bw_mb > 65536 || n_threads > 256 || (llama_bench && !llama_model) ||
        !(phi >= 0 && phi <= 1) || (!profile_path != !task) || (profile_path && phi <= 0) || (pick != ENG_PICK_REQUEST && phi <= 0) ||
        !(cand >= 0 && cand <= 1) || (cand > 0 && pick != ENG_PICK_EXACT) ||
        (comp != ENG_COMP_NONE && phi <= 0) ||
        (swap_task && !profile_path)) {
        usage(stderr);
        return 2;
    }
    if (!model_path)
        model_path = si_default_model(def_model, sizeof def_model);

    eng_model_params mp = eng_model_params_default();
    mp.storage = f32 ? ENG_DTYPE_F32 : ENG_DTYPE_F16;
    mp.q8_matrices = q8;
    mp.prefill_q8 = pq8;
    mp.n_threads = n_threads;
    mp.backend = backend;
    mp.device = device;
    /* what an error on the way frees (fail:, at the end) */
    eng_model *m = NULL;
    eng_session *s = NULL;
    eng_sampler *smp = NULL;
    int32_t *prompt = NULL, *left = NULL;
    eng_error err = {{0}};
    int rc;
    /* the plan of a selective run: a profile's selectinfer plan, else
     * coreinfer (all loaded, phi dynamic), which needs no profile */
    eng_profile *prof = NULL;
    eng_load_plan_params pp = eng_load_plan_params_default();
    if (phi > 0) {
        if (profile_path) {
            if ((rc = eng_profile_load(profile_path, NULL, &prof, &err)) < 0) {
                fprintf(stderr, "Failed to load profile '%s': %s\n", profile_path, err.msg);
                goto fail;
            }
            pp.mode = ENG_SELECT_SELECTINFER;
            pp.profile = prof;
            pp.task = task;
            pp.gamma = gamma;
            pp.delta = delta;
        } else {
            pp.mode = ENG_SELECT_COREINFER;
        }
        pp.sketch = pick == ENG_PICK_TOKEN; /* what per-token picking reads */
        mp.plan = &pp;
    }
    uint64_t t0 = eng_time_ns();
    rc = eng_model_load(model_path, &mp, &m, &err);
    double load_s = (double)(eng_time_ns() - t0) / 1e9;
    if (rc < 0) {
        fprintf(stderr, "Failed to load model '%s': %s (%s)\n", model_path, err.msg, strerror(-rc));
        goto fail;
    }
    if (swap_task) {
        /* measure the slots as a daemon serves them after a hot-swap */
        eng_load_plan_params sw = pp;
        sw.task = swap_task;
        eng_swap_stats st;
        if ((rc = eng_model_swap(m, &sw, &st, &err)) < 0) {
            fprintf(stderr, "Failed to swap to task '%s': %s\n", swap_task, err.msg);
            goto fail;
        }
        swap_ms = st.ns / 1e6;
        swap_in = (unsigned long long)st.neurons_in;
        if (!json)
            printf("hot-swap         to '%s' in %.1f ms (%llu neurons in)\n", swap_task, swap_ms,
                   swap_in);
    }
    const char *backend_name = eng_backend_name(m);
    bool on_cpu = !strcmp(backend_name, "cpu");
    eng_model_info info;
    eng_model_get_info(m, &info);

    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = n_prompt + n_gen + 1;
    sp.kv_type = kv_type;
    sp.n_batch = n_prompt;
    if ((rc = eng_session_new(m, &sp, &s)) < 0) {
        fprintf(stderr, "Failed to create a session: %s\n", strerror(-rc));
        goto fail;
    }
    const size_t kv_bytes = eng_session_kv_bytes(s);
    if (phi > 0) {
        eng_compute_params cp = eng_compute_params_default();
        cp.phi = phi;
        cp.pick = pick;
        cp.cand = cand;
        cp.comp = comp;
        cp.copy_dynamic = copy_dynamic;
        if ((rc = eng_session_set_compute(s, &cp)) < 0) {
            fprintf(stderr, "phi %.3f rejected: %s\n", phi, strerror(-rc));
            goto fail;
        }
    }
    if (sample) {
        eng_sampler_params spp = eng_sampler_params_default();
        spp.temperature = 0.8f;
        spp.top_k = 40;
        spp.top_p = 0.95f;
        spp.repeat_penalty = 1.1f;
        spp.repeat_last_n = 64;
        spp.seed = 1;
        if ((rc = eng_sampler_new(&spp, info.n_vocab, &smp)) < 0) {
            fprintf(stderr, "Failed to create a sampler: %s\n", strerror(-rc));
            goto fail;
        }
    }
    prompt = malloc((size_t)n_prompt * sizeof(int32_t));
    if (!prompt)
        goto fail;
    uint64_t x = 0x9e3779b97f4a7c15ull; /* xorshift: same prompt every run */
    for (int i = 0; i < n_prompt; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        prompt[i] = (int32_t)(x % (uint64_t)info.n_vocab);
    }

    /* where the sampler reads from (eng_generate's choice; --sample-row: the row) */
    const char *sample_from =
        !sample ? "" : !sample_row && (eng_sampler_eval_flags(smp, s) & ENG_EVAL_CANDIDATES)
                               ? "candidates" : "row";

    /* One warm-up run (page faults, thread start-up), then reps measured. */
    run_result r, sum = {0};
    int warm_gen = n_gen < 8 ? n_gen : 8;
    if ((rc = one_run(s, smp, sample_row, prompt, n_prompt, warm_gen, info.n_vocab, &r)) < 0) {
        fprintf(stderr, "Evaluation failed: %s\n", strerror(-rc));
        goto fail;
    }
    double pp_tps[100], tg_tps[100];
    for (int i = 0; i < reps; i++) {
        if ((rc = one_run(s, smp, sample_row, prompt, n_prompt, n_gen, info.n_vocab, &r)) < 0) {
            fprintf(stderr, "Evaluation failed: %s\n", strerror(-rc));
            goto fail;
        }
        sum.prefill_s += r.prefill_s;
        sum.ttft_s += r.ttft_s;
        sum.decode_s += r.decode_s;
        pp_tps[i] = n_prompt / r.prefill_s;
        tg_tps[i] = n_gen / r.decode_s;
    }
    double pp_mean = 0, tg_mean = 0, pp_sd = 0, tg_sd = 0;
    for (int i = 0; i < reps; i++) {
        pp_mean += pp_tps[i] / reps;
        tg_mean += tg_tps[i] / reps;
    }
    for (int i = 0; i < reps; i++) {
        pp_sd += (pp_tps[i] - pp_mean) * (pp_tps[i] - pp_mean);
        tg_sd += (tg_tps[i] - tg_mean) * (tg_tps[i] - tg_mean);
    }
    pp_sd = reps > 1 ? sqrt(pp_sd / (reps - 1)) : 0;
    tg_sd = reps > 1 ? sqrt(tg_sd / (reps - 1)) : 0;
    double ttft_ms = sum.ttft_s / reps * 1e3;
    uint64_t rss = si_proc_status_bytes("VmRSS"), hwm = si_proc_status_bytes("VmHWM");
    int threads = info.n_threads;
    double ffn_share = eng_session_ffn_share(s);
    size_t copy_bytes = eng_session_copy_bytes(s);
    /* the bytes a decode step streams: the FFN at the share computed */
    eng_plan_info plan;
    eng_model_get_plan(m, &plan);
    double neuron_bytes =
        plan.neurons_loaded ? (double)(plan.bytes_ffn - plan.bytes_sketch) / plan.neurons_loaded : 0;
    /* bytes_per_token counts the loaded neurons, not the sketch */
    /* (experts: bytes_per_token counts the ones a step picks; every
     * neuron of theirs is computed, ffn_share 1) */
    /* (the model's neurons: n_ff in every layer, or gemma4's widths per layer) */
    double step_bytes = (double)info.bytes_per_token - (double)(plan.bytes_ffn - plan.bytes_sketch) +
                        ffn_share * (double)plan.neurons_total * neuron_bytes;
    if (info.n_expert > 0)
        step_bytes = (double)info.bytes_per_token;
    /* (Mamba-2 mixers: each step reads and writes their states too) */
    step_bytes += 2.0 * (double)info.bytes_ssm_state;
    eng_backend_info bi;
    if (eng_model_backend_info(m, &bi) < 0)
        memset(&bi, 0, sizeof(bi));

    /* A context shift of what the last run left (keep 4, drop half of the
     * rest, as a full context in eng_generate), then the prefill of the
     * positions left that a shift by re-evaluation would cost instead. */
    const int shift_past = eng_session_n_past(s);
    const int shift_keep = shift_past > 4 ? 4 : 0, shift_drop = (shift_past - shift_keep) / 2;
    const int shift_left = shift_past - shift_drop;
    double shift_ms = 0, reeval_ms = 0;
    uint64_t ts = eng_time_ns();
    /* (Mamba-2 states cannot drop positions: a shift is evaluated again,
     * shift_ms -1) */
    rc = eng_session_shift(s, shift_keep, shift_drop);
    if (rc < 0 && !(rc == -ENOTSUP && info.n_ssm > 0)) {
        fprintf(stderr, "Context shift failed: %s\n", strerror(-rc));
        goto fail;
    }
    shift_ms = rc < 0 ? -1.0 : (double)(eng_time_ns() - ts) / 1e6;
    left = malloc((size_t)(shift_left > 0 ? shift_left : 1) * sizeof(int32_t));
    if (!left)
        goto fail;
    for (int i = 0; i < shift_left; i++)
        left[i] = prompt[i % n_prompt];
    eng_session_reset(s);
    ts = eng_time_ns();
    if (shift_left > 0 && (rc = eng_session_eval(s, left, (size_t)shift_left, 0)) < 0) {
        fprintf(stderr, "Evaluation failed: %s\n", strerror(-rc));
        goto fail;
    }
    reeval_ms = (double)(eng_time_ns() - ts) / 1e6;
    free(left);
    eng_session_free(s);
    eng_sampler_free(smp);
    eng_model_free(m);
    eng_profile_free(prof);
    free(prompt);

    /* the host's read bandwidth bounds CPU decode; a GPU's is its own */
    double bw = on_cpu ? measure_bandwidth((size_t)bw_mb, threads) : bi.peak_gbps * 1e9;
    double roofline = bw > 0 && step_bytes > 0 ? bw / step_bytes : 0;
    double achieved = step_bytes * tg_mean;

    double l_pp = NAN, l_tg = NAN;
    int lrc = 0;
    if (llama_bench) {
        char why[96] = "no pp/tg rows";
        lrc = run_llama_bench(llama_bench, llama_model, n_prompt, n_gen, threads, reps,
                              kv_type == ENG_KV_Q8_0, &l_pp, &l_tg, why, sizeof why);
        if (lrc < 0 && lrc != -ECHILD)
            snprintf(why, sizeof why, "%s", strerror(-lrc));
        if (lrc < 0 || isnan(l_pp) || isnan(l_tg))
            fprintf(stderr, "llama-bench '%s' failed or printed no results (%s)\n", llama_bench,
                    why);
    }

    /* --q8: the matrices in Q8_0 on the CPU, except those the file holds
     * in a format the CPU keeps (Q4_K, Q5_K, Q6_K, Q4_1, Q4_0); the FFN's
     * gate and up rows in info.ffn_dtype (its down rows Q8_0 where that
     * is a 4- or 5-bit format) */
    const char *storage = f32 ? "f32" : q8 && on_cpu ? "q8_0" : "f16";
    const char *ffn_storage = eng_dtype_name(info.ffn_dtype);
    if (json) {
        printf("{\"model\": \"%s\", \"storage\": \"%s\", \"ffn_storage\": \"%s\", "
               "\"threads\": %d, \"backend\": \"%s\",\n",
               model_path, storage, ffn_storage, threads, backend_name);
        if (on_cpu)
            printf(" \"kernels\": \"%s\", \"prefill_x\": \"%s\",\n", bi.kernels,
                   bi.prefill_q8 ? "8-bit" : "f32");
        printf(" \"n_prompt\": %d, \"n_gen\": %d, \"reps\": %d, \"kv_type\": \"%s\", "
               "\"kv_bytes\": %zu,\n", n_prompt, n_gen, reps, eng_kv_type_name(kv_type),
               kv_bytes);
        printf(" \"plan\": \"%s\", \"phi\": %.3f, \"pick\": \"%s\", \"cand\": %.3f, \"comp\": \"%s\", \"ffn_share\": %.4f, "
               "\"copy_bytes\": %zu, \"decode\": \"%s\", \"sample_from\": \"%s\",\n",
               eng_select_mode_name(pp.mode), phi, eng_pick_name(pick), cand,
               eng_comp_name(comp), ffn_share,
               copy_bytes, sample ? "sampled" : "greedy", sample_from);
        if (swap_task)
            printf(" \"swap_task\": \"%s\", \"swap_ms\": %.3f, \"swap_neurons_in\": %llu,\n",
                   swap_task, swap_ms, swap_in);
        printf(" \"load_s\": %.4f, \"prefill_tps\": %.3f, \"prefill_tps_sd\": %.3f, "
               "\"decode_tps\": %.3f, \"decode_tps_sd\": %.3f, \"ttft_ms\": %.3f,\n",
               load_s, pp_mean, pp_sd, tg_mean, tg_sd, ttft_ms);
        printf(" \"vmrss_bytes\": %llu, \"vmhwm_bytes\": %llu, \"weight_bytes\": %llu, "
               "\"bytes_per_token\": %llu,\n",
               (unsigned long long)rss, (unsigned long long)hwm,
               (unsigned long long)info.bytes_weights, (unsigned long long)info.bytes_per_token);
        printf(" \"step_bytes\": %.0f, \"achieved_gbs\": %.3f,\n", step_bytes, achieved / 1e9);
        printf(" \"shift_positions\": %d, \"shift_moved\": %d, \"shift_ms\": %.4f, "
               "\"shift_reeval_ms\": %.4f,\n",
               shift_past, shift_left - shift_keep, shift_ms, reeval_ms);
        printf(" \"bandwidth_gbs\": %.3f, \"bandwidth_source\": \"%s\", \"roofline_decode_tps\": %.3f, "
               "\"roofline_ratio\": %.4f",
               bw / 1e9, on_cpu ? "measured" : "nominal", roofline,
               roofline > 0 ? tg_mean / roofline : 0.0);
        if (!on_cpu)
            printf(",\n \"device\": \"%s\", \"integrated\": %s, \"graphs\": %s, "
                   "\"graph_steps\": %ld, \"graph_replayed\": %ld, \"graph_instantiated\": %ld, "
                   "\"graph_fallbacks\": %ld",
                   bi.device, bi.integrated ? "true" : "false", bi.graphs.enabled ? "true" : "false",
                   bi.graphs.steps, bi.graphs.replayed, bi.graphs.instantiated, bi.graphs.fallbacks);
        if (llama_bench && !isnan(l_pp) && !isnan(l_tg))
            printf(",\n \"llama_model\": \"%s\", \"llama_prefill_tps\": %.3f, \"llama_decode_tps\": %.3f, "
                   "\"prefill_ratio\": %.4f, \"decode_ratio\": %.4f",
                   llama_model, l_pp, l_tg, pp_mean / l_pp, tg_mean / l_tg);
        printf("}\n");
    } else {
        printf("model            %s (%s, %d layers, n_embd %d)\n", model_path, info.arch,
               info.n_layer, info.n_embd);
        printf("storage          %s%s, FFN %s, %d threads, %s backend, KV cache %s (%.1f MiB)\n",
               storage, q8 && on_cpu ? " (a file's Q4_K, Q5_K, Q6_K, Q4_1, Q4_0 kept)" : "",
               ffn_storage, threads, backend_name, eng_kv_type_name(kv_type),
               (double)kv_bytes / (1 << 20));
        if (on_cpu)
            printf("kernels          %s, prefill x %s\n", bi.kernels,
                   bi.prefill_q8 ? "in 8 bits" : "in f32");
        if (phi > 0) {
            char among[48] = "";
            if (pick == ENG_PICK_EXACT && cand > 0)
                snprintf(among, sizeof among, " among %.2f per request", cand);
            if (comp != ENG_COMP_NONE)
                snprintf(among + strlen(among), sizeof among - strlen(among), ", comp %s",
                         eng_comp_name(comp));
            printf("selective        %s plan, phi %.2f, pick per %s%s: decode computes %.1f %% of FFN neurons\n",
                   eng_select_mode_name(pp.mode), phi,
                   pick == ENG_PICK_EXACT ? "token (exact)" : pick == ENG_PICK_TOKEN ? "token" : "request",
                   among, 100.0 * ffn_share);
        }
        if (copy_bytes)
            printf("dynamic copy     %.1f MiB (the session's contiguous copy of its dynamic neurons)\n",
                   copy_bytes / 1048576.0);
        printf("load time        %.3f s\n", load_s);
        printf("prefill          %.1f tok/s (+- %.1f, %d tokens, %d reps)\n", pp_mean, pp_sd,
               n_prompt, reps);
        printf("time to 1st tok  %.1f ms\n", ttft_ms);
        printf("decode           %.2f tok/s (+- %.2f, %d tokens, %s)\n", tg_mean, tg_sd, n_gen,
               sample ? "sampled: temperature 0.8, top-k 40, top-p 0.95, repeat penalty 1.1"
                      : "greedy");
        if (sample)
            printf("sampled from     %s\n", sample_from);
        printf("memory           VmRSS %.1f MiB, VmHWM %.1f MiB, weights %.1f MiB\n",
               rss / 1048576.0, hwm / 1048576.0, info.bytes_weights / 1048576.0);
        if (info.bytes_ple_table) /* (gemma4) */
            printf("per-layer table  %.1f MiB left in the file, a token's row read as it "
                   "comes\n", info.bytes_ple_table / 1048576.0);
        printf("bytes per token  %.1f MiB (all loaded), %.1f MiB at this setting: %.2f GB/s "
               "achieved\n",
               info.bytes_per_token / 1048576.0, step_bytes / 1048576.0, achieved / 1e9);
        if (shift_ms < 0)
            printf("context shift    none (recurrent states); evaluating %d of %d positions "
                   "again: %.1f ms\n", shift_left, shift_past, reeval_ms);
        else
            printf("context shift    %d of %d positions moved in %.2f ms; evaluating them "
                   "again: %.1f ms\n", shift_left - shift_keep, shift_past, shift_ms, reeval_ms);
        if (on_cpu)
            printf("read bandwidth   %.2f GB/s (%d MiB buffer, %d threads)\n", bw / 1e9, bw_mb,
                   threads);
        else
            printf("device           %s (%s), nominal %.0f GB/s; decode graphs %s: %ld steps "
                   "(%ld replayed), %ld instantiated, %ld fallbacks\n",
                   bi.device, bi.integrated ? "integrated" : "discrete", bw / 1e9,
                   bi.graphs.enabled ? "on" : "off", bi.graphs.steps, bi.graphs.replayed,
                   bi.graphs.instantiated, bi.graphs.fallbacks);
        if (roofline > 0)
            printf("roofline decode  %.2f tok/s; achieved %.1f %%\n", roofline,
                   100.0 * tg_mean / roofline);
        if (llama_bench && !isnan(l_pp) && !isnan(l_tg)) {
            printf("llama.cpp        %s: prefill %.1f tok/s, decode %.2f tok/s\n", llama_model, l_pp, l_tg);
            printf("ours/llama.cpp   prefill %.3f, decode %.3f\n", pp_mean / l_pp, tg_mean / l_tg);
        }
    }
    return llama_bench && (lrc < 0 || isnan(l_pp) || isnan(l_tg)) ? 1 : 0;

fail:
    free(left);
    free(prompt);
    eng_session_free(s);
    eng_sampler_free(smp);
    eng_model_free(m);
    eng_profile_free(prof);
    return 1;
}
