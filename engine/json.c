/* The JSON recognizer of json.h: one state per kind of byte that may come
 * next; containers on a stack. */
#include "json.h"
#include "utf8.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    J_START,     /* before the object: whitespace, '{' */
    J_OBJ_FIRST, /* after '{': a key or '}' */
    J_OBJ_KEY,   /* after ',' in an object: a key */
    J_COLON,     /* after a key: ':' */
    J_VALUE,     /* after ':', or ',' in an array: a value */
    J_ARR_FIRST, /* after '[': a value or ']' */
    J_AFTER,     /* after a value: ',' or the container's closer */
    J_STR,       /* in a string */
    J_ESC,       /* after '\' in a string */
    J_HEX,       /* in \uXXXX */
    J_MINUS,     /* a number: after '-' */
    J_ZERO,      /* a leading 0: no more digits before '.' or 'e' */
    J_INT,       /* integer digits */
    J_FRAC0,     /* after '.': a digit is due */
    J_FRAC,      /* fraction digits */
    J_EXP0,      /* after 'e': a sign or a digit */
    J_EXPS,      /* after the exponent's sign: a digit is due */
    J_EXP,       /* exponent digits */
    J_LIT,       /* in true, false or null */
    J_DONE,      /* the object closed */
};

static const char *const literals[3] = {"true", "false", "null"};

void eng__json_init(eng__json *j)
{
    memset(j, 0, sizeof(*j));
    j->state = J_START;
}

bool eng__json_done(const eng__json *j)
{
    return j->state == J_DONE;
}

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int push(eng__json *j, char open)
{
    if (j->depth == ENG__JSON_DEPTH)
        return -EILSEQ;
    j->stack[j->depth++] = open;
    j->state = open == '{' ? J_OBJ_FIRST : J_ARR_FIRST;
    return 0;
}

/* A closer for the innermost container; the last one completes the
 * document. */
static int pop(eng__json *j, unsigned char c)
{
    if (j->depth == 0 || j->stack[j->depth - 1] != (c == '}' ? '{' : '['))
        return -EILSEQ;
    j->depth--;
    j->state = j->depth == 0 ? J_DONE : J_AFTER;
    return 0;
}

/* The first byte of a value. */
static int value_start(eng__json *j, unsigned char c)
{
    switch (c) {
    case '"': j->state = J_STR; j->key = false; return 0;
    case '{': return push(j, '{');
    case '[': return push(j, '[');
    case '-': j->state = J_MINUS; return 0;
    case '0': j->state = J_ZERO; return 0;
    case 't': case 'f': case 'n':
        j->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        j->lit_pos = 1;
        j->state = J_LIT;
        return 0;
    default:
        if (c >= '1' && c <= '9') {
            j->state = J_INT;
            return 0;
        }
        return -EILSEQ;
    }
}

/* After a value: whitespace, ',' or a closer. Also where a number ends. */
static int after_value(eng__json *j, unsigned char c)
{
    j->state = J_AFTER;
    if (is_ws(c))
        return 0; /* counted by the caller */
    if (c == ',') {
        j->state = j->stack[j->depth - 1] == '{' ? J_OBJ_KEY : J_VALUE;
        return 0;
    }
    if (c == '}' || c == ']')
        return pop(j, c);
    return -EILSEQ;
}

static int step(eng__json *j, unsigned char c)
{
    /* whitespace between tokens, bounded */
    switch (j->state) {
    case J_START: case J_OBJ_FIRST: case J_OBJ_KEY: case J_COLON: case J_VALUE:
    case J_ARR_FIRST: case J_AFTER: case J_ZERO: case J_INT: case J_FRAC: case J_EXP:
        if (is_ws(c)) {
            if (++j->ws > ENG__JSON_WS)
                return -EILSEQ;
            if (j->state >= J_ZERO)
                j->state = J_AFTER; /* the number ended */
            return 0;
        }
        j->ws = 0;
        break;
    default:
        break;
    }
    switch (j->state) {
    case J_START:
        return c == '{' ? push(j, '{') : -EILSEQ;
    case J_OBJ_FIRST:
        if (c == '}')
            return pop(j, c);
        /* fall through */
    case J_OBJ_KEY:
        if (c != '"')
            return -EILSEQ;
        j->state = J_STR;
        j->key = true;
        return 0;
    case J_COLON:
        if (c != ':')
            return -EILSEQ;
        j->state = J_VALUE;
        return 0;
    case J_ARR_FIRST:
        if (c == ']')
            return pop(j, c);
        /* fall through */
    case J_VALUE:
        return value_start(j, c);
    case J_AFTER:
        return after_value(j, c);
    case J_STR:
        if (c == '"')
            j->state = j->key ? J_COLON : J_AFTER;
        else if (c == '\\')
            j->state = J_ESC;
        else if (c < 0x20)
            return -EILSEQ;
        return 0;
    case J_ESC:
        if (c == 'u') {
            j->state = J_HEX;
            j->hex = 4;
            return 0;
        }
        if (!strchr("\"\\/bfnrt", c) || c == '\0')
            return -EILSEQ;
        j->state = J_STR;
        return 0;
    case J_HEX:
        if (!is_hex(c))
            return -EILSEQ;
        if (--j->hex == 0)
            j->state = J_STR;
        return 0;
    case J_MINUS:
        if (c == '0')
            j->state = J_ZERO;
        else if (c >= '1' && c <= '9')
            j->state = J_INT;
        else
            return -EILSEQ;
        return 0;
    case J_ZERO:
    case J_INT:
        if (is_digit(c) && j->state == J_INT)
            return 0;
        if (c == '.') {
            j->state = J_FRAC0;
            return 0;
        }
        if (c == 'e' || c == 'E') {
            j->state = J_EXP0;
            return 0;
        }
        return after_value(j, c);
    case J_FRAC0:
        if (!is_digit(c))
            return -EILSEQ;
        j->state = J_FRAC;
        return 0;
    case J_FRAC:
        if (is_digit(c))
            return 0;
        if (c == 'e' || c == 'E') {
            j->state = J_EXP0;
            return 0;
        }
        return after_value(j, c);
    case J_EXP0:
        if (c == '+' || c == '-') {
            j->state = J_EXPS;
            return 0;
        }
        /* fall through */
    case J_EXPS:
        if (!is_digit(c))
            return -EILSEQ;
        j->state = J_EXP;
        return 0;
    case J_EXP:
        if (is_digit(c))
            return 0;
        return after_value(j, c);
    case J_LIT: {
        const char *lit = literals[j->lit];
        if ((unsigned char)lit[j->lit_pos] != c)
            return -EILSEQ;
        if (lit[++j->lit_pos] == '\0')
            j->state = J_AFTER;
        return 0;
    }
    default: /* J_DONE */
        return -EILSEQ;
    }
}

int eng__json_feed(eng__json *j, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int r = step(j, (unsigned char)bytes[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- whole documents ------------------------------------------------------ */

typedef struct jw {
    eng__json_put put; /* NULL: check only */
    void *ctx;
    int indent;        /* > 0: json.dumps(indent=N)'s layout */
} jw;

static void jput(const jw *w, const char *s, size_t n)
{
    if (w->put && n > 0)
        w->put(w->ctx, s, n);
}

/* indent=N: a newline and N spaces per level */
static void put_nl(const jw *w, int depth)
{
    static const char sp[] = "                                ";
    jput(w, "\n", 1);
    for (long k = (long)w->indent * depth; k > 0; k -= (long)sizeof(sp) - 1)
        jput(w, sp, k < (long)sizeof(sp) - 1 ? (size_t)k : sizeof(sp) - 1);
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

static int hex4(const char *s, size_t n, size_t i, uint32_t *v)
{
    if (i + 4 > n)
        return -EINVAL;
    *v = 0;
    for (size_t k = i; k < i + 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -EINVAL;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* One character of a string: re-escaped as Python's json.dumps does, or
 * (raw) as UTF-8. */
static void put_cp(const jw *w, uint32_t cp, bool raw)
{
    char b[8];
    size_t n = 0;
    if (!raw && (cp < 0x20 || cp == '"' || cp == '\\' || (cp >= 0xd800 && cp < 0xe000))) {
        const char *e = cp == '"' ? "\\\"" : cp == '\\' ? "\\\\" : cp == '\n' ? "\\n"
                      : cp == '\r' ? "\\r" : cp == '\t' ? "\\t" : cp == '\b' ? "\\b"
                      : cp == '\f' ? "\\f" : NULL;
        if (e) {
            jput(w, e, 2);
        } else { /* other control characters, and a lone surrogate */
            static const char hx[] = "0123456789abcdef";
            char u[6] = {'\\', 'u', hx[cp >> 12 & 15], hx[cp >> 8 & 15], hx[cp >> 4 & 15], hx[cp & 15]};
            jput(w, u, 6);
        }
        return;
    }
    n = eng__utf8_encode(cp, b);
    jput(w, b, n);
}

/* The string whose opening quote is s[i]: written with its quotes
 * (re-escaped), or raw (unescaped, no quotes). Returns the index after the
 * closing quote. */
static int64_t rd_string(const char *s, size_t n, size_t i, const jw *w, bool raw)
{
    if (i >= n || s[i] != '"')
        return -EINVAL;
    if (!raw)
        jput(w, "\"", 1);
    i++;
    while (i < n) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"') {
            if (!raw)
                jput(w, "\"", 1);
            return (int64_t)i + 1;
        }
        if (c < 0x20)
            return -EINVAL;
        if (c != '\\') { /* a run of plain bytes goes out as it is */
            size_t j = i;
            while (j < n && s[j] != '"' && s[j] != '\\' && (unsigned char)s[j] >= 0x20)
                j++;
            jput(w, s + i, j - i);
            i = j;
            continue;
        }
        if (i + 1 >= n)
            return -EINVAL;
        const char e = s[i + 1];
        i += 2;
        uint32_t cp;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u': {
            if (hex4(s, n, i, &cp) < 0)
                return -EINVAL;
            i += 4;
            uint32_t lo;
            if (cp >= 0xd800 && cp < 0xdc00 && i + 6 <= n && s[i] == '\\' && s[i + 1] == 'u' &&
                hex4(s, n, i + 2, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            }
            break;
        }
        default: return -EINVAL;
        }
        put_cp(w, cp, raw);
    }
    return -EINVAL;
}

/* Python's repr() of a double: the shortest digits that read back. */
static void put_repr(const jw *w, double v)
{
    char out[64];
    if (isinf(v)) {
        jput(w, v > 0 ? "Infinity" : "-Infinity", v > 0 ? 8 : 9);
        return;
    }
    if (v == 0) {
        jput(w, signbit(v) ? "-0.0" : "0.0", signbit(v) ? 4 : 3);
        return;
    }
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    /* e: [-]d[.ddd]e(+|-)xx */
    const char *p = e;
    size_t o = 0;
    if (*p == '-')
        out[o++] = *p++;
    char dig[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            dig[nd++] = *p;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    const int x = atoi(p + 1);
    if (x >= -4 && x < 16) {
        const int pt = x + 1; /* digits before the point */
        if (pt <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int k = 0; k < -pt; k++)
                out[o++] = '0';
            memcpy(out + o, dig, (size_t)nd);
            o += (size_t)nd;
        } else if (pt >= nd) {
            memcpy(out + o, dig, (size_t)nd);
            o += (size_t)nd;
            for (int k = nd; k < pt; k++)
                out[o++] = '0';
            out[o++] = '.';
            out[o++] = '0';
        } else {
            memcpy(out + o, dig, (size_t)pt);
            o += (size_t)pt;
            out[o++] = '.';
            memcpy(out + o, dig + pt, (size_t)(nd - pt));
            o += (size_t)(nd - pt);
        }
    } else {
        out[o++] = dig[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, dig + 1, (size_t)(nd - 1));
            o += (size_t)(nd - 1);
        }
        o += (size_t)snprintf(out + o, sizeof(out) - o, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
    }
    jput(w, out, o);
}

static int64_t rd_number(const char *s, size_t n, size_t i, const jw *w)
{
    const size_t st = i;
    bool whole = true;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n || !is_digit((unsigned char)s[i]))
        return -EINVAL;
    if (s[i] == '0')
        i++;
    else
        while (i < n && is_digit((unsigned char)s[i]))
            i++;
    if (i < n && s[i] == '.') {
        whole = false;
        if (++i >= n || !is_digit((unsigned char)s[i]))
            return -EINVAL;
        while (i < n && is_digit((unsigned char)s[i]))
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        whole = false;
        if (++i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || !is_digit((unsigned char)s[i]))
            return -EINVAL;
        while (i < n && is_digit((unsigned char)s[i]))
            i++;
    }
    if (whole) { /* Python's int: as written, but -0 is 0 */
        if (i - st == 2 && s[st] == '-' && s[st + 1] == '0')
            jput(w, "0", 1);
        else
            jput(w, s + st, i - st);
    } else if (w->put) {
        char tmp[512];
        if (i - st >= sizeof tmp)
            return -EINVAL;
        memcpy(tmp, s + st, i - st);
        tmp[i - st] = '\0';
        put_repr(w, strtod(tmp, NULL));
    }
    return (int64_t)i;
}

static int64_t rd_value(const char *s, size_t n, size_t i, const jw *w, int depth)
{
    i = skip_ws(s, n, i);
    if (i >= n)
        return -EINVAL;
    const char c = s[i];
    if (c == '{' || c == '[') {
        if (depth >= 2 * ENG__JSON_DEPTH)
            return -EINVAL;
        const bool obj = c == '{';
        const char close = obj ? '}' : ']';
        jput(w, &c, 1);
        i = skip_ws(s, n, i + 1);
        if (i < n && s[i] == close) {
            jput(w, &close, 1);
            return (int64_t)i + 1;
        }
        if (w->indent)
            put_nl(w, depth + 1);
        for (;;) {
            int64_t r;
            if (obj) {
                if ((r = rd_string(s, n, skip_ws(s, n, i), w, false)) < 0)
                    return r;
                i = skip_ws(s, n, (size_t)r);
                if (i >= n || s[i] != ':')
                    return -EINVAL;
                jput(w, ": ", 2);
                i++;
            }
            if ((r = rd_value(s, n, i, w, depth + 1)) < 0)
                return r;
            i = skip_ws(s, n, (size_t)r);
            if (i < n && s[i] == ',') {
                if (w->indent) {
                    jput(w, ",", 1);
                    put_nl(w, depth + 1);
                } else {
                    jput(w, ", ", 2);
                }
                i++;
            } else if (i < n && s[i] == close) {
                if (w->indent)
                    put_nl(w, depth);
                jput(w, &close, 1);
                return (int64_t)i + 1;
            } else {
                return -EINVAL;
            }
        }
    }
    if (c == '"')
        return rd_string(s, n, i, w, false);
    for (int k = 0; k < 3; k++) {
        const size_t l = strlen(literals[k]);
        if (n - i >= l && !memcmp(s + i, literals[k], l)) {
            jput(w, literals[k], l);
            return (int64_t)(i + l);
        }
    }
    return rd_number(s, n, i, w);
}

int64_t eng__json_value(const char *s, size_t n, eng__json_put put, void *ctx)
{
    return eng__json_value_indent(s, n, 0, put, ctx);
}

int64_t eng__json_value_indent(const char *s, size_t n, int indent, eng__json_put put, void *ctx)
{
    if (!s || indent < 0 || indent > 16)
        return -EINVAL;
    const jw w = {put, ctx, indent};
    return rd_value(s, n, 0, &w, 0);
}

void eng__json_quote(const char *s, size_t n, eng__json_put put, void *ctx)
{
    const jw w = {put, ctx, 0};
    jput(&w, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        jput(&w, s + run, i - run);
        put_cp(&w, c, false);
        run = i + 1;
    }
    jput(&w, s + run, n - run);
    jput(&w, "\"", 1);
}

int eng__json_next(const char *s, size_t n, size_t *pos, const char **key, size_t *key_len,
                   const char **val, size_t *val_len)
{
    static const jw none = {NULL, NULL, 0};
    if (!s || !pos || !val || !val_len)
        return -EINVAL;
    if (*pos == SIZE_MAX)
        return 0;
    const size_t b = skip_ws(s, n, 0);
    if (b >= n || (s[b] != '{' && s[b] != '['))
        return -EINVAL;
    const bool obj = s[b] == '{';
    const char close = obj ? '}' : ']';
    size_t i;
    if (*pos == 0) {
        i = skip_ws(s, n, b + 1);
        if (i < n && s[i] == close) {
            *pos = SIZE_MAX;
            return 0;
        }
    } else {
        i = skip_ws(s, n, *pos);
        if (i < n && s[i] == close) {
            *pos = SIZE_MAX;
            return 0;
        }
        if (i >= n || s[i] != ',')
            return -EINVAL;
        i = skip_ws(s, n, i + 1);
    }
    int64_t r;
    if (obj) {
        if ((r = rd_string(s, n, i, &none, false)) < 0)
            return (int)r;
        if (key) {
            *key = s + i;
            *key_len = (size_t)r - i;
        }
        i = skip_ws(s, n, (size_t)r);
        if (i >= n || s[i] != ':')
            return -EINVAL;
        i = skip_ws(s, n, i + 1);
    } else if (key) {
        *key = NULL;
        *key_len = 0;
    }
    if ((r = rd_value(s, n, i, &none, 1)) < 0)
        return (int)r;
    *val = s + i;
    *val_len = (size_t)r - i;
    *pos = (size_t)r;
    return 1;
}

typedef struct fixbuf {
    char *p;
    size_t n, cap;
    bool over;
} fixbuf;

static void fix_put(void *ctx, const char *s, size_t n)
{
    fixbuf *f = ctx;
    if (n > f->cap - f->n) {
        f->over = true;
        return;
    }
    memcpy(f->p + f->n, s, n);
    f->n += n;
}

bool eng__json_key_is(const char *key, size_t key_len, const char *want)
{
    if (!key || !want)
        return false;
    const size_t wl = strlen(want);
    char buf[256];
    if (wl >= sizeof buf)
        return false;
    fixbuf f = {buf, 0, wl + 1, false};
    const jw w = {fix_put, &f, 0};
    int64_t r = rd_string(key, key_len, 0, &w, true);
    return r == (int64_t)key_len && !f.over && f.n == wl && !memcmp(buf, want, wl);
}

int eng__json_unquote(const char *s, size_t n, char **ret)
{
    if (!s || !ret)
        return -EINVAL;
    *ret = NULL;
    const size_t b = skip_ws(s, n, 0);
    /* unescaped UTF-8 is never longer than the escaped text */
    char *p = malloc(n + 1);
    if (!p)
        return -ENOMEM;
    fixbuf f = {p, 0, n, false};
    const jw w = {fix_put, &f, 0};
    int64_t r = rd_string(s, n, b, &w, true);
    if (r < 0 || skip_ws(s, n, (size_t)r) != n || f.over || memchr(p, '\0', f.n)) {
        free(p);
        return -EINVAL;
    }
    p[f.n] = '\0';
    *ret = p;
    return 0;
}
