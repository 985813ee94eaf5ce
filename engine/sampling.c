/* Sampler: repetition penalty, then greedy or top-k -> top-p -> min-p ->
 * temperature -> softmax -> draw, the order of llama.cpp's default chain.
 *
 * The caller's logits are never written: each call copies them into the
 * sampler's own scratch (n_vocab floats), which is also where the penalty is
 * applied. Work per token is O(n_vocab) plus O(k) / O(m log n_vocab) for the
 * partial orderings top-k and top-p need (m: tokens top-p keeps).
 *
 * Ties are broken towards the lower token id everywhere (greedy, the top-k
 * boundary, the top-p order), so a given seed gives the same tokens on every
 * platform: the PRNG is xoshiro256** seeded through splitmix64.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Bounds on what a client may ask for; far above any sane setting. */
#define REPEAT_LAST_N_MAX 65536
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
    uint8_t *mark;    /* [n_vocab] tokens already penalised this step */
};

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
        p->repeat_last_n > REPEAT_LAST_N_MAX)
        return -EINVAL;

    eng_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->logits = malloc((size_t)n_vocab * sizeof(*s->logits));
    s->cands = malloc((size_t)n_vocab * sizeof(*s->cands));
    s->mark = calloc((size_t)n_vocab, 1);
    s->hist = p->repeat_last_n > 0 ? malloc((size_t)p->repeat_last_n * sizeof(*s->hist)) : NULL;
    if (!s->logits || !s->cands || !s->mark || (p->repeat_last_n > 0 && !s->hist)) {
        eng_sampler_free(s);
        return -ENOMEM;
    }
    rng_seed(s->rng, p->seed);
    *ret_sampler = s;
    return 0;
}

void eng_sampler_free(eng_sampler *s) {
    if (!s)
        return;
    free(s->logits);
    free(s->cands);
    free(s->mark);
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

/* The greedy branch of eng_sampler_sample with apply_penalty a no-op: the
 * penalty changes nothing when it is 1, and with repeat_last_n 0 accept()
 * keeps no history for it to act on. */
bool eng_sampler_is_greedy(const eng_sampler *s) {
    return s && s->p.temperature <= 0.0f &&
           (s->p.repeat_penalty == 1.0f || s->p.repeat_last_n <= 0);
}

/* Each distinct token of the window is penalised once, however often it
 * occurs (llama.cpp's repeat penalty does the same). */
static void apply_penalty(eng_sampler *s) {
    float pen = s->p.repeat_penalty;
    if (pen == 1.0f || s->n_hist == 0)
        return;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        if (s->mark[t])
            continue;
        s->mark[t] = 1;
        float *l = &s->logits[t];
        *l = *l > 0.0f ? *l / pen : *l * pen;
    }
    for (int i = 0; i < s->n_hist; i++)
        s->mark[s->hist[i]] = 0;
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

/* Moves the k best candidates (in `before` order) to c[0..k), unordered.
 * Quickselect with median-of-three pivots; the order is total (ids are
 * unique), so the selected set is exactly the k best. */
static void select_top(cand *c, size_t n, size_t k) {
    size_t lo = 0, hi = n; /* the boundary k lies in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (before(&c[hi - 1], &c[lo]))
            swap_cand(&c[hi - 1], &c[lo]);
        if (before(&c[mid], &c[lo]))
            swap_cand(&c[mid], &c[lo]);
        if (before(&c[hi - 1], &c[mid]))
            swap_cand(&c[hi - 1], &c[mid]);
        /* now c[lo] <= c[mid] <= c[hi-1] in rank order; partition on c[mid] */
        cand pivot = c[mid];
        swap_cand(&c[mid], &c[hi - 1]);
        size_t store = lo;
        for (size_t i = lo; i < hi - 1; i++)
            if (before(&c[i], &pivot))
                swap_cand(&c[i], &c[store++]);
        swap_cand(&c[store], &c[hi - 1]);
        if (store == k || store + 1 == k)
            return;
        if (k < store)
            hi = store;
        else
            lo = store + 1;
    }
}

/* Binary max-heap in `before` order, for popping candidates best-first. */
static void sift_down(cand *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[l], &h[m]))
            m = l;
        if (r < n && before(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        swap_cand(&h[i], &h[m]);
        i = m;
    }
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
        sift_down(c, n, i);
    size_t heap = n, m = 0;
    while (heap > 0) {
        cand best = c[0];
        c[0] = c[heap - 1];
        heap--;
        sift_down(c, heap, 0);
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

int32_t eng_sampler_sample(eng_sampler *s, const float *logits) {
    if (!s || !logits)
        return -EINVAL;
    int n_vocab = s->n_vocab;
    memcpy(s->logits, logits, (size_t)n_vocab * sizeof(*logits));
    apply_penalty(s);

    if (s->p.temperature <= 0.0f) {
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

    /* candidates: every token with a finite or +inf logit; -inf and NaN are
     * impossible tokens. */
    size_t n = 0;
    for (int i = 0; i < n_vocab; i++) {
        float v = s->logits[i];
        if (!isnan(v) && v != -INFINITY)
            s->cands[n++] = (cand){v, i};
    }
    if (n == 0)
        return 0;
    cand *c = s->cands;
    /* +inf logits: those tokens are certain; choose among them uniformly by
     * keeping only them with equal logits. */
    bool has_inf = false;
    for (size_t i = 0; i < n && !has_inf; i++)
        has_inf = c[i].logit == INFINITY;
    if (has_inf) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].logit == INFINITY)
                c[m++] = (cand){0.0f, c[i].id};
        n = m;
    }

    if (s->p.top_k > 0 && (size_t)s->p.top_k < n) {
        select_top(c, n, (size_t)s->p.top_k);
        n = (size_t)s->p.top_k;
    }
    if (s->p.top_p < 1.0f && n > 1)
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
