/* Prompt sets: a bounded reader for the JSON Lines format of
 * docs/prompt-sets.md.
 *
 * One record per line:
 *
 *     {"task":"qa","id":"qa-0001","split":"heldout","prompt":"...",
 *      "references":["Luanda"],"max_tokens":24}
 *
 * Required keys: task, id, split ("profile" or "heldout"), prompt.
 * Optional: references (array of strings, default empty), system (string),
 * source (string), max_tokens (integer 1..65536, default 0 = caller's
 * choice). Other keys are accepted and ignored when their value is a
 * string, number, true/false/null or an array of strings; any other value
 * (objects, nested arrays) is an error. Duplicate keys, duplicate ids and
 * anything that is not valid JSON (RFC 8259) in valid UTF-8 are errors.
 * Blank lines are skipped; "\r\n" line ends are accepted.
 *
 * Strings come back as NUL-terminated UTF-8, so "\u0000" is rejected, and
 * so are lone surrogates in \u escapes.
 *
 * Errors: functions return 0 or a negative errno (-EINVAL malformed input,
 * -E2BIG a cap exceeded, -ENOMEM, or the errno of a failed open/read) and
 * leave ret_ parameters untouched on failure; an ek_error receives the line
 * (1-based, 0 when the failure is not tied to one) and a message.
 *
 * Usage:
 *
 *     ek_promptset *ps; ek_error err;
 *     if (ek_promptset_load("profiles/tasks/qa.jsonl", NULL, &ps, &err) < 0)
 *         fprintf(stderr, "qa.jsonl:%zu: %s\n", err.line, err.msg);
 *     for (size_t i = 0; i < ek_promptset_size(ps); i++) {
 *         const ek_prompt *p = ek_promptset_get(ps, i);
 *         if (p->split == EK_SPLIT_HELDOUT) ...
 *     }
 *     ek_promptset_free(ps);
 */
#ifndef EVAL_PROMPTSET_H
#define EVAL_PROMPTSET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ek_error {
    size_t line; /* 1-based line of the input, 0: not tied to a line */
    char msg[192];
} ek_error;

typedef enum ek_split {
    EK_SPLIT_PROFILE = 0, /* used to build neuron profiles */
    EK_SPLIT_HELDOUT = 1, /* kept for evaluation only */
} ek_split;

const char *ek_split_name(ek_split split);

/* One record. Every string is NUL-terminated UTF-8 owned by the set and
 * valid until ek_promptset_free(). Optional strings absent from the line
 * are "" (never NULL). */
typedef struct ek_prompt {
    const char *task;
    const char *id;
    ek_split split;
    const char *prompt;
    const char *system;
    const char *source;
    const char *const *references; /* n_references strings */
    size_t n_references;
    int max_tokens; /* 0: not given */
    size_t line;    /* line of the input it came from */
} ek_prompt;

typedef struct ek_promptset_limits {
    size_t max_line_bytes;  /* longest line, without its "\n" */
    size_t max_records;     /* records in one set */
    size_t max_references;  /* references of one record */
    size_t max_total_bytes; /* whole input */
} ek_promptset_limits;

/* 64 KiB lines, 100000 records, 64 references, 64 MiB input. */
ek_promptset_limits ek_promptset_limits_default(void);

typedef struct ek_promptset ek_promptset;

/* Parses buf[0..len) (need not be NUL-terminated). limits may be NULL for
 * the defaults. An empty input gives an empty set. */
int ek_promptset_parse(const char *buf, size_t len, const ek_promptset_limits *limits,
                       ek_promptset **ret_set, ek_error *err);

/* Reads and parses a file (at most limits->max_total_bytes). */
int ek_promptset_load(const char *path, const ek_promptset_limits *limits,
                      ek_promptset **ret_set, ek_error *err);

void ek_promptset_free(ek_promptset *set);

size_t ek_promptset_size(const ek_promptset *set);
/* NULL when i is out of range. */
const ek_prompt *ek_promptset_get(const ek_promptset *set, size_t i);
/* Records of one split. */
size_t ek_promptset_count(const ek_promptset *set, ek_split split);

#ifdef __cplusplus
}
#endif

#endif /* EVAL_PROMPTSET_H */
