/* The JSON Schema recognizer (engine/jschema.c, built here with ASan and
 * UBSan where the compiler has them: schemas come from clients): compile
 * errors with their reasons, documents the schema admits (whole and in
 * random pieces), prefixes it must refuse and at which byte, and random
 * bytes on both the compiler and the recognizer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jschema.h"

static int failures;

#define CHECKF(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static eng__jschema *compile(const char *text)
{
    eng__jschema *s = NULL;
    char msg[256];
    int r = eng__jschema_compile(text, strlen(text), &s, msg, sizeof(msg));
    CHECKF(r == 0 && s, "%s: %d %s", text, r, msg);
    return s;
}

/* Bytes of doc the recognizer takes before refusing one (strlen: all),
 * and whether it is then done. */
static size_t accepted(const eng__jschema *s, const char *doc, bool *done)
{
    eng__jsr r;
    eng__jsr_init(&r, s);
    size_t i = 0;
    for (; doc[i]; i++) {
        eng__jsr c = r;
        if (eng__jsr_feed(&c, doc + i, 1) < 0)
            break;
        r = c;
    }
    *done = eng__jsr_done(&r);
    return i;
}

/* doc is complete and valid: accepted whole, done only at its end, the
 * same in random pieces, and nothing after it */
static void valid(const eng__jschema *s, const char *doc)
{
    bool done;
    const size_t n = strlen(doc);
    CHECKF(accepted(s, doc, &done) == n && done, "valid %s: %zu of %zu bytes, done %d", doc,
           accepted(s, doc, &done), n, done);
    eng__jsr r;
    eng__jsr_init(&r, s);
    for (size_t i = 0; i < n;) {
        CHECKF(!eng__jsr_done(&r), "%s: done after %zu bytes", doc, i);
        size_t k = 1 + rnd() % 7;
        k = k > n - i ? n - i : k;
        CHECKF(eng__jsr_feed(&r, doc + i, k) == 0, "%s: a piece at %zu refused", doc, i);
        i += k;
    }
    CHECKF(eng__jsr_done(&r), "%s: not done in pieces", doc);
    CHECKF(eng__jsr_feed(&r, " ", 1) < 0 && eng__jsr_feed(&r, "x", 1) < 0, "%s: bytes after the end", doc);
}

/* the recognizer refuses doc's byte at offset at (and takes the rest) */
static void refused_at(const eng__jschema *s, const char *doc, size_t at)
{
    bool done;
    const size_t got = accepted(s, doc, &done);
    CHECKF(got == at && !done, "refused %s: took %zu bytes, want %zu", doc, got, at);
}

/* refused at the last byte */
static void refused(const eng__jschema *s, const char *doc)
{
    refused_at(s, doc, strlen(doc) - 1);
}

static void compile_fails(const char *text, int want, const char *why)
{
    eng__jschema *s = (eng__jschema *)1;
    char msg[256];
    int r = eng__jschema_compile(text, strlen(text), &s, msg, sizeof(msg));
    CHECKF(r == want && s == NULL && strstr(msg, why), "%s: %d (%s), want %d with '%s'", text, r, msg,
           want, why);
}

int main(void)
{
    /* ---- an object: order, required, optional, types, array bounds ---- */
    eng__jschema *a = compile(
        "{\"type\": \"object\", \"title\": \"Person\", \"properties\": {"
        " \"name\": {\"type\": \"string\", \"description\": \"whatever\"},"
        " \"age\": {\"type\": \"integer\", \"minimum\": 0},"
        " \"email\": {\"type\": \"string\"},"
        " \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\\\"c\"]}, \"minItems\": 1,"
        " \"maxItems\": 2},"
        " \"score\": {\"type\": \"number\"}},"
        " \"required\": [\"name\", \"age\", \"tags\"], \"additionalProperties\": false}");
    if (a) {
        valid(a, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\"]}");
        valid(a, "{\"name\":\"x\",\"age\":-30,\"email\":\"e@x\",\"tags\":[\"a\",\"b\\\"c\"],\"score\":-0.5e+3}");
        valid(a, "{ \"name\" : \"x\\u0041\\n\\\"\" ,\n  \"age\": 0, \"tags\" : [ \"b\\\"c\" ], \"score\": 7 }");
        valid(a, "{\"name\":\"\",\"age\":12,\"tags\":[\"a\"],\"score\":1.25}");
        refused(a, "{\"a");                                        /* age before the required name */
        refused(a, "{\"name\":\"x\",\"t");                         /* the required age skipped */
        refused(a, "{\"name\":\"x\",\"age\":3.");                  /* an integer */
        refused(a, "{\"name\":\"x\",\"age\":03");                  /* a leading zero */
        refused(a, "{\"name\":\"x\",\"age\":3,\"tags\":[]");       /* minItems 1 */
        refused(a, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\",\"a\",");
        refused(a, "{\"name\":\"x\",\"age\":3,\"tags\":[\"c");     /* not in the enum */
        refused(a, "{\"name\":\"x\",\"age\":3,\"tags\":[\"b\"");    /* "b" is not "b\"c" */
        refused(a, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\"],\"e"); /* email's place was before tags */
        refused(a, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\"],}");
        refused(a, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\"],\"score\":2,"); /* no property left */
        refused(a, "{\"name\":\"x\",\"e");                         /* no other keys */
        refused(a, "{\"name\":1");
        refused(a, "{\"name\":\"x\",\"age\":3}");                  /* tags missing */
        refused(a, "{}");
        refused(a, "[");
        refused(a, "{\"name\":\"\x01");                            /* a control byte in a string */
        refused(a, "{\"name\":\"\\x");                             /* a bad escape */
        refused(a, "{\"name\" \"");                                /* ':' is due */
        refused_at(a, "{\"name\":\"x\",\"age\":-a", 19);
        refused(a, "{\"name\":\"x\",\"age\":1,\"tags\":[\"a\"],\"score\":1e}");
        refused(a, "{\"name\":\"x\",\"age\":1,\"tags\":[\"a\"],\"score\":.");
        /* whitespace runs are bounded as in format json */
        char ws[64] = "{";
        memset(ws + 1, ' ', ENG__JSON_WS + 1);
        refused(a, ws);
        /* random bytes, alone and after a valid prefix: never past a refusal */
        for (int t = 0; t < 20000; t++) {
            char buf[48];
            const char *prefix = t % 2 ? "{\"name\":\"x\",\"age\":" : "";
            size_t n = strlen(prefix);
            memcpy(buf, prefix, n);
            const char alphabet[] = "{}[]\":,-0123456789.eE+ \\u\"abtrue";
            while (n < sizeof(buf) - 1)
                buf[n++] = rnd() % 4 ? alphabet[rnd() % (sizeof(alphabet) - 1)] : (char)(rnd() % 256);
            buf[n] = 0;
            eng__jsr r;
            eng__jsr_init(&r, a);
            eng__jsr_feed(&r, buf, n);
        }
        eng__jschema_free(a);
    }

    /* ---- an array of a union, keys that need escapes, nested $ref ---- */
    eng__jschema *b = compile(
        "{\"type\": \"array\", \"maxItems\": 5, \"items\": {\"anyOf\": [{\"type\": \"string\"},"
        " {\"type\": \"null\"}, {\"type\": \"number\"}, {\"type\": \"boolean\"},"
        " {\"$ref\": \"#/$defs/K\"}]},"
        " \"$defs\": {\"K\": {\"type\": \"object\", \"properties\": {\"q\\\"k\\u00e9\": {\"const\": \"v\"}},"
        " \"required\": [\"q\\\"k\\u00e9\"]}}}");
    if (b) {
        valid(b, "[]");
        valid(b, "[\"s\", null, -1.5e3, true, {\"q\\\"k\xc3\xa9\": \"v\"}]");
        valid(b, "[false,0,\"\"]");
        refused(b, "[\"s\", null, 1, true, false,");            /* maxItems 5 */
        refused(b, "[nul ");
        refused(b, "[tru ");
        refused(b, "[{\"q\\\"k\xc3\xa9\": \"w");
        refused(b, "[{\"qk");
        refused(b, "[1.]");
        refused(b, "[{}");
        eng__jschema_free(b);
    }

    /* pydantic's shape: $defs, titles, Optional as anyOf with null, a
     * type list, an empty properties object */
    eng__jschema *p = compile(
        "{\"$defs\": {\"Pet\": {\"properties\": {\"kind\": {\"enum\": [\"cat\", \"dog\"], \"title\": \"Kind\","
        " \"type\": \"string\"}}, \"required\": [\"kind\"], \"title\": \"Pet\", \"type\": \"object\"}},"
        " \"properties\": {\"name\": {\"title\": \"Name\", \"type\": \"string\"},"
        " \"nick\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"null\"}], \"default\": null},"
        " \"pets\": {\"items\": {\"$ref\": \"#/$defs/Pet\"}, \"type\": \"array\"},"
        " \"n\": {\"type\": [\"integer\", \"null\"]}, \"meta\": {\"type\": \"object\", \"properties\": {}}},"
        " \"required\": [\"name\", \"nick\", \"pets\", \"n\", \"meta\"], \"title\": \"Owner\", \"type\": \"object\"}");
    if (p) {
        valid(p, "{\"name\": \"Ann\", \"nick\": null, \"pets\": [{\"kind\": \"dog\"}], \"n\": 2, \"meta\": {}}");
        valid(p, "{\"name\": \"Ann\", \"nick\": \"A\", \"pets\": [], \"n\": null, \"meta\": { }}");
        refused(p, "{\"name\": \"Ann\", \"nick\": null, \"pets\": [{\"kind\": \"co");
        refused(p, "{\"name\": \"Ann\", \"nick\": null, \"pets\": [], \"n\": 2.");
        refused(p, "{\"name\": \"Ann\", \"nick\": null, \"pets\": [], \"n\": 2, \"meta\": {\"");
        eng__jschema_free(p);
    }

    /* ---- what is refused, and why ---- */
    compile_fails("{\"type\": \"object\"}", -ENOTSUP, "properties");
    compile_fails("{\"type\": \"string\"}", -ENOTSUP, "root");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"not\":{}}", -ENOTSUP,
                  "not");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"allOf\":[]}}}", -ENOTSUP,
                  "allOf");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[1,2]}}}", -ENOTSUP, "enum");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"integer\"},"
                  "{\"type\":\"number\"}]}}}", -ENOTSUP, "begin alike");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/A\"}},\"$defs\":{\"A\":"
                  "{\"type\":\"object\",\"properties\":{\"b\":{\"$ref\":\"#/$defs/A\"}}}}}", -ENOTSUP,
                  "refers to itself");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/B\"}}}", -EINVAL,
                  "no such definition");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"http://x/y\"}}}", -ENOTSUP, "$ref");
    compile_fails("{\"type\":\"object\",\"properties\":", -EINVAL, "ends");
    compile_fails("{\"type\":\"objekt\"}", -EINVAL, "unknown type");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"b\"]}",
                  -ENOTSUP, "required");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
                  "\"additionalProperties\":true}", -ENOTSUP, "additionalProperties");
    compile_fails("{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":3,\"maxItems\":2}",
                  -ENOTSUP, "maxItems");
    compile_fails("{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":-1}", -EINVAL, "minItems");
    /* past UINT32_MAX: refused, not converted (undefined; found by fuzzing) */
    compile_fails("{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":5e59}", -EINVAL, "maxItems");
    compile_fails("{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":4294967296}", -EINVAL,
                  "maxItems");
    compile_fails("{\"type\":\"array\"}", -ENOTSUP, "items");
    compile_fails("[1]", -ENOTSUP, "must be an object");
    compile_fails("{\"properties\":{}}", -ENOTSUP, "without type");
    compile_fails("{\"type\":\"object\",\"properties\":{}} x", -EINVAL, "after the schema");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"a\":\"\\q\"}", -EINVAL,
                  "escape");
    /* \u with non-hex digits between hex ones: the digits' sum once
     * overflowed into a positive "code point" (found by fuzzing) */
    compile_fails("{\"type\":\"object\",\"properties\":{\"\\uz0z0\":{\"type\":\"string\"}}}", -EINVAL,
                  "escape");
    compile_fails("{\"type\":\"object\",\"properties\":{\"\\ud800\\uz0z0\":{\"type\":\"string\"}}}",
                  -EINVAL, "escape");
    {
        /* nesting past the recognizer's stack */
        char deep[1024] = "";
        for (int i = 0; i < 40; i++)
            strcat(deep, "{\"type\":\"array\",\"items\":");
        strcat(deep, "{\"type\":\"string\"}");
        for (int i = 0; i < 40; i++)
            strcat(deep, "}");
        compile_fails(deep, -ENOTSUP, "deeper");
    }

    /* random text on the compiler: an answer, never a crash */
    for (int t = 0; t < 20000; t++) {
        const char *pieces[] = {"{", "}", "[", "]", ",", ":", "\"type\"", "\"object\"", "\"array\"",
                                "\"properties\"", "\"items\"", "\"a\"", "\"string\"", "\"enum\"",
                                "\"anyOf\"", "\"$ref\"", "\"#/$defs/a\"", "\"$defs\"", "\"required\"",
                                "1", "null", "true", " ", "\"minItems\"", "\"\\u12\""};
        char buf[512];
        size_t n = 0;
        while (n < 400) {
            const char *q = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
            memcpy(buf + n, q, strlen(q));
            n += strlen(q);
        }
        buf[n] = 0;
        eng__jschema *s = NULL;
        char msg[128];
        int r = eng__jschema_compile(buf, rnd() % (n + 1), &s, msg, sizeof(msg));
        CHECKF((r == 0) == (s != NULL) && (r == 0 || r == -EINVAL || r == -ENOTSUP), "random: %d", r);
        if (s) {
            eng__jsr rr;
            eng__jsr_init(&rr, s);
            eng__jsr_feed(&rr, buf, n);
        }
        eng__jschema_free(s);
    }

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
