/* The JSON recognizer of ENG_FORMAT_JSON (engine/json.c): documents that
 * RFC 8259 allows are accepted byte by byte and complete exactly at their
 * end; malformed ones are refused at the first byte that cannot continue
 * (checked against positions worked out by hand); the nesting and
 * whitespace bounds hold; random documents from a generator written here
 * (every construct, random whitespace and splits) all pass. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "test-util.h"

/* Feeds s one byte at a time: the index of the first refused byte, or -1
 * when all are accepted; *done: complete after the last accepted byte. */
static int first_bad(const char *s, bool *done)
{
    eng__json j;
    eng__json_init(&j);
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        if (eng__json_feed(&j, s + i, 1) < 0) {
            *done = false;
            return (int)i;
        }
    }
    *done = eng__json_done(&j);
    return -1;
}

static void valid(const char *s)
{
    bool done;
    int bad = first_bad(s, &done);
    CHECKF(bad < 0 && done, "'%s': refused at %d or not complete (%d)", s, bad, done);
    /* the same in one call */
    eng__json j;
    eng__json_init(&j);
    CHECKF(eng__json_feed(&j, s, strlen(s)) == 0 && eng__json_done(&j), "'%s' in one call", s);
}

/* A prefix that may still become a document. */
static void open_prefix(const char *s)
{
    bool done;
    int bad = first_bad(s, &done);
    CHECKF(bad < 0 && !done, "'%s': refused at %d, or complete", s, bad);
}

static void invalid(const char *s, int at)
{
    bool done;
    int bad = first_bad(s, &done);
    CHECKF(bad == at, "'%s': refused at %d, expected %d", s, bad, at);
}

/* ---- random documents ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 16) % n);
}

typedef struct buf {
    char s[1 << 16];
    size_t n;
} buf;

static void put(buf *b, const char *s)
{
    size_t l = strlen(s);
    CHECK(b->n + l < sizeof(b->s));
    memcpy(b->s + b->n, s, l);
    b->n += l;
    b->s[b->n] = '\0';
}

static void ws(buf *b)
{
    static const char *w[] = {"", "", " ", "\n", "\t", "\r\n  "};
    put(b, w[rnd(6)]);
}

static void gen_string(buf *b)
{
    static const char *parts[] = {"a", "Z", " ", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r",
                                  "\\t", "\\u00e9", "\\uD83D\\uDE00", "\xc3\xa9", "\xe4\xb8\xad", "{", "]", ":", ","};
    put(b, "\"");
    for (int i = rnd(6); i > 0; i--)
        put(b, parts[rnd(sizeof(parts) / sizeof(parts[0]))]);
    put(b, "\"");
}

static void gen_number(buf *b)
{
    char t[64];
    static const char *ints[] = {"0", "-0", "7", "-42", "1234567890"};
    static const char *fracs[] = {"", "", ".0", ".5", ".125"};
    static const char *exps[] = {"", "", "e1", "E-2", "e+10", "E05"};
    snprintf(t, sizeof(t), "%s%s%s", ints[rnd(5)], fracs[rnd(5)], exps[rnd(6)]);
    put(b, t);
}

static void gen_value(buf *b, int depth);

static void gen_container(buf *b, int depth, bool object)
{
    put(b, object ? "{" : "[");
    int n = depth >= 6 ? 0 : (int)rnd(4);
    for (int i = 0; i < n; i++) {
        if (i)
            put(b, ",");
        ws(b);
        if (object) {
            gen_string(b);
            ws(b);
            put(b, ":");
            ws(b);
        }
        gen_value(b, depth + 1);
        ws(b);
    }
    if (n == 0)
        ws(b);
    put(b, object ? "}" : "]");
}

static void gen_value(buf *b, int depth)
{
    static const char *lits[] = {"true", "false", "null"};
    switch (rnd(6)) {
    case 0: gen_string(b); break;
    case 1: gen_number(b); break;
    case 2: put(b, lits[rnd(3)]); break;
    case 3: gen_container(b, depth, false); break;
    default: gen_container(b, depth, true); break;
    }
}

/* ---- whole documents: eng__json_value in json.dumps form ---- */

typedef struct sink {
    char s[4096];
    size_t n;
} sink;

static void sink_put(void *ctx, const char *bytes, size_t n)
{
    sink *k = ctx;
    if (n < sizeof(k->s) - k->n) {
        memcpy(k->s + k->n, bytes, n);
        k->n += n;
        k->s[k->n] = '\0';
    } else {
        k->n = sizeof(k->s); /* overflow: no test output is this long */
    }
}

/* in -> out, and out is its own form */
static void dumps(const char *in, const char *want)
{
    static sink k, k2;
    k.n = 0;
    k.s[0] = '\0';
    int64_t r = eng__json_value(in, strlen(in), sink_put, &k);
    size_t end = strlen(in);
    while (end > 0 && (in[end - 1] == ' ' || in[end - 1] == '\n'))
        end--;
    CHECKF(r == (int64_t)end && strcmp(k.s, want) == 0, "'%s': %lld '%s', want '%s'", in, (long long)r, k.s, want);
    k2.n = 0;
    k2.s[0] = '\0';
    r = eng__json_value(k.s, k.n, sink_put, &k2);
    CHECKF(r == (int64_t)k.n && strcmp(k2.s, k.s) == 0, "'%s' again: '%s'", k.s, k2.s);
}

static void test_dumps(void)
{
    /* expected strings: Python 3.11's json.dumps(json.loads(in), ensure_ascii=False) */
    dumps("{\"a\":[1,2.5,-0.1e+3,true,false,null,\"x\\u00e9\\n\"],\"b\":{}}",
          "{\"a\": [1, 2.5, -100.0, true, false, null, \"x\xc3\xa9\\n\"], \"b\": {}}");
    dumps("[ 1E5 , -0 , 0.1 , 1e-5 , 123456789012345678 , 1.0e16, 9.999999999999999e15, 5e-324, "
          "1.7976931348623157e308, -2.50E-3, 0.000123, 1e22, 123.456, 0.30000000000000004 ] ",
          "[100000.0, 0, 0.1, 1e-05, 123456789012345678, 1e+16, 1e+16, 5e-324, 1.7976931348623157e+308, "
          "-0.0025, 0.000123, 1e+22, 123.456, 0.30000000000000004]");
    dumps("{\"q\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\\ud83d\\ude00x\"}",
          "{\"q\": \"\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xf0\x9f\x98\x80x\"}");
    dumps(" \"\\u00e9\\u4e2d\" ", "\"\xc3\xa9\xe4\xb8\xad\"");
    dumps("\"\\ud800\\uD800\\udc00\"", "\"\\ud800\xf0\x90\x80\x80\""); /* a lone surrogate stays escaped */
    dumps("{ }", "{}");
    dumps("[-3, -0, -12, -7.0]", "[-3, 0, -12, -7.0]"); /* (only -0 loses its sign) */
    /* past the largest double: Python's float is inf, written Infinity
     * (not JSON, so not read again) */
    static sink inf;
    CHECK(eng__json_value("[1e400,-1E999]", 14, sink_put, &inf) == 14 && !strcmp(inf.s, "[Infinity, -Infinity]"));
    dumps("[[],{ \"\" : [ ] }]", "[[], {\"\": []}]");

    /* indent=N, and strings quoted (Python's json.dumps) */
    static sink ind, q;
    const char *doc = "{\"a\":[1,{\"b\":[]},{}],\"c\":\"x\",\"d\":{\"e\":1.50}}";
    CHECK(eng__json_value_indent(doc, strlen(doc), 4, sink_put, &ind) == (int64_t)strlen(doc));
    CHECKF(!strcmp(ind.s, "{\n    \"a\": [\n        1,\n        {\n            \"b\": []\n        },\n        {}\n"
                          "    ],\n    \"c\": \"x\",\n    \"d\": {\n        \"e\": 1.5\n    }\n}"),
           "indent 4: %s", ind.s);
    ind.n = 0;
    CHECK(eng__json_value_indent("[[]]", 4, 2, sink_put, &ind) == 4 && !strcmp(ind.s, "[\n  []\n]"));
    CHECK(eng__json_value_indent("[]", 2, 17, NULL, NULL) == -EINVAL);
    eng__json_quote("a\"b\\c\n\x01\xc3\xa9\x7f", 10, sink_put, &q);
    CHECKF(!strcmp(q.s, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\x7f\""), "quote: %s", q.s);

    /* not values */
    const char *bad[] = {"", " ", "{", "[1,]", "{\"a\" 1}", "{\"a\":}", "[01]", "-", "1.", ".5", "1e", "+1",
                         "tru", "nul", "\"\\q\"", "\"\\u12G4\"", "\"\x01\"", "\"abc", "{,}", "[1 2]",
                         "{\"a\":1,}", "'a'", "{a:1}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECKF(eng__json_value(bad[i], strlen(bad[i]), NULL, NULL) == -EINVAL, "'%s' accepted", bad[i]);
    /* a value ends where it ends: the rest is the caller's */
    CHECK(eng__json_value("{} x", 4, NULL, NULL) == 2);
    CHECK(eng__json_value("12,3", 4, NULL, NULL) == 2);
    /* nesting bound: 2 * ENG__JSON_DEPTH containers */
    char deep[300] = "";
    for (int i = 0; i < 2 * ENG__JSON_DEPTH; i++)
        strcat(deep, "[");
    for (int i = 0; i < 2 * ENG__JSON_DEPTH; i++)
        strcat(deep, "]");
    CHECK(eng__json_value(deep, strlen(deep), NULL, NULL) == (int64_t)strlen(deep));
    memmove(deep + 1, deep, strlen(deep) + 1);
    strcat(deep, "]");
    CHECK(eng__json_value(deep, strlen(deep), NULL, NULL) == -EINVAL);

    /* members and elements */
    const char *obj = " {\"a\": 1, \"b\\u0063\" : [2, {\"x\": 3}], \"d\":\"s\\n\"} ";
    size_t pos = 0, kl, vl;
    const char *k, *v;
    CHECK(eng__json_next(obj, strlen(obj), &pos, &k, &kl, &v, &vl) == 1);
    CHECK(eng__json_key_is(k, kl, "a") && vl == 1 && v[0] == '1');
    CHECK(eng__json_next(obj, strlen(obj), &pos, &k, &kl, &v, &vl) == 1);
    CHECK(eng__json_key_is(k, kl, "bc") && !eng__json_key_is(k, kl, "b") && vl == strlen("[2, {\"x\": 3}]") && !memcmp(v, "[2, {\"x\": 3}]", vl));
    CHECK(eng__json_next(obj, strlen(obj), &pos, &k, &kl, &v, &vl) == 1);
    char *str = NULL;
    CHECK(eng__json_key_is(k, kl, "d") && eng__json_unquote(v, vl, &str) == 0 && str && !strcmp(str, "s\n"));
    free(str);
    CHECK(eng__json_next(obj, strlen(obj), &pos, &k, &kl, &v, &vl) == 0);
    CHECK(eng__json_next(obj, strlen(obj), &pos, &k, &kl, &v, &vl) == 0);
    pos = 0;
    CHECK(eng__json_next("[]", 2, &pos, NULL, NULL, &v, &vl) == 0);
    pos = 0;
    CHECK(eng__json_next("[1", 2, &pos, NULL, NULL, &v, &vl) == 1);
    CHECK(eng__json_next("[1", 2, &pos, NULL, NULL, &v, &vl) == -EINVAL); /* never closed */
    pos = 0;
    CHECK(eng__json_next("[1 2]", 5, &pos, NULL, NULL, &v, &vl) == 1);
    CHECK(eng__json_next("[1 2]", 5, &pos, NULL, NULL, &v, &vl) == -EINVAL);
    pos = 0;
    CHECK(eng__json_next("\"x\"", 3, &pos, NULL, NULL, &v, &vl) == -EINVAL);
    CHECK(eng__json_unquote("\"a\\u0000b\"", 10, &str) == -EINVAL && str == NULL);
    CHECK(eng__json_unquote("\"a\" x", 5, &str) == -EINVAL);
    CHECK(eng__json_unquote("1", 1, &str) == -EINVAL);
}

int main(void)
{
    test_dumps();
    valid("{}");
    valid(" \n{ }");
    valid("{\"a\":1}");
    valid("{\"k\":0}");
    valid("{\"k\":-0}");
    valid("{\"k\":1E5}");
    valid("{\"k\":-12.5e-3}");
    valid("{\"a\":[1,2.5,-0.1e+3,true,false,null,\"x\\u00e9\\n\"],\"b\":{}}");
    valid("{\"a\" : { \"b\" : [ ] } , \"c\" : [ [ ] , { } ] }");
    valid("{\"\":\"\"}");
    valid("{\"q\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}");
    valid("{\"utf8\":\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"}");

    open_prefix("");
    open_prefix("   ");
    open_prefix("{");
    open_prefix("{\"a");
    open_prefix("{\"a\":");
    open_prefix("{\"a\":1"); /* more digits may come */
    open_prefix("{\"a\":tr");
    open_prefix("{\"a\":\"\\u00");
    open_prefix("{\"a\":[1,{\"b\":null}");

    invalid("[1]", 0);                /* the document is an object */
    invalid("\"x\"", 0);
    invalid("{a:1}", 1);              /* keys are strings */
    invalid("{'a':1}", 1);
    invalid("{\"a\" 1}", 5);
    invalid("{\"a\":01}", 6);         /* no leading zeros */
    invalid("{\"a\":-}", 6);
    invalid("{\"a\":+1}", 5);
    invalid("{\"a\":1.}", 7);
    invalid("{\"a\":.5}", 5);
    invalid("{\"a\":1e}", 7);
    invalid("{\"a\":1e+}", 8);
    invalid("{\"a\":tru}", 8);
    invalid("{\"a\":nul1}", 8);
    invalid("{\"a\":truex}", 9);
    invalid("{\"a\":\"\x01\"}", 6);  /* control bytes must be escaped */
    invalid("{\"a\":\"\n\"}", 6);
    invalid("{\"a\":\"\\q\"}", 7);
    invalid("{\"a\":\"\\u12G4\"}", 10);
    invalid("{\"a\":1,}", 7);         /* no trailing commas */
    invalid("{\"a\":[1,]}", 8);
    invalid("{\"a\":[,1]}", 6);
    invalid("{\"a\":1]", 6);          /* the closer must match */
    invalid("{\"a\":[1}", 7);
    invalid("{,}", 1);
    invalid("{\"a\":1}}", 7);         /* complete: nothing more */
    invalid("{\"a\":1} ", 7);
    invalid("{}x", 2);
    invalid("{\"a\":1 2}", 7);
    invalid("{\"a\"::1}", 5);

    /* nesting: 32 open containers, not 33 */
    char deep[128] = "{\"a\":";
    for (int i = 1; i < ENG__JSON_DEPTH; i++)
        strcat(deep, "[");
    open_prefix(deep);
    strcat(deep, "[");
    invalid(deep, (int)strlen(deep) - 1);
    /* whitespace: 24 in a row, not 25, anywhere between tokens */
    char sp[64];
    memset(sp, ' ', 24);
    strcpy(sp + 24, "{}");
    valid(sp);
    memset(sp, ' ', 25);
    strcpy(sp + 25, "{}");
    invalid(sp, 24);
    char mid[64] = "{\"a\":1";
    memset(mid + 6, '\n', 25);
    strcpy(mid + 31, "}");
    invalid(mid, 30);
    /* ...but whitespace inside a string is text, not counted */
    char str[80] = "{\"a\":\"";
    memset(str + 6, ' ', 40);
    strcpy(str + 46, "\"}");
    valid(str);

    /* random documents, fed whole and in random pieces (as tokens come) */
    static buf b;
    for (int it = 0; it < 20000; it++) {
        b.n = 0;
        b.s[0] = '\0';
        ws(&b);
        gen_container(&b, 0, true);
        eng__json j;
        eng__json_init(&j);
        for (size_t i = 0; i < b.n;) {
            size_t piece = 1 + rnd(6);
            if (piece > b.n - i)
                piece = b.n - i;
            CHECKF(!eng__json_done(&j) && eng__json_feed(&j, b.s + i, piece) == 0, "doc %d at %zu: %s", it,
                   i, b.s);
            i += piece;
        }
        CHECKF(eng__json_done(&j), "doc %d not complete: %s", it, b.s);
        /* the whole-document reader takes it too, and its json.dumps form
         * is a document the recognizer takes and its own form */
        static sink k1, k2;
        k1.n = k2.n = 0;
        CHECKF(eng__json_value(b.s, b.n, sink_put, &k1) == (int64_t)b.n && k1.n < sizeof(k1.s),
               "doc %d: value reader: %s", it, b.s);
        CHECKF(eng__json_value(k1.s, k1.n, sink_put, &k2) == (int64_t)k1.n && k2.n == k1.n &&
                   !memcmp(k1.s, k2.s, k1.n), "doc %d: form not stable: %s", it, k1.s);
        eng__json_init(&j);
        CHECKF(eng__json_feed(&j, k1.s, k1.n) == 0 && eng__json_done(&j), "doc %d: form %s", it, k1.s);

        /* one byte changed, dropped or added: the two readers (written
         * apart) agree on whether it is still one object, nothing after */
        if (b.n < 2 || b.n + 2 >= sizeof(b.s))
            continue;
        static const char alphabet[] = "{}[]:,\"\\ \t\n0123456789-+.eEtrufalsn/bu\x01\xc3";
        const size_t at = rnd((uint32_t)b.n);
        const char c = alphabet[rnd(sizeof(alphabet) - 1)];
        switch (rnd(3)) {
        case 0: b.s[at] = c; break;
        case 1: memmove(b.s + at, b.s + at + 1, b.n - at); b.n--; break;
        default: memmove(b.s + at + 1, b.s + at, b.n - at + 1); b.s[at] = c; b.n++; break;
        }
        eng__json_init(&j);
        const bool rec = eng__json_feed(&j, b.s, b.n) == 0 && eng__json_done(&j);
        const size_t lead = strspn(b.s, " \t\n\r");
        const bool val = lead < b.n && b.s[lead] == '{' && eng__json_value(b.s, b.n, NULL, NULL) == (int64_t)b.n;
        CHECKF(rec == val, "mutated doc %d: recognizer %d, reader %d: %.*s", it, rec, val, (int)b.n, b.s);
    }
    printf("json: ok\n");
    return 0;
}
