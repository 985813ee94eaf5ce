/* Sampler: logit bias, repetition, frequency and presence penalties, then greedy or top-k -> top-p -> min-p ->
 * temperature -> softmax -> draw, the order of llama.cpp's default chain.
 *
 * The caller's logits are never written: top-k reads them in one pass
 * (the window's penalised tokens offered separately); the other paths copy
 * them into the sampler's own scratch (n_vocab floats), where the penalty
 * is applied. Work per token is O(n_vocab) plus O(k log k) / O(m log m)
 * for the orderings top-k and top-p need (m: tokens top-p keeps; after
 * top-k, O(k log k); alone, the best 64, 512, ... until they hold p).
 *
 * Ties are broken towards the lower token id everywhere (greedy, the top-k
 * boundary, the top-p order), so a given seed gives the same tokens on every
 * platform: the PRNG is xoshiro256** seeded through splitmix64. The k
 * tokens top-k keeps are drawn from in rank order (best first), so the draw
 * depends on which tokens they are, not on how they were found.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Bounds on what a client may ask for; far above any sane setting. */
#define REPEAT_LAST_N_MAX 65536
#define FREQ_PRESENCE_MAX 100.0f
#define N_VOCAB_MAX (1 << 24)

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct eng_sampler {
    eng_sampler_params p;
    int n_vocab;
    uint64_t rng[4];

    int32_t *hist;    /* ring of the last repeat_last_n accepted tokens */
    int n_hist, hist_pos;

    float *logits;    /* [n_vocab] penalised copy of the caller's logits */
    cand *cands;      /* [n_vocab] candidates of the current step */
    uint32_t *cnt;    /* [n_vocab] occurrences in the window (and BIASED),
                       * marked while a step adjusts; all zero between steps */
    float *bias;      /* [n_vocab] logit bias, or NULL for none */
    int32_t *bias_ids; /* the distinct biased tokens, n_bias of them */
    int n_bias;
    int n_cands;       /* eng_sampler_candidates(): fixed by the parameters */
};

static int candidates_k(const eng_sampler *s);

eng_sampler_params eng_sampler_params_default(void) {
    return (eng_sampler_params){
        .temperature = 0.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = 0,
    };
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

static void rng_seed(uint64_t s[4], uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&x);
}

int eng_sampler_new(const eng_sampler_params *params, int n_vocab, eng_sampler **ret_sampler) {
    if (!params || !ret_sampler || n_vocab <= 0 || n_vocab > N_VOCAB_MAX)
        return -EINVAL;
    const eng_sampler_params *p = params;
    if (isnan(p->temperature) || isinf(p->temperature) || p->top_k < 0 ||
        !(p->top_p >= 0.0f && p->top_p <= 1.0f) || !(p->min_p >= 0.0f && p->min_p <= 1.0f) ||
        !(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty) || p->repeat_last_n < 0 ||
        p->repeat_last_n > REPEAT_LAST_N_MAX || !(fabsf(p->freq_penalty) <= FREQ_PRESENCE_MAX) ||
        !(fabsf(p->presence_penalty) <= FREQ_PRESENCE_MAX) || p->n_logit_bias < 0 ||
        p->n_logit_bias > ENG_MAX_LOGIT_BIAS || (p->n_logit_bias > 0 && !p->logit_bias))
        return -EINVAL;
    for (int i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token < 0 || p->logit_bias[i].token >= n_vocab || isnan(p->logit_bias[i].bias) ||
            p->logit_bias[i].bias == INFINITY)
            return -EINVAL;

    eng_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->p = *p;
    s->p.logit_bias = NULL; /* the caller's array is not kept */
    s->n_vocab = n_vocab;
    s->logits = malloc((size_t)n_vocab * sizeof(*s->logits));
    s->cands = malloc((size_t)n_vocab * sizeof(*s->cands));
    s->cnt = calloc((size_t)n_vocab, sizeof(*s->cnt));
    s->hist = p->repeat_last_n > 0 ? malloc((size_t)p->repeat_last_n * sizeof(*s->hist)) : NULL;
    if (!s->logits || !s->cands || !s->cnt || (p->repeat_last_n > 0 && !s->hist)) {
        eng_sampler_free(s);
        return -ENOMEM;
    }
    if (p->n_logit_bias > 0) {
        s->bias = calloc((size_t)n_vocab, sizeof(*s->bias));
        s->bias_ids = malloc((size_t)p->n_logit_bias * sizeof(*s->bias_ids));
        if (!s->bias || !s->bias_ids) {
            eng_sampler_free(s);
            return -ENOMEM;
        }
        for (int i = 0; i < p->n_logit_bias; i++) {
            const int32_t t = p->logit_bias[i].token;
            if (!s->cnt[t]) { /* cnt is all zero here: a mark of the first sight */
                s->cnt[t] = 1;
                s->bias_ids[s->n_bias++] = t;
            }
            s->bias[t] += p->logit_bias[i].bias;
        }
        for (int i = 0; i < s->n_bias; i++)
            s->cnt[s->bias_ids[i]] = 0;
    }
    rng_seed(s->rng, p->seed);
    s->n_cands = candidates_k(s);
    *ret_sampler = s;
    return 0;
}

void eng_sampler_free(eng_sampler *s) {
    if (!s)
        return;
    free(s->logits);
    free(s->cands);
    free(s->cnt);
    free(s->bias);
    free(s->bias_ids);
    free(s->hist);
    free(s);
}

void eng_sampler_reset(eng_sampler *s) {
    if (!s)
        return;
    s->n_hist = 0;
    s->hist_pos = 0;
    rng_seed(s->rng, s->p.seed);
}

void eng_sampler_accept(eng_sampler *s, int32_t token) {
    if (!s || s->p.repeat_last_n <= 0 || token < 0 || token >= s->n_vocab)
        return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->n_hist < s->p.repeat_last_n)
        s->n_hist++;
}

/* Whether any penalty is set (each is a no-op at its default). */
static bool penalties_set(const eng_sampler_params *p) {
    return p->repeat_penalty != 1.0f || p->freq_penalty != 0.0f || p->presence_penalty != 0.0f;
}

/* The greedy branch of eng_sampler_sample with apply_penalty a no-op: no
 * penalty set, or repeat_last_n 0, where accept() keeps no history for
 * one to act on. */
bool eng_sampler_is_greedy(const eng_sampler *s) {
    return s && s->p.temperature <= 0.0f && (!penalties_set(&s->p) || s->p.repeat_last_n <= 0) &&
           s->n_bias == 0;
}

/* A logit of a token that occurs count (> 0) times in the window, as
 * llama.cpp's penalties sampler computes it: scaled away from likely by the
 * repeat penalty (divided when positive, multiplied otherwise), then less
 * count x frequency penalty and the presence penalty. */
static inline float penalised(const eng_sampler *s, float v, uint32_t count) {
    v = v > 0.0f ? v / s->p.repeat_penalty : v * s->p.repeat_penalty;
    return v - ((float)count * s->p.freq_penalty + s->p.presence_penalty);
}

/* Each distinct token of the window is penalised once, by its count. */
static void apply_penalty(eng_sampler *s) {
    if (!penalties_set(&s->p) || s->n_hist == 0)
        return;
    for (int i = 0; i < s->n_hist; i++)
        s->cnt[s->hist[i]]++;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        if (s->cnt[t]) {
            s->logits[t] = penalised(s, s->logits[t], s->cnt[t]);
            s->cnt[t] = 0;
        }
    }
}

/* The caller's logits into the sampler's scratch, biased and penalised
 * there. */
static void penalised_copy(eng_sampler *s, const float *logits) {
    memcpy(s->logits, logits, (size_t)s->n_vocab * sizeof(*logits));
    for (int i = 0; i < s->n_bias; i++)
        s->logits[s->bias_ids[i]] += s->bias[s->bias_ids[i]];
    apply_penalty(s);
}

/* a ranks before b: higher logit, then lower id. */
static inline bool before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void swap_cand(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

/* A +inf logit makes every finite one impossible: only the +inf tokens
 * stay, chosen among uniformly (equal logits). */
static size_t keep_inf(cand *c, size_t n) {
    bool has_inf = false;
    for (size_t i = 0; i < n && !has_inf; i++)
        has_inf = c[i].logit == INFINITY;
    if (!has_inf)
        return n;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit == INFINITY)
            c[m++] = (cand){0.0f, c[i].id};
    return m;
}

/* Every possible token as a candidate, in id order (-inf and NaN logits
 * are impossible tokens). */
static size_t all_cands(eng_sampler *s, cand *c) {
    size_t n = 0;
    for (int i = 0; i < s->n_vocab; i++) {
        float v = s->logits[i];
        if (!isnan(v) && v != -INFINITY)
            c[n++] = (cand){v, i};
    }
    return keep_inf(c, n);
}

static int cmp_before(const void *a, const void *b) {
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* Binary heaps of candidates: rooted at the best (top-p pops them best
 * first) or, with worst_root, at the worst (top-k's k best so far). */
static inline bool heap_above(const cand *a, const cand *b, bool worst_root) {
    return worst_root ? before(b, a) : before(a, b);
}

static void sift_down(cand *h, size_t n, size_t i, bool worst_root) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap_above(&h[l], &h[m], worst_root))
            m = l;
        if (r < n && heap_above(&h[r], &h[m], worst_root))
            m = r;
        if (m == i)
            return;
        swap_cand(&h[i], &h[m]);
        i = m;
    }
}

static void worst_up(cand *h, size_t i) {
    while (i > 0 && heap_above(&h[i], &h[(i - 1) / 2], true)) {
        swap_cand(&h[i], &h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
}

/* The top_k best possible tokens as candidates c[0..m), best first (m <
 * top_k only when fewer are possible). One pass keeps the k best so far
 * in a heap rooted at the worst of them: after the first few hundred
 * tokens nearly every token loses its one comparison with the root, a
 * branch that predicts well, so the pass costs about what reading the
 * logits does. (A quickselect over a candidate per token took 1.3 ms a
 * token for Llama 3's 128k vocabulary, more than a GPU's decode step.)
 * Ids come in ascending order, so a later equal logit never displaces an
 * earlier one: ties go to the lower id, and with more +inf logits than k
 * the k lowest ids stay, as over every candidate. */
/* Offers x to the heap of the k best so far (m of them). */
static void heap_offer(cand *c, size_t *m, size_t k, cand x) {
    if (isnan(x.logit) || x.logit == -INFINITY)
        return;
    if (*m < k) {
        c[*m] = x;
        worst_up(c, (*m)++);
    } else if (before(&x, &c[0])) {
        c[0] = x;
        sift_down(c, *m, 0, true);
    }
}

#define BIASED 0x80000000u /* cnt's mark of a biased token in top_k_pass */

/* Marks in cnt the tokens an adjustment touches: the window's (their
 * counts, pen) and the biased ones (BIASED, bias). */
static void mark_adjusted(eng_sampler *s, bool pen, bool bias) {
    for (int h = 0; pen && h < s->n_hist; h++)
        s->cnt[s->hist[h]]++;
    for (int b = 0; bias && b < s->n_bias; b++)
        s->cnt[s->bias_ids[b]] |= BIASED;
}

/* Token t's raw logit v as the marks in cnt adjust it: biased, then
 * penalised by its count, as penalised_copy() does to the row. */
static inline float adjusted(const eng_sampler *s, int32_t t, float v) {
    const uint32_t n = s->cnt[t] & ~BIASED;
    if (s->cnt[t] & BIASED)
        v += s->bias[t];
    return n ? penalised(s, v, n) : v;
}

/* raw: l is the caller's row, not yet biased or penalised. */
static size_t top_k_pass(eng_sampler *s, const float *l, cand *c, size_t k, bool raw) {
    /* the window's tokens and the biased ones are left out of the pass and
     * offered after it with their adjusted logits: no copy of the row */
    const bool pen = raw && penalties_set(&s->p) && s->n_hist > 0, bias = raw && s->n_bias > 0;
    mark_adjusted(s, pen, bias);
    size_t m = 0;
    int i = 0;
    for (; i < s->n_vocab && m < k; i++)
        if (!s->cnt[i])
            heap_offer(c, &m, k, (cand){l[i], i});
    /* the root's logit: anything below it (NaN too) loses at once, and a
     * block of 16 that all lose costs one branch */
    float worst = m ? c[0].logit : INFINITY;
    for (; i < s->n_vocab; i += 16) {
        const int e = s->n_vocab - i < 16 ? s->n_vocab : i + 16;
        int any = 0;
        for (int j = i; j < e; j++)
            any |= l[j] >= worst;
        if (!any)
            continue;
        for (int j = i; j < e; j++)
            if (l[j] >= worst && !s->cnt[j]) {
                heap_offer(c, &m, k, (cand){l[j], j});
                worst = c[0].logit;
            }
    }
    for (int b = 0; bias && b < s->n_bias; b++) {
        const int32_t t = s->bias_ids[b];
        heap_offer(c, &m, k, (cand){adjusted(s, t, l[t]), t});
        s->cnt[t] = 0;
    }
    for (int h = 0; pen && h < s->n_hist; h++) {
        const int32_t t = s->hist[h];
        if (!s->cnt[t])
            continue; /* offered already: a token counts once */
        heap_offer(c, &m, k, (cand){adjusted(s, t, l[t]), t});
        s->cnt[t] = 0;
    }
    m = keep_inf(c, m);
    qsort(c, m, sizeof(*c), cmp_before);
    return m;
}

static size_t top_k_cands(eng_sampler *s, const float *l, cand *c, size_t k) {
    return top_k_pass(s, l, c, k, true);
}

/* Keeps the smallest best-first prefix whose probability (softmax of the
 * logits) reaches p; at least one token. Returns how many, moved to c[0..m).
 * Popping a heap orders only what is kept: O(n + m log n). Each pop frees the
 * heap's last slot, where the popped candidate is parked. */
static size_t top_p(cand *c, size_t n, float p) {
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit > max)
            max = c[i].logit;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += exp((double)c[i].logit - max);
    double target = (double)p * sum, cum = 0.0;
    for (size_t i = n / 2; i-- > 0;)
        sift_down(c, n, i, false);
    size_t heap = n, m = 0;
    while (heap > 0) {
        cand best = c[0];
        c[0] = c[heap - 1];
        heap--;
        sift_down(c, heap, 0, false);
        c[n - 1 - m] = best; /* slot freed by the shrinking heap */
        m++;
        cum += exp((double)best.logit - max);
        if (cum >= target)
            break;
    }
    /* c[n-m..n) holds the kept ones (best last); bring them to the front */
    memmove(c, c + (n - m), m * sizeof(*c));
    return m;
}

/* top_p() over every possible token of the penalised row s->logits, with
 * the same result (kept tokens, their order, every sum taken in the same
 * order) without a candidate per token: the normaliser in one pass, then
 * the best K in rank order by top_k_pass (K = 64, times 8 while they fall
 * short of p). Real logits keep a few tokens; heapifying the whole
 * vocabulary for them cost a millisecond a token at 128k. -1 when a +inf
 * logit calls for keep_inf's rule: the caller takes the general path. */
static long top_p_only(eng_sampler *s, cand *c, float p) {
    const float *l = s->logits;
    const int nv = s->n_vocab;
    float max = -INFINITY;
    size_t n = 0;
    for (int i = 0; i < nv; i++) {
        const float v = l[i];
        if (v == INFINITY)
            return -1;
        if (!isnan(v) && v != -INFINITY) {
            n++;
            max = v > max ? v : max;
        }
    }
    if (n <= 1)
        return -1; /* nothing to cut */
    double sum = 0.0;
    for (int i = 0; i < nv; i++)
        if (!isnan(l[i]) && l[i] != -INFINITY)
            sum += exp((double)l[i] - max);
    const double target = (double)p * sum;
    for (size_t k = 64;; k *= 8) {
        size_t m = top_k_pass(s, l, c, k < n ? k : n, false);
        double cum = 0.0;
        size_t kept = 0;
        while (kept < m) {
            cum += exp((double)c[kept++].logit - max);
            if (cum >= target)
                break;
        }
        if (cum >= target || m == n) {
            /* top_p leaves them best last */
            for (size_t i = 0; i < kept / 2; i++)
                swap_cand(&c[i], &c[kept - 1 - i]);
            return (long)kept;
        }
    }
}

static int32_t finish(eng_sampler *s, cand *c, size_t n, long kept);

int32_t eng_sampler_sample(eng_sampler *s, const float *logits) {
    if (!s || !logits)
        return -EINVAL;
    int n_vocab = s->n_vocab;
    cand *c = s->cands;
    size_t n;
    if (s->p.temperature <= 0.0f) {
        penalised_copy(s, logits);
        int32_t best = -1;
        float bv = -INFINITY;
        for (int i = 0; i < n_vocab; i++) {
            float v = s->logits[i];
            if (!isnan(v) && (best < 0 || v > bv)) {
                best = i;
                bv = v;
            }
        }
        return best < 0 ? 0 : best;
    }
    long kept = -1;
    if (s->p.top_k > 0 && s->p.top_k < n_vocab) {
        n = top_k_cands(s, logits, c, (size_t)s->p.top_k);
    } else {
        penalised_copy(s, logits);
        if (s->p.top_p < 1.0f)
            kept = top_p_only(s, c, s->p.top_p);
        n = kept >= 0 ? (size_t)kept : all_cands(s, c);
    }
    return finish(s, c, n, kept);
}

/* The chain after top-k (or the whole row): top-p (unless top_p_only cut
 * already: kept >= 0), min-p, temperature, the draw, over c[0..n). */
static int32_t finish(eng_sampler *s, cand *c, size_t n, long kept)
{
    if (n == 0)
        return 0;
    if (kept < 0 && s->p.top_p < 1.0f && n > 1)
        n = top_p(c, n, s->p.top_p);
    if (s->p.min_p > 0.0f && n > 1) {
        float max = -INFINITY;
        for (size_t i = 0; i < n; i++)
            if (c[i].logit > max)
                max = c[i].logit;
        /* p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p) */
        float floor = max + logf(s->p.min_p);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].logit >= floor)
                c[m++] = c[i];
        n = m; /* the max itself always passes */
    }

    double inv_t = 1.0 / (double)s->p.temperature;
    double max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit * inv_t > max)
            max = c[i].logit * inv_t;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = exp(c[i].logit * inv_t - max);
        c[i].logit = (float)e;
        sum += e;
    }
    double u = rng_uniform(s->rng) * sum, cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum += c[i].logit;
        if (u < cum)
            return c[i].id;
    }
    return c[n - 1].id; /* rounding: u landed on the very top */
}

/* ---- sampling from a row's candidates (eng_candidates) ----
 *
 * Why the candidates suffice, when eng_sampler_candidates() is not 0: let
 * A be the tokens an adjustment touches (the window's, the biased ones;
 * at most K - k of them, K the candidates' k) and order tokens by logit,
 * ties to the lower id, as top-k and greedy do. The candidates hold the K
 * best raw logits of the row, so at least k tokens outside A. A token t
 * left out has at least K tokens at or above it, k of them outside A,
 * whose logits nothing moves; its own adjusted logit is at most its raw
 * one (adjustments only lower), so those k rank before it after the
 * adjustments too, and t is neither in the top k nor the greedy choice.
 * Everything after top-k sees only its k tokens. */

int eng_sampler_candidates(const eng_sampler *s)
{
    return s ? s->n_cands : 0;
}

/* eng_sampler_candidates() of a new sampler: its parameters never change. */
static int candidates_k(const eng_sampler *s)
{
    const eng_sampler_params *p = &s->p;
    long k;
    if (p->temperature <= 0.0f)
        k = 1;
    else if (p->top_k > 0 && p->top_k < s->n_vocab)
        k = p->top_k;
    else
        return 0; /* top-p and min-p alone normalise over every token */
    k += s->n_bias;
    for (int i = 0; i < s->n_bias; i++)
        if (!(s->bias[s->bias_ids[i]] <= 0.0f))
            return 0;
    if (penalties_set(p) && p->repeat_last_n > 0) {
        /* v / rp or v * rp moves v towards -inf for rp >= 1 */
        if (!(p->repeat_penalty >= 1.0f) || p->freq_penalty < 0.0f || p->presence_penalty < 0.0f)
            return 0;
        k += p->repeat_last_n;
    }
    return k > ENG_CAND_MAX ? 0 : (int)k;
}

int32_t eng_sampler_sample_candidates(eng_sampler *s, const float *vals, const int32_t *ids, size_t n)
{
    if (!s || (n && (!vals || !ids)) || s->n_cands == 0)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= s->n_vocab)
            return -EINVAL;
    /* the adjusted tokens marked as top_k_pass marks them */
    const bool pen = penalties_set(&s->p) && s->n_hist > 0, bias = s->n_bias > 0;
    mark_adjusted(s, pen, bias);
    const bool greedy = s->p.temperature <= 0.0f;
    const size_t k = greedy ? 1 : (size_t)s->p.top_k;
    cand *c = s->cands;
    size_t m = 0;
    int32_t best = -1;
    float bv = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const int32_t t = ids[i];
        if (t < 0)
            continue;
        const float v = adjusted(s, t, vals[i]);
        if (!greedy)
            heap_offer(c, &m, k, (cand){v, t});
        else if (!isnan(v) && (best < 0 || v > bv || (v == bv && t < best))) {
            best = t; /* greedy's rule: the first of the largest, -inf too */
            bv = v;
        }
    }
    for (int b = 0; bias && b < s->n_bias; b++)
        s->cnt[s->bias_ids[b]] = 0;
    for (int h = 0; pen && h < s->n_hist; h++)
        s->cnt[s->hist[h]] = 0;
    if (greedy)
        return best < 0 ? 0 : best;
    m = keep_inf(c, m);
    qsort(c, m, sizeof(*c), cmp_before);
    return finish(s, c, m, -1);
}

unsigned eng_sampler_eval_flags(const eng_sampler *s, eng_session *session)
{
    if (eng_sampler_is_greedy(s))
        return ENG_EVAL_ARGMAX;
    const int k = eng_sampler_candidates(s);
    if (k > 0 && session && eng_session_set_candidates(session, k) == 0)
        return ENG_EVAL_CANDIDATES;
    return 0;
}

int32_t eng_sampler_sample_session(eng_sampler *s, const eng_session *session)
{
    if (!s || !session)
        return -EINVAL;
    const float *vals;
    const int32_t *ids;
    long n = eng_session_candidates(session, &vals, &ids);
    if (n >= 0) {
        /* too few a chunk (a session set up for another sampler) would
         * pick wrongly, not fail */
        const size_t chunks = eng_candidates_size(s->n_vocab, 1);
        if ((size_t)n != chunks * ((size_t)n / chunks) ||
            (long)((size_t)n / chunks) < s->n_cands)
            return -EINVAL;
        return eng_sampler_sample_candidates(s, vals, ids, (size_t)n);
    }
    if (eng_sampler_is_greedy(s)) {
        const int32_t tok = eng_session_argmax(session);
        return tok == -EDOM ? 0 : tok; /* every logit NaN: what the sampler's greedy picks */
    }
    const float *logits = eng_session_logits(session, -1);
    return logits ? eng_sampler_sample(s, logits) : -ENODATA;
}
