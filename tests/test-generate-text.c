/* The text side of generation (engine/generate.h): UTF-8 held back until
 * complete, stop strings matched across token boundaries and not emitted,
 * held text released when it turns out not to be a stop string. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "generate.h"

static int failures;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

/* Pushes pieces one by one; checks each call's released text against
 * want[i] (NULL: don't check) and returns the result of the last push. The
 * whole output goes to out. finish: call eng__text_finish when no stop. */
typedef struct run {
    char out[1024];
    size_t n_out;
    int last;      /* last push result */
    bool stopped;
} run;

static void run_pieces(const char *const *stop, size_t n_stop, const char *const *pieces,
                       size_t n, const char *const *want, bool finish, run *r) {
    eng__textstream t;
    memset(r, 0, sizeof(*r));
    int rc = eng__text_init(&t, stop, n_stop);
    CHECK(rc == 0);
    if (rc != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        const char *text = NULL;
        size_t len = 99;
        r->last = eng__text_push(&t, pieces[i], strlen(pieces[i]), &text, &len);
        CHECK(r->last == 0 || r->last == 1);
        if (r->last < 0)
            break;
        CHECK(text != NULL && text[len] == '\0');
        if (want && want[i] && (len != strlen(want[i]) || memcmp(text, want[i], len) != 0)) {
            fprintf(stderr, "piece %zu: released [%.*s], want [%s]\n", i, (int)len, text, want[i]);
            failures++;
        }
        if (r->n_out + len < sizeof(r->out)) {
            memcpy(r->out + r->n_out, text, len);
            r->n_out += len;
        }
        if (r->last == 1) {
            r->stopped = true;
            /* the stream is done: further pushes and finish are refused */
            CHECK(eng__text_push(&t, "x", 1, &text, &len) == -EINVAL);
            CHECK(eng__text_finish(&t, &text, &len) == -EINVAL);
            break;
        }
    }
    if (!r->stopped && finish) {
        const char *text = NULL;
        size_t len = 0;
        CHECK(eng__text_finish(&t, &text, &len) == 0);
        if (text && r->n_out + len < sizeof(r->out)) {
            memcpy(r->out + r->n_out, text, len);
            r->n_out += len;
        }
    }
    r->out[r->n_out] = '\0';
    eng__text_free(&t);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_plain(void) {
    const char *pieces[] = {"Hello", ",", " world", ""};
    const char *want[] = {"Hello", ",", " world", ""};
    run r;
    run_pieces(NULL, 0, pieces, N(pieces), want, true, &r);
    CHECK(!r.stopped && strcmp(r.out, "Hello, world") == 0);
}

static void test_utf8_split(void) {
    /* é = C3 A9, € = E2 82 AC, 😀 = F0 9F 98 80 */
    const char *pieces[] = {"caf\xC3", "\xA9 ", "\xE2", "\x82", "\xAC", "\xF0\x9F", "\x98",
                            "\x80!"};
    const char *want[] = {"caf", "\xC3\xA9 ", "", "", "\xE2\x82\xAC", "", "", "\xF0\x9F\x98\x80!"};
    run r;
    run_pieces(NULL, 0, pieces, N(pieces), want, true, &r);
    CHECK(strcmp(r.out, "caf\xC3\xA9 \xE2\x82\xAC\xF0\x9F\x98\x80!") == 0);

    /* incomplete at the very end: one U+FFFD */
    const char *tail[] = {"x\xE2\x82"};
    const char *want_tail[] = {"x"};
    run_pieces(NULL, 0, tail, 1, want_tail, true, &r);
    CHECK(strcmp(r.out, "x\xEF\xBF\xBD") == 0);
}

static void test_stop_split(void) {
    const char *stop[] = {"\nUser:"};
    const char *pieces[] = {"Hello", "\nUs", "er", ": more"};
    const char *want[] = {"Hello", "", "", ""};
    run r;
    run_pieces(stop, 1, pieces, N(pieces), want, true, &r);
    CHECK(r.stopped && strcmp(r.out, "Hello") == 0);

    /* the text before the stop string inside the same token is emitted */
    const char *stop2[] = {"<|end|>"};
    const char *p2[] = {"Hi", " there<|end|>garbage"};
    const char *w2[] = {"Hi", " there"};
    run_pieces(stop2, 1, p2, N(p2), w2, true, &r);
    CHECK(r.stopped && strcmp(r.out, "Hi there") == 0);
}

static void test_stop_at_start(void) {
    const char *stop[] = {"STOP"};
    const char *pieces[] = {"STOP and more"};
    const char *want[] = {""};
    run r;
    run_pieces(stop, 1, pieces, 1, want, true, &r);
    CHECK(r.stopped && r.n_out == 0);

    const char *p2[] = {"ST", "OP"};
    const char *w2[] = {"", ""};
    run_pieces(stop, 1, p2, 2, w2, true, &r);
    CHECK(r.stopped && r.n_out == 0);
}

static void test_partial_then_fail(void) {
    const char *stop[] = {"</s>"};
    const char *pieces[] = {"a<", "/", "x", "b"};
    const char *want[] = {"a", "", "</x", "b"};
    run r;
    run_pieces(stop, 1, pieces, N(pieces), want, true, &r);
    CHECK(!r.stopped && strcmp(r.out, "a</xb") == 0);

    /* a held prefix at the end of generation is released by finish */
    const char *stop2[] = {"END"};
    const char *p2[] = {"abc", "EN"};
    const char *w2[] = {"abc", ""};
    run_pieces(stop2, 1, p2, 2, w2, true, &r);
    CHECK(!r.stopped && strcmp(r.out, "abcEN") == 0);

    /* a failed partial match that contains the start of a real one */
    const char *stop3[] = {"aab"};
    const char *p3[] = {"a", "a", "a", "b", "c"};
    const char *w3[] = {"", "", "a", ""};
    run_pieces(stop3, 1, p3, N(p3), w3, true, &r);
    CHECK(r.stopped && strcmp(r.out, "a") == 0);
}

static void test_several_stops(void) {
    /* the earliest match wins, whichever string it is */
    const char *stop[] = {"BB", "A"};
    const char *pieces[] = {"xBBA"};
    const char *want[] = {"x"};
    run r;
    run_pieces(stop, 2, pieces, 1, want, true, &r);
    CHECK(r.stopped && strcmp(r.out, "x") == 0);

    /* a shorter stop string completes inside text held for a longer one */
    const char *stop2[] = {"abcd", "cx"};
    const char *p2[] = {"abc", "x"};
    const char *w2[] = {"", "ab"};
    run_pieces(stop2, 2, p2, 2, w2, true, &r);
    CHECK(r.stopped && strcmp(r.out, "ab") == 0);

    /* the longest possible prefix is held: "ab" could start "abz" */
    const char *stop3[] = {"bq", "abz"};
    const char *p3[] = {"xab", "q"};
    const char *w3[] = {"x", "a"};
    run_pieces(stop3, 2, p3, 2, w3, true, &r);
    CHECK(r.stopped && strcmp(r.out, "xa") == 0);

    /* empty stop strings are ignored */
    const char *stop4[] = {"", "zz"};
    const char *p4[] = {"ab", "cz"};
    const char *w4[] = {"ab", "c"};
    run_pieces(stop4, 2, p4, 2, w4, true, &r);
    CHECK(!r.stopped && strcmp(r.out, "abcz") == 0);
}

static void test_utf8_stop(void) {
    /* a multi-byte stop string split inside its character */
    const char *stop[] = {"\xC3\xA9"};
    const char *pieces[] = {"caf\xC3", "\xA9!"};
    const char *want[] = {"caf", ""};
    run r;
    run_pieces(stop, 1, pieces, 2, want, true, &r);
    CHECK(r.stopped && strcmp(r.out, "caf") == 0);
    /* a different character with the same lead byte is released whole */
    const char *p2[] = {"caf\xC3", "\xA8!"};
    const char *w2[] = {"caf", "\xC3\xA8!"};
    run_pieces(stop, 1, p2, 2, w2, true, &r);
    CHECK(!r.stopped && strcmp(r.out, "caf\xC3\xA8!") == 0);
}

static void test_init_errors(void) {
    eng__textstream t;
    const char *nul[] = {"a", NULL};
    CHECK(eng__text_init(&t, nul, 2) == -EINVAL);
    CHECK(eng__text_init(&t, NULL, 1) == -EINVAL);
    const char *many[ENG__STOP_MAX_COUNT + 1];
    for (size_t i = 0; i < N(many); i++)
        many[i] = "x";
    CHECK(eng__text_init(&t, many, N(many)) == -EINVAL);
    CHECK(eng__text_init(&t, many, ENG__STOP_MAX_COUNT) == 0);
    eng__text_free(&t);
    char *longs = malloc(ENG__STOP_MAX_LEN + 2);
    memset(longs, 'a', ENG__STOP_MAX_LEN + 1);
    longs[ENG__STOP_MAX_LEN + 1] = '\0';
    const char *lp[] = {longs};
    CHECK(eng__text_init(&t, lp, 1) == -EINVAL);
    longs[ENG__STOP_MAX_LEN] = '\0';
    CHECK(eng__text_init(&t, lp, 1) == 0);
    eng__text_free(&t);
    free(longs);
    eng__text_free(NULL);
}

/* Random texts over a small alphabet (with multi-byte characters), cut at
 * random byte positions: the concatenated output must be the text up to the
 * earliest stop string (or all of it), and every released piece must be a
 * prefix-extension that ends on a character boundary. */
static uint64_t rng = 88172645463325252ull;
static unsigned rnd(unsigned n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static void test_random(void) {
    static const char *const alpha[] = {"a", "b", "c", "\xC3\xA9", "\xE2\x82\xAC"};
    static const char *const stops_all[] = {"ab", "ca", "\xC3\xA9" "b", "bbb", "\xE2\x82\xAC\xE2\x82\xAC"};
    for (int iter = 0; iter < 3000; iter++) {
        char text[256];
        size_t n = 0;
        int chars = 1 + (int)rnd(30);
        for (int i = 0; i < chars; i++) {
            const char *c = alpha[rnd(N(alpha))];
            memcpy(text + n, c, strlen(c));
            n += strlen(c);
        }
        text[n] = '\0';
        size_t n_stop = rnd(3);
        const char *stop[2];
        for (size_t i = 0; i < n_stop; i++)
            stop[i] = stops_all[rnd(N(stops_all))];
        size_t cut = n;
        for (size_t i = 0; i < n_stop; i++) {
            char *h = strstr(text, stop[i]);
            if (h && (size_t)(h - text) < cut)
                cut = (size_t)(h - text);
        }

        eng__textstream t;
        CHECK(eng__text_init(&t, stop, n_stop) == 0);
        char out[512];
        size_t n_out = 0, pos = 0;
        bool stopped = false;
        while (pos < n && !stopped) {
            size_t len = 1 + rnd(5);
            if (len > n - pos)
                len = n - pos;
            const char *rel;
            size_t rlen;
            int r = eng__text_push(&t, text + pos, len, &rel, &rlen);
            CHECK(r == 0 || r == 1);
            pos += len;
            if (r < 0)
                break;
            CHECK(n_out + rlen <= cut && memcmp(rel, text + n_out, rlen) == 0);
            CHECK(eng_utf8_complete_prefix(rel, rlen) == rlen);
            if (n_out + rlen <= sizeof(out)) {
                memcpy(out + n_out, rel, rlen);
                n_out += rlen;
            }
            stopped = r == 1;
        }
        if (!stopped) {
            const char *rel;
            size_t rlen;
            CHECK(eng__text_finish(&t, &rel, &rlen) == 0);
            if (n_out + rlen <= sizeof(out)) {
                memcpy(out + n_out, rel, rlen);
                n_out += rlen;
            }
        }
        CHECK(stopped == (cut < n));
        if (n_out != cut || memcmp(out, text, cut) != 0) {
            fprintf(stderr, "random %d: text [%s], got [%.*s], want [%.*s]\n", iter, text,
                    (int)n_out, out, (int)cut, text);
            failures++;
            eng__text_free(&t);
            return;
        }
        eng__text_free(&t);
    }
}

int main(void) {
    test_plain();
    test_utf8_split();
    test_stop_split();
    test_stop_at_start();
    test_partial_then_fail();
    test_several_stops();
    test_utf8_stop();
    test_init_errors();
    test_random();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
