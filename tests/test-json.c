/* The JSON recognizer of ENG_FORMAT_JSON (engine/json.c): documents that
 * RFC 8259 allows are accepted byte by byte and complete exactly at their
 * end; malformed ones are refused at the first byte that cannot continue
 * (checked against positions worked out by hand); the nesting and
 * whitespace bounds hold; random documents from a generator written here
 * (every construct, random whitespace and splits) all pass. */
#include <stdint.h>
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

int main(void)
{
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
    }
    printf("json: ok\n");
    return 0;
}
