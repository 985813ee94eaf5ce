/* Quality metrics for the SelectInfer evaluation: BLEU (corpus and
 * smoothed sentence), SQuAD exact match and token F1, ROUGE-L, and the
 * language-model statistics (perplexity, next-token agreement) that compare
 * a sparse run with the dense model. docs/prompt-sets.md says how each one
 * relates to the reference implementations (sacrebleu, the SQuAD v2
 * evaluation script, Google's rouge_score).
 *
 * All text is UTF-8 (NUL-terminated). Functions return 0 or a negative
 * errno (-EINVAL bad arguments, -E2BIG input over EK_METRIC_MAX_BYTES,
 * EK_METRIC_MAX_TOKENS or EK_METRIC_MAX_REFS, -ENOMEM, -EDOM non-finite
 * logits) and leave ret_ parameters untouched on failure. References:
 * n_refs strings; a hypothesis is scored against the best-matching one
 * (BLEU: clipped counts against all of them, as sacrebleu does).
 *
 * Usage:
 *
 *     ek_bleu_stats st;
 *     ek_bleu_stats_init(&st);
 *     for each prompt: ek_bleu_add(&st, output, p->references, p->n_references);
 *     double bleu = ek_bleu_score(&st);               -- 0..100
 *
 *     double em, f1;
 *     ek_squad_em(output, refs, n, &em);              -- 0 or 1
 *     ek_squad_f1(output, refs, n, &f1);              -- 0..1
 */
#ifndef EVAL_METRICS_H
#define EVAL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EK_METRIC_MAX_BYTES (256u * 1024) /* one hypothesis or reference */
#define EK_METRIC_MAX_TOKENS 8192u        /* after tokenisation */
#define EK_METRIC_MAX_REFS 64u            /* references of one segment */
#define EK_BLEU_ORDER 4

/* ---- tokenisation ------------------------------------------------------ */

/* The BLEU tokenisation (sacrebleu "13a", the mteval-v13a rules): returns
 * the tokens joined by single spaces in a malloc'ed string (*ret_text, the
 * caller frees) and their count. Exposed for tests and reports. */
int ek_tokenize_13a(const char *text, char **ret_text, size_t *ret_n);

/* SQuAD answer normalisation: lowercase, punctuation removed, articles
 * a/an/the removed, whitespace collapsed. Malloc'ed result. */
int ek_squad_normalize(const char *text, char **ret_text);

/* ---- BLEU -------------------------------------------------------------- */

typedef struct ek_bleu_stats {
    uint64_t match[EK_BLEU_ORDER]; /* clipped n-gram matches, n = 1..4 */
    uint64_t total[EK_BLEU_ORDER]; /* hypothesis n-grams */
    uint64_t hyp_len, ref_len;     /* ref_len: closest reference length */
    uint64_t n_segments;
} ek_bleu_stats;

void ek_bleu_stats_init(ek_bleu_stats *st);

/* Adds one segment (a hypothesis and its references) to st. st is left
 * untouched on failure. n_refs == 0 is -EINVAL. */
int ek_bleu_add(ek_bleu_stats *st, const char *hyp, const char *const *refs, size_t n_refs);

/* Corpus BLEU-4 of everything added, 0..100: brevity penalty times the
 * geometric mean of the four clipped precisions, no smoothing (0 when an
 * order has no match, or when nothing was added). */
double ek_bleu_score(const ek_bleu_stats *st);

/* Brevity penalty of st, 0..1 (1 when hyp_len >= ref_len). */
double ek_bleu_brevity_penalty(const ek_bleu_stats *st);

/* Sentence BLEU-4, 0..100, smoothed as Lin & Och (2004) "BLEU+1": one is
 * added to the matches and totals of orders 2..4, so a sentence that shares
 * unigrams but no 4-gram still scores; no shared unigram scores 0. */
int ek_bleu_sentence(const char *hyp, const char *const *refs, size_t n_refs, double *ret);

/* ---- SQuAD exact match / F1 --------------------------------------------- */

/* 1 when the normalised prediction equals a normalised reference, else 0.
 * n_refs == 0 compares against the empty answer (SQuAD v2). */
int ek_squad_em(const char *pred, const char *const *refs, size_t n_refs, double *ret);

/* Token F1 of the normalised texts (bag-of-tokens overlap), the best over
 * the references, 0..1. Both empty: 1; one empty: 0. */
int ek_squad_f1(const char *pred, const char *const *refs, size_t n_refs, double *ret);

/* ---- ROUGE-L ----------------------------------------------------------- */

/* ROUGE-L F-measure (beta = 1, as rouge_score): longest common subsequence
 * of the tokens (lowercased ASCII, runs of [a-z0-9]), the best over the
 * references, 0..1. Optional ret_p / ret_r receive precision and recall of
 * that best reference (may be NULL). */
int ek_rouge_l(const char *hyp, const char *const *refs, size_t n_refs, double *ret_f,
               double *ret_p, double *ret_r);

/* ---- paired bootstrap of a score ratio ---------------------------------- */

/* How far the ratio of a configuration's task score to the reference's
 * can be trusted on n items (prompts): n_boot resamples of the items, with
 * replacement and the same items for both sides (paired), each giving
 * score(x) / score(ref) over the resample; *lo and *hi are the 2.5th and
 * 97.5th percentiles (a 95 % interval). The score of a set of items is the
 * mean of per-item scores (ek_boot_mean_ratio: F1, ROUGE-L) or the corpus
 * BLEU of their summed statistics (ek_boot_bleu_ratio). Resamples whose
 * reference score is 0 have no ratio; more than 5 % of them, or n < 2, give
 * -EDOM (lo and hi NAN). The resamples follow seed: the same call gives the
 * same interval. */
int ek_boot_mean_ratio(const double *x, const double *ref, size_t n, int n_boot, uint64_t seed,
                       double *lo, double *hi);
int ek_boot_bleu_ratio(const ek_bleu_stats *x, const ek_bleu_stats *ref, size_t n, int n_boot,
                       uint64_t seed, double *lo, double *hi);

/* ---- language-model statistics ----------------------------------------- */

/* log softmax(logits)[target] in double precision, and the argmax (lowest
 * index on ties). ret_argmax may be NULL. */
int ek_logprob(const float *logits, size_t n_vocab, int32_t target, double *ret_logprob,
               int32_t *ret_argmax);

/* Teacher-forced statistics of one model on one text: perplexity from the
 * summed negative log-likelihood; agreement = share of positions where the
 * model's top-1 equals the dense model's top-1. */
typedef struct ek_lm_stats {
    double nll;         /* sum of -log p(target) */
    uint64_t n_tokens;  /* positions scored */
    uint64_t n_agree;   /* positions whose top-1 matched the dense top-1 */
} ek_lm_stats;

void ek_lm_stats_init(ek_lm_stats *st);
/* Adds one position. -EINVAL when logprob is not finite or > 0. */
int ek_lm_stats_add(ek_lm_stats *st, double logprob, bool agree);
/* exp(nll / n_tokens); 0 when nothing was added. */
double ek_lm_stats_perplexity(const ek_lm_stats *st);
/* n_agree / n_tokens, 0..1; 0 when nothing was added. */
double ek_lm_stats_agreement(const ek_lm_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* EVAL_METRICS_H */
