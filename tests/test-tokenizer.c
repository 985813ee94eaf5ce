/* Tokenizer against llama.cpp's ids for the SmolLM2 vocabulary, and for a
 * SentencePiece one.
 *
 * Usage: test-tokenizer tests/data/tokenizer-smollm2.tsv
 *        test-tokenizer --vocab tests/data/vocab-spm.gguf tests/data/tokenizer-spm.tsv
 *
 * Each row of the .tsv is: escaped text, parse_special (0/1), ids. We load
 * the vocabulary of the real model (closing the GGUF right away, so the
 * vocabulary must own its copy), and check for every row: the ids, the
 * -ENOBUFS contract, the detokenized round trip, and streaming decode with
 * eng_utf8_complete_prefix. Then the vocabulary's special ids, EOG set, error
 * paths on synthetic vocabularies, and concurrent use from two threads.
 * Exits 77 when the model is not available.
 *
 * With --vocab (a vocabulary-only GGUF; never skips) each row has a fourth
 * column, llama.cpp's pieces of those ids (special tokens rendered)
 * concatenated: a SentencePiece vocabulary adds a space before text that
 * starts the input or follows a special token, so the pieces are not the
 * input. The ids with BOS added, the pieces and the streaming decode are
 * checked against it; --spm adds what holds for the SentencePiece test
 * vocabularies (special ids, byte fallback, random round trips), and
 * --spm-gemma the same for the Gemma-like one (bos 2, eos 1, no space put
 * first), --gemma4 what holds for the Gemma 4 one (BOS always added, its
 * end-of-generation markers, byte fallback, random round trips).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "vocab.h"

#define MAX_TEXT 65536
#define MAX_IDS 8192

typedef struct row {
    char *text;
    size_t len;
    char *want;      /* --vocab rows: the reference's pieces, else NULL */
    size_t want_len;
    int parse_special;
    int32_t *ids;
    size_t n_ids;
    int line;
} row;

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* C-style escapes of tests/data: \\ \n \r \t \xHH. Returns the length or -1. */
static long unescape(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            out[o++] = s[i++];
            continue;
        }
        if (i + 1 >= n)
            return -1;
        char c = s[i + 1];
        if (c == 'n') out[o++] = '\n';
        else if (c == 'r') out[o++] = '\r';
        else if (c == 't') out[o++] = '\t';
        else if (c == '\\') out[o++] = '\\';
        else if (c == 'x' && i + 3 < n) {
            char hex[3] = { s[i + 2], s[i + 3], 0 };
            char *end;
            long v = strtol(hex, &end, 16);
            if (*end)
                return -1;
            out[o++] = (char)v;
            i += 2;
        } else
            return -1;
        i += 2;
    }
    return (long)o;
}

static const char *model_path(char *buf, size_t cap) {
    const char *p = getenv("SI_MODEL");
    if (p && *p)
        return p;
    const char *cache = getenv("XDG_CACHE_HOME");
    if (cache && *cache)
        snprintf(buf, cap, "%s/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
    else if ((p = getenv("HOME")))
        snprintf(buf, cap, "%s/.cache/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", p);
    else
        return NULL;
    return buf;
}

static row *load_rows(const char *path, size_t *ret_n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    row *rows = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t l;
    int lineno = 0;
    while ((l = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        if (l && line[l - 1] == '\n')
            line[--l] = '\0';
        if (line[0] == '#')
            continue;
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2) {
            fprintf(stderr, "%s:%d: malformed row\n", path, lineno);
            exit(1);
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            rows = realloc(rows, cap * sizeof(*rows));
        }
        row *r = &rows[n++];
        r->text = malloc((size_t)(t1 - line) + 1);
        long tl = unescape(line, (size_t)(t1 - line), r->text);
        if (tl < 0) {
            fprintf(stderr, "%s:%d: bad escape\n", path, lineno);
            exit(1);
        }
        r->len = (size_t)tl;
        r->want = NULL;
        r->want_len = 0;
        char *t3 = strchr(t2 + 1, '\t');
        if (t3) {
            *t3 = '\0';
            size_t wl = strlen(t3 + 1);
            r->want = malloc(wl + 1);
            long k = unescape(t3 + 1, wl, r->want);
            if (k < 0) {
                fprintf(stderr, "%s:%d: bad escape in the pieces\n", path, lineno);
                exit(1);
            }
            r->want_len = (size_t)k;
        }
        r->parse_special = atoi(t1 + 1);
        r->ids = malloc(MAX_IDS * sizeof(int32_t));
        r->n_ids = 0;
        r->line = lineno;
        for (char *p = t2 + 1; *p;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            r->ids[r->n_ids++] = (int32_t)v;
            p = end;
        }
    }
    free(line);
    fclose(f);
    *ret_n = n;
    return rows;
}

/* Strict UTF-8: no overlong forms, surrogates or code points past U+10FFFF
 * (the tokenizer replaces those, so they cannot round-trip). */
static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!l || i + l > n)
            return false;
        uint32_t cp = l == 1 ? c : c & (0x7f >> l);
        for (size_t k = 1; k < l; k++) {
            if (((unsigned char)s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3f);
        }
        static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (cp < min[l] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += l;
    }
    return true;
}

/* Bytes the vocabulary cannot spell: the tokenizer drops them (as llama.cpp
 * does), so inputs holding them cannot round-trip. */
static bool missing[256];

static void find_missing_bytes(const eng_vocab *v) {
    /* ASCII bytes with no token tokenize to nothing; of the others, only the
     * lead bytes of planes 4-11 (F1, F2) can occur in strict UTF-8 and are
     * missing from SmolLM2, so count them as missing too. */
    int n_missing = 0;
    for (int b = 0; b < 0x80; b++) {
        char ch = (char)b;
        size_t nt = 0;
        missing[b] = eng_vocab_tokenize(v, &ch, 1, 0, NULL, 0, &nt) == -ENOBUFS ? false : nt == 0;
        n_missing += missing[b];
    }
    missing[0xf1] = missing[0xf2] = true;
    CHECK(n_missing == 6, "SmolLM2 lacks 6 ASCII byte tokens (04 06 13 14 16 1d), found %d", n_missing);
}

static bool unspellable(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (missing[(unsigned char)s[i]])
            return true;
    return false;
}

/* Concatenated pieces of ids; returns the length. */
static size_t detok(const eng_vocab *v, const int32_t *ids, size_t n, bool special, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int k = eng_vocab_token_to_piece(v, ids[i], special, out + o, cap - o);
        if (k < 0 || (size_t)k > cap - o)
            return (size_t)-1;
        o += (size_t)k;
    }
    return o;
}

static bool contains(const char *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

/* Streaming: the complete-UTF-8 prefix emitted after each token, the rest
 * kept; true when every emitted chunk is valid UTF-8 and the whole is
 * want. Counts in n_held the tokens that left bytes held back. */
static bool streams(const eng_vocab *v, const int32_t *ids, size_t n, const char *want, size_t want_len,
                    int *n_held) {
    static char pend[64], outb[4 * MAX_TEXT];
    size_t np = 0, no = 0;
    for (size_t i = 0; i < n; i++) {
        int k = eng_vocab_token_to_piece(v, ids[i], true, pend + np, sizeof(pend) - np);
        if (k < 0 || (size_t)k > sizeof(pend) - np)
            return false;
        np += (size_t)k;
        size_t c = eng_utf8_complete_prefix(pend, np);
        if (c < np)
            (*n_held)++;
        if (!valid_utf8(pend, c))
            return false;
        memcpy(outb + no, pend, c);
        no += c;
        memmove(pend, pend + c, np - c);
        np -= c;
    }
    return np == 0 && no == want_len && memcmp(outb, want, no) == 0;
}

/* The row's text tokenizes to llama.cpp's ids (both listed when not). */
static bool same_ids(const eng_vocab *v, const row *r, int32_t *got) {
    size_t n = 12345;
    int rc = eng_vocab_tokenize(v, r->text, r->len, r->parse_special ? ENG_TOK_PARSE_SPECIAL : 0, got, MAX_IDS, &n);
    bool same = rc == 0 && n == r->n_ids && memcmp(got, r->ids, n * sizeof(int32_t)) == 0;
    CHECK(same, "line %d (parse_special=%d): ids differ from llama.cpp (rc %d, %zu vs %zu tokens)", r->line,
          r->parse_special, rc, n, r->n_ids);
    if (!same) {
        fprintf(stderr, "  want:");
        for (size_t i = 0; i < r->n_ids; i++)
            fprintf(stderr, " %d", r->ids[i]);
        fprintf(stderr, "\n  got: ");
        for (size_t i = 0; rc == 0 && i < n; i++)
            fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n");
    }
    return same;
}

/* Too small a buffer: -ENOBUFS, the full count, and the prefix that fits. */
static void check_small_buffer(const eng_vocab *v, const row *r, int32_t *got) {
    if (r->n_ids < 2)
        return;
    unsigned flags = r->parse_special ? ENG_TOK_PARSE_SPECIAL : 0;
    size_t cap = r->n_ids / 2, n3 = 0;
    for (size_t i = 0; i < MAX_IDS; i++)
        got[i] = -7;
    int rc = eng_vocab_tokenize(v, r->text, r->len, flags, got, cap, &n3);
    CHECK(rc == -ENOBUFS && n3 == r->n_ids, "line %d: cap %zu gave rc %d n %zu", r->line, cap, rc, n3);
    CHECK(memcmp(got, r->ids, cap * sizeof(int32_t)) == 0 && got[cap] == -7,
          "line %d: wrong prefix or write past cap", r->line);
    n3 = 0;
    rc = eng_vocab_tokenize(v, r->text, r->len, flags, NULL, 0, &n3);
    CHECK(rc == -ENOBUFS && n3 == r->n_ids, "line %d: cap 0 gave rc %d n %zu", r->line, rc, n3);
}

static void check_row(const eng_vocab *v, const row *r, int *n_held) {
    static int32_t got[MAX_IDS];
    unsigned flags = r->parse_special ? ENG_TOK_PARSE_SPECIAL : 0;
    int rc;
    if (!same_ids(v, r, got))
        return;

    /* SmolLM2's metadata adds neither BOS nor EOS (llama.cpp agrees: the
     * generator checked that add_special gives the same ids). */
    size_t n2 = 0;
    rc = eng_vocab_tokenize(v, r->text, r->len, flags | ENG_TOK_ADD_SPECIAL, got, MAX_IDS, &n2);
    CHECK(rc == 0 && n2 == r->n_ids && memcmp(got, r->ids, n2 * sizeof(int32_t)) == 0,
          "line %d: ENG_TOK_ADD_SPECIAL changed the ids", r->line);

    check_small_buffer(v, r, got);

    /* Round trip. Malformed UTF-8 is replaced on the way in, so skip it. */
    static char buf[4 * MAX_TEXT];
    if (!valid_utf8(r->text, r->len) || unspellable(r->text, r->len))
        return;
    size_t m = detok(v, r->ids, r->n_ids, true, buf, sizeof(buf));
    CHECK(m == r->len && memcmp(buf, r->text, m) == 0, "line %d: pieces (special) do not rebuild the input",
          r->line);
    bool has_control = contains(r->text, r->len, "<|im_start|>") || contains(r->text, r->len, "<|im_end|>") ||
                       contains(r->text, r->len, "<|endoftext|>") || contains(r->text, r->len, "<jupyter_") ||
                       contains(r->text, r->len, "<repo") || contains(r->text, r->len, "<file_sep>") ||
                       contains(r->text, r->len, "<empty_output>");
    if (!r->parse_special || !has_control) {
        m = detok(v, r->ids, r->n_ids, false, buf, sizeof(buf));
        CHECK(m == r->len && memcmp(buf, r->text, m) == 0, "line %d: pieces do not rebuild the input", r->line);
    } else {
        /* Control tokens render as nothing without special. */
        m = detok(v, r->ids, r->n_ids, false, buf, sizeof(buf));
        CHECK(m < r->len && !contains(buf, m, "<|im_start|>") && !contains(buf, m, "<|endoftext|>"),
              "line %d: control token rendered without special", r->line);
    }

    CHECK(streams(v, r->ids, r->n_ids, r->text, r->len, n_held),
          "line %d: streaming decode broke UTF-8 or lost bytes", r->line);
}

static void test_utf8_prefix(void) {
    static const struct {
        const char *s;
        size_t n, want;
    } c[] = {
        { "", 0, 0 },
        { "abc", 3, 3 },
        { "\xe2\x82", 2, 0 },
        { "a\xe2\x82", 3, 1 },
        { "a\xe2\x82\xac", 4, 4 },
        { "\xf0\x9f\xa6", 3, 0 },
        { "x\xf0\x9f\xa6\x99", 5, 5 },
        { "ab\xc3", 3, 2 },
        { "\xc3\xa9", 2, 2 },
        { "\x80", 1, 1 },       /* stray continuation: nothing can complete it */
        { "\xff", 1, 1 },
        { "\x80\x80\x80\x80", 4, 4 },
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        size_t got = eng_utf8_complete_prefix(c[i].s, c[i].n);
        CHECK(got == c[i].want, "utf8_complete_prefix case %zu: %zu, want %zu", i, got, c[i].want);
    }
}

static void test_vocab_facts(const eng_vocab *v) {
    CHECK(eng_vocab_n_tokens(v) == 49152, "n_tokens %d", eng_vocab_n_tokens(v));
    CHECK(eng_vocab_bos(v) == 1 && eng_vocab_eos(v) == 2, "bos %d eos %d", eng_vocab_bos(v), eng_vocab_eos(v));
    CHECK(eng_vocab_is_eog(v, 2), "<|im_end|> is EOG");
    CHECK(eng_vocab_is_eog(v, 0), "<|endoftext|> is EOG");
    CHECK(!eng_vocab_is_eog(v, 1) && !eng_vocab_is_eog(v, 19556), "<|im_start|> / Hello are not EOG");
    CHECK(!eng_vocab_is_eog(v, -1) && !eng_vocab_is_eog(v, 49152), "out-of-range ids are not EOG");

    char buf[64];
    CHECK(eng_vocab_token_to_piece(v, 1, false, buf, sizeof(buf)) == 0, "control hidden without special");
    int k = eng_vocab_token_to_piece(v, 1, true, buf, sizeof(buf));
    CHECK(k == 12 && memcmp(buf, "<|im_start|>", 12) == 0, "control text with special");
    memset(buf, 'z', sizeof(buf));
    k = eng_vocab_token_to_piece(v, 1, true, buf, 5);
    CHECK(k == 12 && buf[0] == 'z', "small cap: needed count, nothing written (%d)", k);
    CHECK(eng_vocab_token_to_piece(v, -1, true, buf, sizeof(buf)) == -EINVAL, "negative id");
    CHECK(eng_vocab_token_to_piece(v, 49152, true, buf, sizeof(buf)) == -EINVAL, "id past vocab");
    k = eng_vocab_token_to_piece(v, 19556, false, buf, sizeof(buf));
    CHECK(k == 5 && memcmp(buf, "Hello", 5) == 0, "piece of 19556");
    k = eng_vocab_token_to_piece(v, 905, false, buf, sizeof(buf));
    CHECK(k == 6 && memcmp(buf, " world", 6) == 0, "piece of 905 (Ġ -> space)");

    size_t n;
    CHECK(eng_vocab_tokenize(v, NULL, 0, 0, NULL, 0, &n) == 0 && n == 0, "empty input");
    CHECK(eng_vocab_tokenize(v, NULL, 3, 0, NULL, 0, &n) == -EINVAL, "NULL text with length");
}

/* ---- synthetic vocabularies: error paths ---- */

/* extra_key: a bool key set true, or false when it starts with '!', or
 * KEY=N a u32 key, or +TEXT one more token (id 8, normal), or "+A B ..."
 * more (ids 8, 9, ..., at most 8; "^A": A a control token) */
static int write_vocab(const char *path, const char *model, const char *pre, bool merges, const char *extra_key) {
    gguf_writer *w;
    if (gguf_writer_new(&w) < 0)
        return -1;
    const char *toks[16] = { "<unk>", "<s>", "</s>", "a", "b", "ab", "Ġ", "Ġab" };
    int32_t types[16] = { 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    static const char *const mg[] = { "a b", "Ġ ab" };
    const bool more = extra_key && extra_key[0] == '+';
    char words[256] = "";
    size_t n_toks = 8;
    if (more) {
        snprintf(words, sizeof(words), "%s", extra_key + 1);
        for (char *save = NULL, *t = strtok_r(words, " ", &save); t && n_toks < 16;
             t = strtok_r(NULL, " ", &save)) {
            types[n_toks] = t[0] == '^' ? 3 : 1;
            toks[n_toks++] = t + (t[0] == '^');
        }
    }
    int r = 0;
    r |= gguf_writer_set_str(w, "general.architecture", "llama");
    if (model)
        r |= gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    if (pre)
        r |= gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    r |= gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, n_toks);
    r |= gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, n_toks);
    if (merges)
        r |= gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", mg, 2);
    r |= gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    r |= gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    r |= gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 99); /* out of range: ignored */
    const char *eq = extra_key ? strchr(extra_key, '=') : NULL;
    if (eq) {
        char key[64];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - extra_key), extra_key);
        r |= gguf_writer_set_u32(w, key, (uint32_t)strtoul(eq + 1, NULL, 10));
    } else if (extra_key && !more) {
        r |= gguf_writer_set_bool(w, extra_key + (extra_key[0] == '!'), extra_key[0] != '!');
    }
    if (r == 0)
        r = gguf_writer_write(w, path);
    gguf_writer_free(w);
    return r;
}

static int load_synthetic(const char *model, const char *pre, bool merges, const char *extra, eng_vocab **ret,
                          eng_error *err) {
    char path[] = "/tmp/test-tokenizer-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -EIO;
    close(fd);
    int r = write_vocab(path, model, pre, merges, extra);
    gguf_file *f = NULL;
    if (r == 0)
        r = gguf_open(path, &f, err);
    unlink(path);
    if (r < 0) {
        fprintf(stderr, "synthetic vocab: %s\n", err->msg);
        return -EIO;
    }
    r = eng_vocab_load(f, ret, err);
    gguf_close(f);
    return r;
}

/* gpt-oss's o200k_harmony, as llama.cpp has it: <|return|> and <|call|>
 * end generation, and with both there <|end|> does not (it closes each
 * message of an answer); <|end|> and the markers of a message's header,
 * control tokens in the file, print in answers (user-defined: text for
 * the answer's parser) and are cut out of text even without special
 * tokens parsed, as llama.cpp cuts its user-defined ones. Without <|call|>
 * (another vocabulary) <|end|> stays an end of generation. */
static void test_harmony_vocab(void) {
    static const char *const names[] = { "<|return|>", "<|call|>", "<|end|>", "<|channel|>",
                                         "<|message|>", "<|start|>", "<|constrain|>" };
    eng_vocab *v = NULL;
    eng_error err = { "" };
    int r = load_synthetic("llama", NULL, false,
                           "+^<|return|> ^<|call|> ^<|end|> ^<|channel|> ^<|message|> ^<|start|> "
                           "^<|constrain|>", &v, &err);
    CHECK(r == 0, "harmony vocabulary: %d %s", r, err.msg);
    if (r < 0)
        return;
    CHECK(eng_vocab_n_tokens(v) == 15, "harmony vocabulary: %d tokens", eng_vocab_n_tokens(v));
    for (int32_t id = 8; id < 15; id++) {
        const char *name = names[id - 8];
        const size_t len = strlen(name);
        const bool ends = id < 10;
        char piece[32];
        int32_t ids[16];
        size_t n = 0;
        CHECK(eng_vocab_is_eog(v, id) == ends, "%s %s an end of generation", name,
              ends ? "not" : "made");
        r = eng_vocab_token_to_piece(v, id, false, piece, sizeof(piece));
        CHECK(r == (ends ? 0 : (int)len) && (ends || !memcmp(piece, name, len)),
              "%s prints %d bytes in an answer", name, r);
        CHECK(eng_vocab_token_to_piece(v, id, true, piece, sizeof(piece)) == (int)len,
              "%s printed with special tokens", name);
        r = eng_vocab_tokenize(v, name, len, ENG_TOK_PARSE_SPECIAL, ids, 16, &n);
        CHECK(r == 0 && n == 1 && ids[0] == id, "%s parsed: r %d n %zu", name, r, n);
        r = eng_vocab_tokenize(v, name, len, 0, ids, 16, &n);
        CHECK(r == 0 && (n == 1 && ids[0] == id) == !ends, "%s in text: r %d n %zu id %d", name,
              r, n, n ? ids[0] : -1);
    }
    eng_vocab_free(v);
    r = load_synthetic("llama", NULL, false, "+^<|return|> ^<|end|>", &v, &err);
    CHECK(r == 0, "without <|call|>: %d %s", r, err.msg);
    if (r == 0) {
        char piece[16];
        CHECK(eng_vocab_is_eog(v, 8) && eng_vocab_is_eog(v, 9) &&
                  eng_vocab_token_to_piece(v, 9, false, piece, sizeof(piece)) == 0,
              "without <|call|>, <|end|> ends generation, unprinted");
        eng_vocab_free(v);
    }
}

static void test_synthetic(void) {
    eng_vocab *v = NULL;
    eng_error err = { "" };
    int r = load_synthetic("t5", "default", true, NULL, &v, &err);
    CHECK(r == -ENOTSUP && strstr(err.msg, "t5"), "Unigram (T5) model: %d '%s'", r, err.msg);
    r = load_synthetic(NULL, "default", true, NULL, &v, &err);
    CHECK(r == -EINVAL, "missing tokenizer.ggml.model: %d", r);
    /* SentencePiece without scores and with an EOS id out of range: all
     * scores 0, </s> is 2 as SentencePiece numbers it, BOS added; "ab" is
     * "\u2581ab": a U+2581 the vocabulary cannot spell (3 x <unk>), "ab" */
    r = load_synthetic("llama", NULL, false, NULL, &v, &err);
    CHECK(r == 0, "SPM synthetic: %d %s", r, err.msg);
    if (r == 0) {
        int32_t ids[8];
        size_t n = 0;
        CHECK(eng_vocab_bos(v) == 1 && eng_vocab_eos(v) == 2, "SPM ids: bos %d eos %d", eng_vocab_bos(v),
              eng_vocab_eos(v));
        r = eng_vocab_tokenize(v, "ab", 2, ENG_TOK_ADD_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n == 5 && ids[0] == 1 && ids[1] == 0 && ids[3] == 0 && ids[4] == 5, "SPM synthetic: r %d n %zu",
              r, n);
        eng_vocab_free(v);
    }
    r = load_synthetic("gpt2", "default", false, NULL, &v, &err);
    CHECK(r == -EINVAL && strstr(err.msg, "merges"), "missing merges: %d '%s'", r, err.msg);

    err.msg[0] = '\0';
    r = load_synthetic("gpt2", "no-such-pre", true, "tokenizer.ggml.add_eos_token", &v, &err);
    CHECK(r == 0 && strstr(err.msg, "no-such-pre"), "unknown pre falls back with a note: %d '%s'", r, err.msg);
    if (r == 0) {
        CHECK(eng_vocab_bos(v) == 1 && eng_vocab_eos(v) == -1, "bos %d eos %d (99 is out of range)",
              eng_vocab_bos(v), eng_vocab_eos(v));
        int32_t ids[8];
        size_t n = 0;
        /* "ab ab" -> "ab", "Ġab"; add_eos is set but there is no EOS; add_bos
         * defaults to false for a gpt2 vocabulary. */
        r = eng_vocab_tokenize(v, "ab ab", 5, ENG_TOK_ADD_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n == 2 && ids[0] == 5 && ids[1] == 7, "synthetic BPE: r %d n %zu", r, n);
        /* "ba": no merge, one token per character; "c" is not in the vocab:
         * dropped as llama.cpp drops it, not the unknown token. */
        r = eng_vocab_tokenize(v, "bac", 3, 0, ids, 8, &n);
        CHECK(r == 0 && n == 2 && ids[0] == 4 && ids[1] == 3, "fallback: r %d n %zu", r, n);
        /* <s> is control: text without PARSE_SPECIAL, a token with it. */
        r = eng_vocab_tokenize(v, "<s>", 3, ENG_TOK_PARSE_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n == 1 && ids[0] == 1, "parse special <s>: r %d n %zu", r, n);
        eng_vocab_free(v);
    }
    r = load_synthetic("gpt2", "llama-bpe", true, NULL, &v, &err);
    CHECK(r == 0, "llama-bpe synthetic: %d %s", r, err.msg);
    if (r == 0) {
        int32_t ids[8];
        size_t n = 0;
        /* llama-bpe defaults add_bos to true. */
        r = eng_vocab_tokenize(v, "ab", 2, ENG_TOK_ADD_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n == 2 && ids[0] == 1 && ids[1] == 5, "llama-bpe BOS: r %d n %zu", r, n);
        /* text that starts with BOS (a rendered Llama 3 chat) gets no
         * second one; BOS later in the text does not count */
        r = eng_vocab_tokenize(v, "<s>ab", 5, ENG_TOK_ADD_SPECIAL | ENG_TOK_PARSE_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n == 2 && ids[0] == 1 && ids[1] == 5, "one BOS: r %d n %zu", r, n);
        r = eng_vocab_tokenize(v, "ab<s>", 5, ENG_TOK_ADD_SPECIAL | ENG_TOK_PARSE_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n == 3 && ids[0] == 1 && ids[1] == 5 && ids[2] == 1, "BOS later: r %d n %zu", r, n);
        r = eng_vocab_tokenize(v, "<s>ab", 5, ENG_TOK_ADD_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n >= 2 && ids[0] == 1 && ids[1] != 1, "<s> as text: r %d n %zu", r, n);
        eng_vocab_free(v);
    }
    /* Gemma 4: BOS added though the file says not (as llama.cpp forces it),
     * the file's pre-tokenizer ignored without a note; " " is U+2581, which
     * neither a token nor a <0xXX> token holds: dropped, <unk> unused */
    err.msg[0] = '\0';
    r = load_synthetic("gemma4", "llama-bpe", true, "!tokenizer.ggml.add_bos_token", &v, &err);
    CHECK(r == 0 && !err.msg[0], "gemma4 synthetic: %d '%s'", r, err.msg);
    if (r == 0) {
        int32_t ids[8];
        size_t n = 0;
        r = eng_vocab_tokenize(v, "ab ab", 5, ENG_TOK_ADD_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n == 3 && ids[0] == 1 && ids[1] == 5 && ids[2] == 5,
              "gemma4 BOS: r %d n %zu", r, n);
        eng_vocab_free(v);
    }
    /* GLM-4 (pre glm4): no BOS, even where the file says to add one, as
     * llama.cpp has none for it */
    r = load_synthetic("gpt2", "glm4", true, "tokenizer.ggml.add_bos_token", &v, &err);
    CHECK(r == 0, "glm4 synthetic: %d %s", r, err.msg);
    if (r == 0) {
        int32_t ids[8];
        size_t n = 0;
        r = eng_vocab_tokenize(v, "ab", 2, ENG_TOK_ADD_SPECIAL, ids, 8, &n);
        CHECK(r == 0 && n == 1 && ids[0] == 5, "glm4 without BOS: r %d n %zu", r, n);
        eng_vocab_free(v);
    }
    /* the tokens the file names as a turn's and a message's end (GLM-4's
     * <|user|> and <|observation|>) end generation, as EOS does; an id
     * past the vocabulary is none */
    static const char *const ends[] = { "tokenizer.ggml.eot_token_id=4",
                                        "tokenizer.ggml.eom_token_id=4",
                                        "tokenizer.ggml.eot_token_id=99" };
    for (int i = 0; i < 3; i++) {
        r = load_synthetic("gpt2", "glm4", true, ends[i], &v, &err);
        CHECK(r == 0, "%s: %d %s", ends[i], r, err.msg);
        if (r == 0) {
            CHECK(eng_vocab_is_eog(v, 4) == (i < 2) && !eng_vocab_is_eog(v, 3),
                  "%s: token 4 %s an end of generation", ends[i], i < 2 ? "not" : "made");
            eng_vocab_free(v);
        }
    }
    /* ERNIE 4.5's <|end_of_sentence|> (its template's end of an answer)
     * ends generation and, named so, is a control token whatever the file
     * says: one token in a rendered history, no text in an answer */
    r = load_synthetic("llama", NULL, false, "+<|end_of_sentence|>", &v, &err);
    CHECK(r == 0, "ERNIE's end of sentence: %d %s", r, err.msg);
    if (r == 0) {
        int32_t ids[16];
        size_t n = 0;
        char piece[32];
        CHECK(eng_vocab_n_tokens(v) == 9 && eng_vocab_is_eog(v, 8) && !eng_vocab_is_eog(v, 3),
              "<|end_of_sentence|>: %d tokens, eog %d", eng_vocab_n_tokens(v),
              eng_vocab_is_eog(v, 8));
        r = eng_vocab_tokenize(v, "<|end_of_sentence|>", 19, ENG_TOK_PARSE_SPECIAL, ids, 16, &n);
        CHECK(r == 0 && n == 1 && ids[0] == 8, "<|end_of_sentence|> parsed: r %d n %zu", r, n);
        CHECK(eng_vocab_token_to_piece(v, 8, false, piece, sizeof(piece)) == 0 &&
                  eng_vocab_token_to_piece(v, 8, true, piece, sizeof(piece)) == 19,
              "<|end_of_sentence|> printed");
        eng_vocab_free(v);
    }
    test_harmony_vocab();
    r = load_synthetic("gemma4", NULL, false, NULL, &v, &err);
    CHECK(r == -EINVAL && strstr(err.msg, "merges"), "gemma4 without merges: %d '%s'", r, err.msg);
    eng_vocab_free(NULL);
}

/* Random strings (seeded): pieces rebuild any valid UTF-8 input, special
 * tokens included; malformed input must not break anything. */
/* text [tn] after the first w bytes of want, each U+2581 a space (as a
 * piece prints it); returns the bytes of want. */
static size_t spaces_back(const char *text, size_t tn, char *want, size_t w) {
    for (size_t j = 0; j < tn; j++) {
        if (j + 3 <= tn && memcmp(text + j, "\xe2\x96\x81", 3) == 0) {
            want[w++] = ' ';
            j += 2;
        } else {
            want[w++] = text[j];
        }
    }
    return w;
}

static void test_random_roundtrip(const eng_vocab *v) {
    static const char *const atoms[] = {
        "a", "Z", "e", "'s", "'LL", " ", "  ", "\t", "\n", "\r\n", "7", "42", ".", "!?", "<|im_start|>", "<|im_end|>",
        "<|", "|>", "\xc3\xa9", "\xe4\xbd\xa0", "\xf0\x9f\xa6\x99", "\xe2\x80\x8d", "\xd9\x85", "\xcc\x81", "\x00",
    };
    static int32_t ids[MAX_IDS];
    static char text[1024], out[8192];

    uint64_t x = 0x9e3779b97f4a7c15ull;
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        size_t n = 0;
        int k = 1 + (int)((x >> 33) % 40);
        bool raw = it % 5 == 4;
        for (int j = 0; j < k; j++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            if (raw) {
                text[n++] = (char)(x >> 24); /* arbitrary bytes */
            } else {
                const char *a = atoms[(x >> 20) % (sizeof(atoms) / sizeof(atoms[0]))];
                size_t al = (a[0] == '\0') ? 1 : strlen(a);
                memcpy(text + n, a, al);
                n += al;
            }
        }
        size_t nt = 0;
        unsigned flags = (it & 1) ? ENG_TOK_PARSE_SPECIAL : 0;
        int rc = eng_vocab_tokenize(v, text, n, flags, ids, MAX_IDS, &nt);
        if (rc != 0) {
            bad++;
            continue;
        }
        if (raw && !valid_utf8(text, n))
            continue;
        /* Bytes the vocabulary cannot spell are dropped: leave those inputs
         * to the corpus case that pins the behaviour to llama.cpp. */
        if (unspellable(text, n))
            continue;
        size_t m = detok(v, ids, nt, true, out, sizeof(out));
        if (m != n || memcmp(out, text, n) != 0) {
            bad++;
            fprintf(stderr, "  round trip failed (flags %u):", flags);
            for (size_t j = 0; j < n; j++)
                fprintf(stderr, " %02x", (unsigned char)text[j]);
            fprintf(stderr, "\n");
        }
    }
    CHECK(bad == 0, "random round trip: %d failures", bad);
}

/* ---- a vocabulary-only GGUF (--vocab) ---- */

static void check_row_vocab(const eng_vocab *v, const row *r, int *n_held) {
    static int32_t got[MAX_IDS];
    static char buf[4 * MAX_TEXT];
    unsigned flags = r->parse_special ? ENG_TOK_PARSE_SPECIAL : 0;
    int rc;
    if (!same_ids(v, r, got))
        return;
    /* where add_bos_token is set (all but the gpt-4o vocabulary, whose
     * empty text stays empty): BOS, then the same ids; none more where the
     * text starts with BOS (llama.cpp adds a second one and warns) */
    size_t n0 = 0;
    CHECK(eng_vocab_tokenize(v, "", 0, ENG_TOK_ADD_SPECIAL, got, MAX_IDS, &n0) == 0 && n0 <= 1, "empty text");
    const bool adds_bos = n0 == 1 && got[0] == eng_vocab_bos(v);
    size_t n2 = 0, add = !adds_bos || (r->n_ids > 0 && r->ids[0] == eng_vocab_bos(v)) ? 0 : 1;
    rc = eng_vocab_tokenize(v, r->text, r->len, flags | ENG_TOK_ADD_SPECIAL, got, MAX_IDS, &n2);
    CHECK(rc == 0 && n2 == r->n_ids + add && (!add || got[0] == eng_vocab_bos(v)) &&
              memcmp(got + add, r->ids, r->n_ids * sizeof(int32_t)) == 0,
          "line %d: ENG_TOK_ADD_SPECIAL is not BOS + the ids", r->line);
    check_small_buffer(v, r, got);
    size_t m = detok(v, r->ids, r->n_ids, true, buf, sizeof(buf));
    CHECK(m == r->want_len && memcmp(buf, r->want, m) == 0, "line %d: pieces differ from llama.cpp's", r->line);
    if (!valid_utf8(r->want, r->want_len))
        return;
    CHECK(streams(v, r->ids, r->n_ids, r->want, r->want_len, n_held),
          "line %d: streaming decode broke UTF-8 or lost bytes", r->line);
}

/* What holds for any input, from the vocabulary's own facts: every byte has
 * a <0xXX> token, so valid UTF-8 text without special tokens comes back
 * with the one space the tokenizer puts first (none for Gemma's). */
static void test_spm_facts(const eng_vocab *v, bool gemma) {
    const int32_t bos = gemma ? 2 : 1, eos = gemma ? 1 : 2;
    const size_t pre = gemma ? 0 : 1; /* the space put first */
    CHECK(eng_vocab_bos(v) == bos && eng_vocab_eos(v) == eos, "bos %d eos %d", eng_vocab_bos(v), eng_vocab_eos(v));
    CHECK(eng_vocab_is_eog(v, eos) && !eng_vocab_is_eog(v, bos), "</s> ends generation, <s> does not");
    char buf[64];
    int k = eng_vocab_token_to_piece(v, bos, false, buf, sizeof(buf));
    CHECK(k == 0, "<s> without special: %d bytes", k);
    k = eng_vocab_token_to_piece(v, bos, true, buf, sizeof(buf));
    CHECK(k == 3 && memcmp(buf, "<s>", 3) == 0, "<s> with special: %d bytes", k);
    /* a byte no piece holds is spelled by its <0xXX> token: [" "] "\x01" */
    int32_t ids[64];
    size_t n = 0;
    k = -1;
    if (eng_vocab_tokenize(v, "\x01", 1, 0, ids, 64, &n) == 0 && n == 1 + pre)
        k = eng_vocab_token_to_piece(v, ids[pre], false, buf, sizeof(buf));
    CHECK(k == 1 && buf[0] == 1, "<0x01> is the byte 01: %zu tokens, %d bytes", n, k);
    /* "the" is "\u2581the" with the space put first: one token, piece " the";
     * without the space, "the" */
    k = -1;
    if (eng_vocab_tokenize(v, "the", 3, 0, ids, 64, &n) == 0 && n == 1)
        k = eng_vocab_token_to_piece(v, ids[0], false, buf, sizeof(buf));
    CHECK(k == (int)(3 + pre) && memcmp(buf, " the" + 1 - pre, 3 + pre) == 0,
          "'the' is one token, piece '%s' (%zu tokens)", " the" + 1 - pre, n);

    static const char *const atoms[] = {
        "a", "Z", "the", " ", "  ", "\t", "\n", "\r\n", "7", "42", ".", "!?", "\xc3\xa9", "\xe4\xbd\xa0",
        "\xf0\x9f\xa6\x99", "\xe2\x80\x8d", "\xd9\x85", "\xcc\x81", "\x00", "\xe2\x96\x81", "<s>", "[INST",
    };
    static int32_t rid[MAX_IDS];
    static char text[1024], out[8192];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        size_t tn = 0;
        int kk = 1 + (int)((x >> 33) % 40);
        /* every 5th: arbitrary bytes (malformed UTF-8 too: byte fallback
         * spells anything), but '[' (the user-defined [INST] would be cut)
         * and ' ' (its U+2581 after a stray lead byte would be split into
         * that byte's symbol and come back as bytes, as in llama.cpp) */
        const bool raw = it % 5 == 4;
        for (int j = 0; j < kk; j++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            if (raw) {
                text[tn] = (char)(x >> 24);
                tn += text[tn] != '[' && text[tn] != ' ';
                continue;
            }
            const char *a = atoms[(x >> 20) % (sizeof(atoms) / sizeof(atoms[0]))];
            size_t al = a[0] == '\0' ? 1 : strlen(a);
            memcpy(text + tn, a, al);
            tn += al;
        }
        size_t nt = 0;
        if (eng_vocab_tokenize(v, text, tn, 0, rid, MAX_IDS, &nt) != 0) {
            bad++;
            continue;
        }
        size_t m = detok(v, rid, nt, false, out, sizeof(out));
        /* "\xe2\x96\x81" in the input comes back as a space, as in llama.cpp */
        char want[1100] = " ";
        size_t w = spaces_back(text, tn, want, pre);
        if (m != w || memcmp(out, want, w) != 0)
            bad++;
    }
    CHECK(bad == 0, "SentencePiece random round trip: %d failures", bad);
}

/* Gemma 4's test vocabulary (tests/data/make-gemma4-vocab.py fixes these
 * ids): what holds for any input, and llama.cpp's token attributes. */
static void test_gemma4_facts(const eng_vocab *v) {
    enum { PAD = 0, EOS = 1, BOS = 2, TOOL_RESPONSE = 13, TOOL_RESPONSE_END = 14, QUOTE = 15,
           TURN = 19, TURN_END = 20, NL = 21, END_S = 91 };
    CHECK(eng_vocab_bos(v) == BOS && eng_vocab_eos(v) == EOS, "bos %d eos %d", eng_vocab_bos(v),
          eng_vocab_eos(v));
    /* <|tool_response> (user-defined in the file) ends generation as
     * llama.cpp's list says; </s> is text in Gemma 4 */
    CHECK(eng_vocab_is_eog(v, EOS) && eng_vocab_is_eog(v, TURN_END) &&
              eng_vocab_is_eog(v, TOOL_RESPONSE),
          "<eos> <turn|> <|tool_response> end generation");
    CHECK(!eng_vocab_is_eog(v, BOS) && !eng_vocab_is_eog(v, TURN) &&
              !eng_vocab_is_eog(v, TOOL_RESPONSE_END) && !eng_vocab_is_eog(v, END_S) &&
              !eng_vocab_is_eog(v, PAD),
          "<bos> <|turn> <tool_response|> </s> <pad> do not end generation");
    int32_t ids[64];
    size_t n = 0;
    CHECK(eng_vocab_tokenize(v, "", 0, ENG_TOK_ADD_SPECIAL, ids, 64, &n) == 0 && n == 1 &&
              ids[0] == BOS,
          "BOS added to empty text");
    /* and so a control token: hidden without special, not cut out of text
     * without parse_special; <|"|> is user-defined: both */
    char buf[64];
    CHECK(eng_vocab_token_to_piece(v, TOOL_RESPONSE, false, buf, sizeof(buf)) == 0 &&
              eng_vocab_token_to_piece(v, TOOL_RESPONSE, true, buf, sizeof(buf)) == 16,
          "<|tool_response> is a control token");
    int k = eng_vocab_token_to_piece(v, QUOTE, false, buf, sizeof(buf));
    CHECK(k == 5 && memcmp(buf, "<|\"|>", 5) == 0, "<|\"|> prints without special: %d", k);
    CHECK(eng_vocab_tokenize(v, "<|tool_response>", 16, 0, ids, 64, &n) == 0 && n > 1,
          "<|tool_response> is text without parse_special (%zu tokens)", n);
    CHECK(eng_vocab_tokenize(v, "<|\"|>", 5, 0, ids, 64, &n) == 0 && n == 1 && ids[0] == QUOTE,
          "<|\"|> is cut out without parse_special");
    /* six newlines: one token, though the merges stop at four */
    CHECK(eng_vocab_tokenize(v, "\n\n\n\n\n\n", 6, 0, ids, 64, &n) == 0 && n == 1 &&
              ids[0] == NL + 5,
          "a run of newlines is its token (%zu tokens)", n);
    /* a byte no token holds is its <0xXX> token; spaces come back */
    k = -1;
    if (eng_vocab_tokenize(v, "\x01", 1, 0, ids, 64, &n) == 0 && n == 1)
        k = eng_vocab_token_to_piece(v, ids[0], false, buf, sizeof(buf));
    CHECK(k == 1 && buf[0] == 1, "<0x01> is the byte 01: %zu tokens, %d bytes", n, k);
    k = -1;
    if (eng_vocab_tokenize(v, " the", 4, 0, ids, 64, &n) == 0 && n == 1)
        k = eng_vocab_token_to_piece(v, ids[0], false, buf, sizeof(buf));
    CHECK(k == 4 && memcmp(buf, " the", 4) == 0, "' the' is one token, \\u2581the (%zu tokens)", n);

    /* Random valid UTF-8 comes back as it went in, U+2581 as a space, with
     * special tokens (cut out or not) */
    static const char *const atoms[] = {
        "a", "Z", "the", " ", "  ", "\t", "\n", "\n\n\n\n\n", "\r\n", "7", ".", "\xc3\xa9",
        "\xe4\xbd\xa0", "\xf0\x9f\xa6\x99", "\xe2\x80\x8d", "\x00", "\xe2\x96\x81", "\xef\xbf\xbd",
        "<|\"|>", "<|turn>", "<turn|>", "<|tool_response>", "<tool_call|>", "</s>", "<bos>", "<|",
    };
    static int32_t rid[MAX_IDS];
    static char text[1024], out[8192], want[1100];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        size_t tn = 0;
        int kk = 1 + (int)((x >> 33) % 40);
        for (int j = 0; j < kk; j++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            const char *a = atoms[(x >> 20) % (sizeof(atoms) / sizeof(atoms[0]))];
            size_t al = a[0] == '\0' ? 1 : strlen(a);
            memcpy(text + tn, a, al);
            tn += al;
        }
        size_t w = spaces_back(text, tn, want, 0);
        const unsigned flags = (it & 1) ? ENG_TOK_PARSE_SPECIAL : 0;
        size_t nt = 0;
        if (eng_vocab_tokenize(v, text, tn, flags, rid, MAX_IDS, &nt) != 0) {
            bad++;
            continue;
        }
        size_t m = detok(v, rid, nt, flags != 0, out, sizeof(out));
        if (m != w || memcmp(out, want, w) != 0)
            bad++;
    }
    CHECK(bad == 0, "Gemma 4 random round trip: %d failures", bad);
}

static int main_vocab(const char *vocab_path, const char *rows_path, bool spm, bool gemma,
                      bool gemma4) {
    gguf_file *f;
    eng_error err = { "" };
    if (gguf_open(vocab_path, &f, &err) < 0) {
        fprintf(stderr, "FAIL: gguf_open %s: %s\n", vocab_path, err.msg);
        return 1;
    }
    eng_vocab *v;
    int r = eng_vocab_load(f, &v, &err);
    gguf_close(f);
    if (r < 0) {
        fprintf(stderr, "FAIL: eng_vocab_load: %d %s\n", r, err.msg);
        return 1;
    }
    if (spm)
        test_spm_facts(v, gemma);
    if (gemma4)
        test_gemma4_facts(v);
    size_t n_rows;
    row *rows = load_rows(rows_path, &n_rows);
    if (!rows || n_rows < 50) {
        fprintf(stderr, "FAIL: too few rows in %s\n", rows_path);
        return 1;
    }
    int n_held = 0;
    for (size_t i = 0; i < n_rows; i++) {
        CHECK(rows[i].want, "line %d: no pieces column", rows[i].line);
        if (rows[i].want)
            check_row_vocab(v, &rows[i], &n_held);
    }
    CHECK(n_held > 0, "no token ended inside a UTF-8 sequence; the streaming check proved nothing");
    for (size_t i = 0; i < n_rows; i++) {
        free(rows[i].text);
        free(rows[i].want);
        free(rows[i].ids);
    }
    free(rows);
    eng_vocab_free(v);
    printf("%s: %zu rows, %d held-back UTF-8 tails, %d failures\n", vocab_path, n_rows, n_held, failures);
    return failures ? 1 : 0;
}

/* ---- two threads over one vocabulary ---- */

struct thread_arg {
    const eng_vocab *v;
    const row *rows;
    size_t n_rows;
    int bad;
};

static void *thread_main(void *p) {
    struct thread_arg *a = p;
    int32_t *got = malloc(MAX_IDS * sizeof(int32_t));
    for (int rep = 0; rep < 3; rep++)
        for (size_t i = 0; i < a->n_rows; i++) {
            const row *r = &a->rows[i];
            size_t n = 0;
            int rc = eng_vocab_tokenize(a->v, r->text, r->len, r->parse_special ? ENG_TOK_PARSE_SPECIAL : 0, got,
                                        MAX_IDS, &n);
            if (rc != 0 || n != r->n_ids || memcmp(got, r->ids, n * sizeof(int32_t)))
                a->bad++;
        }
    free(got);
    return NULL;
}

int main(int argc, char **argv) {
    const bool gemma = argc == 5 && !strcmp(argv[4], "--spm-gemma");
    const bool gemma4 = argc == 5 && !strcmp(argv[4], "--gemma4");
    if ((argc == 4 || (argc == 5 && (!strcmp(argv[4], "--spm") || gemma || gemma4))) &&
        strcmp(argv[1], "--vocab") == 0)
        return main_vocab(argv[2], argv[3], argc == 5 && !gemma4, gemma, gemma4);
    if (argc != 2) {
        fprintf(stderr,
                "usage: %s tokenizer-smollm2.tsv | --vocab VOCAB.gguf ROWS.tsv"
                " [--spm | --spm-gemma | --gemma4]\n",
                argv[0]);
        return 1;
    }
    test_utf8_prefix();
    test_synthetic();

    char pbuf[4096];
    const char *mp = model_path(pbuf, sizeof(pbuf));
    if (!mp || access(mp, R_OK) != 0) {
        fprintf(stderr, "SKIP: model not found (%s); run scripts/fetch-model.sh\n", mp ? mp : "?");
        return failures ? 1 : 77;
    }
    gguf_file *f;
    eng_error err = { "" };
    if (gguf_open(mp, &f, &err) < 0) {
        fprintf(stderr, "FAIL: gguf_open %s: %s\n", mp, err.msg);
        return 1;
    }
    eng_vocab *v;
    int r = eng_vocab_load(f, &v, &err);
    gguf_close(f); /* the vocabulary must not point into the file */
    if (r < 0) {
        fprintf(stderr, "FAIL: eng_vocab_load: %d %s\n", r, err.msg);
        return 1;
    }
    test_vocab_facts(v);
    find_missing_bytes(v);
    test_random_roundtrip(v);

    size_t n_rows;
    row *rows = load_rows(argv[1], &n_rows);
    if (!rows || n_rows < 50) {
        fprintf(stderr, "FAIL: too few rows in %s\n", argv[1]);
        return 1;
    }
    int n_held = 0;
    for (size_t i = 0; i < n_rows; i++)
        check_row(v, &rows[i], &n_held);
    /* The corpus has emoji split over several byte tokens: the streaming
     * check must have held bytes back at least once to mean anything. */
    CHECK(n_held > 0, "no token ended inside a UTF-8 sequence; the streaming check proved nothing");

    struct thread_arg a[2] = { { v, rows, n_rows, 0 }, { v, rows, n_rows, 0 } };
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, thread_main, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK(a[0].bad == 0 && a[1].bad == 0, "concurrent tokenize: %d/%d mismatches", a[0].bad, a[1].bad);

    for (size_t i = 0; i < n_rows; i++) {
        free(rows[i].text);
        free(rows[i].ids);
    }
    free(rows);
    eng_vocab_free(v);
    printf("%zu rows, %d held-back UTF-8 tails, %d failures\n", n_rows, n_held, failures);
    return failures ? 1 : 0;
}
