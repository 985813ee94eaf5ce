/* evalkit metrics: hand-computed known answers (BLEU, 13a tokenisation,
 * SQuAD EM/F1, ROUGE-L, log-softmax and perplexity), error paths, and a
 * fixture of values computed by sacrebleu, the SQuAD v2 script and
 * rouge_score (tests/data/metrics-fixture.tsv, made by
 * tests/data/make-metrics-fixture.py). */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                             \
            fputc('\n', stderr);                                      \
            failures++;                                               \
        }                                                             \
    } while (0)

#define NEAR(a, b, tol) (fabs((a) - (b)) <= (tol))

static double sbleu(const char *hyp, const char *ref) {
    double v = -1.0;
    int r = ek_bleu_sentence(hyp, &ref, 1, &v);
    CHECK(r == 0, "ek_bleu_sentence(%s) = %d", hyp, r);
    return v;
}

static double cbleu(const char *hyp, const char *ref) {
    ek_bleu_stats st;
    ek_bleu_stats_init(&st);
    int r = ek_bleu_add(&st, hyp, &ref, 1);
    CHECK(r == 0, "ek_bleu_add(%s) = %d", hyp, r);
    return ek_bleu_score(&st);
}

static void test_bleu(void) {
    /* Identical: every precision 1, no brevity penalty. */
    const char *s = "The quick brown fox jumps over the lazy dog.";
    CHECK(NEAR(cbleu(s, s), 100.0, 1e-9), "identical corpus %f", cbleu(s, s));
    CHECK(NEAR(sbleu(s, s), 100.0, 1e-9), "identical sentence %f", sbleu(s, s));
    /* Disjoint: no unigram match. */
    CHECK(cbleu("alpha beta gamma delta", "one two three four") == 0.0, "disjoint corpus");
    CHECK(sbleu("alpha beta gamma delta", "one two three four") == 0.0, "disjoint sentence");

    /* "the cat sat on the mat" vs "the cat is on the mat":
     * 1-grams 5/6, 2-grams 3/5, 3-grams 1/4 ("on the mat"), 4-grams 0/3.
     * Corpus BLEU is 0 (no 4-gram); BLEU+1 adds one to orders 2..4:
     * (5/6 * 4/6 * 2/5 * 1/4)^(1/4), equal lengths so BP = 1. */
    double want = 100.0 * pow(5.0 / 6 * 4.0 / 6 * 2.0 / 5 * 1.0 / 4, 0.25);
    CHECK(cbleu("the cat sat on the mat", "the cat is on the mat") == 0.0, "no 4-gram");
    CHECK(NEAR(sbleu("the cat sat on the mat", "the cat is on the mat"), want, 1e-9),
          "smoothed %f want %f", sbleu("the cat sat on the mat", "the cat is on the mat"), want);

    /* One extra word: precisions 6/7, 5/6, 4/5, 3/4; longer than the
     * reference, so BP = 1: BLEU = (3/7)^(1/4). */
    want = 100.0 * pow(3.0 / 7.0, 0.25);
    double got = cbleu("the cat sat on the mat today", "the cat sat on the mat");
    CHECK(NEAR(got, want, 1e-9), "extra word %f want %f", got, want);

    /* Brevity: a 5-word prefix of a 6-word reference, all precisions 1,
     * BP = exp(1 - 6/5). */
    want = 100.0 * exp(1.0 - 6.0 / 5.0);
    got = cbleu("the cat sat on the", "the cat sat on the mat");
    CHECK(NEAR(got, want, 1e-9), "brevity %f want %f", got, want);

    /* Clipping: "the" four times against one "the": 1/4 unigrams; no
     * bigram matches: BLEU+1 = (1/4 * 1/4 * 1/3 * 1/2)^(1/4). */
    want = 100.0 * pow(0.25 * 0.25 / 3.0 / 2.0, 0.25);
    got = sbleu("the the the the", "the cat");
    CHECK(NEAR(got, want, 1e-9), "clipping %f want %f", got, want);

    /* Clipping against several references uses the highest count in any
     * one of them: "the the cat" vs {"the cat", "the the dog"} -> 3/3. */
    ek_bleu_stats st;
    ek_bleu_stats_init(&st);
    const char *refs2[] = {"the cat", "the the dog"};
    CHECK(ek_bleu_add(&st, "the the cat", refs2, 2) == 0, "add");
    CHECK(st.match[0] == 3 && st.total[0] == 3, "unigrams %llu/%llu",
          (unsigned long long)st.match[0], (unsigned long long)st.total[0]);
    /* "the the", "the cat" both occur in some reference. */
    CHECK(st.match[1] == 2 && st.total[1] == 2, "bigrams %llu/%llu",
          (unsigned long long)st.match[1], (unsigned long long)st.total[1]);
    /* Closest reference length: 3 tokens vs 2 and 3 -> 3. */
    CHECK(st.ref_len == 3 && st.hyp_len == 3, "lengths %llu %llu",
          (unsigned long long)st.hyp_len, (unsigned long long)st.ref_len);

    /* Ties in the closest length go to the shorter reference: hyp of 4
     * tokens, references of 2 and 6 -> 2, so BP = 1. */
    ek_bleu_stats_init(&st);
    const char *refs3[] = {"x y z w v u", "a b"};
    CHECK(ek_bleu_add(&st, "a b c d", refs3, 2) == 0, "add");
    CHECK(st.ref_len == 2, "tie ref_len %llu", (unsigned long long)st.ref_len);
    CHECK(ek_bleu_brevity_penalty(&st) == 1.0, "tie bp");

    /* Corpus statistics add up: the two segments above as one corpus
     * equals the sums of their own statistics. */
    ek_bleu_stats a, b, ab;
    ek_bleu_stats_init(&a);
    ek_bleu_stats_init(&b);
    ek_bleu_stats_init(&ab);
    const char *r1 = "the cat sat on the mat", *r2 = "a dog ran in the park today";
    CHECK(ek_bleu_add(&a, "the cat sat on a mat", &r1, 1) == 0, "add a");
    CHECK(ek_bleu_add(&b, "the dog ran in the park", &r2, 1) == 0, "add b");
    CHECK(ek_bleu_add(&ab, "the cat sat on a mat", &r1, 1) == 0, "add ab1");
    CHECK(ek_bleu_add(&ab, "the dog ran in the park", &r2, 1) == 0, "add ab2");
    for (int n = 0; n < EK_BLEU_ORDER; n++)
        CHECK(ab.match[n] == a.match[n] + b.match[n] && ab.total[n] == a.total[n] + b.total[n],
              "order %d sums", n + 1);
    CHECK(ab.hyp_len == 12 && ab.ref_len == 13 && ab.n_segments == 2, "corpus lengths");
    /* Matches: seg 1: 5/6 3/5 2/4 1/3 ("the cat sat on"); seg 2: 5/6
     * (the second "the" clipped) 4/5 3/4 2/3 ("dog ran in the", "ran in the
     * park"). Summed: 10/12 7/10 5/8 3/6; BP = exp(1 - 13/12). */
    want = 100.0 * exp(1.0 - 13.0 / 12.0) *
           pow(10.0 / 12.0 * 7.0 / 10.0 * 5.0 / 8.0 * 3.0 / 6.0, 0.25);
    CHECK(NEAR(ek_bleu_score(&ab), want, 1e-9), "corpus %f want %f", ek_bleu_score(&ab), want);

    /* Empty hypothesis. */
    CHECK(cbleu("", "some reference") == 0.0, "empty hyp corpus");
    CHECK(sbleu("", "some reference") == 0.0, "empty hyp sentence");
    ek_bleu_stats_init(&st);
    CHECK(ek_bleu_score(&st) == 0.0, "empty corpus");

    /* Errors leave the statistics untouched. */
    ek_bleu_stats_init(&st);
    CHECK(ek_bleu_add(&st, "x", NULL, 0) == -EINVAL, "no refs");
    CHECK(ek_bleu_add(&st, NULL, &r1, 1) == -EINVAL, "NULL hyp");
    size_t big = EK_METRIC_MAX_BYTES + 1;
    char *huge = malloc(big + 1);
    memset(huge, 'a', big);
    huge[big] = '\0';
    CHECK(ek_bleu_add(&st, huge, &r1, 1) == -E2BIG, "huge hyp");
    /* Many tokens within the byte cap. */
    size_t nt = EK_METRIC_MAX_TOKENS + 1;
    for (size_t i = 0; i < nt; i++) {
        huge[2 * i] = 'a';
        huge[2 * i + 1] = ' ';
    }
    huge[2 * nt] = '\0';
    CHECK(ek_bleu_add(&st, huge, &r1, 1) == -E2BIG, "too many tokens");
    CHECK(st.n_segments == 0 && st.total[0] == 0, "untouched after errors");
    double v = 12345.0;
    CHECK(ek_bleu_sentence(huge, &r1, 1, &v) == -E2BIG && v == 12345.0, "ret untouched");
    free(huge);
}

static void test_13a(void) {
    static const struct {
        const char *in, *out;
    } cases[] = {
        /* Punctuation split off, except '.' and ',' between digits and '-'
         * not after a digit. */
        {"Hello, world! 3.5 and 1,000 items-2 (x).", "Hello , world ! 3.5 and 1,000 items-2 ( x ) ."},
        {"x&amp;lt;y", "x < y"}, /* entities unescaped in order, like str.replace */
        {"a-\nb", "ab"},         /* hyphenated line break joined */
        {"U.S.A.", "U . S . A ."},
        {"It's \"quoted\" <skipped>ok", "It's \" quoted \" ok"},
        {"  spaced\t\tout  ", "spaced out"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL;
        size_t n = 0;
        int r = ek_tokenize_13a(cases[i].in, &out, &n);
        CHECK(r == 0 && strcmp(out, cases[i].out) == 0, "13a(%s) = '%s' want '%s'", cases[i].in,
              out ? out : "(null)", cases[i].out);
        free(out);
    }
}

static double em1(const char *pred, const char *ref) {
    double v = -1;
    CHECK(ek_squad_em(pred, &ref, 1, &v) == 0, "em");
    return v;
}

static double f11(const char *pred, const char *ref) {
    double v = -1;
    CHECK(ek_squad_f1(pred, &ref, 1, &v) == 0, "f1");
    return v;
}

static void test_squad(void) {
    char *n = NULL;
    CHECK(ek_squad_normalize("  Hello,   The World's-end  ", &n) == 0, "normalize");
    CHECK(n && strcmp(n, "hello worldsend") == 0, "normalize got '%s'", n ? n : "");
    free(n);
    CHECK(ek_squad_normalize("An apple a day; THE end.", &n) == 0, "normalize");
    CHECK(n && strcmp(n, "apple day end") == 0, "articles '%s'", n ? n : "");
    free(n);
    /* Articles only inside words stay: "theory", "and", "anthem". */
    CHECK(ek_squad_normalize("theory and anthem", &n) == 0, "normalize");
    CHECK(n && strcmp(n, "theory and anthem") == 0, "words '%s'", n ? n : "");
    free(n);
    /* Non-ASCII lowercase (German, Romanian). */
    CHECK(ek_squad_normalize("ÜBER ȘTIINȚĂ", &n) == 0, "normalize");
    CHECK(n && strcmp(n, "über știință") == 0, "unicode lower '%s'", n ? n : "");
    free(n);

    CHECK(em1("The Cat!", "cat") == 1.0, "EM case/punct/article");
    CHECK(em1("cat sat", "sat cat") == 0.0, "EM order matters");
    CHECK(em1("a an the", "") == 1.0, "EM both empty");
    CHECK(f11("a an the", "") == 1.0, "F1 both empty");
    CHECK(f11("", "Luanda") == 0.0, "F1 empty pred");
    CHECK(NEAR(f11("Barack Obama", "Obama"), 2.0 / 3.0, 1e-12), "F1 partial");
    /* [quick brown fox] vs [quick fox jumps]: 2 shared, P = R = 2/3. */
    CHECK(NEAR(f11("the quick brown fox", "quick fox jumps"), 2.0 / 3.0, 1e-12), "F1 bag");
    /* Bag counts: "dog dog" vs "dog": 1 shared, P = 1/2, R = 1. */
    CHECK(NEAR(f11("dog dog", "dog"), 2.0 / 3.0, 1e-12), "F1 multiset");
    CHECK(f11("Paris", "London") == 0.0, "F1 disjoint");
    /* Best over references. */
    const char *refs[] = {"George Washington", "Washington", "Wash"};
    double v;
    CHECK(ek_squad_em("washington.", refs, 3, &v) == 0 && v == 1.0, "EM multi");
    CHECK(ek_squad_f1("President Washington", refs, 3, &v) == 0 && NEAR(v, 2.0 / 3.0, 1e-12),
          "F1 multi %f", v);
    /* No references: compared with the empty answer. */
    CHECK(ek_squad_em("", NULL, 0, &v) == 0 && v == 1.0, "EM no refs, empty pred");
    CHECK(ek_squad_f1("something", NULL, 0, &v) == 0 && v == 0.0, "F1 no refs");
    CHECK(ek_squad_f1(NULL, refs, 1, &v) == -EINVAL, "NULL pred");
}

static double rl1(const char *hyp, const char *ref, double *p, double *r) {
    double f = -1;
    CHECK(ek_rouge_l(hyp, &ref, 1, &f, p, r) == 0, "rouge");
    return f;
}

static void test_rouge(void) {
    double p, r;
    /* LCS of "police killed the gunman" and "police kill the gunman" is
     * police-the-gunman: 3 of 4 on both sides. */
    CHECK(NEAR(rl1("police killed the gunman", "police kill the gunman", &p, &r), 0.75, 1e-12),
          "rouge 0.75");
    CHECK(NEAR(p, 0.75, 1e-12) && NEAR(r, 0.75, 1e-12), "p/r");
    /* Word order: "the gunman police killed": LCS = "the gunman" (2/4). */
    CHECK(NEAR(rl1("the gunman police killed", "police kill the gunman", NULL, NULL), 0.5, 1e-12),
          "rouge order");
    /* Case and punctuation do not matter; "e-mail" is two tokens.
     * hyp [send, an, e, mail] ref [send, e, mail, now]: LCS 3, P = R = 3/4. */
    CHECK(NEAR(rl1("Send an E-mail!", "send e mail now", &p, &r), 0.75, 1e-12), "rouge tokens");
    /* Unequal lengths: hyp 2 tokens in a 6-token ref: P = 1, R = 1/3. */
    CHECK(NEAR(rl1("cat mat", "the cat sat on the mat", &p, &r), 0.5, 1e-12), "rouge f");
    CHECK(NEAR(p, 1.0, 1e-12) && NEAR(r, 1.0 / 3.0, 1e-12), "rouge p=1 r=1/3");
    CHECK(rl1("", "something", NULL, NULL) == 0.0, "rouge empty");
    CHECK(rl1("alpha", "beta", NULL, NULL) == 0.0, "rouge disjoint");
    CHECK(rl1("Same Text.", "same text", NULL, NULL) == 1.0, "rouge identical");
    const char *refs[] = {"unrelated words here", "police kill the gunman"};
    double f;
    CHECK(ek_rouge_l("police killed the gunman", refs, 2, &f, &p, &r) == 0 && NEAR(f, 0.75, 1e-12),
          "rouge best ref %f", f);
    CHECK(ek_rouge_l("x", NULL, 0, &f, NULL, NULL) == -EINVAL, "rouge no refs");
}

static void test_lm(void) {
    /* Uniform over 4: log p = -log 4, perplexity 4; ties -> lowest index. */
    float u[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    double lp;
    int32_t am = -1;
    CHECK(ek_logprob(u, 4, 2, &lp, &am) == 0 && NEAR(lp, -log(4.0), 1e-12) && am == 0,
          "uniform lp %f am %d", lp, am);
    /* logits (0, log 3): p = 1/4, 3/4. */
    float l2[2] = {0.0f, (float)log(3.0)};
    CHECK(ek_logprob(l2, 2, 0, &lp, &am) == 0 && NEAR(lp, log(0.25), 1e-6) && am == 1,
          "two-way lp %f am %d", lp, am);
    /* Large logits must not overflow. */
    float big[3] = {1000.0f, 1000.0f, -1000.0f};
    CHECK(ek_logprob(big, 3, 1, &lp, NULL) == 0 && NEAR(lp, log(0.5), 1e-9), "stable %f", lp);
    float bad[2] = {0.0f, NAN};
    CHECK(ek_logprob(bad, 2, 0, &lp, NULL) == -EDOM, "NaN");
    CHECK(ek_logprob(u, 4, 4, &lp, NULL) == -EINVAL, "target range");
    CHECK(ek_logprob(u, 4, -1, &lp, NULL) == -EINVAL, "negative target");

    ek_lm_stats st;
    ek_lm_stats_init(&st);
    CHECK(ek_lm_stats_perplexity(&st) == 0.0 && ek_lm_stats_agreement(&st) == 0.0, "empty");
    CHECK(ek_lm_stats_add(&st, log(0.25), true) == 0, "add");
    CHECK(ek_lm_stats_add(&st, log(0.25), false) == 0, "add");
    CHECK(ek_lm_stats_add(&st, log(1.0 / 16), true) == 0, "add");
    CHECK(ek_lm_stats_add(&st, log(1.0 / 16), true) == 0, "add");
    /* Geometric mean of 1/4, 1/4, 1/16, 1/16 is 1/8. */
    CHECK(NEAR(ek_lm_stats_perplexity(&st), 8.0, 1e-9), "ppl %f", ek_lm_stats_perplexity(&st));
    CHECK(NEAR(ek_lm_stats_agreement(&st), 0.75, 1e-12), "agreement");
    CHECK(ek_lm_stats_add(&st, 0.5, true) == -EINVAL, "positive logprob");
    CHECK(ek_lm_stats_add(&st, NAN, true) == -EINVAL, "NaN logprob");
    CHECK(st.n_tokens == 4, "untouched");
}

/* ---- fixture from the reference implementations ------------------------ */

static char *unescape(char *s) {
    char *w = s;
    for (char *p = s; *p; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            *w++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
    return s;
}

static void test_fixture(void) {
    const char *root = getenv("SI_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/metrics-fixture.tsv", root ? root : ".");
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    static char line[1 << 16];
    ek_bleu_stats corpus;
    ek_bleu_stats_init(&corpus);
    size_t n_cases = 0, lineno = 0;
    bool saw_corpus = false;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        char *fields[80];
        size_t nf = 0;
        for (char *p = line;; ) {
            char *tab = strchr(p, '\t');
            if (nf < 80) fields[nf++] = p;
            if (!tab) break;
            *tab = '\0';
            p = tab + 1;
        }
        if (strcmp(fields[0], "corpus") == 0) {
            double want = atof(fields[1]);
            CHECK(NEAR(ek_bleu_score(&corpus), want, 1e-6), "corpus BLEU %f want %f",
                  ek_bleu_score(&corpus), want);
            saw_corpus = true;
            continue;
        }
        CHECK(nf >= 9 && strcmp(fields[0], "case") == 0, "line %zu: bad fixture line", lineno);
        if (nf < 9) continue;
        const char *hyp = unescape(fields[1]);
        const char *refs[72];
        size_t nr = 0;
        for (size_t i = 8; i < nf && nr < 72; i++) refs[nr++] = unescape(fields[i]);
        double sb, em, f1, rl;
        char *tok = NULL, *norm = NULL;
        CHECK(ek_bleu_sentence(hyp, refs, nr, &sb) == 0, "line %zu", lineno);
        CHECK(ek_squad_em(hyp, refs, nr, &em) == 0, "line %zu", lineno);
        CHECK(ek_squad_f1(hyp, refs, nr, &f1) == 0, "line %zu", lineno);
        CHECK(ek_rouge_l(hyp, refs, nr, &rl, NULL, NULL) == 0, "line %zu", lineno);
        CHECK(ek_tokenize_13a(hyp, &tok, NULL) == 0, "line %zu", lineno);
        CHECK(ek_squad_normalize(hyp, &norm) == 0, "line %zu", lineno);
        CHECK(ek_bleu_add(&corpus, hyp, &refs[nr - 1], 1) == 0, "line %zu", lineno);
        CHECK(NEAR(sb, atof(fields[2]), 1e-6), "line %zu: sentence BLEU %f want %s", lineno, sb,
              fields[2]);
        CHECK(em == atof(fields[3]), "line %zu: EM %f want %s", lineno, em, fields[3]);
        CHECK(NEAR(f1, atof(fields[4]), 1e-9), "line %zu: F1 %f want %s", lineno, f1, fields[4]);
        CHECK(NEAR(rl, atof(fields[5]), 1e-9), "line %zu: ROUGE-L %f want %s", lineno, rl,
              fields[5]);
        CHECK(tok && strcmp(tok, unescape(fields[6])) == 0, "line %zu: 13a '%s' want '%s'", lineno,
              tok ? tok : "", fields[6]);
        CHECK(norm && strcmp(norm, unescape(fields[7])) == 0, "line %zu: norm '%s' want '%s'",
              lineno, norm ? norm : "", fields[7]);
        free(tok);
        free(norm);
        n_cases++;
    }
    fclose(f);
    CHECK(n_cases >= 100 && saw_corpus, "fixture has %zu cases", n_cases);
    printf("fixture: %zu cases\n", n_cases);
}

/* The paired bootstrap of a score ratio: exact where every resample has
 * the same ratio, the binomial spread where items differ, BLEU over
 * summed statistics, and the undefined cases. */
static void test_boot(void) {
    enum { N = 40 };
    double x[N], ref[N], lo, hi, lo2, hi2;
    /* x = ref / 2 item by item: every paired resample's ratio is 0.5
     * exactly (an unpaired one would not be) */
    for (int i = 0; i < N; i++) {
        ref[i] = 0.1 + 0.02 * i;
        x[i] = ref[i] / 2;
    }
    CHECK(ek_boot_mean_ratio(x, ref, N, 1000, 1, &lo, &hi) == 0, "boot half");
    CHECK(lo == 0.5 && hi == 0.5, "half: [%g, %g]", lo, hi);
    /* half the items kept (1), half lost (0), against 1 everywhere: the
     * ratio is a binomial share, 0.5 +- 1.96 sqrt(0.25 / 40) = +-0.155 */
    for (int i = 0; i < N; i++) {
        ref[i] = 1;
        x[i] = i % 2;
    }
    CHECK(ek_boot_mean_ratio(x, ref, N, 2000, 7, &lo, &hi) == 0, "boot binomial");
    CHECK(lo >= 0.30 && lo <= 0.40 && hi >= 0.60 && hi <= 0.70, "binomial: [%g, %g]", lo, hi);
    CHECK(ek_boot_mean_ratio(x, ref, N, 2000, 7, &lo2, &hi2) == 0 && lo2 == lo && hi2 == hi,
          "the same seed, the same interval");
    /* undefined: a reference of 0, one item; bad input */
    for (int i = 0; i < N; i++)
        ref[i] = 0;
    CHECK(ek_boot_mean_ratio(x, ref, N, 100, 1, &lo, &hi) == -EDOM && isnan(lo) && isnan(hi),
          "zero reference");
    ref[0] = 1;
    CHECK(ek_boot_mean_ratio(x, ref, 1, 100, 1, &lo, &hi) == -EDOM, "one item");
    x[3] = NAN;
    CHECK(ek_boot_mean_ratio(x, ref, N, 100, 1, &lo, &hi) == -EINVAL, "NaN score");
    CHECK(ek_boot_mean_ratio(x, ref, N, 0, 1, &lo, &hi) == -EINVAL, "no resamples");

    /* BLEU: per-item statistics summed per resample */
    const char *refs[4] = {"the cat sat on the mat", "a dog ran in the park today",
                           "birds sing in the early morning", "the sun rises over the hills"};
    const char *hyps[4] = {"the cat sat on a mat", "the dog ran in the park",
                           "birds sing early in the morning", "the sun rises over the hills"};
    ek_bleu_stats bx[4], br[4], all_x, all_r;
    ek_bleu_stats_init(&all_x);
    ek_bleu_stats_init(&all_r);
    for (int i = 0; i < 4; i++) {
        ek_bleu_stats_init(&bx[i]);
        ek_bleu_stats_init(&br[i]);
        CHECK(ek_bleu_add(&bx[i], hyps[i], &refs[i], 1) == 0 && ek_bleu_add(&all_x, hyps[i], &refs[i], 1) == 0,
              "bleu add %d", i);
        /* the reference side: the reference itself, BLEU 100 */
        CHECK(ek_bleu_add(&br[i], refs[i], &refs[i], 1) == 0 && ek_bleu_add(&all_r, refs[i], &refs[i], 1) == 0,
              "bleu add ref %d", i);
    }
    const double point = ek_bleu_score(&all_x) / ek_bleu_score(&all_r);
    CHECK(ek_boot_bleu_ratio(br, br, 4, 500, 3, &lo, &hi) == 0 && lo == 1 && hi == 1,
          "bleu against itself: [%g, %g]", lo, hi);
    int r = ek_boot_bleu_ratio(bx, br, 4, 2000, 3, &lo, &hi);
    /* a resample of items 1 and 2 only can have no matching 4-gram (BLEU
     * 0, ratio 0): defined, as long as the reference scores */
    CHECK(r == 0 && lo <= point && point <= hi && lo < hi && hi <= 1, "bleu: %d [%g, %g] around %g",
          r, lo, hi, point);
}

int main(void) {
    test_boot();
    test_bleu();
    test_13a();
    test_squad();
    test_rouge();
    test_lm();
    test_fixture();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test-metrics: all checks passed\n");
    return 0;
}
