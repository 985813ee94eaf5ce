/* Prompt sets: a small JSON Lines reader for exactly the format of
 * docs/prompt-sets.md. It is not a general JSON parser: a line is one
 * object whose values are strings, numbers, literals or arrays of strings,
 * and everything else is rejected with the line and column. */
#include "promptset.h"
#include "ek-utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Per-record cap on keys that we skip, so that a line cannot make the
 * duplicate-key check quadratic in its length. */
#define MAX_UNKNOWN_KEYS 32
#define MAX_TASK_BYTES 64
#define MAX_ID_BYTES 128
#define MAX_TOKENS_LIMIT 65536

struct ek_promptset {
    ek_prompt *recs;
    size_t n, cap;
    const char **refs; /* all references, records point into it */
    size_t n_refs, cap_refs;
    size_t *ref_start; /* per record, index into refs (fixed up at the end) */
    char *arena;       /* every decoded string; never longer than the input */
    size_t arena_len, arena_cap;
    size_t count[2];
};

const char *ek_split_name(ek_split split) {
    switch (split) {
    case EK_SPLIT_PROFILE: return "profile";
    case EK_SPLIT_HELDOUT: return "heldout";
    }
    return "?";
}

ek_promptset_limits ek_promptset_limits_default(void) {
    return (ek_promptset_limits){
        .max_line_bytes = 64 * 1024,
        .max_records = 100000,
        .max_references = 64,
        .max_total_bytes = 64u * 1024 * 1024,
    };
}

/* ---- cursor over one line ---------------------------------------------- */

typedef struct cursor {
    const char *line; /* start of the line, for columns */
    const char *p, *end;
    size_t lineno;
    ek_error *err;
    ek_promptset *set;
} cursor;

static int fail(ek_error *err, size_t line, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(ek_error *err, size_t line, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->line = line;
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

#define CUR_FAIL(c, ...) \
    fail((c)->err, (c)->lineno, -EINVAL, __VA_ARGS__)

static size_t col(const cursor *c) { return (size_t)(c->p - c->line) + 1; }

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r'))
        c->p++;
}

static int expect(cursor *c, char ch) {
    skip_ws(c);
    if (c->p >= c->end)
        return CUR_FAIL(c, "column %zu: expected '%c', found end of line", col(c), ch);
    if (*c->p != ch)
        return CUR_FAIL(c, "column %zu: expected '%c'", col(c), ch);
    c->p++;
    return 0;
}

static int hexval(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int read_hex4(cursor *c, unsigned *ret) {
    if (c->end - c->p < 4)
        return CUR_FAIL(c, "column %zu: truncated \\u escape", col(c));
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)c->p[i]);
        if (h < 0)
            return CUR_FAIL(c, "column %zu: bad hex digit in \\u escape", col(c));
        v = v * 16 + (unsigned)h;
    }
    c->p += 4;
    *ret = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end) {
    size_t avail = (size_t)(end - p);
    unsigned b0 = p[0];
    if (b0 < 0x80) return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        return avail >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    }
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        if (avail < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (b0 == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (b0 == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        if (avail < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return 0;
        if (b0 == 0xF0 && p[1] < 0x90) return 0; /* overlong */
        if (b0 == 0xF4 && p[1] >= 0x90) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

/* Decodes a JSON string at the cursor into the arena; *ret points at the
 * NUL-terminated result, *ret_len its length. The arena was sized to the
 * whole input, and a decoded string plus its NUL is never longer than its
 * quoted source, so writing cannot overflow; the check stays as a guard. */
static int parse_string(cursor *c, const char **ret, size_t *ret_len) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != '"')
        return CUR_FAIL(c, "column %zu: expected a string", col(c));
    ek_promptset *s = c->set;
    size_t start = s->arena_len;
    c->p++;
    for (;;) {
        if (c->p >= c->end)
            return CUR_FAIL(c, "column %zu: unterminated string", col(c));
        unsigned char ch = (unsigned char)*c->p;
        char buf[4];
        size_t n;
        if (ch == '"') {
            c->p++;
            break;
        }
        if (ch < 0x20)
            return CUR_FAIL(c, "column %zu: control character in string", col(c));
        if (ch == '\\') {
            const char *esc = c->p;
            if (c->end - c->p < 2)
                return CUR_FAIL(c, "column %zu: truncated escape", col(c));
            char e = c->p[1];
            c->p += 2;
            switch (e) {
            case '"': buf[0] = '"'; n = 1; break;
            case '\\': buf[0] = '\\'; n = 1; break;
            case '/': buf[0] = '/'; n = 1; break;
            case 'b': buf[0] = '\b'; n = 1; break;
            case 'f': buf[0] = '\f'; n = 1; break;
            case 'n': buf[0] = '\n'; n = 1; break;
            case 'r': buf[0] = '\r'; n = 1; break;
            case 't': buf[0] = '\t'; n = 1; break;
            case 'u': {
                unsigned cp, lo;
                int r = read_hex4(c, &cp);
                if (r < 0) return r;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    c->p = esc;
                    return CUR_FAIL(c, "column %zu: lone low surrogate in \\u escape", col(c));
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u') {
                        c->p = esc;
                        return CUR_FAIL(c, "column %zu: high surrogate without a low one",
                                        col(c));
                    }
                    c->p += 2;
                    r = read_hex4(c, &lo);
                    if (r < 0) return r;
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        c->p = esc;
                        return CUR_FAIL(c, "column %zu: high surrogate without a low one",
                                        col(c));
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) {
                    c->p = esc;
                    return CUR_FAIL(c, "column %zu: \\u0000 is not allowed", col(c));
                }
                n = ek__utf8_encode(cp, buf);
                break;
            }
            default:
                c->p = esc;
                return CUR_FAIL(c, "column %zu: bad escape '\\%c'", col(c),
                                (e >= 0x20 && e < 0x7f) ? e : '?');
            }
        } else {
            n = utf8_seq((const unsigned char *)c->p, (const unsigned char *)c->end);
            if (n == 0)
                return CUR_FAIL(c, "column %zu: invalid UTF-8 in string", col(c));
            memcpy(buf, c->p, n);
            c->p += n;
        }
        if (s->arena_len + n + 1 > s->arena_cap)
            return fail(c->err, c->lineno, -E2BIG, "string arena full");
        memcpy(s->arena + s->arena_len, buf, n);
        s->arena_len += n;
    }
    s->arena[s->arena_len++] = '\0';
    *ret = s->arena + start;
    *ret_len = s->arena_len - start - 1;
    return 0;
}

/* Validates a JSON number; *ret_int receives its value when it is a
 * non-negative integer that fits (else -1). */
static int parse_number(cursor *c, long *ret_int) {
    skip_ws(c);
    bool integer = true, neg = false;
    long v = 0;
    if (c->p < c->end && *c->p == '-') {
        neg = true;
        c->p++;
    }
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return CUR_FAIL(c, "column %zu: bad number", col(c));
    if (*c->p == '0') {
        c->p++;
        if (c->p < c->end && *c->p >= '0' && *c->p <= '9')
            return CUR_FAIL(c, "column %zu: leading zero in number", col(c));
    } else {
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            int d = *c->p - '0';
            if (v > (LONG_MAX - d) / 10)
                integer = false; /* too large: still valid JSON */
            else
                v = v * 10 + d;
            c->p++;
        }
    }
    if (c->p < c->end && *c->p == '.') {
        integer = false;
        c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return CUR_FAIL(c, "column %zu: bad fraction in number", col(c));
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        integer = false;
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return CUR_FAIL(c, "column %zu: bad exponent in number", col(c));
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    *ret_int = (integer && !neg) ? v : -1;
    return 0;
}

static int parse_literal(cursor *c) {
    static const char *const lits[] = {"true", "false", "null"};
    skip_ws(c);
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(lits[i]);
        if ((size_t)(c->end - c->p) >= n && memcmp(c->p, lits[i], n) == 0) {
            c->p += n;
            return 0;
        }
    }
    return CUR_FAIL(c, "column %zu: unexpected value", col(c));
}

static int push_ref(cursor *c, const char *ref, size_t max_refs_here, size_t n_here) {
    ek_promptset *s = c->set;
    if (n_here >= max_refs_here)
        return fail(c->err, c->lineno, -E2BIG, "more than %zu references", max_refs_here);
    if (s->n_refs == s->cap_refs) {
        size_t nc = s->cap_refs ? s->cap_refs * 2 : 256;
        if (nc > SIZE_MAX / sizeof(*s->refs)) return -ENOMEM;
        const char **nr = realloc(s->refs, nc * sizeof(*nr));
        if (!nr) return fail(c->err, c->lineno, -ENOMEM, "out of memory");
        s->refs = nr;
        s->cap_refs = nc;
    }
    s->refs[s->n_refs++] = ref;
    return 0;
}

/* An array of strings. When keep, each string becomes a reference of the
 * current record; *ret_n receives how many. */
static int parse_string_array(cursor *c, bool keep, size_t max_refs, size_t *ret_n) {
    int r = expect(c, '[');
    if (r < 0) return r;
    size_t n = 0;
    skip_ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        *ret_n = 0;
        return 0;
    }
    for (;;) {
        const char *str;
        size_t len;
        skip_ws(c);
        if (c->p < c->end && *c->p != '"')
            return CUR_FAIL(c, "column %zu: arrays may hold only strings", col(c));
        r = parse_string(c, &str, &len);
        if (r < 0) return r;
        if (keep) {
            r = push_ref(c, str, max_refs, n);
            if (r < 0) return r;
        }
        n++;
        skip_ws(c);
        if (c->p >= c->end)
            return CUR_FAIL(c, "column %zu: unterminated array", col(c));
        if (*c->p == ']') {
            c->p++;
            break;
        }
        if (*c->p != ',')
            return CUR_FAIL(c, "column %zu: expected ',' or ']' in array", col(c));
        c->p++;
    }
    *ret_n = n;
    return 0;
}

static int skip_value(cursor *c) {
    skip_ws(c);
    if (c->p >= c->end)
        return CUR_FAIL(c, "column %zu: expected a value, found end of line", col(c));
    char ch = *c->p;
    if (ch == '"') {
        const char *s;
        size_t n;
        return parse_string(c, &s, &n);
    }
    if (ch == '[') {
        size_t n;
        return parse_string_array(c, false, 0, &n);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        long v;
        return parse_number(c, &v);
    }
    if (ch == '{')
        return CUR_FAIL(c, "column %zu: nested objects are not part of the format", col(c));
    return parse_literal(c);
}

enum {
    K_TASK = 1 << 0,
    K_ID = 1 << 1,
    K_SPLIT = 1 << 2,
    K_PROMPT = 1 << 3,
    K_REFS = 1 << 4,
    K_SYSTEM = 1 << 5,
    K_SOURCE = 1 << 6,
    K_MAXTOK = 1 << 7,
};

static const struct {
    const char *name;
    unsigned bit;
} known_keys[] = {
    {"task", K_TASK},     {"id", K_ID},         {"split", K_SPLIT},
    {"prompt", K_PROMPT}, {"references", K_REFS}, {"system", K_SYSTEM},
    {"source", K_SOURCE}, {"max_tokens", K_MAXTOK},
};

static bool has_control(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20) return true;
    return false;
}

static int parse_record(cursor *c, const ek_promptset_limits *lim, ek_prompt *rec,
                        size_t *ret_ref_start) {
    ek_promptset *s = c->set;
    unsigned seen = 0;
    const char *unknown[MAX_UNKNOWN_KEYS];
    size_t n_unknown = 0;
    const char *split = NULL;
    size_t slen = 0;
    int r;

    memset(rec, 0, sizeof(*rec));
    rec->system = "";
    rec->source = "";
    rec->line = c->lineno;
    *ret_ref_start = s->n_refs;

    r = expect(c, '{');
    if (r < 0) return r;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}')
        return CUR_FAIL(c, "empty object: missing \"task\"");
    for (;;) {
        const char *key;
        size_t klen;
        skip_ws(c);
        const char *key_at = c->p;
        r = parse_string(c, &key, &klen);
        if (r < 0) return r;
        r = expect(c, ':');
        if (r < 0) return r;

        unsigned bit = 0;
        for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]); i++)
            if (strcmp(key, known_keys[i].name) == 0) bit = known_keys[i].bit;
        if (bit && (seen & bit)) {
            c->p = key_at;
            return CUR_FAIL(c, "column %zu: duplicate key \"%s\"", col(c), key);
        }
        seen |= bit;

        size_t len;
        long iv;
        switch (bit) {
        case K_TASK: r = parse_string(c, &rec->task, &len); break;
        case K_ID: r = parse_string(c, &rec->id, &len); break;
        case K_SPLIT: r = parse_string(c, &split, &slen); break;
        case K_PROMPT: r = parse_string(c, &rec->prompt, &len); break;
        case K_SYSTEM: r = parse_string(c, &rec->system, &len); break;
        case K_SOURCE: r = parse_string(c, &rec->source, &len); break;
        case K_REFS:
            skip_ws(c);
            if (c->p < c->end && *c->p != '[')
                return CUR_FAIL(c, "column %zu: \"references\" must be an array of strings",
                                col(c));
            r = parse_string_array(c, true, lim->max_references, &rec->n_references);
            break;
        case K_MAXTOK: {
            skip_ws(c);
            const char *at = c->p;
            if (c->p < c->end && *c->p == '"')
                return CUR_FAIL(c, "column %zu: \"max_tokens\" must be a number", col(c));
            r = parse_number(c, &iv);
            if (r < 0) return r;
            if (iv < 1 || iv > MAX_TOKENS_LIMIT) {
                c->p = at;
                return CUR_FAIL(c, "column %zu: \"max_tokens\" must be an integer in 1..%d",
                                col(c), MAX_TOKENS_LIMIT);
            }
            rec->max_tokens = (int)iv;
            break;
        }
        default:
            for (size_t i = 0; i < n_unknown; i++)
                if (strcmp(unknown[i], key) == 0) {
                    c->p = key_at;
                    return CUR_FAIL(c, "column %zu: duplicate key \"%s\"", col(c), key);
                }
            if (n_unknown == MAX_UNKNOWN_KEYS)
                return fail(c->err, c->lineno, -E2BIG, "more than %d unknown keys",
                            MAX_UNKNOWN_KEYS);
            unknown[n_unknown++] = key;
            r = skip_value(c);
            break;
        }
        if (r < 0) return r;

        skip_ws(c);
        if (c->p >= c->end)
            return CUR_FAIL(c, "column %zu: unterminated object", col(c));
        if (*c->p == '}') {
            c->p++;
            break;
        }
        if (*c->p != ',')
            return CUR_FAIL(c, "column %zu: expected ',' or '}'", col(c));
        c->p++;
    }
    skip_ws(c);
    if (c->p != c->end)
        return CUR_FAIL(c, "column %zu: trailing characters after the object", col(c));

    static const char *const required[] = {"task", "id", "split", "prompt"};
    static const unsigned req_bits[] = {K_TASK, K_ID, K_SPLIT, K_PROMPT};
    for (size_t i = 0; i < 4; i++)
        if (!(seen & req_bits[i]))
            return CUR_FAIL(c, "missing \"%s\"", required[i]);

    if (strcmp(split, "profile") == 0)
        rec->split = EK_SPLIT_PROFILE;
    else if (strcmp(split, "heldout") == 0)
        rec->split = EK_SPLIT_HELDOUT;
    else
        return CUR_FAIL(c, "\"split\" must be \"profile\" or \"heldout\"");

    size_t tl = strlen(rec->task);
    if (tl == 0 || tl > MAX_TASK_BYTES)
        return CUR_FAIL(c, "\"task\" must have 1..%d bytes", MAX_TASK_BYTES);
    for (const char *t = rec->task; *t; t++) {
        char ch = *t;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.'))
            return CUR_FAIL(c, "\"task\" may hold only letters, digits, '-', '_', '.'");
    }
    size_t il = strlen(rec->id);
    if (il == 0 || il > MAX_ID_BYTES || has_control(rec->id))
        return CUR_FAIL(c, "\"id\" must have 1..%d bytes and no control characters",
                        MAX_ID_BYTES);
    if (rec->prompt[0] == '\0')
        return CUR_FAIL(c, "\"prompt\" is empty");
    return 0;
}

/* ---- the set ----------------------------------------------------------- */

void ek_promptset_free(ek_promptset *set) {
    if (!set) return;
    free(set->recs);
    free(set->refs);
    free(set->ref_start);
    free(set->arena);
    free(set);
}

static int cmp_id(const void *a, const void *b) {
    const ek_prompt *pa = *(const ek_prompt *const *)a;
    const ek_prompt *pb = *(const ek_prompt *const *)b;
    int r = strcmp(pa->id, pb->id);
    if (r) return r;
    return pa->line < pb->line ? -1 : pa->line > pb->line;
}

static int check_unique_ids(ek_promptset *s, ek_error *err) {
    if (s->n < 2) return 0;
    const ek_prompt **v = malloc(s->n * sizeof(*v));
    if (!v) return fail(err, 0, -ENOMEM, "out of memory");
    for (size_t i = 0; i < s->n; i++) v[i] = &s->recs[i];
    qsort(v, s->n, sizeof(*v), cmp_id);
    int r = 0;
    for (size_t i = 1; i < s->n; i++)
        if (strcmp(v[i - 1]->id, v[i]->id) == 0) {
            r = fail(err, v[i]->line, -EINVAL, "duplicate id \"%.100s\" (first on line %zu)",
                     v[i]->id, v[i - 1]->line);
            break;
        }
    free(v);
    return r;
}

int ek_promptset_parse(const char *buf, size_t len, const ek_promptset_limits *limits,
                       ek_promptset **ret_set, ek_error *err) {
    ek_promptset_limits lim = limits ? *limits : ek_promptset_limits_default();
    if (!ret_set || (!buf && len)) return fail(err, 0, -EINVAL, "invalid arguments");
    if (len > lim.max_total_bytes)
        return fail(err, 0, -E2BIG, "input of %zu bytes exceeds the cap of %zu", len,
                    lim.max_total_bytes);
    if (len >= SIZE_MAX - 1) return fail(err, 0, -E2BIG, "input too large");

    ek_promptset *s = calloc(1, sizeof(*s));
    if (!s) return fail(err, 0, -ENOMEM, "out of memory");
    s->arena_cap = len + 1;
    s->arena = malloc(s->arena_cap);
    if (!s->arena) {
        ek_promptset_free(s);
        return fail(err, 0, -ENOMEM, "out of memory");
    }

    int r = 0;
    size_t lineno = 0;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        lineno++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        if ((size_t)(le - p) > lim.max_line_bytes) {
            r = fail(err, lineno, -E2BIG, "line of %zu bytes exceeds the cap of %zu",
                     (size_t)(le - p), lim.max_line_bytes);
            goto out;
        }
        if (le > p && le[-1] == '\r') le--;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q == le) { /* blank line */
            p = next;
            continue;
        }
        if (s->n == lim.max_records) {
            r = fail(err, lineno, -E2BIG, "more than %zu records", lim.max_records);
            goto out;
        }
        if (s->n == s->cap) {
            size_t nc = s->cap ? s->cap * 2 : 64;
            if (nc > lim.max_records) nc = lim.max_records;
            ek_prompt *nr = realloc(s->recs, nc * sizeof(*nr));
            if (!nr) {
                r = fail(err, lineno, -ENOMEM, "out of memory");
                goto out;
            }
            s->recs = nr;
            size_t *ns = realloc(s->ref_start, nc * sizeof(*ns));
            if (!ns) {
                r = fail(err, lineno, -ENOMEM, "out of memory");
                goto out;
            }
            s->ref_start = ns;
            s->cap = nc;
        }
        cursor c = {.line = p, .p = p, .end = le, .lineno = lineno, .err = err, .set = s};
        r = parse_record(&c, &lim, &s->recs[s->n], &s->ref_start[s->n]);
        if (r < 0) goto out;
        s->count[s->recs[s->n].split]++;
        s->n++;
        p = next;
    }
    /* The reference vector may have moved while it grew: point records at
     * their references only now. */
    for (size_t i = 0; i < s->n; i++)
        s->recs[i].references = s->recs[i].n_references ? s->refs + s->ref_start[i] : NULL;
    r = check_unique_ids(s, err);
    if (r < 0) goto out;
    *ret_set = s;
    return 0;
out:
    ek_promptset_free(s);
    return r;
}

int ek_promptset_load(const char *path, const ek_promptset_limits *limits,
                      ek_promptset **ret_set, ek_error *err) {
    ek_promptset_limits lim = limits ? *limits : ek_promptset_limits_default();
    if (!path || !ret_set) return fail(err, 0, -EINVAL, "invalid arguments");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return fail(err, 0, -e, "cannot open: %s", strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, 0, -EINVAL, "not a regular file");
    }
    if ((uint64_t)st.st_size > lim.max_total_bytes) {
        close(fd);
        return fail(err, 0, -E2BIG, "file of %lld bytes exceeds the cap of %zu",
                    (long long)st.st_size, lim.max_total_bytes);
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return fail(err, 0, -ENOMEM, "out of memory");
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            free(buf);
            close(fd);
            return fail(err, 0, -e, "read failed: %s", n < 0 ? strerror(e) : "file shrank");
        }
        got += (size_t)n;
    }
    close(fd);
    int r = ek_promptset_parse(buf, size, &lim, ret_set, err);
    free(buf);
    return r;
}

size_t ek_promptset_size(const ek_promptset *set) { return set ? set->n : 0; }

const ek_prompt *ek_promptset_get(const ek_promptset *set, size_t i) {
    return set && i < set->n ? &set->recs[i] : NULL;
}

size_t ek_promptset_count(const ek_promptset *set, ek_split split) {
    if (!set || (split != EK_SPLIT_PROFILE && split != EK_SPLIT_HELDOUT)) return 0;
    return set->count[split];
}
