/* Vocabulary and tokenizers: byte-level BPE ("gpt2"), SentencePiece
 * ("llama": Llama 2, Mistral, TinyLlama, Gemma...) and Gemma 4's BPE over
 * raw UTF-8 ("gemma4").
 *
 * Pipeline of eng_vocab_tokenize() for byte-level BPE:
 *   1. special-token partition: the text is cut at every occurrence of a
 *      control/user-defined token (longest token first, each token over all
 *      remaining text fragments, as llama.cpp does); without
 *      ENG_TOK_PARSE_SPECIAL only user-defined tokens are cut out;
 *   2. each text fragment is made valid UTF-8 (a malformed byte becomes
 *      U+FFFD, as llama.cpp does) and split by the pre-tokenizer's regexes
 *      (PCRE2, UTF + UCP); a pre-tokenizer is a list of regexes, each one
 *      splitting the pieces of the previous one, with the text between
 *      matches kept as pieces of its own;
 *   3. each piece is mapped through the GPT-2 byte-to-unicode table and
 *      merged by BPE rank (lowest rank first, leftmost first on ties).
 *
 * SentencePiece vocabularies (llama.cpp's "SPM") have no pre-tokenizer and
 * no merge list: after the same special-token partition, each text fragment
 * (it starts the input or follows a special token) gets a leading space
 * (tokenizer.ggml.add_space_prefix, default on), its spaces become U+2581
 * ("\xe2\x96\x81"), and its characters are merged pairwise, the pair whose
 * concatenation is the token of highest score first (leftmost on ties),
 * while any such pair exists. A symbol that is no token is spelled by its
 * bytes' <0xXX> tokens. Malformed UTF-8 is not replaced: a stray byte is a
 * symbol of its own, as in llama.cpp.
 *
 * Gemma 4 ("gemma4", llama.cpp's BPE with its GEMMA4 pre-tokenizer, also
 * reached by tokenizer.ggml.pre "gemma4") is BPE by merge rank over raw
 * UTF-8 characters, no byte map: after the special-token partition, each
 * text fragment has its spaces made U+2581 (no space put first), malformed
 * UTF-8 replaced by U+FFFD, and is cut into runs of newlines and runs of
 * anything else ("[^\n]+|[\n]+"); a run of newlines that is a token is that
 * token, unmerged. A symbol left that is no token is spelled by its bytes'
 * <0xXX> tokens (a byte without one is dropped, <unk> is never used), and
 * pieces turn U+2581 back into spaces. BOS is always added. Checked against
 * llama.cpp with tests/data/vocab-gemma4.gguf (tests/data/README.md).
 *
 * The vocabulary is immutable after load and shared across threads: every
 * tokenize call owns its scratch memory, nothing global is mutable.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include "error.h"
#include "utf8.h"
#include "vocab.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a file may ask of us. */
#define VOCAB_MAX_TOKENS   (1u << 22)   /* 4M tokens: 30x the largest vocabularies in use */
#define VOCAB_MAX_MERGES   (1u << 23)
#define VOCAB_MAX_TOKEN_LEN 4096u       /* bytes of one token's text */
#define VOCAB_MAX_TEXT     ((size_t)1 << 28) /* bytes one tokenize call accepts */
#define VOCAB_MAX_REGEX    3

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

enum tok_type {
    TOK_UNDEFINED = 0,
    TOK_NORMAL = 1,
    TOK_UNKNOWN = 2,
    TOK_CONTROL = 3,
    TOK_USER_DEFINED = 4,
    TOK_UNUSED = 5,
    TOK_BYTE = 6,
};

enum pre_type {
    PRE_GPT2,
    PRE_SMOLLM,
    PRE_LLAMA3,
    PRE_QWEN2,
    PRE_TEKKEN,
    PRE_GPT4O,
    PRE_HUNYUAN,
    PRE_QWEN35,
    PRE_GEMMA4,
};

/* Published patterns (Hugging Face tokenizer.json), with the case-insensitive
 * contraction group spelled out in ASCII as llama.cpp does, so that e.g.
 * U+017F (long s, which case-folds to 's') does not count as a contraction. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen3.5's: Qwen2's with combining marks inside words (llama.cpp splits
 * it by hand with the same classes) */
#define RE_QWEN35 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Mistral Nemo's ("tekken") and GPT-4o's o200k ("gpt-4o": Phi-4-mini):
 * words split at case changes. llama.cpp, the reference, runs these as
 * rewritten patterns (its regex engine has no \p{Lu}): an "upper" letter
 * is any letter but a-z and a "lower" one any letter but A-Z, so a
 * non-ASCII capital ends a piece ("ÉCOLE": "É" + "COLE"), and a combining
 * mark is no letter (it splits off as punctuation). Hugging Face's
 * tokenizers, with the published \p{Lu}/\p{Ll}/\p{M} classes, keep both
 * words whole; we follow llama.cpp. gpt-4o adds the contraction as a
 * suffix of the word, and digits in threes. */
#define RE_UPPER "(?=\\p{L})[^a-z]"
#define RE_LOWER "(?=\\p{L})[^A-Z]"
#define RE_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?(?:" RE_UPPER ")*(?:" RE_LOWER ")+" \
    "|[^\\r\\n\\p{L}\\p{N}]?(?:" RE_UPPER ")+(?:" RE_LOWER ")*" \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O "[^\\r\\n\\p{L}\\p{N}]?(?:" RE_UPPER ")*(?:" RE_LOWER ")+" RE_CONTRACTIONS "?" \
    "|[^\\r\\n\\p{L}\\p{N}]?(?:" RE_UPPER ")+(?:" RE_LOWER ")*" RE_CONTRACTIONS "?" \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Hunyuan's dense models ("hunyuan-dense"), as llama.cpp runs them: digits
 * in threes, runs of CJK ideographs and kana, then words (a punctuation
 * mark may lead ASCII letters, a character neither letter, punctuation nor
 * symbol may lead letters and marks) */
#define RE_HY_DIGITS "\\p{N}{1,3}"
#define RE_HY_CJK "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+"
#define RE_HUNYUAN "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+" \
    "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+" \
    "|\\s+(?!\\S)|\\s+"

static const struct pre_def {
    const char *name;
    enum pre_type type;
    bool ignore_merges; /* a piece that is a whole token is taken as is (llama3) */
    bool add_bos;       /* default of tokenizer.ggml.add_bos_token */
    int n_re;
    const char *re[VOCAB_MAX_REGEX];
    int force_bos;      /* whatever the file says, as llama.cpp has the family: 1 BOS
                         * added, -1 none; 0 the file's add_bos_token */
} pre_defs[] = {
    { "gpt2", PRE_GPT2, false, false, 1, { RE_GPT2 }, 0 },
    /* SmolLM2's tokenizer.json: Digits(individual) then ByteLevel. */
    { "smollm", PRE_SMOLLM, false, false, 2, { "\\p{N}", RE_GPT2 }, 0 },
    { "llama-bpe", PRE_LLAMA3, true, true, 1, { RE_LLAMA3 }, 0 },
    /* GLM-4's: Llama 3's pattern and shortcut, no BOS (llama.cpp: none,
     * whatever the file says; its template opens with [gMASK]<sop>) */
    { "glm4", PRE_LLAMA3, true, false, 1, { RE_LLAMA3 }, -1 },
    /* Llama 3's pattern without its whole-token shortcut (llama.cpp's
     * DBRX type): OLMo 2's files say dbrx */
    { "dbrx", PRE_LLAMA3, false, false, 1, { RE_LLAMA3 }, 0 },
    { "qwen2", PRE_QWEN2, false, false, 1, { RE_QWEN2 }, 0 },
    { "qwen35", PRE_QWEN35, false, false, 1, { RE_QWEN35 }, 0 },
    { "tekken", PRE_TEKKEN, true, true, 1, { RE_TEKKEN }, 0 },
    { "gpt-4o", PRE_GPT4O, false, false, 1, { RE_GPT4O }, 0 },
    { "hunyuan-dense", PRE_HUNYUAN, false, false, 3, { RE_HY_DIGITS, RE_HY_CJK, RE_HUNYUAN }, 0 },
    /* Gemma 4's: BPE runs over whole lines, only newlines cut (see the top);
     * BOS even where the file says not to (llama.cpp's workaround for such
     * files: Gemma 4 needs it) */
    { "gemma4", PRE_GEMMA4, false, true, 1, { "[^\\n]+|[\\n]+" }, 1 },
};

static const struct pre_alias {
    const char *alias, *name;
} pre_aliases[] = {
    /* the names llama.cpp gives the same pattern (its llama-vocab.cpp) */
    { "gpt-2", "gpt2" },
    { "default", "gpt2" },
    { "phi-2", "gpt2" },
    { "mellum", "gpt2" },
    { "exaone4", "gpt2" },
    { "olmo", "gpt2" },
    { "smaug-bpe", "dbrx" },
    { "llama3", "llama-bpe" },
    { "llama-v3", "llama-bpe" },
    { "falcon3", "llama-bpe" },   /* Falcon3 1B-10B: llama layers */
    { "falcon-h1", "llama-bpe" },
    { "pixtral", "llama-bpe" },
    { "midm-2.0", "llama-bpe" },
    { "lfm2", "llama-bpe" },
    { "glm5", "glm4" },
    { "deepseek-r1-qwen", "qwen2" }, /* DeepSeek-R1-Distill-Qwen: qwen2 layers */
    { "megrez", "qwen2" },
    { "kormo", "qwen2" },
    { "llama4", "gpt-4o" },
    /* SmolLM2's pattern under other names: Granite 3.x files say refact */
    { "refact", "smollm" },
    { "starcoder", "smollm" },
    { "command-r", "smollm" },
    { "codeshell", "smollm" },
    { "exaone", "smollm" },
    { "granite-embed-multi-311m", "gemma4" },
};

static const struct pre_def *pre_find(const char *name) {
    for (size_t i = 0; i < sizeof(pre_aliases) / sizeof(pre_aliases[0]); i++)
        if (strcmp(name, pre_aliases[i].alias) == 0) {
            name = pre_aliases[i].name;
            break;
        }
    for (size_t i = 0; i < sizeof(pre_defs) / sizeof(pre_defs[0]); i++)
        if (strcmp(name, pre_defs[i].name) == 0)
            return &pre_defs[i];
    return NULL;
}

/* Compiled pre-tokenizer: immutable after creation, safe to share. */
typedef struct pretok {
    const struct pre_def *def;
    pcre2_code *re[VOCAB_MAX_REGEX];
} pretok;

typedef struct span {
    uint32_t off, len;
} span;

struct eng_vocab {
    bool spm;            /* SentencePiece ("llama"), else byte-level BPE */
    bool add_space_prefix; /* SPM: " " before each text fragment */
    bool raw_bpe;        /* BPE over raw UTF-8, spaces as U+2581 (Gemma 4) */
    float *score;        /* SPM: [n_tokens] merge priority, higher first */
    int32_t byte_tok[256]; /* SPM, raw_bpe: the <0xXX> token of each byte, or -1 */
    int32_t n_tokens;
    char *text;          /* token texts, back to back */
    span *tok;           /* [n_tokens] token text inside text */
    uint8_t *type;       /* [n_tokens] enum tok_type */
    uint8_t *eog;        /* [n_tokens] 1 for end-of-generation tokens */
    char *piece;         /* decoded pieces (bytes), back to back */
    span *tok_piece;     /* [n_tokens] */

    uint32_t *tok_hash;  /* open addressing: id + 1, 0 empty */
    uint32_t tok_mask;

    char *merge_text;    /* merge strings copied from the file */
    struct merge {
        uint32_t left_off, left_len, right_off, right_len;
    } *merges;           /* rank = index */
    uint32_t n_merges;
    uint32_t *merge_hash; /* rank + 1, 0 empty */
    uint32_t merge_mask;

    int32_t *special;    /* control / user-defined / unknown ids, longest text first */
    size_t n_special;
    uint8_t *rstrip;     /* [n_tokens] 1: whitespace after this special token is dropped
                          * (Phi-3's tokens, as llama.cpp sets them); NULL: none */
    uint8_t *shown;      /* [n_tokens] 1: a control token answers print as text
                          * (eng_vocab_show); NULL: none */

    int32_t bos, eos, unk, pad;
    bool add_bos, add_eos;
    pretok pre;
};

/* ---- errors ---------------------------------------------------------- */

/* ---- GPT-2 byte <-> unicode ------------------------------------------ */

/* Printable bytes stand for themselves; the other 68 bytes are moved to
 * U+0100.. in byte order, so that every byte has a visible character. */
static uint32_t byte_to_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae)
        return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae))
            n++;
    return 256 + n;
}

typedef struct byte_map {
    char enc[256][2]; /* UTF-8 of byte_to_cp(b) */
    uint8_t enc_len[256];
    int16_t dec[324];  /* code point -> byte, -1 none (max code point is 0x143) */
} byte_map;

static void byte_map_init(byte_map *m) {
    for (int i = 0; i < 324; i++)
        m->dec[i] = -1;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = byte_to_cp((uint8_t)b);
        if (cp < 0x80) {
            m->enc[b][0] = (char)cp;
            m->enc_len[b] = 1;
        } else {
            m->enc[b][0] = (char)(0xc0 | (cp >> 6));
            m->enc[b][1] = (char)(0x80 | (cp & 0x3f));
            m->enc_len[b] = 2;
        }
        m->dec[cp] = (int16_t)b;
    }
}

/* ---- UTF-8 ----------------------------------------------------------- */

static size_t utf8_len(uint8_t lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xe0) == 0xc0) return 2;
    if ((lead & 0xf0) == 0xe0) return 3;
    if ((lead & 0xf8) == 0xf0) return 4;
    return 1;
}

/* Decodes one code point at s[0..n) (n >= 1). Returns its length, or 0 for a
 * malformed sequence (bad lead, missing continuation, surrogate, > U+10FFFF).
 * Overlong forms are accepted as llama.cpp accepts them. */
static size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v;
    if ((c & 0xe0) == 0xc0) {
        len = 2;
        v = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        v = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4;
        v = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}


/* Copies s[0..n) to out as valid, shortest-form UTF-8; a byte that does not
 * start a well-formed sequence becomes U+FFFD, and with spm_spaces a space
 * becomes U+2581 (the same as escaping first: a space never continues a
 * sequence, nor does U+2581's lead byte). out needs 3 * n bytes. */
static size_t utf8_sanitize(const char *s, size_t n, bool spm_spaces, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (spm_spaces && s[i] == ' ') {
            memcpy(out + o, SPM_SPACE, 3);
            o += 3;
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = utf8_decode((const uint8_t *)s + i, n - i, &cp);
        if (l == 0) {
            cp = 0xfffd;
            l = 1;
        }
        o += eng__utf8_encode(cp, out + o);
        i += l;
    }
    return o;
}

size_t eng_utf8_complete_prefix(const char *buf, size_t n) {
    if (!buf)
        return 0;
    /* Find the last lead byte among the final four; if the sequence it starts
     * needs more bytes than follow it, hold it back. Stray bytes that no
     * continuation can complete are passed through. */
    size_t lim = n < 4 ? n : 4;
    for (size_t k = 1; k <= lim; k++) {
        uint8_t c = (uint8_t)buf[n - k];
        if ((c & 0xc0) == 0x80)
            continue;
        if (c < 0x80)
            return n;
        size_t need;
        if ((c & 0xe0) == 0xc0) need = 2;
        else if ((c & 0xf0) == 0xe0) need = 3;
        else if ((c & 0xf8) == 0xf0) need = 4;
        else return n;
        return k < need ? n - k : n;
    }
    return n;
}

/* ---- hashing --------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV_INIT 0xcbf29ce484222325ull

static uint64_t hash_pair(const char *a, size_t na, const char *b, size_t nb) {
    uint64_t h = fnv(FNV_INIT, a, na);
    h ^= 0xff; /* separator: a byte that never occurs in UTF-8 */
    h *= 0x100000001b3ull;
    return fnv(h, b, nb);
}

static uint32_t table_size(uint32_t n) {
    uint32_t s = 16;
    while (s < 2 * n)
        s <<= 1;
    return s;
}

static int32_t lookup_token(const eng_vocab *v, const char *s, size_t n) {
    uint32_t i = (uint32_t)fnv(FNV_INIT, s, n) & v->tok_mask;
    for (;;) {
        uint32_t e = v->tok_hash[i];
        if (e == 0)
            return -1;
        const span *t = &v->tok[e - 1];
        if (t->len == n && memcmp(v->text + t->off, s, n) == 0)
            return (int32_t)(e - 1);
        i = (i + 1) & v->tok_mask;
    }
}

static int32_t lookup_merge(const eng_vocab *v, const char *a, size_t na, const char *b, size_t nb) {
    if (v->n_merges == 0)
        return -1;
    uint32_t i = (uint32_t)hash_pair(a, na, b, nb) & v->merge_mask;
    for (;;) {
        uint32_t e = v->merge_hash[i];
        if (e == 0)
            return -1;
        const struct merge *m = &v->merges[e - 1];
        if (m->left_len == na && m->right_len == nb && memcmp(v->merge_text + m->left_off, a, na) == 0 &&
            memcmp(v->merge_text + m->right_off, b, nb) == 0)
            return (int32_t)(e - 1);
        i = (i + 1) & v->merge_mask;
    }
}

/* ---- pre-tokenizer ----------------------------------------------------- */

static void pretok_fini(pretok *p) {
    for (int i = 0; i < VOCAB_MAX_REGEX; i++) {
        pcre2_code_free(p->re[i]);
        p->re[i] = NULL;
    }
}

static int pretok_init(pretok *p, const struct pre_def *def, eng_error *err) {
    memset(p, 0, sizeof(*p));
    p->def = def;
    for (int i = 0; i < def->n_re; i++) {
        int ec;
        PCRE2_SIZE eo;
        p->re[i] = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo,
                                 NULL);
        if (!p->re[i]) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(ec, msg, sizeof(msg));
            pretok_fini(p);
            return eng__set_err(err, -EINVAL, "pre-tokenizer '%s': regex %d does not compile at %zu: %s", def->name, i,
                                (size_t)eo, (const char *)msg);
        }
        /* JIT is an optimization only: without it pcre2_match interprets. */
        (void)pcre2_jit_compile(p->re[i], PCRE2_JIT_COMPLETE);
    }
    return 0;
}

typedef int (*piece_fn)(void *ud, const char *s, size_t n);

typedef struct split_ctx {
    const pretok *p;
    pcre2_match_data *md;
    piece_fn fn;
    void *ud;
} split_ctx;

static int split_stage(split_ctx *c, int stage, const char *s, size_t n);

static int split_emit(split_ctx *c, int stage, const char *s, size_t n) {
    if (n == 0)
        return 0;
    if (stage + 1 < c->p->def->n_re)
        return split_stage(c, stage + 1, s, n);
    return c->fn(c->ud, s, n);
}

/* Runs regex `stage` over s[0..n) (valid UTF-8), passing matches and the
 * text between them, in order, to the next stage. The piece is the whole
 * subject, so lookaheads stop at its end (as in llama.cpp). */
static int split_stage(split_ctx *c, int stage, const char *s, size_t n) {
    const pcre2_code *re = c->p->re[stage];
    size_t pos = 0, gap = 0;
    while (pos < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAPLIMIT ? -ENOMEM : -EINVAL;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (ms < pos || me < ms || me > n)
            return -EINVAL;
        if (me == ms) {
            /* An empty match would not advance: step over one character,
             * which stays part of the gap. */
            pos = ms + utf8_len((uint8_t)s[ms]);
            if (pos > n)
                pos = n;
            continue;
        }
        int r = split_emit(c, stage, s + gap, ms - gap);
        if (r < 0)
            return r;
        if ((r = split_emit(c, stage, s + ms, me - ms)) < 0)
            return r;
        pos = gap = me;
    }
    return split_emit(c, stage, s + gap, n - gap);
}

/* Splits valid UTF-8 text into pieces. */
static int pretok_split(const pretok *p, const char *s, size_t n, piece_fn fn, void *ud) {
    if (n == 0)
        return 0;
    split_ctx c = { p, pcre2_match_data_create(1, NULL), fn, ud };
    if (!c.md)
        return -ENOMEM;
    int r = split_stage(&c, 0, s, n);
    pcre2_match_data_free(c.md);
    return r;
}

struct pretok_cb {
    void (*cb)(void *ud, const char *piece, size_t len);
    void *ud;
};

static int pretok_cb_fn(void *ud, const char *s, size_t n) {
    struct pretok_cb *c = ud;
    c->cb(c->ud, s, n);
    return 0;
}

int eng_pretokenize(const char *pre_name, const char *text, size_t len,
                    void (*cb)(void *ud, const char *piece, size_t len), void *ud) {
    if (!pre_name || !cb || (!text && len) || len > VOCAB_MAX_TEXT)
        return -EINVAL;
    const struct pre_def *def = pre_find(pre_name);
    if (!def)
        return -ENOTSUP;
    pretok p;
    int r = pretok_init(&p, def, NULL);
    if (r < 0)
        return r;
    char *clean = malloc(3 * len + 1);
    if (!clean) {
        pretok_fini(&p);
        return -ENOMEM;
    }
    size_t n = utf8_sanitize(text, len, false, clean);
    struct pretok_cb c = { cb, ud };
    r = pretok_split(&p, clean, n, pretok_cb_fn, &c);
    free(clean);
    pretok_fini(&p);
    return r;
}

/* ---- load ------------------------------------------------------------ */

void eng_vocab_free(eng_vocab *v) {
    if (!v)
        return;
    free(v->text);
    free(v->tok);
    free(v->type);
    free(v->eog);
    free(v->piece);
    free(v->tok_piece);
    free(v->tok_hash);
    free(v->merge_text);
    free(v->merges);
    free(v->merge_hash);
    free(v->special);
    free(v->score);
    free(v->rstrip);
    free(v->shown);
    pretok_fini(&v->pre);
    free(v);
}

/* Reads an optional token id; absent or out of range leaves *id as is. */
static int load_id(const gguf_file *f, const char *key, int32_t n_tokens, int32_t *id, eng_error *err) {
    uint32_t u;
    int r = gguf_get_u32(f, key, &u);
    if (r == -ENOENT)
        return 0;
    if (r < 0) {
        int32_t s;
        /* -1 written as a signed value means "none" in some converters. */
        if (gguf_get_i32(f, key, &s) == 0 && s < 0)
            return 0;
        return eng__set_err(err, -EINVAL, "%s: not an unsigned integer", key);
    }
    if (u < (uint32_t)n_tokens)
        *id = (int32_t)u;
    return 0;
}

static int load_bool(const gguf_file *f, const char *key, bool *val, eng_error *err) {
    bool b;
    int r = gguf_get_bool(f, key, &b);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return eng__set_err(err, -EINVAL, "%s: not a bool", key);
    *val = b;
    return 0;
}

static int load_tokens(eng_vocab *v, const gguf_file *f, eng_error *err) {
    enum gguf_type et;
    uint64_t n;
    int r = gguf_get_arr_info(f, "tokenizer.ggml.tokens", &et, &n);
    if (r == -ENOENT)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.tokens missing");
    if (r < 0 || et != GGUF_TYPE_STRING)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.tokens: not an array of strings");
    if (n == 0 || n > VOCAB_MAX_TOKENS)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.tokens: %llu tokens (expected 1..%u)", (unsigned long long)n,
                            VOCAB_MAX_TOKENS);
    v->n_tokens = (int32_t)n;

    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if ((r = gguf_get_arr_str(f, "tokenizer.ggml.tokens", i, &s, &len)) < 0)
            return eng__set_err(err, -EINVAL, "tokenizer.ggml.tokens[%llu]: unreadable", (unsigned long long)i);
        if (len > VOCAB_MAX_TOKEN_LEN)
            return eng__set_err(err, -EINVAL, "tokenizer.ggml.tokens[%llu]: %zu bytes (max %u)", (unsigned long long)i, len,
                                VOCAB_MAX_TOKEN_LEN);
        total += len;
    }
    /* total <= 4M * 4096 = 16 GiB would overflow span offsets: bound it. */
    if (total > UINT32_MAX)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.tokens: %zu bytes of text", total);

    v->text = malloc(total + 1);
    v->tok = calloc(n, sizeof(*v->tok));
    v->type = malloc(n);
    v->eog = calloc(n, 1);
    v->tok_mask = table_size((uint32_t)n) - 1;
    v->tok_hash = calloc((size_t)v->tok_mask + 1, sizeof(*v->tok_hash));
    if (!v->text || !v->tok || !v->type || !v->eog || !v->tok_hash)
        return eng__set_err(err, -ENOMEM, "out of memory for %llu tokens", (unsigned long long)n);

    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        gguf_get_arr_str(f, "tokenizer.ggml.tokens", i, &s, &len);
        memcpy(v->text + off, s, len);
        v->tok[i] = (span){ (uint32_t)off, (uint32_t)len };
        off += len;
        if (len == 0)
            continue; /* an empty token can never be produced from text */
        /* A later token with the same text wins, as in llama.cpp. */
        uint32_t h = (uint32_t)fnv(FNV_INIT, s, len) & v->tok_mask;
        for (;;) {
            uint32_t e = v->tok_hash[h];
            if (e == 0 || (v->tok[e - 1].len == len && memcmp(v->text + v->tok[e - 1].off, s, len) == 0)) {
                v->tok_hash[h] = (uint32_t)i + 1;
                break;
            }
            h = (h + 1) & v->tok_mask;
        }
    }

    memset(v->type, TOK_NORMAL, n);
    uint64_t nt;
    r = gguf_get_arr_info(f, "tokenizer.ggml.token_type", &et, &nt);
    if (r == 0) {
        if (nt < n)
            return eng__set_err(err, -EINVAL, "tokenizer.ggml.token_type: %llu entries for %llu tokens",
                                (unsigned long long)nt, (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            int32_t t;
            if (gguf_get_arr_i32(f, "tokenizer.ggml.token_type", i, &t) < 0)
                return eng__set_err(err, -EINVAL, "tokenizer.ggml.token_type[%llu]: not an integer",
                                    (unsigned long long)i);
            v->type[i] = (t >= TOK_NORMAL && t <= TOK_BYTE) ? (uint8_t)t : TOK_UNDEFINED;
        }
    } else if (r != -ENOENT) {
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.token_type: not an array");
    }
    return 0;
}

static int load_merges(eng_vocab *v, const gguf_file *f, eng_error *err) {
    enum gguf_type et;
    uint64_t n;
    int r = gguf_get_arr_info(f, "tokenizer.ggml.merges", &et, &n);
    if (r == -ENOENT)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.merges missing (required by a BPE vocabulary)");
    if (r < 0 || et != GGUF_TYPE_STRING)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.merges: not an array of strings");
    if (n > VOCAB_MAX_MERGES)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.merges: %llu merges (max %u)", (unsigned long long)n,
                            VOCAB_MAX_MERGES);
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (gguf_get_arr_str(f, "tokenizer.ggml.merges", i, &s, &len) < 0)
            return eng__set_err(err, -EINVAL, "tokenizer.ggml.merges[%llu]: unreadable", (unsigned long long)i);
        if (len > 2 * VOCAB_MAX_TOKEN_LEN + 1)
            return eng__set_err(err, -EINVAL, "tokenizer.ggml.merges[%llu]: %zu bytes", (unsigned long long)i, len);
        total += len;
    }
    if (total > UINT32_MAX)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.merges: %zu bytes of text", total);
    v->merge_text = malloc(total + 1);
    v->merges = calloc(n ? n : 1, sizeof(*v->merges));
    v->merge_mask = table_size((uint32_t)n) - 1;
    v->merge_hash = calloc((size_t)v->merge_mask + 1, sizeof(*v->merge_hash));
    if (!v->merge_text || !v->merges || !v->merge_hash)
        return eng__set_err(err, -ENOMEM, "out of memory for %llu merges", (unsigned long long)n);

    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        gguf_get_arr_str(f, "tokenizer.ggml.merges", i, &s, &len);
        /* "left right", split at the first space after the first byte (a
         * left part may itself be a space in non-byte-level vocabularies). */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp)
            continue; /* malformed: keeps its rank, can never match */
        size_t ll = (size_t)(sp - s), rl = len - ll - 1;
        memcpy(v->merge_text + off, s, len);
        uint32_t rank = (uint32_t)i;
        v->merges[rank] = (struct merge){ (uint32_t)off, (uint32_t)ll, (uint32_t)(off + ll + 1), (uint32_t)rl };
        off += len;
        /* The first (lowest-rank) occurrence of a pair wins. */
        uint32_t h = (uint32_t)hash_pair(s, ll, sp + 1, rl) & v->merge_mask;
        for (;;) {
            uint32_t e = v->merge_hash[h];
            if (e == 0) {
                v->merge_hash[h] = rank + 1;
                break;
            }
            const struct merge *m = &v->merges[e - 1];
            if (m->left_len == ll && m->right_len == rl && memcmp(v->merge_text + m->left_off, s, ll) == 0 &&
                memcmp(v->merge_text + m->right_off, sp + 1, rl) == 0)
                break;
            h = (h + 1) & v->merge_mask;
        }
    }
    v->n_merges = (uint32_t)n;
    return 0;
}

/* SPM: the merge scores (absent: all 0, as llama.cpp reads them) and the
 * token of each byte: "<0xAB>", else the byte itself as a token, else none. */
static int load_spm(eng_vocab *v, const gguf_file *f, eng_error *err) {
    v->score = calloc((uint32_t)v->n_tokens, sizeof(*v->score));
    if (!v->score)
        return eng__set_err(err, -ENOMEM, "out of memory for token scores");
    enum gguf_type et;
    uint64_t n;
    int r = gguf_get_arr_info(f, "tokenizer.ggml.scores", &et, &n);
    if (r == 0) {
        if (n < (uint64_t)v->n_tokens)
            return eng__set_err(err, -EINVAL, "tokenizer.ggml.scores: %llu entries for %d tokens",
                                (unsigned long long)n, v->n_tokens);
        for (int32_t i = 0; i < v->n_tokens; i++) {
            float x;
            if (gguf_get_arr_f32(f, "tokenizer.ggml.scores", (uint64_t)i, &x) < 0)
                return eng__set_err(err, -EINVAL, "tokenizer.ggml.scores[%d]: not a number", i);
            /* a NaN would make the merge order depend on the heap's shape */
            v->score[i] = x == x ? x : -INFINITY;
        }
    } else if (r != -ENOENT) {
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.scores: not an array");
    }
    for (int b = 0; b < 256; b++) {
        char hex[8], raw = (char)b;
        snprintf(hex, sizeof(hex), "<0x%02X>", b);
        int32_t id = lookup_token(v, hex, 6);
        v->byte_tok[b] = id >= 0 ? id : lookup_token(v, &raw, 1);
    }
    if ((r = load_bool(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err)) < 0)
        return r;
    return 0;
}

/* Precomputes every token's bytes, so token_to_piece is a copy. */
static int build_pieces(eng_vocab *v, eng_error *err) {
    byte_map bm;
    byte_map_init(&bm);
    size_t total = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        total += v->tok[i].len; /* decoding never grows a token */
    v->piece = malloc(total + 1);
    v->tok_piece = calloc((uint32_t)v->n_tokens, sizeof(*v->tok_piece));
    if (!v->piece || !v->tok_piece)
        return eng__set_err(err, -ENOMEM, "out of memory for token pieces");
    size_t off = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const char *s = v->text + v->tok[i].off;
        size_t n = v->tok[i].len, start = off;
        switch (v->type[i]) {
        case TOK_CONTROL:
        case TOK_UNKNOWN:
        case TOK_USER_DEFINED:
            memcpy(v->piece + off, s, n);
            off += n;
            break;
        case TOK_BYTE:
            /* "<0xAB>" or the byte's mapped character. */
            if (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
                unsigned b;
                if (sscanf(s + 3, "%2x", &b) == 1) {
                    v->piece[off++] = (char)b;
                    break;
                }
            }
            /* fall through */
        case TOK_NORMAL:
            if (v->spm || v->raw_bpe) {
                /* U+2581 stands for a space; everything else is as written */
                for (size_t j = 0; j < n;) {
                    if (n - j >= 3 && memcmp(s + j, SPM_SPACE, 3) == 0) {
                        v->piece[off++] = ' ';
                        j += 3;
                    } else {
                        v->piece[off++] = s[j++];
                    }
                }
                break;
            }
            for (size_t j = 0; j < n;) {
                uint32_t cp;
                size_t l = utf8_decode((const uint8_t *)s + j, n - j, &cp);
                if (l == 0) {
                    v->piece[off++] = s[j++];
                    continue;
                }
                if (cp < 324 && bm.dec[cp] >= 0) {
                    v->piece[off++] = (char)bm.dec[cp];
                } else {
                    /* Not a byte-level character: keep its UTF-8 as is. */
                    memcpy(v->piece + off, s + j, l);
                    off += l;
                }
                j += l;
            }
            break;
        default: /* unused, undefined: no text */
            break;
        }
        v->tok_piece[i] = (span){ (uint32_t)start, (uint32_t)(off - start) };
    }
    return 0;
}

static int cmp_special(const void *a, const void *b, void *ud) {
    const eng_vocab *v = ud;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (v->tok[x].len != v->tok[y].len)
        return v->tok[x].len > v->tok[y].len ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int build_special(eng_vocab *v, eng_error *err) {
    size_t n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint8_t t = v->type[i];
        if ((t == TOK_CONTROL || t == TOK_USER_DEFINED || t == TOK_UNKNOWN) && v->tok[i].len)
            n++;
    }
    v->special = malloc((n ? n : 1) * sizeof(*v->special));
    if (!v->special)
        return eng__set_err(err, -ENOMEM, "out of memory");
    n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint8_t t = v->type[i];
        if ((t == TOK_CONTROL || t == TOK_USER_DEFINED || t == TOK_UNKNOWN) && v->tok[i].len)
            v->special[n++] = i;
    }
    v->n_special = n;
    qsort_r(v->special, n, sizeof(*v->special), cmp_special, v);
    return 0;
}

/* End-of-generation tokens: EOS and those named so (llama.cpp's list). A
 * named one becomes a control token whatever the file says, as llama.cpp
 * makes it: Gemma 4's converter writes <|tool_response> user-defined, and
 * llama.cpp then neither cuts it out of text without parse_special nor
 * prints it without special. Runs before the pieces and the special list. */
static void mark_eog(eng_vocab *v) {
    static const char *const eog_names[] = {
        "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>", "<|eom_id|>",
        "<|end|>", "<end_of_turn>", /* Phi-3, Gemma */
        "<eos>", "<turn|>", "<|tool_response>", /* Gemma 4 */
        "<|end_of_sentence|>", /* ERNIE 4.5: its template's end of an answer */
        "<|return|>", "<|call|>", /* gpt-oss: an answer's end, a call's */
    };
    for (size_t i = 0; i < sizeof(eog_names) / sizeof(eog_names[0]); i++) {
        int32_t id = lookup_token(v, eog_names[i], strlen(eog_names[i]));
        if (id >= 0) {
            v->eog[id] = 1;
            v->type[id] = TOK_CONTROL;
        }
    }
    if (v->eos >= 0)
        v->eog[v->eos] = 1;
}

/* o200k_harmony (gpt-oss), as llama.cpp has it for any vocabulary with
 * these tokens: the markers of a message's header print in answers, as
 * user-defined tokens (harmony_split in chat.c reads them); and where
 * <|return|> and <|call|> end generation, <|end|>, which closes every
 * message of an answer (its reasoning first), does not, and prints too.
 * Runs after every end of generation is marked, before the pieces. */
static void harmony_attributes(eng_vocab *v) {
    static const char *const shown[] = { "<|channel|>", "<|message|>", "<|start|>",
                                         "<|constrain|>" };
    for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
        const int32_t id = lookup_token(v, shown[i], strlen(shown[i]));
        if (id >= 0)
            v->type[id] = TOK_USER_DEFINED;
    }
    const int32_t ret = lookup_token(v, "<|return|>", 10), call = lookup_token(v, "<|call|>", 8),
                  end = lookup_token(v, "<|end|>", 7);
    if (ret >= 0 && call >= 0 && end >= 0 && v->eog[ret] && v->eog[call] && v->eog[end]) {
        v->eog[end] = 0;
        v->type[end] = TOK_USER_DEFINED;
    }
}

/* Phi-3's tokenizer drops the whitespace that follows its special tokens
 * (rstrip in its tokenizer.json, which the GGUF does not carry); llama.cpp
 * recognises the model by its name and sets it on every special token and
 * </s>, except <unk>, <s> and <|endoftext|>. So do we. */
static int phi3_attributes(eng_vocab *v, const gguf_file *f, eng_error *err) {
    const char *name;
    size_t len;
    if (gguf_get_str(f, "general.name", &name, &len) < 0)
        return 0;
    bool phi3 = false;
    for (size_t i = 0; i + 4 <= len && !phi3; i++) {
        char w[5];
        for (int k = 0; k < 5 && i + (size_t)k < len; k++)
            w[k] = (char)((name[i + k] >= 'A' && name[i + k] <= 'Z') ? name[i + k] + 32 : name[i + k]);
        phi3 = !memcmp(w, "phi3", 4) || (i + 5 <= len && !memcmp(w, "phi-3", 5));
    }
    if (!phi3)
        return 0;
    if (!(v->rstrip = calloc((uint32_t)v->n_tokens, 1)))
        return eng__set_err(err, -ENOMEM, "out of memory");
    for (size_t k = 0; k < v->n_special; k++)
        v->rstrip[v->special[k]] = 1;
    static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };
    for (size_t k = 0; k < sizeof(keep) / sizeof(keep[0]); k++) {
        int32_t id = lookup_token(v, keep[k], strlen(keep[k]));
        if (id >= 0)
            v->rstrip[id] = 0;
    }
    int32_t eos = lookup_token(v, "</s>", 4);
    if (eos >= 0)
        v->rstrip[eos] = 1;
    return 0;
}

int eng_vocab_load(const gguf_file *f, eng_vocab **ret_vocab, eng_error *err) {
    if (!f || !ret_vocab)
        return -EINVAL;
    if (err)
        err->msg[0] = '\0';

    const char *model;
    size_t model_len;
    int r = gguf_get_str(f, "tokenizer.ggml.model", &model, &model_len);
    if (r == -ENOENT)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.model missing: the file has no vocabulary");
    if (r < 0)
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.model: not a string");
    bool spm = model_len == 5 && memcmp(model, "llama", 5) == 0;
    bool gemma4 = model_len == 6 && memcmp(model, "gemma4", 6) == 0;
    if (!spm && !gemma4 && (model_len != 4 || memcmp(model, "gpt2", 4) != 0))
        return eng__set_err(err, -ENOTSUP,
                            "tokenizer '%.*s' not supported (byte-level BPE, \"gpt2\", "
                            "SentencePiece, \"llama\", and Gemma 4's BPE, \"gemma4\")",
                            (int)(model_len > 64 ? 64 : model_len), model);

    char pre_name[64] = "default";
    const char *pre;
    size_t pre_len;
    r = gguf_get_str(f, "tokenizer.ggml.pre", &pre, &pre_len);
    if (r == 0) {
        if (pre_len >= sizeof(pre_name) || memchr(pre, '\0', pre_len))
            return eng__set_err(err, -EINVAL, "tokenizer.ggml.pre: invalid name");
        memcpy(pre_name, pre, pre_len);
        pre_name[pre_len] = '\0';
    } else if (r != -ENOENT) {
        return eng__set_err(err, -EINVAL, "tokenizer.ggml.pre: not a string");
    }
    /* llama.cpp takes "gemma4" for Gemma 4's pre-tokenizer, whatever the
     * file's tokenizer.ggml.pre says (Gemma 4's files have none) */
    const struct pre_def *def = pre_find(gemma4 ? "gemma4" : pre_name);
    bool pre_unknown = def == NULL;
    if (!def)
        def = pre_find("gpt2");

    eng_vocab *v = calloc(1, sizeof(*v));
    if (!v)
        return eng__set_err(err, -ENOMEM, "out of memory");
    v->bos = v->eos = v->unk = v->pad = -1;
    v->spm = spm;
    v->raw_bpe = !spm && def->type == PRE_GEMMA4;
    /* SentencePiece models start with BOS and a space, unless they say not */
    v->add_bos = spm || def->add_bos;
    v->add_space_prefix = spm;
    v->add_eos = false;

    if ((r = load_tokens(v, f, err)) < 0)
        goto out;
    if ((r = spm ? load_spm(v, f, err) : load_merges(v, f, err)) < 0)
        goto out;
    if (spm && v->n_tokens > 2) {
        /* SentencePiece's own numbering, which llama.cpp assumes when the
         * file names no ids: <unk> <s> </s> */
        v->unk = 0;
        v->bos = 1;
        v->eos = 2;
    }
    if ((r = load_id(f, "tokenizer.ggml.bos_token_id", v->n_tokens, &v->bos, err)) < 0 ||
        (r = load_id(f, "tokenizer.ggml.eos_token_id", v->n_tokens, &v->eos, err)) < 0 ||
        (r = load_id(f, "tokenizer.ggml.unknown_token_id", v->n_tokens, &v->unk, err)) < 0 ||
        (r = load_id(f, "tokenizer.ggml.padding_token_id", v->n_tokens, &v->pad, err)) < 0)
        goto out;
    if ((r = load_bool(f, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) < 0 ||
        (r = load_bool(f, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) < 0)
        goto out;
    if (def->force_bos)
        v->add_bos = def->force_bos > 0;
    if (v->raw_bpe) {
        /* Gemma 4 spells what no token holds by <0xXX> tokens alone */
        for (int b = 0; b < 256; b++) {
            char hex[8];
            snprintf(hex, sizeof(hex), "<0x%02X>", b);
            v->byte_tok[b] = lookup_token(v, hex, 6);
        }
    }
    mark_eog(v);
    /* the end of a turn and of a message where the file names them (GLM-4's
     * converter: <|user|> and <|observation|>), ends of generation as in
     * llama.cpp */
    int32_t eot = -1, eom = -1;
    if ((r = load_id(f, "tokenizer.ggml.eot_token_id", v->n_tokens, &eot, err)) < 0 ||
        (r = load_id(f, "tokenizer.ggml.eom_token_id", v->n_tokens, &eom, err)) < 0)
        goto out;
    if (eot >= 0)
        v->eog[eot] = 1;
    if (eom >= 0)
        v->eog[eom] = 1;
    harmony_attributes(v);
    if ((r = build_pieces(v, err)) < 0 || (r = build_special(v, err)) < 0 ||
        (r = phi3_attributes(v, f, err)) < 0)
        goto out;
    if (!spm && (r = pretok_init(&v->pre, def, err)) < 0)
        goto out;

    /* Success; an unknown pre-tokenizer is worth a note for the caller to log. */
    if (pre_unknown && !spm && err)
        snprintf(err->msg, sizeof(err->msg), "note: unknown pre-tokenizer '%s', using 'gpt2'", pre_name);
    *ret_vocab = v;
    return 0;
out:
    eng_vocab_free(v);
    return r;
}

/* ---- queries --------------------------------------------------------- */

int eng_vocab_n_tokens(const eng_vocab *v) {
    return v ? v->n_tokens : 0;
}

int32_t eng_vocab_bos(const eng_vocab *v) {
    return v ? v->bos : -1;
}

int32_t eng_vocab_eos(const eng_vocab *v) {
    return v ? v->eos : -1;
}

bool eng_vocab_is_eog(const eng_vocab *v, int32_t token) {
    return v && token >= 0 && token < v->n_tokens && v->eog[token];
}

int eng_vocab_show(eng_vocab *v, const char *text) {
    const int32_t id = v && text ? lookup_token(v, text, strlen(text)) : -1;
    if (id < 0)
        return -ENOENT;
    if (!v->shown && !(v->shown = calloc((size_t)v->n_tokens, 1)))
        return -ENOMEM;
    v->shown[id] = 1;
    return id;
}

int eng_vocab_mark_eog(eng_vocab *v, const char *text) {
    const int32_t id = v && text ? lookup_token(v, text, strlen(text)) : -1;
    if (id < 0)
        return -ENOENT;
    v->eog[id] = 1;
    return id;
}

int eng_vocab_token_to_piece(const eng_vocab *v, int32_t token, bool special, char *buf, size_t cap) {
    if (!v || token < 0 || token >= v->n_tokens || (!buf && cap))
        return -EINVAL;
    uint8_t t = v->type[token];
    if (!special && (t == TOK_CONTROL || t == TOK_UNKNOWN) && !(v->shown && v->shown[token]))
        return 0;
    span p = v->tok_piece[token];
    if (p.len <= cap)
        memcpy(buf, v->piece + p.off, p.len);
    return (int)p.len;
}

/* ---- tokenize -------------------------------------------------------- */

/* Output sink: counts everything, stores what fits. */
typedef struct out_buf {
    int32_t *tokens;
    size_t cap, n;
} out_buf;

static void out_push(out_buf *o, int32_t id) {
    if (o->n < o->cap)
        o->tokens[o->n] = id;
    o->n++;
}

typedef struct bpe_sym {
    uint32_t off, len; /* inside the encoded word */
    int32_t prev, next;
} bpe_sym;

typedef struct bpe_pair {
    double key; /* lower first: a BPE merge's rank, or minus an SPM token's score */
    int32_t left, right;
    uint32_t len; /* left.len + right.len when pushed; detects stale entries */
} bpe_pair;

/* Per-call scratch, grown on demand. */
typedef struct tok_ctx {
    const eng_vocab *v;
    out_buf *out;
    byte_map bm;
    char *word;
    size_t word_cap;
    bpe_sym *sym;
    size_t sym_cap;
    bpe_pair *heap;
    size_t heap_n, heap_cap;
} tok_ctx;

static bool pair_less(const bpe_pair *a, const bpe_pair *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static int heap_push(tok_ctx *c, bpe_pair p) {
    if (c->heap_n == c->heap_cap) {
        size_t nc = c->heap_cap ? 2 * c->heap_cap : 64;
        bpe_pair *h = realloc(c->heap, nc * sizeof(*h));
        if (!h)
            return -ENOMEM;
        c->heap = h;
        c->heap_cap = nc;
    }
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_less(&p, &c->heap[parent]))
            break;
        c->heap[i] = c->heap[parent];
        i = parent;
    }
    c->heap[i] = p;
    return 0;
}

static bpe_pair heap_pop(tok_ctx *c) {
    bpe_pair top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const bpe_pair *best = &last;
        if (l < n && pair_less(&c->heap[l], best)) {
            m = l;
            best = &c->heap[l];
        }
        if (l + 1 < n && pair_less(&c->heap[l + 1], best))
            m = l + 1;
        if (m == i)
            break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n)
        c->heap[i] = last;
    return top;
}

static int try_pair(tok_ctx *c, int32_t left, int32_t right) {
    if (left < 0 || right < 0)
        return 0;
    const bpe_sym *a = &c->sym[left], *b = &c->sym[right];
    double key;
    if (c->v->spm) {
        /* symbols are adjacent in the word: their union is one span */
        int32_t id = lookup_token(c->v, c->word + a->off, a->len + b->len);
        if (id < 0)
            return 0;
        key = -(double)c->v->score[id];
    } else {
        int32_t rank = lookup_merge(c->v, c->word + a->off, a->len, c->word + b->off, b->len);
        if (rank < 0)
            return 0;
        key = rank;
    }
    return heap_push(c, (bpe_pair){ key, left, right, a->len + b->len });
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

/* Emits the tokens of one symbol that is not itself a token: one per
 * character that is a token. A byte whose character is missing from the
 * vocabulary (SmolLM2 lacks 21 of the 256, e.g. 0x1d) is dropped, as
 * llama.cpp drops it; the unknown token is not used, since some byte-level
 * vocabularies name <|endoftext|> as unknown. */
static void emit_fallback(tok_ctx *c, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len((uint8_t)s[i]);
        if (l > n - i)
            l = n - i;
        int32_t id = lookup_token(c->v, s + i, l);
        if (id >= 0)
            out_push(c->out, id);
        i += l;
    }
}

/* Merges the ns symbols of c->word, best pair first, until no pair merges. */
static int merge_symbols(tok_ctx *c, int32_t ns) {
    int r;
    c->heap_n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if ((r = try_pair(c, i, i + 1)) < 0)
            return r;
    while (c->heap_n) {
        bpe_pair p = heap_pop(c);
        bpe_sym *a = &c->sym[p.left], *b = &c->sym[p.right];
        if (a->len == 0 || b->len == 0 || a->next != p.right || a->len + b->len != p.len)
            continue; /* stale: one side has changed since the pair was queued */
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0)
            c->sym[b->next].prev = p.left;
        if ((r = try_pair(c, a->prev, p.left)) < 0 || (r = try_pair(c, p.left, a->next)) < 0)
            return r;
    }
    return 0;
}

/* Splits c->word[0, wn) into at most max_syms symbols, one per character,
 * and merges them; *ret_ns receives the symbol count. A character's length
 * comes from its lead byte: for BPE as UTF-8 says (the word is the byte
 * map's valid UTF-8, or Gemma 4's sanitized text); for SPM as llama.cpp
 * counts it, so that a stray continuation byte is one symbol and a
 * 0xF8-0xFF lead takes up to 4 bytes. */
static int merge_word(tok_ctx *c, size_t wn, size_t max_syms, bool spm, int32_t *ret_ns) {
    static const uint8_t spm_len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    int r;
    if ((r = grow((void **)&c->sym, &c->sym_cap, max_syms, sizeof(bpe_sym))) < 0)
        return r;
    int32_t ns = 0;
    for (size_t off = 0; off < wn;) {
        uint8_t lead = (uint8_t)c->word[off];
        size_t l = spm ? spm_len[lead >> 4] : utf8_len(lead);
        if (l > wn - off)
            l = wn - off;
        c->sym[ns] = (bpe_sym){ (uint32_t)off, (uint32_t)l, ns - 1, -1 };
        if (ns > 0)
            c->sym[ns - 1].next = ns;
        ns++;
        off += l;
    }
    *ret_ns = ns;
    return merge_symbols(c, ns);
}

/* SentencePiece over one text fragment: a space first if asked, spaces as
 * U+2581, one symbol per character, merged by token score; what is left
 * that is no token is spelled by byte tokens (a byte without one is
 * dropped, <unk> when there is one). */
static int spm_fragment(tok_ctx *c, const char *s, size_t n, bool space_first) {
    const eng_vocab *v = c->v;
    int r;
    if (n > (UINT32_MAX / 2 - 3) / 3)
        return -E2BIG;
    if ((r = grow((void **)&c->word, &c->word_cap, 3 * n + 3, 1)) < 0)
        return r;
    size_t wn = 0;
    if (space_first) {
        memcpy(c->word, SPM_SPACE, 3);
        wn = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(c->word + wn, SPM_SPACE, 3);
            wn += 3;
        } else {
            c->word[wn++] = s[i];
        }
    }
    int32_t ns;
    if ((r = merge_word(c, wn, wn, true, &ns)) < 0)
        return r;
    for (int32_t i = 0; i >= 0 && ns > 0; i = c->sym[i].next) {
        const bpe_sym *sy = &c->sym[i];
        int32_t id = lookup_token(v, c->word + sy->off, sy->len);
        if (id >= 0) {
            out_push(c->out, id);
            continue;
        }
        for (uint32_t j = 0; j < sy->len; j++) {
            int32_t b = v->byte_tok[(uint8_t)c->word[sy->off + j]];
            if (b >= 0 || (b = v->unk) >= 0)
                out_push(c->out, b);
        }
    }
    return 0;
}

static bool all_newlines(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\n')
            return false;
    return true;
}

/* BPE over one pre-token piece (valid UTF-8; for raw_bpe with U+2581 for
 * spaces, merged as it is, else through the byte map). */
static int bpe_piece(void *ud, const char *s, size_t n) {
    tok_ctx *c = ud;
    const eng_vocab *v = c->v;
    int r;
    if ((r = grow((void **)&c->word, &c->word_cap, 2 * n, 1)) < 0)
        return r;
    size_t wn = 0;
    if (v->raw_bpe) {
        memcpy(c->word, s, n);
        wn = n;
    } else {
        for (size_t i = 0; i < n; i++) {
            uint8_t b = (uint8_t)s[i];
            memcpy(c->word + wn, c->bm.enc[b], c->bm.enc_len[b]);
            wn += c->bm.enc_len[b];
        }
    }
    if (wn > UINT32_MAX / 2)
        return -E2BIG;

    /* A piece that is a whole token is that token: any piece for llama-bpe
     * and tekken; for Gemma 4 a run of newlines, which llama.cpp takes
     * whole because Gemma 4's merges need not rebuild it */
    if (v->pre.def->ignore_merges || (v->raw_bpe && all_newlines(c->word, wn))) {
        int32_t id = lookup_token(v, c->word, wn);
        if (id >= 0) {
            out_push(c->out, id);
            return 0;
        }
    }

    /* One symbol per encoded character (1 to 4 bytes). */
    int32_t ns;
    if ((r = merge_word(c, wn, n, false, &ns)) < 0)
        return r;
    for (int32_t i = 0; i >= 0 && ns > 0; i = c->sym[i].next) {
        const bpe_sym *sy = &c->sym[i];
        int32_t id = lookup_token(v, c->word + sy->off, sy->len);
        if (id >= 0) {
            out_push(c->out, id);
        } else if (v->raw_bpe) {
            /* Gemma 4's byte fallback: <0xXX> per byte, never <unk> */
            for (uint32_t j = 0; j < sy->len; j++) {
                int32_t b = v->byte_tok[(uint8_t)c->word[sy->off + j]];
                if (b >= 0)
                    out_push(c->out, b);
            }
        } else {
            emit_fallback(c, c->word + sy->off, sy->len);
        }
    }
    return 0;
}

typedef struct frag {
    size_t off, len;
    int32_t token; /* -1: text */
} frag;

static bool c_isspace(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Cuts special tokens out of text (llama.cpp's order: each special token,
 * longest first, over every text fragment left by the previous ones). */
static int partition(const eng_vocab *v, const char *text, size_t len, bool parse_special, frag **ret,
                     size_t *ret_n) {
    size_t cap = 16, n = 1;
    frag *fr = malloc(cap * sizeof(*fr)), *tmp = NULL;
    if (!fr)
        return -ENOMEM;
    fr[0] = (frag){ 0, len, -1 };
    size_t tmp_cap = 0;
    for (size_t k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        uint8_t t = v->type[id];
        if (!parse_special && (t == TOK_CONTROL || t == TOK_UNKNOWN))
            continue;
        const char *st = v->text + v->tok[id].off;
        size_t sl = v->tok[id].len;
        /* Quick reject: no text fragment contains it. */
        bool any = false;
        for (size_t i = 0; i < n && !any; i++)
            any = fr[i].token < 0 && fr[i].len >= sl && memmem(text + fr[i].off, fr[i].len, st, sl);
        if (!any)
            continue;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            size_t off = fr[i].off, rem = fr[i].len;
            const char *hit;
            while (fr[i].token < 0 && rem >= sl && (hit = memmem(text + off, rem, st, sl))) {
                size_t at = (size_t)(hit - text);
                if (grow((void **)&tmp, &tmp_cap, m + 2, sizeof(frag)) < 0)
                    goto nomem;
                if (at > off)
                    tmp[m++] = (frag){ off, at - off, -1 };
                tmp[m++] = (frag){ at, sl, id };
                rem -= at - off + sl;
                off = at + sl;
                while (v->rstrip && v->rstrip[id] && rem > 0 && c_isspace(text[off]))
                    off++, rem--;
            }
            if (grow((void **)&tmp, &tmp_cap, m + 1, sizeof(frag)) < 0)
                goto nomem;
            if (fr[i].token >= 0)
                tmp[m++] = fr[i];
            else if (rem)
                tmp[m++] = (frag){ off, rem, -1 };
        }
        frag *sw = fr;
        fr = tmp;
        tmp = sw;
        size_t swc = cap;
        cap = tmp_cap;
        tmp_cap = swc;
        n = m;
    }
    free(tmp);
    *ret = fr;
    *ret_n = n;
    return 0;
nomem:
    free(tmp);
    free(fr);
    return -ENOMEM;
}

int eng_vocab_tokenize(const eng_vocab *v, const char *text, size_t len, unsigned flags, int32_t *tokens,
                       size_t cap, size_t *ret_n) {
    if (!v || (!text && len) || (!tokens && cap) || !ret_n)
        return -EINVAL;
    if (len > VOCAB_MAX_TEXT)
        return -E2BIG;
    out_buf out = { tokens, cap, 0 };
    tok_ctx c = { .v = v, .out = &out };
    byte_map_init(&c.bm);
    frag *fr = NULL;
    size_t nf = 0;
    char *clean = NULL;
    size_t clean_cap = 0;
    int r = 0;

    bool add = flags & ENG_TOK_ADD_SPECIAL;
    if (len && (r = partition(v, text, len, flags & ENG_TOK_PARSE_SPECIAL, &fr, &nf)) < 0)
        goto done;
    /* Text that starts with the BOS token (a rendered Llama 3 or Llama 2
     * chat prints it) gets no second one: llama.cpp would add it (and
     * warn), its server and Ollama strip the template's. */
    if (add && v->add_bos && v->bos >= 0 && !(nf > 0 && fr[0].token == v->bos))
        out_push(&out, v->bos);
    if (len) {
        for (size_t i = 0; i < nf; i++) {
            if (fr[i].token >= 0) {
                out_push(&out, fr[i].token);
                continue;
            }
            /* a text fragment starts the text or follows a special token:
             * SPM puts a space before each */
            if (v->spm) {
                if ((r = spm_fragment(&c, text + fr[i].off, fr[i].len, v->add_space_prefix)) < 0)
                    goto done;
                continue;
            }
            if ((r = grow((void **)&clean, &clean_cap, 3 * fr[i].len, 1)) < 0)
                goto done;
            size_t cn = utf8_sanitize(text + fr[i].off, fr[i].len, v->raw_bpe, clean);
            if ((r = pretok_split(&v->pre, clean, cn, bpe_piece, &c)) < 0)
                goto done;
        }
    }
    if (add && v->add_eos && v->eos >= 0)
        out_push(&out, v->eos);
    *ret_n = out.n;
    r = out.n > cap ? -ENOBUFS : 0;
done:
    free(fr);
    free(clean);
    free(c.word);
    free(c.sym);
    free(c.heap);
    return r;
}
