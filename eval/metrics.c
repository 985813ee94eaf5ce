/* Quality metrics. Text is decoded to code points first (invalid UTF-8
 * bytes become U+FFFD, one each: model output may end inside a sequence),
 * so that the tokenisers can follow the Python reference implementations
 * character by character. Tokens are then interned to integer ids, and
 * n-gram counting, bag overlap and LCS work on ids. */
#include "metrics.h"
#include "ek-utf8.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- code points ------------------------------------------------------- */

typedef struct cpbuf {
    uint32_t *c;
    size_t n, cap;
} cpbuf;

static void cpbuf_free(cpbuf *b) {
    free(b->c);
    b->c = NULL;
    b->n = b->cap = 0;
}

static int cpbuf_reserve(cpbuf *b, size_t cap) {
    if (cap <= b->cap) return 0;
    if (cap > SIZE_MAX / sizeof(uint32_t)) return -ENOMEM;
    uint32_t *nc = realloc(b->c, cap * sizeof(uint32_t));
    if (!nc) return -ENOMEM;
    b->c = nc;
    b->cap = cap;
    return 0;
}

/* Callers reserve enough room first; every push stays within cap. */
static inline void cpbuf_push(cpbuf *b, uint32_t c) { b->c[b->n++] = c; }

static int decode_utf8(const char *text, cpbuf *out) {
    size_t len = strlen(text);
    if (len > EK_METRIC_MAX_BYTES) return -E2BIG;
    out->n = 0;
    int r = cpbuf_reserve(out, len + 1);
    if (r < 0) return r;
    const unsigned char *p = (const unsigned char *)text, *end = p + len;
    while (p < end) {
        unsigned b0 = *p;
        uint32_t cp;
        size_t n = 0;
        if (b0 < 0x80) {
            cp = b0;
            n = 1;
        } else if (b0 >= 0xC2 && b0 <= 0xDF && end - p >= 2 && (p[1] & 0xC0) == 0x80) {
            cp = ((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu);
            n = 2;
        } else if (b0 >= 0xE0 && b0 <= 0xEF && end - p >= 3 && (p[1] & 0xC0) == 0x80 &&
                   (p[2] & 0xC0) == 0x80) {
            cp = ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
            n = (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ? 3 : 0;
        } else if (b0 >= 0xF0 && b0 <= 0xF4 && end - p >= 4 && (p[1] & 0xC0) == 0x80 &&
                   (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80) {
            cp = ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
                 (p[3] & 0x3Fu);
            n = (cp >= 0x10000 && cp <= 0x10FFFF) ? 4 : 0;
        }
        if (n == 0) {
            cp = 0xFFFD;
            n = 1;
        }
        cpbuf_push(out, cp);
        p += n;
    }
    return 0;
}

/* Python's str.split() whitespace. */
static bool is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Lowercase for ASCII, Latin-1, Latin Extended-A, the paired part of
 * Latin Extended-B, Greek and Cyrillic capitals: what str.lower() does
 * for the scripts our tasks use. */
static uint32_t lower_cp(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0xC0) return c;
    if (c <= 0xDE) return c == 0xD7 ? c : c + 32;
    if (c >= 0x100 && c <= 0x137) return c | 1;
    if (c >= 0x139 && c <= 0x148) return (c & 1) ? c + 1 : c;
    if (c >= 0x14A && c <= 0x177) return c | 1;
    if (c == 0x178) return 0xFF;
    if (c >= 0x179 && c <= 0x17E) return (c & 1) ? c + 1 : c;
    /* Latin Extended-B pairs, among them Romanian S/T with comma below */
    if ((c >= 0x200 && c <= 0x21F) || (c >= 0x222 && c <= 0x233)) return c | 1;
    if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

/* Python's \w for the article regex: ASCII letters, digits and '_', and
 * any non-ASCII code point except the punctuation and symbol blocks. */
static bool is_word(uint32_t c) {
    if (c < 0x80)
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_';
    if (c >= 0xA0 && c <= 0xBF)
        return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA ||
               (c >= 0xBC && c <= 0xBE);
    if (c == 0xD7 || c == 0xF7) return false;
    if (c >= 0x2000 && c <= 0x2BFF) return false; /* punctuation, symbols, arrows, ... */
    if (c >= 0x3000 && c <= 0x303F) return false;
    if (c == 0xFFFD) return false;
    return !is_space(c);
}

static bool is_ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

/* ---- tokens ------------------------------------------------------------ */

typedef struct tok {
    const uint32_t *s;
    uint32_t n;
} tok;

typedef struct toklist {
    cpbuf text;
    tok *t;
    size_t n;
    uint32_t *id; /* filled by intern() */
} toklist;

static void toklist_free(toklist *l) {
    cpbuf_free(&l->text);
    free(l->t);
    free(l->id);
    memset(l, 0, sizeof(*l));
}

/* Splits l->text on whitespace (Python str.split()). */
static int split_tokens(toklist *l) {
    size_t cap = l->text.n / 2 + 1;
    l->t = malloc(cap * sizeof(tok));
    if (!l->t) return -ENOMEM;
    l->n = 0;
    size_t i = 0;
    while (i < l->text.n) {
        while (i < l->text.n && is_space(l->text.c[i])) i++;
        if (i == l->text.n) break;
        size_t s = i;
        while (i < l->text.n && !is_space(l->text.c[i])) i++;
        if (l->n == EK_METRIC_MAX_TOKENS) return -E2BIG;
        l->t[l->n++] = (tok){l->text.c + s, (uint32_t)(i - s)};
    }
    return 0;
}

static int tok_cmp(const tok *a, const tok *b) {
    uint32_t n = a->n < b->n ? a->n : b->n;
    for (uint32_t i = 0; i < n; i++)
        if (a->s[i] != b->s[i]) return a->s[i] < b->s[i] ? -1 : 1;
    return a->n < b->n ? -1 : a->n > b->n;
}

typedef struct tokref {
    tok t;
    uint32_t list, idx;
} tokref;

static int tokref_cmp(const void *a, const void *b) {
    return tok_cmp(&((const tokref *)a)->t, &((const tokref *)b)->t);
}

/* Gives every distinct token of lists[0..k) an id >= 1, equal tokens equal
 * ids, in l->id. */
static int intern(toklist *lists, size_t k) {
    size_t total = 0;
    for (size_t i = 0; i < k; i++) total += lists[i].n;
    for (size_t i = 0; i < k; i++) {
        lists[i].id = malloc((lists[i].n ? lists[i].n : 1) * sizeof(uint32_t));
        if (!lists[i].id) return -ENOMEM;
    }
    if (total == 0) return 0;
    tokref *all = malloc(total * sizeof(*all));
    if (!all) return -ENOMEM;
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < lists[i].n; j++)
            all[m++] = (tokref){lists[i].t[j], (uint32_t)i, (uint32_t)j};
    qsort(all, total, sizeof(*all), tokref_cmp);
    uint32_t id = 0;
    for (size_t i = 0; i < total; i++) {
        if (i == 0 || tok_cmp(&all[i - 1].t, &all[i].t) != 0) id++;
        lists[all[i].list].id[all[i].idx] = id;
    }
    free(all);
    return 0;
}

/* ---- 13a tokenisation --------------------------------------------------- */

/* Replaces every occurrence of from (ASCII) with to (ASCII, not longer),
 * left to right, like str.replace. */
static void replace_all(cpbuf *b, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to), w = 0;
    for (size_t i = 0; i < b->n;) {
        bool hit = i + fl <= b->n;
        for (size_t j = 0; hit && j < fl; j++) hit = b->c[i + j] == (unsigned char)from[j];
        if (hit) {
            for (size_t j = 0; j < tl; j++) b->c[w++] = (unsigned char)to[j];
            i += fl;
        } else {
            b->c[w++] = b->c[i++];
        }
    }
    b->n = w;
}

static bool in_13a_class(uint32_t c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}

static bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

/* sacrebleu's tokenizer_13a on in (consumed): the mteval-v13a rules as
 * four regex passes, each emulated as re.sub (non-overlapping, left to
 * right) on code points. */
static int tokenize_13a_cp(cpbuf *in, toklist *out) {
    cpbuf a = {0}, b = {0};
    int r;
    /* _preprocess_segment: rstrip() */
    while (in->n && is_space(in->c[in->n - 1])) in->n--;
    replace_all(in, "<skipped>", "");
    replace_all(in, "-\n", "");
    replace_all(in, "\n", " ");
    replace_all(in, "&quot;", "\"");
    replace_all(in, "&amp;", "&");
    replace_all(in, "&lt;", "<");
    replace_all(in, "&gt;", ">");

    /* Pass 1 on f' {line} ': ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 ' */
    if ((r = cpbuf_reserve(&a, 3 * in->n + 8)) < 0) goto out;
    cpbuf_push(&a, ' ');
    for (size_t i = 0; i < in->n; i++) {
        if (in_13a_class(in->c[i])) {
            cpbuf_push(&a, ' ');
            cpbuf_push(&a, in->c[i]);
            cpbuf_push(&a, ' ');
        } else {
            cpbuf_push(&a, in->c[i]);
        }
    }
    cpbuf_push(&a, ' ');
    /* Pass 2: ([^0-9])([\.,]) -> '\1 \2 ' */
    if ((r = cpbuf_reserve(&b, 2 * a.n + 2)) < 0) goto out;
    b.n = 0;
    for (size_t i = 0; i < a.n;) {
        if (i + 1 < a.n && !is_digit(a.c[i]) && (a.c[i + 1] == '.' || a.c[i + 1] == ',')) {
            cpbuf_push(&b, a.c[i]);
            cpbuf_push(&b, ' ');
            cpbuf_push(&b, a.c[i + 1]);
            cpbuf_push(&b, ' ');
            i += 2;
        } else {
            cpbuf_push(&b, a.c[i++]);
        }
    }
    /* Pass 3: ([\.,])([^0-9]) -> ' \1 \2' */
    if ((r = cpbuf_reserve(&a, 2 * b.n + 2)) < 0) goto out;
    a.n = 0;
    for (size_t i = 0; i < b.n;) {
        if (i + 1 < b.n && (b.c[i] == '.' || b.c[i] == ',') && !is_digit(b.c[i + 1])) {
            cpbuf_push(&a, ' ');
            cpbuf_push(&a, b.c[i]);
            cpbuf_push(&a, ' ');
            cpbuf_push(&a, b.c[i + 1]);
            i += 2;
        } else {
            cpbuf_push(&a, b.c[i++]);
        }
    }
    /* Pass 4: ([0-9])(-) -> '\1 \2 ' */
    if ((r = cpbuf_reserve(&b, 2 * a.n + 2)) < 0) goto out;
    b.n = 0;
    for (size_t i = 0; i < a.n;) {
        if (i + 1 < a.n && is_digit(a.c[i]) && a.c[i + 1] == '-') {
            cpbuf_push(&b, a.c[i]);
            cpbuf_push(&b, ' ');
            cpbuf_push(&b, '-');
            cpbuf_push(&b, ' ');
            i += 2;
        } else {
            cpbuf_push(&b, a.c[i++]);
        }
    }
    out->text = b;
    b = (cpbuf){0};
    r = split_tokens(out);
out:
    cpbuf_free(&a);
    cpbuf_free(&b);
    return r;
}

static int toks_13a(const char *text, toklist *out) {
    cpbuf in = {0};
    int r = decode_utf8(text, &in);
    if (r == 0) r = tokenize_13a_cp(&in, out);
    cpbuf_free(&in);
    return r;
}

/* Joins tokens with single spaces into a malloc'ed UTF-8 string. */
static int join_tokens(const toklist *l, char **ret) {
    size_t bytes = 1;
    for (size_t i = 0; i < l->n; i++) bytes += 4 * (size_t)l->t[i].n + 1;
    char *s = malloc(bytes), *w = s;
    if (!s) return -ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        if (i) *w++ = ' ';
        for (uint32_t j = 0; j < l->t[i].n; j++) w += ek__utf8_encode(l->t[i].s[j], w);
    }
    *w = '\0';
    *ret = s;
    return 0;
}

int ek_tokenize_13a(const char *text, char **ret_text, size_t *ret_n) {
    if (!text || !ret_text) return -EINVAL;
    toklist l = {0};
    char *s = NULL;
    int r = toks_13a(text, &l);
    if (r == 0) r = join_tokens(&l, &s);
    if (r == 0) {
        *ret_text = s;
        if (ret_n) *ret_n = l.n;
    }
    toklist_free(&l);
    return r;
}

/* ---- BLEU -------------------------------------------------------------- */

/* An n-gram of ids, zero-padded: ids start at 1, so padding never equals a
 * token and n-grams of different orders never compare equal. */
typedef struct ngram {
    uint32_t w[EK_BLEU_ORDER];
} ngram;

static int ngram_cmp(const void *a, const void *b) {
    const ngram *x = a, *y = b;
    for (int i = 0; i < EK_BLEU_ORDER; i++)
        if (x->w[i] != y->w[i]) return x->w[i] < y->w[i] ? -1 : 1;
    return 0;
}

/* Sorted n-grams of order n of l into out (room for l->n entries); returns
 * their count. */
static size_t ngrams_sorted(const toklist *l, int n, ngram *out) {
    if (l->n < (size_t)n) return 0;
    size_t m = l->n - (size_t)n + 1;
    for (size_t i = 0; i < m; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        for (int j = 0; j < n; j++) out[i].w[j] = l->id[i + (size_t)j];
    }
    qsort(out, m, sizeof(*out), ngram_cmp);
    return m;
}

/* Occurrences of g in the sorted v[0..n). */
static size_t count_in(const ngram *v, size_t n, const ngram *g) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ngram_cmp(&v[mid], g) < 0) lo = mid + 1;
        else hi = mid;
    }
    size_t c = 0;
    while (lo + c < n && ngram_cmp(&v[lo + c], g) == 0) c++;
    return c;
}

typedef struct seg_stats {
    uint64_t match[EK_BLEU_ORDER], total[EK_BLEU_ORDER];
    uint64_t hyp_len, ref_len;
} seg_stats;

static int segment_stats(const char *hyp, const char *const *refs, size_t n_refs,
                         seg_stats *ret) {
    if (!hyp || !refs || n_refs == 0 || !ret) return -EINVAL;
    if (n_refs > EK_METRIC_MAX_REFS) return -E2BIG;
    for (size_t i = 0; i < n_refs; i++)
        if (!refs[i]) return -EINVAL;
    size_t k = n_refs + 1;
    toklist *l = calloc(k, sizeof(*l));
    ngram *hg = NULL, *rg = NULL;
    size_t *rn = NULL;
    if (!l) return -ENOMEM;
    int r = toks_13a(hyp, &l[0]);
    for (size_t i = 0; r == 0 && i < n_refs; i++) r = toks_13a(refs[i], &l[i + 1]);
    if (r == 0) r = intern(l, k);
    if (r < 0) goto out;

    seg_stats st = {0};
    st.hyp_len = l[0].n;
    /* Closest reference length; ties go to the shorter (sacrebleu). */
    uint64_t best = 0, best_diff = UINT64_MAX;
    size_t max_ref = 0;
    for (size_t i = 1; i < k; i++) {
        uint64_t rl = l[i].n;
        uint64_t diff = rl > st.hyp_len ? rl - st.hyp_len : st.hyp_len - rl;
        if (diff < best_diff || (diff == best_diff && rl < best)) {
            best = rl;
            best_diff = diff;
        }
        if (l[i].n > max_ref) max_ref = l[i].n;
    }
    st.ref_len = best;

    hg = malloc((l[0].n ? l[0].n : 1) * sizeof(*hg));
    rg = malloc(n_refs * (max_ref ? max_ref : 1) * sizeof(*rg));
    rn = malloc(n_refs * sizeof(*rn));
    if (!hg || !rg || !rn) {
        r = -ENOMEM;
        goto out;
    }
    for (int n = 1; n <= EK_BLEU_ORDER; n++) {
        size_t nh = ngrams_sorted(&l[0], n, hg);
        for (size_t i = 0; i < n_refs; i++) rn[i] = ngrams_sorted(&l[i + 1], n, rg + i * max_ref);
        st.total[n - 1] = nh;
        /* Each distinct hypothesis n-gram counts at most as often as it
         * occurs in the reference that has it most often. */
        for (size_t i = 0; i < nh;) {
            size_t c = 1;
            while (i + c < nh && ngram_cmp(&hg[i], &hg[i + c]) == 0) c++;
            size_t best_c = 0;
            for (size_t j = 0; j < n_refs; j++) {
                size_t rc = count_in(rg + j * max_ref, rn[j], &hg[i]);
                if (rc > best_c) best_c = rc;
            }
            st.match[n - 1] += c < best_c ? c : best_c;
            i += c;
        }
    }
    *ret = st;
out:
    for (size_t i = 0; i < k; i++) toklist_free(&l[i]);
    free(l);
    free(hg);
    free(rg);
    free(rn);
    return r;
}

void ek_bleu_stats_init(ek_bleu_stats *st) {
    if (st) memset(st, 0, sizeof(*st));
}

int ek_bleu_add(ek_bleu_stats *st, const char *hyp, const char *const *refs, size_t n_refs) {
    if (!st) return -EINVAL;
    seg_stats s;
    int r = segment_stats(hyp, refs, n_refs, &s);
    if (r < 0) return r;
    for (int i = 0; i < EK_BLEU_ORDER; i++) {
        st->match[i] += s.match[i];
        st->total[i] += s.total[i];
    }
    st->hyp_len += s.hyp_len;
    st->ref_len += s.ref_len;
    st->n_segments++;
    return 0;
}

static double brevity(uint64_t hyp_len, uint64_t ref_len) {
    if (hyp_len == 0) return 0.0;
    if (hyp_len >= ref_len) return 1.0;
    return exp(1.0 - (double)ref_len / (double)hyp_len);
}

double ek_bleu_brevity_penalty(const ek_bleu_stats *st) {
    return st ? brevity(st->hyp_len, st->ref_len) : 0.0;
}

double ek_bleu_score(const ek_bleu_stats *st) {
    if (!st || st->hyp_len == 0) return 0.0;
    double logsum = 0.0;
    for (int i = 0; i < EK_BLEU_ORDER; i++) {
        if (st->total[i] == 0 || st->match[i] == 0) return 0.0;
        logsum += log((double)st->match[i] / (double)st->total[i]);
    }
    return 100.0 * brevity(st->hyp_len, st->ref_len) * exp(logsum / EK_BLEU_ORDER);
}

int ek_bleu_sentence(const char *hyp, const char *const *refs, size_t n_refs, double *ret) {
    if (!ret) return -EINVAL;
    seg_stats s;
    int r = segment_stats(hyp, refs, n_refs, &s);
    if (r < 0) return r;
    if (s.hyp_len == 0 || s.match[0] == 0) {
        *ret = 0.0;
        return 0;
    }
    double logsum = log((double)s.match[0] / (double)s.total[0]);
    for (int i = 1; i < EK_BLEU_ORDER; i++)
        logsum += log(((double)s.match[i] + 1.0) / ((double)s.total[i] + 1.0));
    *ret = 100.0 * brevity(s.hyp_len, s.ref_len) * exp(logsum / EK_BLEU_ORDER);
    return 0;
}

/* ---- paired bootstrap ---------------------------------------------------- */

typedef struct boot_src {
    const double *x, *ref;              /* per-item scores (mean), or */
    const ek_bleu_stats *bx, *bref;     /* per-item BLEU statistics */
} boot_src;

static void bleu_sum(ek_bleu_stats *acc, const ek_bleu_stats *s) {
    for (int k = 0; k < EK_BLEU_ORDER; k++) {
        acc->match[k] += s->match[k];
        acc->total[k] += s->total[k];
    }
    acc->hyp_len += s->hyp_len;
    acc->ref_len += s->ref_len;
    acc->n_segments += s->n_segments;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int boot_ratio(const boot_src *src, size_t n, int n_boot, uint64_t seed, double *lo,
                      double *hi) {
    if (!lo || !hi || n_boot < 1 || n_boot > 1000000) return -EINVAL;
    *lo = *hi = NAN;
    if (n < 2) return -EDOM;
    double *ratios = malloc((size_t)n_boot * sizeof(*ratios));
    if (!ratios) return -ENOMEM;
    /* splitmix64: the same resamples for the same seed everywhere */
    uint64_t state = seed;
    int n_ok = 0;
    for (int b = 0; b < n_boot; b++) {
        double sx = 0, sr = 0;
        ek_bleu_stats ax, ar;
        ek_bleu_stats_init(&ax);
        ek_bleu_stats_init(&ar);
        for (size_t j = 0; j < n; j++) {
            uint64_t z = (state += 0x9e3779b97f4a7c15ull);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            z ^= z >> 31;
            const size_t i = (size_t)(z % n);
            if (src->x) {
                sx += src->x[i];
                sr += src->ref[i];
            } else {
                bleu_sum(&ax, &src->bx[i]);
                bleu_sum(&ar, &src->bref[i]);
            }
        }
        if (!src->x) {
            sx = ek_bleu_score(&ax);
            sr = ek_bleu_score(&ar);
        }
        if (sr > 0 && isfinite(sx))
            ratios[n_ok++] = sx / sr; /* the means' n cancels */
    }
    int r = 0;
    if (n_ok == 0 || (double)n_ok < 0.95 * n_boot) {
        r = -EDOM;
    } else {
        qsort(ratios, (size_t)n_ok, sizeof(*ratios), cmp_double);
        /* nearest rank: the smallest value with at least 2.5 % at or below
         * it, and the largest with at least 2.5 % at or above it */
        size_t k = (size_t)ceil(0.025 * n_ok);
        *lo = ratios[k > 0 ? k - 1 : 0];
        *hi = ratios[(size_t)n_ok - (k > 0 ? k : 1)];
    }
    free(ratios);
    return r;
}

int ek_boot_mean_ratio(const double *x, const double *ref, size_t n, int n_boot, uint64_t seed,
                       double *lo, double *hi) {
    if (!x || !ref) return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || !isfinite(ref[i])) return -EINVAL;
    const boot_src src = {x, ref, NULL, NULL};
    return boot_ratio(&src, n, n_boot, seed, lo, hi);
}

int ek_boot_bleu_ratio(const ek_bleu_stats *x, const ek_bleu_stats *ref, size_t n, int n_boot,
                       uint64_t seed, double *lo, double *hi) {
    if (!x || !ref) return -EINVAL;
    const boot_src src = {NULL, NULL, x, ref};
    return boot_ratio(&src, n, n_boot, seed, lo, hi);
}

/* ---- SQuAD ------------------------------------------------------------- */

/* normalize_answer() of the SQuAD v2 script: lower, remove punctuation,
 * remove articles (replaced by a space, as re.sub does), split. */
static int squad_tokens(const char *text, toklist *out) {
    cpbuf *b = &out->text;
    int r = decode_utf8(text, b);
    if (r < 0) return r;
    size_t w = 0;
    for (size_t i = 0; i < b->n; i++) {
        uint32_t c = lower_cp(b->c[i]);
        if (!is_ascii_punct(c)) b->c[w++] = c;
    }
    b->n = w;
    /* \b(a|an|the)\b: a maximal run of word characters equal to an article */
    for (size_t i = 0; i < b->n;) {
        if (!is_word(b->c[i])) {
            i++;
            continue;
        }
        size_t s = i;
        while (i < b->n && is_word(b->c[i])) i++;
        size_t n = i - s;
        const uint32_t *p = b->c + s;
        bool art = (n == 1 && p[0] == 'a') || (n == 2 && p[0] == 'a' && p[1] == 'n') ||
                   (n == 3 && p[0] == 't' && p[1] == 'h' && p[2] == 'e');
        if (art) {
            /* Replace the run with one space: shift the tail left. */
            b->c[s] = ' ';
            memmove(b->c + s + 1, b->c + i, (b->n - i) * sizeof(uint32_t));
            b->n -= n - 1;
            i = s + 1;
        }
    }
    return split_tokens(out);
}

int ek_squad_normalize(const char *text, char **ret_text) {
    if (!text || !ret_text) return -EINVAL;
    toklist l = {0};
    char *s = NULL;
    int r = squad_tokens(text, &l);
    if (r == 0) r = join_tokens(&l, &s);
    if (r == 0) *ret_text = s;
    toklist_free(&l);
    return r;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Computes EM (want_f1 false) or F1 of pred against each reference and
 * keeps the best. */
static int squad_score(const char *pred, const char *const *refs, size_t n_refs, bool want_f1,
                       double *ret) {
    static const char *const empty[] = {""};
    if (!pred || !ret || (n_refs && !refs)) return -EINVAL;
    if (n_refs > EK_METRIC_MAX_REFS) return -E2BIG;
    if (n_refs == 0) {
        refs = empty;
        n_refs = 1;
    }
    for (size_t i = 0; i < n_refs; i++)
        if (!refs[i]) return -EINVAL;
    size_t k = n_refs + 1;
    toklist *l = calloc(k, sizeof(*l));
    if (!l) return -ENOMEM;
    int r = squad_tokens(pred, &l[0]);
    for (size_t i = 0; r == 0 && i < n_refs; i++) r = squad_tokens(refs[i], &l[i + 1]);
    if (r == 0) r = intern(l, k);
    if (r < 0) goto out;
    /* Sorted ids: equality is EM; a merge counts the bag intersection. */
    for (size_t i = 0; i < k; i++) qsort(l[i].id, l[i].n, sizeof(uint32_t), cmp_u32);
    double best = 0.0;
    for (size_t j = 1; j < k; j++) {
        const toklist *p = &l[0], *g = &l[j];
        double s;
        if (!want_f1) {
            /* Normalised strings are equal iff the token sequences are;
             * compare in order, not as bags. */
            bool eq = p->n == g->n;
            for (size_t i = 0; eq && i < p->n; i++) eq = tok_cmp(&p->t[i], &g->t[i]) == 0;
            s = eq ? 1.0 : 0.0;
        } else if (p->n == 0 || g->n == 0) {
            s = (p->n == g->n) ? 1.0 : 0.0;
        } else {
            size_t a = 0, b = 0, same = 0;
            while (a < p->n && b < g->n) {
                if (p->id[a] == g->id[b]) {
                    same++;
                    a++;
                    b++;
                } else if (p->id[a] < g->id[b]) {
                    a++;
                } else {
                    b++;
                }
            }
            if (same == 0) {
                s = 0.0;
            } else {
                double prec = (double)same / (double)p->n, rec = (double)same / (double)g->n;
                s = 2.0 * prec * rec / (prec + rec);
            }
        }
        if (s > best) best = s;
    }
    *ret = best;
out:
    for (size_t i = 0; i < k; i++) toklist_free(&l[i]);
    free(l);
    return r;
}

int ek_squad_em(const char *pred, const char *const *refs, size_t n_refs, double *ret) {
    return squad_score(pred, refs, n_refs, false, ret);
}

int ek_squad_f1(const char *pred, const char *const *refs, size_t n_refs, double *ret) {
    return squad_score(pred, refs, n_refs, true, ret);
}

/* ---- ROUGE-L ----------------------------------------------------------- */

/* rouge_score's tokenize(): lowercase, every run outside [a-z0-9] is a
 * separator. */
static int rouge_tokens(const char *text, toklist *out) {
    cpbuf *b = &out->text;
    int r = decode_utf8(text, b);
    if (r < 0) return r;
    for (size_t i = 0; i < b->n; i++) {
        uint32_t c = lower_cp(b->c[i]);
        b->c[i] = ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) ? c : ' ';
    }
    return split_tokens(out);
}

static size_t lcs_len(const uint32_t *x, size_t m, const uint32_t *y, size_t n, uint32_t *row) {
    /* row[j] = LCS of x[0..i) and y[0..j); one row and a diagonal. */
    memset(row, 0, (n + 1) * sizeof(uint32_t));
    for (size_t i = 0; i < m; i++) {
        uint32_t diag = 0;
        for (size_t j = 0; j < n; j++) {
            uint32_t up = row[j + 1];
            if (x[i] == y[j])
                row[j + 1] = diag + 1;
            else if (row[j] > row[j + 1])
                row[j + 1] = row[j];
            diag = up;
        }
    }
    return row[n];
}

int ek_rouge_l(const char *hyp, const char *const *refs, size_t n_refs, double *ret_f,
               double *ret_p, double *ret_r) {
    if (!hyp || !refs || n_refs == 0 || !ret_f) return -EINVAL;
    if (n_refs > EK_METRIC_MAX_REFS) return -E2BIG;
    for (size_t i = 0; i < n_refs; i++)
        if (!refs[i]) return -EINVAL;
    size_t k = n_refs + 1;
    toklist *l = calloc(k, sizeof(*l));
    uint32_t *row = NULL;
    if (!l) return -ENOMEM;
    int r = rouge_tokens(hyp, &l[0]);
    for (size_t i = 0; r == 0 && i < n_refs; i++) r = rouge_tokens(refs[i], &l[i + 1]);
    if (r == 0) r = intern(l, k);
    if (r < 0) goto out;
    size_t max_ref = 0;
    for (size_t i = 1; i < k; i++)
        if (l[i].n > max_ref) max_ref = l[i].n;
    row = malloc((max_ref + 1) * sizeof(uint32_t));
    if (!row) {
        r = -ENOMEM;
        goto out;
    }
    double bf = 0.0, bp = 0.0, br = 0.0;
    bool have = false;
    for (size_t j = 1; j < k; j++) {
        double f = 0.0, p = 0.0, rc = 0.0;
        if (l[0].n && l[j].n) {
            size_t lcs = lcs_len(l[0].id, l[0].n, l[j].id, l[j].n, row);
            p = (double)lcs / (double)l[0].n;
            rc = (double)lcs / (double)l[j].n;
            f = (p + rc) > 0.0 ? 2.0 * p * rc / (p + rc) : 0.0;
        }
        if (!have || f > bf) {
            bf = f;
            bp = p;
            br = rc;
            have = true;
        }
    }
    *ret_f = bf;
    if (ret_p) *ret_p = bp;
    if (ret_r) *ret_r = br;
out:
    for (size_t i = 0; i < k; i++) toklist_free(&l[i]);
    free(l);
    free(row);
    return r;
}

/* ---- language-model statistics ----------------------------------------- */

int ek_logprob(const float *logits, size_t n_vocab, int32_t target, double *ret_logprob,
               int32_t *ret_argmax) {
    if (!logits || n_vocab == 0 || n_vocab > INT32_MAX || !ret_logprob || target < 0 ||
        (size_t)target >= n_vocab)
        return -EINVAL;
    size_t arg = 0;
    float mx = -INFINITY;
    for (size_t i = 0; i < n_vocab; i++) {
        float v = logits[i];
        if (isnan(v) || v == INFINITY) return -EDOM;
        if (v > mx) {
            mx = v;
            arg = i;
        }
    }
    if (mx == -INFINITY) return -EDOM;
    double sum = 0.0;
    for (size_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - (double)mx);
    *ret_logprob = ((double)logits[target] - (double)mx) - log(sum);
    if (ret_argmax) *ret_argmax = (int32_t)arg;
    return 0;
}

void ek_lm_stats_init(ek_lm_stats *st) {
    if (st) memset(st, 0, sizeof(*st));
}

int ek_lm_stats_add(ek_lm_stats *st, double logprob, bool agree) {
    if (!st || !(logprob <= 0.0) || isinf(logprob)) return -EINVAL;
    st->nll -= logprob;
    st->n_tokens++;
    if (agree) st->n_agree++;
    return 0;
}

double ek_lm_stats_perplexity(const ek_lm_stats *st) {
    if (!st || st->n_tokens == 0) return 0.0;
    return exp(st->nll / (double)st->n_tokens);
}

double ek_lm_stats_agreement(const ek_lm_stats *st) {
    if (!st || st->n_tokens == 0) return 0.0;
    return (double)st->n_agree / (double)st->n_tokens;
}
