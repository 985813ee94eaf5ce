/* Chat templates: detection on real template texts (tests/data/chat-template-*.jinja,
 * the SmolLM2 one checked against the bytes of the default model's GGUF when
 * it is present) and rendering compared with strings derived by hand from the
 * templates' Jinja (cross-checked once with jinja2 3.1 on the stored templates:
 * identical for every conversation the templates accept). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"

static int failures;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static char *read_all(const char *path, size_t *ret_len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) {
        buf[len] = '\0';
        *ret_len = len;
    }
    return buf;
}

static char *read_template(const char *name, size_t *len) {
    const char *root = getenv("SI_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/chat-template-%s.jinja", root ? root : ".", name);
    char *t = read_all(path, len);
    if (!t) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    return t;
}

/* t [0, len) with each newline written as Jinja's "\n" escape (a
 * template as some GGUFs carry it); its length in *ret_len. */
static char *escape_newlines(const char *t, size_t len, size_t *ret_len) {
    char *e = malloc(2 * len + 1);
    CHECK(e);
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\n')
            e[k++] = '\\', e[k++] = 'n';
        else
            e[k++] = t[i];
    }
    *ret_len = k;
    return e;
}

/* The stored SmolLM2 template must be the model's own: find the GGUF string
 * value (key, type 8, u64 length, bytes) in the file's metadata. */
static void check_smollm2_matches_gguf(const char *tmpl, size_t tlen) {
    char path[4096];
    const char *env = getenv("SI_MODEL");
    if (env) {
        snprintf(path, sizeof(path), "%s", env);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg)
            snprintf(path, sizeof(path), "%s/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", xdg);
        else
            snprintf(path, sizeof(path), "%s/.cache/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf",
                     home ? home : ".");
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "note: no model at %s, template not checked against the GGUF\n", path);
        return;
    }
    /* metadata (vocabulary included) lies in the first few MiB */
    size_t cap = 32u << 20;
    char *buf = malloc(cap);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    static const char key[] = "tokenizer.chat_template";
    char *k = buf ? memmem(buf, n, key, sizeof(key) - 1) : NULL;
    CHECK(k != NULL);
    if (k) {
        size_t off = (size_t)(k - buf) + sizeof(key) - 1;
        uint32_t type = 0;
        uint64_t len = 0;
        CHECK(off + 12 <= n);
        if (off + 12 <= n) {
            memcpy(&type, buf + off, 4);
            memcpy(&len, buf + off + 4, 8);
            CHECK(type == 8);
            CHECK(len == tlen);
            CHECK(len == tlen && off + 12 + len <= n && memcmp(buf + off + 12, tmpl, tlen) == 0);
        }
    }
    free(buf);
}

/* Renders and compares, then checks the snprintf contract on every shorter cap. */
static void check_render_tools(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n,
                               const char *tools, unsigned add, const char *want) {
    static char buf[8192], small[8192];
    size_t wl = strlen(want);
    int r = eng_chat_render(info, msgs, n, tools, add, buf, sizeof(buf));
    CHECK(r == (int)wl);
    if (r != (int)wl || strcmp(buf, want) != 0) {
        fprintf(stderr, "render mismatch\n got: [%s]\nwant: [%s]\n", r >= 0 ? buf : "(error)", want);
        failures++;
        return;
    }
    CHECK(eng_chat_render(info, msgs, n, tools, add, NULL, 0) == (int)wl);
    for (size_t cap = 1; cap <= wl + 1; cap++) {
        memset(small, 'Z', sizeof(small));
        r = eng_chat_render(info, msgs, n, tools, add, small, cap);
        CHECK(r == (int)wl);
        CHECK(small[cap - 1] == '\0');
        CHECK(memcmp(small, want, cap - 1) == 0);
        CHECK(small[cap] == 'Z'); /* nothing past cap */
    }
}

static void check_render(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n,
                         unsigned add, const char *want) {
    check_render_tools(info, msgs, n, NULL, add, want);
}

#define SMOL_SYS "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
#define QWEN_SYS "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

static void test_smollm2(void) {
    size_t len;
    char *t = read_template("smollm2", &len);
    check_smollm2_matches_gguf(t, len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_CHATML);
    CHECK(strcmp(info.default_system, SMOL_SYS) == 0);
    free(t);

    eng_chat_msg user[] = {{.role = "user", .content = "Hi"}};
    check_render(&info, user, 1, true,
                 "<|im_start|>system\n" SMOL_SYS "<|im_end|>\n"
                 "<|im_start|>user\nHi<|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_render(&info, user, 1, false,
                 "<|im_start|>system\n" SMOL_SYS "<|im_end|>\n"
                 "<|im_start|>user\nHi<|im_end|>\n");

    /* own system prompt: no default; content verbatim (no trimming) */
    eng_chat_msg sys[] = {{.role = "system", .content = "Be terse."}, {.role = "user", .content = " What is 2+2?\n"},
                          {.role = "assistant", .content = "4"}, {.role = "user", .content = "And 3+3?"}};
    check_render(&info, sys, 4, true,
                 "<|im_start|>system\nBe terse.<|im_end|>\n"
                 "<|im_start|>user\n What is 2+2?\n<|im_end|>\n"
                 "<|im_start|>assistant\n4<|im_end|>\n"
                 "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
                 "<|im_start|>assistant\n");

    /* a system message that is not first does not suppress the default */
    eng_chat_msg late[] = {{.role = "user", .content = "a"}, {.role = "system", .content = "s"}, {.role = "assistant", .content = "b"}};
    check_render(&info, late, 3, false,
                 "<|im_start|>system\n" SMOL_SYS "<|im_end|>\n"
                 "<|im_start|>user\na<|im_end|>\n"
                 "<|im_start|>system\ns<|im_end|>\n"
                 "<|im_start|>assistant\nb<|im_end|>\n");

    /* the default is inserted inside the message loop: none for no messages */
    check_render(&info, NULL, 0, true, "<|im_start|>assistant\n");
    check_render(&info, NULL, 0, false, "");

    /* empty content and UTF-8 pass through */
    eng_chat_msg odd[] = {{.role = "user", .content = ""}, {.role = "assistant", .content = "h\xc3\xa9"}};
    check_render(&info, odd, 2, false,
                 "<|im_start|>system\n" SMOL_SYS "<|im_end|>\n"
                 "<|im_start|>user\n<|im_end|>\n"
                 "<|im_start|>assistant\nh\xc3\xa9<|im_end|>\n");
}

static void test_qwen(void) {
    size_t len;
    char *t = read_template("qwen2.5", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_CHATML);
    CHECK(strcmp(info.default_system, QWEN_SYS) == 0);
    free(t);

    eng_chat_msg user[] = {{.role = "user", .content = "Hi"}};
    check_render(&info, user, 1, true,
                 "<|im_start|>system\n" QWEN_SYS "<|im_end|>\n"
                 "<|im_start|>user\nHi<|im_end|>\n"
                 "<|im_start|>assistant\n");
    eng_chat_msg sys[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U"}};
    check_render(&info, sys, 2, true,
                 "<|im_start|>system\nS<|im_end|>\n"
                 "<|im_start|>user\nU<|im_end|>\n"
                 "<|im_start|>assistant\n");
}

/* Qwen3 (Qwen3-0.6B's template as llama.cpp keeps it): ChatML whose
 * earlier answers lose their reasoning, answers after the last user
 * message keep a <think> block (an empty one for the last), and
 * enable_thinking = false ends the prompt with an empty <think> block.
 * Every expected string below is what Python's jinja2 3.1 renders from
 * tests/data/chat-template-qwen3.jinja for the same messages. */
static void test_qwen3(void) {
    size_t len;
    char *t = read_template("qwen3", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    free(t);
    CHECK(info.kind == ENG_CHAT_CHATML && info.reasoning && info.think_switch);
    CHECK(info.default_system[0] == '\0');
    const unsigned A = ENG_CHAT_ADD_ASSISTANT, NT = ENG_CHAT_NO_THINK;

    eng_chat_msg user[] = {{.role = "user", .content = "Hi"}};
    check_render(&info, user, 1, A, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    check_render(&info, user, 1, A | NT,
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    eng_chat_msg hist[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U1"},
                           {.role = "assistant", .content = "<think>\nreason 1\n</think>\n\nA1"}, {.role = "user", .content = "U2"}};
    check_render(&info, hist, 4, A,
                 "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                 "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n"
                 "<|im_start|>assistant\n");
    eng_chat_msg last[] = {{.role = "user", .content = "U1"}, {.role = "assistant", .content = "<think>\nr\n</think>\n\nA1"}};
    check_render(&info, last, 2, 0,
                 "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nA1<|im_end|>\n");
    eng_chat_msg plain[] = {{.role = "user", .content = "U1"}, {.role = "assistant", .content = "plain answer"}};
    check_render(&info, plain, 2, 0,
                 "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                 "plain answer<|im_end|>\n");
    eng_chat_msg nl[] = {{.role = "user", .content = "U"}, {.role = "assistant", .content = "\n\n<think>\n\nx <think> y\n\n</think>\n\n\nA </think>\n\nB\n"},
                         {.role = "user", .content = "V"}};
    check_render(&info, nl, 3, A,
                 "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nB\n<|im_end|>\n"
                 "<|im_start|>user\nV<|im_end|>\n<|im_start|>assistant\n");
    eng_chat_msg nl2[] = {{.role = "user", .content = "U"}, {.role = "assistant", .content = "pre<think>\n\nx <think> y\n\n</think>\n\n\nA </think>\n\nB\n"}};
    check_render(&info, nl2, 2, 0,
                 "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<think>\n y\n</think>\n\nB\n<|im_end|>\n");
    eng_chat_msg mid[] = {{.role = "user", .content = "U"}, {.role = "system", .content = "S2"}, {.role = "assistant", .content = "A"}};
    check_render(&info, mid, 3, A | NT,
                 "<|im_start|>user\nU<|im_end|>\n<|im_start|>system\nS2<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    /* a tool result sent as a user message is not the last query */
    eng_chat_msg tool[] = {{.role = "user", .content = "U1"}, {.role = "assistant", .content = "<think>r</think>A"},
                           {.role = "user", .content = "<tool_response>\nok\n</tool_response>"}};
    check_render(&info, tool, 3, A,
                 "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nA<|im_end|>\n"
                 "<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
    /* ...and an answer there without reasoning that is not the last gets
     * no <think> block */
    tool[1].content = "A";
    check_render(&info, tool, 3, A,
                 "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
                 "<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n");

    /* the split of an answer that the daemon reports (done.thinking and
     * content): the same as the history's */
    const char *ans = "\n\n<think>\n\nx <think> y\n\n</think>\n\n\nA </think>\n\nB\n";
    size_t to, tl, co;
    CHECK(eng_chat_split_reasoning(&info, ans, strlen(ans), &to, &tl, &co) == 0);
    CHECK(tl == 2 && !memcmp(ans + to, " y", 2) && !strcmp(ans + co, "B\n"));
    CHECK(eng_chat_split_reasoning(&info, "plain", 5, &to, &tl, &co) == 0 && tl == 0 && co == 0);
    CHECK(eng_chat_split_reasoning(&info, NULL, 0, &to, &tl, &co) == 0);

    /* templates without the switch or the reasoning: no change */
    t = read_template("qwen2.5", &len);
    eng_chat_detect(t, len, &info);
    free(t);
    CHECK(!info.reasoning && !info.think_switch);
    CHECK(eng_chat_split_reasoning(&info, NULL, 0, &to, &tl, &co) == -ENOTSUP);

    /* DeepSeek-R1's distills: the prompt opens the reasoning, so an answer
     * holds only its end; the split is the same rule */
    t = read_template("deepseek-r1-distill", &len);
    eng_chat_info r1;
    eng_chat_detect(t, len, &r1);
    free(t);
    const char *r1a = "Let me think.\n</think>\n\nParis.";
    CHECK(r1.kind == ENG_CHAT_DEEPSEEK_R1 && r1.reasoning && !r1.think_switch);
    CHECK(eng_chat_split_reasoning(&r1, r1a, strlen(r1a), &to, &tl, &co) == 0);
    CHECK(tl == 13 && !memcmp(r1a + to, "Let me think.", 13) && !strcmp(r1a + co, "Paris."));

    check_render(&info, last, 2, A | NT,
                 "<|im_start|>system\n" QWEN_SYS "<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\nr\n</think>\n\nA1<|im_end|>\n<|im_start|>assistant\n");
}

/* Qwen3.5 (Qwen3.5-4B's template as llama.cpp keeps it): Qwen3's ChatML
 * whose prompt opens the reasoning ("<think>\n"; enable_thinking = false:
 * an empty block), whose answers after the last query show their <think>
 * block even when empty, and which trims every message. Every expected
 * string is what Python's jinja2 3.1 renders from
 * tests/data/chat-template-qwen3.5.jinja for the same messages. */
static void test_qwen35(void) {
    size_t len;
    char *t = read_template("qwen3.5", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    free(t);
    CHECK(info.kind == ENG_CHAT_CHATML && info.reasoning && info.think_switch && info.think_open);
    CHECK(info.default_system[0] == '\0');
    const unsigned A = ENG_CHAT_ADD_ASSISTANT, NT = ENG_CHAT_NO_THINK;
    eng_chat_msg user[] = {{.role = "user", .content = "Hi"}};
    check_render(&info, user, 1, A,
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
    check_render(&info, user, 1, A | NT,
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    eng_chat_msg hist[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U1"},
                           {.role = "assistant", .content = "<think>\nreason 1\n</think>\n\nA1"},
                           {.role = "user", .content = "U2"}};
    check_render(&info, hist, 4, A,
                 "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                 "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\n");
    eng_chat_msg ws[] = {{.role = "system", .content = " S \n"},
                         {.role = "user", .content = "  Hi \n"}};
    check_render(&info, ws, 2, A,
                 "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\n");
    /* an answer after the last query without reasoning, not the last
     * message (a tool result follows as a user message): an empty block */
    eng_chat_msg tool[] = {{.role = "user", .content = "U1"}, {.role = "assistant", .content = "A"},
                           {.role = "user", .content = "<tool_response>\nok\n</tool_response>"}};
    check_render(&info, tool, 3, A,
                 "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                 "A<|im_end|>\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n"
                 "<|im_start|>assistant\n<think>\n");
    eng_chat_msg two[] = {{.role = "user", .content = "U1"},
                          {.role = "assistant", .content = "<think>\nr\n</think>\n\nA1"},
                          {.role = "user", .content = "U2"},
                          {.role = "assistant", .content = "A2"}};
    check_render(&info, two, 4, A | NT,
                 "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                 "<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                 "A2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    /* the answer the model writes after the opened block: its reasoning
     * up to </think> */
    const char *ans = "Let me see.\n</think>\n\nParis.";
    size_t to, tl, co;
    CHECK(eng_chat_split_reasoning(&info, ans, strlen(ans), &to, &tl, &co) == 0);
    CHECK(tl == 11 && !memcmp(ans + to, "Let me see.", 11) && !strcmp(ans + co, "Paris."));
    /* Qwen3's template opens nothing */
    t = read_template("qwen3", &len);
    eng_chat_detect(t, len, &info);
    free(t);
    CHECK(!info.think_open);
}

static void test_llama3(void) {
    size_t len;
    char *t = read_template("llama3", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_LLAMA3);
    CHECK(info.default_system[0] == '\0'); /* 3.0: no system block of its own */
    free(t);

    eng_chat_msg conv[] = {{.role = "system", .content = " Be brief.\n"}, {.role = "user", .content = "Hi  "}};
    check_render(&info, conv, 2, true,
                 "<|begin_of_text|>"
                 "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    eng_chat_msg user[] = {{.role = "user", .content = "\t x y \r\n"}, {.role = "assistant", .content = "z"}};
    check_render(&info, user, 2, false,
                 "<|begin_of_text|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nx y<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nz<|eot_id|>");
    /* 3.0 attaches bos_token to the first message: none without messages */
    check_render(&info, NULL, 0, true, "<|start_header_id|>assistant<|end_header_id|>\n\n");

    t = read_template("llama3.2", &len);
    eng_chat_detect(t, len, &info);
    free(t);
    CHECK(info.kind == ENG_CHAT_LLAMA3);
#define PRE "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
    CHECK(strcmp(info.default_system, PRE) == 0);
    eng_chat_msg u2[] = {{.role = "user", .content = "Hi  "}};
    check_render(&info, u2, 1, true,
                 "<|begin_of_text|>"
                 "<|start_header_id|>system<|end_header_id|>\n\n" PRE "<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* the system message moves into the system block, trimmed */
    eng_chat_msg s2[] = {{.role = "system", .content = " Be brief. "}, {.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello"}};
    check_render(&info, s2, 3, false,
                 "<|begin_of_text|>"
                 "<|start_header_id|>system<|end_header_id|>\n\n" PRE "Be brief.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>");
    /* (the template itself fails on an empty list; we print its system block) */
    check_render(&info, NULL, 0, false,
                 "<|begin_of_text|>"
                 "<|start_header_id|>system<|end_header_id|>\n\n" PRE "<|eot_id|>");
#undef PRE
}

static void test_detect_edges(void) {
    eng_chat_info info;
    memset(&info, 0x55, sizeof(info));
    eng_chat_detect(NULL, 0, &info);
    CHECK(info.kind == ENG_CHAT_NONE && info.default_system[0] == '\0');
    eng_chat_detect(NULL, 0, NULL); /* must not crash */

    static const char gemma[] =
        "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' "
        "+ message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}";
    eng_chat_detect(gemma, sizeof(gemma) - 1, &info);
    CHECK(info.kind == ENG_CHAT_NONE);

    /* detection honours len: the marker past len is not seen */
    static const char cut[] = "{{ messages }}<|im_start|>";
    eng_chat_detect(cut, 14, &info);
    CHECK(info.kind == ENG_CHAT_NONE);
    eng_chat_detect(cut, sizeof(cut) - 1, &info);
    CHECK(info.kind == ENG_CHAT_CHATML && info.default_system[0] == '\0');

    /* a ChatML template without a default system prompt */
    static const char plain[] =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    eng_chat_detect(plain, sizeof(plain) - 1, &info);
    CHECK(info.kind == ENG_CHAT_CHATML && info.default_system[0] == '\0');

    /* double-quoted literal with escapes */
    static const char dq[] =
        "{% if messages[0]['role'] != 'system' %}{{ \"<|im_start|>system\\nSay \\\"hi\\\"<|im_end|>\\n\" }}"
        "{% endif %}{% for m in messages %}{{ '<|im_start|>' + m.role }}{% endfor %}";
    eng_chat_detect(dq, sizeof(dq) - 1, &info);
    CHECK(info.kind == ENG_CHAT_CHATML && strcmp(info.default_system, "Say \"hi\"") == 0);

    /* a default prompt that does not fit is dropped, not truncated */
    char big[sizeof(info.default_system) + 256];
    int n = snprintf(big, sizeof(big), "{{ '<|im_start|>system\\n");
    for (size_t i = 0; i < sizeof(info.default_system) + 100; i++)
        big[n++] = 'a';
    n += snprintf(big + n, sizeof(big) - (size_t)n, "<|im_end|>\\n' }}");
    eng_chat_detect(big, (size_t)n, &info);
    CHECK(info.kind == ENG_CHAT_CHATML && info.default_system[0] == '\0');
}

static void test_render_errors(void) {
    eng_chat_info info = {.kind = ENG_CHAT_CHATML};
    char buf[64];
    eng_chat_msg bad_role[] = {{.role = NULL, .content = "x"}};
    eng_chat_msg bad_content[] = {{.role = "user", .content = "x"}, {.role = "assistant", .content = NULL}};
    CHECK(eng_chat_render(&info, bad_role, 1, NULL, true, buf, sizeof(buf)) == -EINVAL);
    CHECK(eng_chat_render(&info, bad_content, 2, NULL, true, buf, sizeof(buf)) == -EINVAL);
    CHECK(eng_chat_render(&info, NULL, 1, NULL, true, buf, sizeof(buf)) == -EINVAL);
    CHECK(eng_chat_render(NULL, NULL, 0, NULL, true, buf, sizeof(buf)) == -EINVAL);
    CHECK(eng_chat_render(&info, NULL, 0, NULL, true, NULL, 5) == -EINVAL);
    info.kind = ENG_CHAT_NONE;
    eng_chat_msg ok[] = {{.role = "user", .content = "x"}};
    CHECK(eng_chat_render(&info, ok, 1, NULL, true, buf, sizeof(buf)) == -ENOTSUP);

    /* an unterminated default_system is read only up to its array size */
    info.kind = ENG_CHAT_CHATML;
    memset(info.default_system, 'q', sizeof(info.default_system));
    int r = eng_chat_render(&info, ok, 1, NULL, false, NULL, 0);
    CHECK(r == (int)(strlen("<|im_start|>system\n<|im_end|>\n<|im_start|>user\nx<|im_end|>\n") +
                     sizeof(info.default_system)));
}

#include "data/chat-tools-cases.h"

/* Tool calling: the conversations of tests/data/chat-tools-cases.h against
 * jinja2's renderings (tools and arguments re-serialized as json.dumps
 * does), refusals, and the calls read back from answers. */
static void test_tools(void) {
    for (size_t k = 0; k < sizeof(tools_cases) / sizeof(tools_cases[0]); k++) {
        const struct tools_case *c = &tools_cases[k];
        size_t len;
        char *t = read_template(c->template, &len);
        eng_chat_info info;
        eng_chat_detect(t, len, &info);
        free(t);
        CHECK((info.kind == ENG_CHAT_CHATML || info.kind == ENG_CHAT_LLAMA3 ||
               (info.kind == ENG_CHAT_GRANITE && info.granite4) ||
               (info.kind == ENG_CHAT_EXAONE && info.exaone4) ||
               info.kind == ENG_CHAT_GEMMA4 || info.kind == ENG_CHAT_NEMOTRON) && info.tools);
        CHECK((info.kind == ENG_CHAT_NEMOTRON) == !strcmp(c->template, "nemotron-nano-v2"));
        CHECK((info.kind == ENG_CHAT_GEMMA4) == !strcmp(c->template, "gemma4"));
        if (info.kind == ENG_CHAT_GEMMA4) /* (the only one here that prints bos_token) */
            strcpy(info.bos, "<bos>");
        fprintf(stderr, "tools case %s\n", c->name);
        const unsigned flags =
            (c->add ? ENG_CHAT_ADD_ASSISTANT : 0) | (c->no_think ? ENG_CHAT_NO_THINK : 0);
        check_render_tools(&info, c->msgs, c->n_msgs, c->tools, flags, c->want);
    }

    /* templates without tool calling refuse tools and calls, not [] */
    static const eng_tool_call call = {(char *)"f", (char *)"{}"};
    eng_chat_msg user[] = {{.role = "user", .content = "x"}};
    eng_chat_msg called[] = {{.role = "user", .content = "x"},
                             {.role = "assistant", .content = "", .tool_calls = &call, .n_tool_calls = 1}};
    char buf[512];
    const char *names[] = {"smollm2", "llama3"};
    for (int k = 0; k < 2; k++) {
        size_t len;
        char *t = read_template(names[k], &len);
        eng_chat_info info;
        eng_chat_detect(t, len, &info);
        free(t);
        CHECK(!info.tools);
        CHECK(eng_chat_render(&info, user, 1, "[{\"type\": \"function\"}]", true, buf, sizeof buf) == -ENOTSUP);
        CHECK(eng_chat_render(&info, called, 2, NULL, true, buf, sizeof buf) == -ENOTSUP);
        CHECK(eng_chat_render(&info, user, 1, " [ ] ", true, buf, sizeof buf) > 0);
        eng_tool_call *calls = NULL;
        size_t n = 9;
        CHECK(eng_chat_parse_calls(&info, "<tool_call>{\"name\": \"f\"}</tool_call>", 33, &calls, &n, NULL) == -ENOTSUP);
        CHECK(n == 0 && calls == NULL);
    }

    size_t len;
    char *t = read_template("qwen2.5", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    free(t);
    /* tools that are not a JSON array, arguments that are not an object */
    const char *bad_tools[] = {"", "{}", "[", "[1,]", "[{\"a\": 1}] x", "[\"\\q\"]", "[01]", "[1.]", "[nul]"};
    for (size_t k = 0; k < sizeof(bad_tools) / sizeof(bad_tools[0]); k++)
        CHECK(eng_chat_render(&info, user, 1, bad_tools[k], true, buf, sizeof buf) == -EINVAL);
    const char *bad_args[] = {"[]", "1", "{", "{\"a\" 1}", "{\"a\": 1}}", ""};
    for (size_t k = 0; k < sizeof(bad_args) / sizeof(bad_args[0]); k++) {
        eng_tool_call bc = {(char *)"f", (char *)bad_args[k]};
        called[1].tool_calls = &bc;
        CHECK(eng_chat_render(&info, called, 2, NULL, true, buf, sizeof buf) == -EINVAL);
    }
    eng_tool_call noname = {NULL, (char *)"{}"}, noargs = {(char *)"f", NULL};
    called[1].tool_calls = &noname;
    CHECK(eng_chat_render(&info, called, 2, NULL, true, buf, sizeof buf) == -EINVAL);
    called[1].tool_calls = &noargs; /* no arguments: {} */
    CHECK(eng_chat_render(&info, called, 2, NULL, false, buf, sizeof buf) > 0);
    CHECK(strstr(buf, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><|im_end|>\n"));
    called[1].tool_calls = NULL; /* a count without calls */
    CHECK(eng_chat_render(&info, called, 2, NULL, true, buf, sizeof buf) == -EINVAL);

    /* Llama 3.2: one call per answer, and tools need a first message to
     * go into (the template raises otherwise) */
    t = read_template("llama3.2", &len);
    eng_chat_info ll;
    eng_chat_detect(t, len, &ll);
    free(t);
    CHECK(ll.kind == ENG_CHAT_LLAMA3 && ll.tools);
    static const eng_tool_call two[] = {{(char *)"f", (char *)"{}"}, {(char *)"g", (char *)"{}"}};
    eng_chat_msg twice[] = {{.role = "user", .content = "x"},
                            {.role = "assistant", .content = "", .tool_calls = two, .n_tool_calls = 2}};
    CHECK(eng_chat_render(&ll, twice, 2, NULL, true, buf, sizeof buf) == -EINVAL);
    twice[1].n_tool_calls = 1;
    CHECK(eng_chat_render(&ll, twice, 2, NULL, true, buf, sizeof buf) > 0);
    eng_chat_msg only_sys[] = {{.role = "system", .content = "s"}};
    CHECK(eng_chat_render(&ll, only_sys, 1, "[{}]", true, buf, sizeof buf) == -EINVAL);
    CHECK(eng_chat_render(&ll, only_sys, 1, "[]", true, buf, sizeof buf) > 0);
    CHECK(eng_chat_render(&ll, NULL, 0, "[{}]", true, buf, sizeof buf) == -EINVAL);
    struct {
        const char *text, *name, *args;
    } lanswers[] = {
        {"{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Paris\"}}", "get_weather", "{\"city\": \"Paris\"}"},
        {" <|python_tag|>{\"name\": \"f\", \"parameters\": {}}\n", "f", "{}"},
        {"{\"name\": \"f\"}", "f", "{}"},
        {"The weather is fine.", NULL, NULL},
        {"{\"name\": \"f\", \"parameters\": {}} and more", NULL, NULL},
        {"{\"name\": \"f\", \"parameters\": [1]}", NULL, NULL},
        {"{\"parameters\": {}}", NULL, NULL},
        {"{\"name\": \"f\", \"parameters\": {\"x\": ", NULL, NULL},
    };
    for (size_t k = 0; k < sizeof(lanswers) / sizeof(lanswers[0]); k++) {
        eng_tool_call *calls = NULL;
        size_t n = 99;
        size_t cl = 0;
        CHECK(eng_chat_parse_calls(&ll, lanswers[k].text, strlen(lanswers[k].text), &calls, &n, &cl) == 0);
        CHECK(cl == (n ? 0 : strlen(lanswers[k].text)));
        CHECK(n == (lanswers[k].name ? 1u : 0u));
        if (n == 1 && lanswers[k].name)
            CHECK(!strcmp(calls[0].name, lanswers[k].name) && !strcmp(calls[0].arguments, lanswers[k].args));
        else if (n != (lanswers[k].name ? 1u : 0u))
            fprintf(stderr, "llama answer %zu: %zu calls\n", k, n);
        eng_tool_calls_free(calls, n);
    }

    /* LFM2's answers: Python calls in their blocks, the arguments as
     * json.dumps writes the values those literals are */
    {
        size_t len;
        char *t = read_template("lfm2", &len);
        eng_chat_info lf;
        eng_chat_detect(t, len, &lf);
        free(t);
        static const struct {
            const char *text;
            size_t n;
            const char *name[3], *args[3];
            const char *content;
        } fanswers[] = {
            {"<|tool_call_start|>[get_weather(city=\"Paris\", unit='celsius')]<|tool_call_end|>", 1,
             {"get_weather"}, {"{\"city\": \"Paris\", \"unit\": \"celsius\"}"}, ""},
            {"Checking.\n<|tool_call_start|>[a(), b.c-d(x=1.50, y=-2e3, z=True, w=None, v=false),"
             " e(l=[1, 'two', {'k': \"v\\n\\u00e9\\x41\"},], d={})]<|tool_call_end|>then",
             3, {"a", "b.c-d", "e"},
             {"{}", "{\"x\": 1.5, \"y\": -2000.0, \"z\": true, \"w\": null, \"v\": false}",
              "{\"l\": [1, \"two\", {\"k\": \"v\\n\xc3\xa9" "A\"}], \"d\": {}}"}, "Checking."},
            /* two blocks; a quote, a backslash Python keeps, a tab */
            {"<|tool_call_start|>[f(s='it\\'s \"x\" \\q\t')]<|tool_call_end|> and "
             "<|tool_call_start|>[g(n=3)]", 2, {"f", "g"},
             {"{\"s\": \"it's \\\"x\\\" \\\\q\\t\"}", "{\"n\": 3}"}, ""},
            /* not calls: the answer stays text */
            {"[f(x=1)]", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>f(x=1)<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(1)]<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(x=)]<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(x=.5)]<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(x='open)]<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(x=1)] junk<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(x=1);g(y=2)]<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(x=1 y=2)]<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[]<|tool_call_end|>", 0, {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(x=1)]<|tool_call_end|><|tool_call_start|>[g(y=Nonesuch)]", 0,
             {NULL}, {NULL}, NULL},
            {"<|tool_call_start|>[f(x=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]"
             "]]]]]]])]", 0, {NULL}, {NULL}, NULL}, /* nesting past 32 */
        };
        CHECK(lf.lfm2_calls && lf.tools);
        for (size_t k = 0; k < sizeof(fanswers) / sizeof(fanswers[0]); k++) {
            eng_tool_call *calls = (eng_tool_call *)1;
            size_t n = 99, cl = 0;
            CHECK(eng_chat_parse_calls(&lf, fanswers[k].text, strlen(fanswers[k].text), &calls, &n,
                                       &cl) == 0);
            CHECK(cl == (n ? strlen(fanswers[k].content) : strlen(fanswers[k].text)));
            CHECK(n == fanswers[k].n);
            if (n != fanswers[k].n)
                fprintf(stderr, "lfm2 answer %zu: %zu calls\n", k, n);
            for (size_t j = 0; j < n && n == fanswers[k].n; j++) {
                CHECK(!strcmp(calls[j].name, fanswers[k].name[j]) &&
                      !strcmp(calls[j].arguments, fanswers[k].args[j]));
                if (strcmp(calls[j].arguments, fanswers[k].args[j]))
                    fprintf(stderr, "lfm2 answer %zu call %zu: %s [%s]\n", k, j, calls[j].name,
                            calls[j].arguments);
            }
            eng_tool_calls_free(calls, n);
        }
    }

    /* Qwen3.5's XML calls: a value that is whole JSON (not a string) is
     * that value, any other one a string */
    {
        size_t tlen;
        char *qt = read_template("qwen3.5", &tlen);
        eng_chat_info q5;
        eng_chat_detect(qt, tlen, &q5);
        free(qt);
        CHECK(q5.xml_calls && q5.tools);
        struct {
            const char *text;
            size_t n;
            const char *name[2], *args[2];
            const char *content;
        } xanswers[] = {
            {"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
             "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
             1, {"get_weather"}, {"{\"city\": \"Paris\", \"days\": 3}"}, ""},
            {"Let me check.\n\n<tool_call>\n<function=a>\n<parameter=o>\n{\"k\":[1,2.50]}\n"
             "</parameter>\n<parameter=s>\nline one\nline two\n</parameter>\n<parameter=q>\n"
             "\"quoted\"\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n"
             "</function>\n</tool_call>\nthen",
             2, {"a", "b"},
             {"{\"o\": {\"k\": [1, 2.5]}, \"s\": \"line one\\nline two\", \"q\": "
              "\"\\\"quoted\\\"\"}", "{}"}, "Let me check."},
            /* the closing tag eaten by a stop string */
            {"<tool_call>\n<function=f>\n<parameter=x>\ntrue\n</parameter>\n</function>\n", 1,
             {"f"}, {"{\"x\": true}"}, ""},
            /* not calls: the answer stays text */
            {"<tool_call>\n{\"name\": \"f\"}\n</tool_call>", 0, {NULL}, {NULL}, NULL},
            {"<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>", 0, {NULL},
             {NULL}, NULL},
            {"<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n", 0, {NULL}, {NULL},
             NULL},
            {"<tool_call>\n<function=>\n</function>\n</tool_call>", 0, {NULL}, {NULL}, NULL},
            {"<tool_call>\n<function=f\n>\n</function>\n</tool_call>", 0, {NULL}, {NULL}, NULL},
            {"<tool_call>\n<function=f>\n</function> x</tool_call>", 0, {NULL}, {NULL}, NULL},
            {"<tool_call>\n<function=f>\n</function>\n</tool_call><tool_call>\nf()", 0, {NULL},
             {NULL}, NULL},
        };
        for (size_t k = 0; k < sizeof(xanswers) / sizeof(xanswers[0]); k++) {
            eng_tool_call *calls = (eng_tool_call *)1;
            size_t n = 99, cl = 0;
            CHECK(eng_chat_parse_calls(&q5, xanswers[k].text, strlen(xanswers[k].text), &calls,
                                       &n, &cl) == 0);
            CHECK(cl == (n ? strlen(xanswers[k].content) : strlen(xanswers[k].text)));
            CHECK(n == xanswers[k].n);
            if (n != xanswers[k].n)
                fprintf(stderr, "qwen3.5 answer %zu: %zu calls\n", k, n);
            for (size_t j = 0; j < n && n == xanswers[k].n; j++) {
                CHECK(!strcmp(calls[j].name, xanswers[k].name[j]) &&
                      !strcmp(calls[j].arguments, xanswers[k].args[j]));
                if (strcmp(calls[j].arguments, xanswers[k].args[j]))
                    fprintf(stderr, "qwen3.5 answer %zu call %zu: %s [%s]\n", k, j,
                            calls[j].name, calls[j].arguments);
            }
            eng_tool_calls_free(calls, n);
        }
    }

    /* answers: the calls, their arguments in json.dumps form */
    struct {
        const char *text;
        size_t n;
        const char *name[2], *args[2];
        const char *content; /* the text before the calls */
    } answers[] = {
        {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\",\"n\":1.50}}\n</tool_call>",
         1, {"get_weather"}, {"{\"city\": \"Paris\", \"n\": 1.5}"}, ""},
        {"Let me check.\n<tool_call>\n{\"arguments\": {}, \"name\": \"a\\u00e9\"}\n</tool_call>\n"
         "<tool_call>\n{\"name\": \"b\"}\n</tool_call>",
         2, {"a\xc3\xa9", "b"}, {"{}", "{}"}, "Let me check."},
        /* the closing tag may be missing at the very end (a stop string) */
        {"<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": [1, {\"y\": null}]}}  ", 1, {"f"},
         {"{\"x\": [1, {\"y\": null}]}"}, ""},
        /* not calls: the answer stays text */
        {"no calls here", 0, {NULL}, {NULL}, NULL},
        {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": ", 0, {NULL}, {NULL}, NULL}, /* cut short */
        {"<tool_call>\n{\"arguments\": {}}\n</tool_call>", 0, {NULL}, {NULL}, NULL},             /* no name */
        {"<tool_call>\n{\"name\": 3}\n</tool_call>", 0, {NULL}, {NULL}, NULL},                   /* name not a string */
        {"<tool_call>\n{\"name\": \"f\", \"arguments\": \"{}\"}\n</tool_call>", 0, {NULL}, {NULL}, NULL},
        {"<tool_call>\n[\"f\"]\n</tool_call>", 0, {NULL}, {NULL}, NULL},
        {"<tool_call>\n{\"name\": \"f\"} trailing\n</tool_call>", 0, {NULL}, {NULL}, NULL},
        {"<tool_call>\n{\"name\": \"ok\"}\n</tool_call><tool_call>\n{\"name\": \"\\u0000\"}\n</tool_call>", 0,
         {NULL}, {NULL}, NULL}, /* one bad call: none */
    };
    for (size_t k = 0; k < sizeof(answers) / sizeof(answers[0]); k++) {
        eng_tool_call *calls = (eng_tool_call *)1;
        size_t n = 99;
        size_t cl = 0;
        CHECK(eng_chat_parse_calls(&info, answers[k].text, strlen(answers[k].text), &calls, &n, &cl) == 0);
        CHECK(cl == (n ? strlen(answers[k].content) : strlen(answers[k].text)));
        CHECK(n == answers[k].n);
        if (n != answers[k].n) {
            fprintf(stderr, "answer %zu: %zu calls\n", k, n);
            continue;
        }
        CHECK((n == 0) == (calls == NULL));
        for (size_t j = 0; j < n; j++) {
            CHECK(strcmp(calls[j].name, answers[k].name[j]) == 0);
            CHECK(strcmp(calls[j].arguments, answers[k].args[j]) == 0);
            if (strcmp(calls[j].arguments, answers[k].args[j]) != 0)
                fprintf(stderr, "answer %zu call %zu: [%s]\n", k, j, calls[j].arguments);
        }
        eng_tool_calls_free(calls, n);
    }
}

/* Nemotron Nano v2 beyond tools_cases (jinja2's renderings of its
 * template, tests/data/chat-template-nemotron-nano-v2.jinja): what makes
 * the format, its answers' reasoning and calls, where the template
 * raises. */
static void test_nemotron(void) {
    size_t len;
    char *t = read_template("nemotron-nano-v2", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_NEMOTRON && info.reasoning && info.think_switch && info.tools &&
          !info.default_system[0]);
    /* its newlines written as Jinja's "\n" escapes: the same */
    size_t k;
    char *e = escape_newlines(t, len, &k);
    eng_chat_info esc;
    eng_chat_detect(e, k, &esc);
    CHECK(esc.kind == ENG_CHAT_NEMOTRON && esc.tools);
    free(e);
    /* a tool text we would print differently: no tools; a marker of the
     * format gone: not this format */
    char *cut = malloc(len + 1);
    const char *p = strstr(t, "or just respond to the user.");
    CHECK(p != NULL);
    memcpy(cut, t, len + 1);
    cut[p - t] = 'O';
    eng_chat_info notools;
    eng_chat_detect(cut, len, &notools);
    CHECK(notools.kind == ENG_CHAT_NEMOTRON && !notools.tools && notools.think_switch);
    memcpy(cut, t, len + 1);
    p = strstr(t, "content.split('</think>')[1]");
    CHECK(p != NULL);
    cut[p - t] = 'C';
    eng_chat_detect(cut, len, &notools);
    CHECK(notools.kind == ENG_CHAT_NONE);
    free(cut);
    free(t);

    /* the template raises on no message after the system one */
    char buf[1024];
    eng_chat_msg sys[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "u"}};
    CHECK(eng_chat_render(&info, sys, 0, NULL, ENG_CHAT_ADD_ASSISTANT, buf, sizeof buf) == -EINVAL);
    CHECK(eng_chat_render(&info, sys, 1, NULL, ENG_CHAT_ADD_ASSISTANT, buf, sizeof buf) == -EINVAL);
    CHECK(eng_chat_render(&info, sys, 2, NULL, 0, buf, sizeof buf) ==
          (int)strlen("<SPECIAL_10>System\nS\n\n<SPECIAL_11>User\nu\n"));

    /* an answer: its reasoning (the prompt opened it) up to "</think>" */
    static const char ans[] = "Two cities.\n</think>\n\nParis.";
    size_t to, tl, co;
    CHECK(eng_chat_split_reasoning(&info, ans, sizeof ans - 1, &to, &tl, &co) == 0);
    CHECK(to == 0 && tl == 11 && !strcmp(ans + co, "Paris."));
    static const char plain[] = "Paris."; /* (thinking off: all answer) */
    CHECK(eng_chat_split_reasoning(&info, plain, 6, &to, &tl, &co) == 0 && tl == 0 && co == 0);

    /* its calls: the array of each <TOOLCALL> block after the reasoning */
    static const char call[] =
        "I should look <TOOLCALL>[{\"name\": \"no\"}]</TOOLCALL> it up.</think>Checking.\n"
        "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}},\n"
        " {\"name\": \"round\", \"arguments\": {\"x\": 1.50}}]</TOOLCALL>";
    eng_tool_call *calls = NULL;
    size_t n = 0, cl = 0;
    CHECK(eng_chat_parse_calls(&info, call, sizeof call - 1, &calls, &n, &cl) == 0 && n == 2);
    if (n == 2) {
        CHECK(!strcmp(calls[0].name, "get_weather") && !strcmp(calls[0].arguments, "{\"city\": \"Paris\"}"));
        CHECK(!strcmp(calls[1].name, "round") && !strcmp(calls[1].arguments, "{\"x\": 1.5}"));
        CHECK(cl == (size_t)(strstr(call, "Checking.") - call) + 9);
    }
    eng_tool_calls_free(calls, n);
    /* cut short by a stop string, no reasoning: still calls; not an
     * array, or not objects: text */
    static const char open_call[] = "<TOOLCALL>[{\"name\": \"f\"}]";
    CHECK(eng_chat_parse_calls(&info, open_call, sizeof open_call - 1, &calls, &n, &cl) == 0 && n == 1 &&
          cl == 0 && !strcmp(calls[0].name, "f") && !strcmp(calls[0].arguments, "{}"));
    eng_tool_calls_free(calls, n);
    const char *not_calls[] = {"<TOOLCALL>{\"name\": \"f\"}</TOOLCALL>", "<TOOLCALL>[\"f\"]</TOOLCALL>",
                               "<TOOLCALL>[{\"name\": \"f\"} {\"name\": \"g\"}]</TOOLCALL>",
                               "<TOOLCALL>[{\"name\": \"f\"}] x</TOOLCALL>",
                               "<TOOLCALL>[{\"name\": \"f\", \"arguments\": 1}]</TOOLCALL>",
                               "x</think><TOOLCALL>[{\"name\": 1}]</TOOLCALL>"};
    for (size_t i = 0; i < sizeof(not_calls) / sizeof(not_calls[0]); i++) {
        CHECK(eng_chat_parse_calls(&info, not_calls[i], strlen(not_calls[i]), &calls, &n, &cl) == 0 && n == 0 &&
              calls == NULL);
    }
}

/* Llama 2, Mistral and Zephyr templates: jinja2's renderings
 * (plain_cases), then what we do where the Mistral templates raise. */
static eng_chat_info detect_named(const char *name) {
    size_t len;
    char *t = read_template(name, &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    free(t);
    strcpy(info.bos, "<s>");
    strcpy(info.eos, "</s>");
    return info;
}

static void test_spm_families(void) {
    for (size_t k = 0; k < sizeof(plain_cases) / sizeof(plain_cases[0]); k++) {
        const struct tools_case *c = &plain_cases[k];
        eng_chat_info info = detect_named(c->template);
        eng_chat_template want = !strcmp(c->template, "llama2")     ? ENG_CHAT_LLAMA2
                                 : !strcmp(c->template, "zephyr")     ? ENG_CHAT_ZEPHYR
                                 : !strcmp(c->template, "olmo2")      ? ENG_CHAT_TULU
                                 : !strncmp(c->template, "granite4", 8) ? ENG_CHAT_GRANITE
                                 : !strcmp(c->template, "exaone4")    ? ENG_CHAT_EXAONE
                                 : !strcmp(c->template, "ministral3-reasoning") ||
                                   !strcmp(c->template, "mistral-small3.2") ? ENG_CHAT_MISTRAL7
                                 : !strncmp(c->template, "phi", 3)    ? ENG_CHAT_PHI3
                                 : !strncmp(c->template, "mistral-v3", 10) ? ENG_CHAT_MISTRAL3
                                 : !strncmp(c->template, "gemma", 5)  ? ENG_CHAT_GEMMA
                                 : !strncmp(c->template, "deepseek-r1", 11) ? ENG_CHAT_DEEPSEEK_R1
                                 : !strncmp(c->template, "lfm2", 4)   ? ENG_CHAT_CHATML
                                 : !strcmp(c->template, "glm4")       ? ENG_CHAT_GLM4
                                 : !strcmp(c->template, "ernie4.5")   ? ENG_CHAT_ERNIE
                                                                      : ENG_CHAT_MISTRAL;
        const bool m7 = want == ENG_CHAT_MISTRAL7, m7r = !strcmp(c->template, "ministral3-reasoning");
        const bool g40 = !strcmp(c->template, "granite4.0"), g4 = want == ENG_CHAT_GRANITE;
        const bool ex4 = want == ENG_CHAT_EXAONE, lfm25 = !strcmp(c->template, "lfm2.5");
        CHECK(info.granite4 == g4 && info.exaone4 == ex4 &&
              info.tools == (g4 || ex4 || !strncmp(c->template, "lfm2", 4)));
        const bool lfm = !strncmp(c->template, "lfm2", 4);
        CHECK(info.lfm2_past == lfm25 && info.lfm2_tool == !strcmp(c->template, "lfm2"));
        CHECK(info.lfm2_calls == lfm && info.lfm2_marks == (lfm && !lfm25));
        CHECK(info.kind == want &&
              info.reasoning == (want == ENG_CHAT_DEEPSEEK_R1 || m7r || ex4 || lfm25) &&
              info.bracket_think == m7r &&
              !info.default_system[0] == !(m7 || g40) && info.dated_default == (m7 && !m7r));
        CHECK(info.r1_think == (want == ENG_CHAT_DEEPSEEK_R1));
        CHECK(info.r1_strip == !strcmp(c->template, "deepseek-r1-distill"));
        CHECK(info.eos_space == !strcmp(c->template, "mistral-v0.1"));
        CHECK(info.tekken == !strcmp(c->template, "mistral-v3-tekken"));
        CHECK(!info.gemma_nl1 && !info.gemma_no_bos);
        CHECK(info.phi4 == !strcmp(c->template, "phi4-mini"));
        CHECK(info.tulu_bos == (want == ENG_CHAT_TULU));
        CHECK(info.glm_skip_empty == (want == ENG_CHAT_GLM4) && !info.glm_sys_first);
        fprintf(stderr, "plain case %s\n", c->name);
        check_render(&info, c->msgs, c->n_msgs, c->add ? ENG_CHAT_ADD_ASSISTANT : 0, c->want);
    }

    /* OLMo 2's template with its newlines written as Jinja escapes, and
     * Tulu 3's (the same without bos_token): the same format */
    {
        size_t len;
        size_t k;
        char *t = read_template("olmo2", &len), *e = escape_newlines(t, len, &k);
        eng_chat_info ti;
        eng_chat_detect(e, k, &ti);
        CHECK(ti.kind == ENG_CHAT_TULU && ti.tulu_bos);
        const char *b = strstr(t, "{{ bos_token }}");
        CHECK(b == t);
        eng_chat_detect(t + 15, len - 15, &ti);
        CHECK(ti.kind == ENG_CHAT_TULU && !ti.tulu_bos);
        free(e);
        free(t);
    }

    /* Phi-3's first template drops system messages; we print them as its
     * later one does */
    eng_chat_info p3 = detect_named("phi3-mini");
    CHECK(p3.kind == ENG_CHAT_PHI3 && p3.phi3_legacy && p3.phi3_bos);
    eng_chat_msg phi_sys[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U"}};
    check_render(&p3, phi_sys, 2, ENG_CHAT_ADD_ASSISTANT, "<s><|system|>\nS<|end|>\n<|user|>\nU<|end|>\n<|assistant|>\n");
    p3 = detect_named("phi3.5");
    CHECK(p3.kind == ENG_CHAT_PHI3 && !p3.phi3_legacy && p3.phi3_skip_empty_system);

    /* Gemma 3 raises where turns do not alternate; we render them as its
     * loop would. Copies of the template with one "\n" after the system
     * prefix (some GGUFs') keep it; one without trim is not taken for it. */
    eng_chat_info g3 = detect_named("gemma3");
    eng_chat_msg g3_odd[] = {{.role = "user", .content = "a"}, {.role = "user", .content = " b"},
                             {.role = "tool", .content = "1"}, {.role = "system", .content = "S"}};
    check_render(&g3, g3_odd, 4, ENG_CHAT_ADD_ASSISTANT,
                 "<s><start_of_turn>user\na<end_of_turn>\n<start_of_turn>user\nb<end_of_turn>\n"
                 "<start_of_turn>tool\n1<end_of_turn>\n<start_of_turn>system\nS<end_of_turn>\n"
                 "<start_of_turn>model\n");
    check_render(&g3, NULL, 0, ENG_CHAT_ADD_ASSISTANT, "<s><start_of_turn>model\n");
    {
        size_t gl;
        char *gt = read_template("gemma3", &gl);
        char *at = strstr(gt, "'\\n\\n' -%}");
        CHECK(at != NULL);
        memmove(at + 3, at + 5, strlen(at + 5) + 1); /* '\n\n' -> '\n', both places */
        at = strstr(at, "'\\n\\n' -%}");
        CHECK(at != NULL);
        memmove(at + 3, at + 5, strlen(at + 5) + 1);
        eng_chat_info g1;
        eng_chat_detect(gt, strlen(gt), &g1);
        CHECK(g1.kind == ENG_CHAT_GEMMA && g1.gemma_nl1);
        strcpy(g1.bos, "<bos>");
        eng_chat_msg g1_sys[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U"}};
        check_render(&g1, g1_sys, 2, 0, "<bos><start_of_turn>user\nS\nU<end_of_turn>\n");
        char *tr = strstr(gt, "{{ message['content'] | trim }}");
        CHECK(tr != NULL);
        memcpy(tr + 22, "      ", 6); /* "| trim" gone: not Gemma's */
        eng_chat_detect(gt, strlen(gt), &g1);
        CHECK(g1.kind == ENG_CHAT_NONE);
        free(gt);
    }

    /* Gemma 2's template raises on a system message: printed as Gemma 3's
     * does; Gemma 1.0's (no bos_token) prints no BOS */
    eng_chat_info g2 = detect_named("gemma2");
    eng_chat_msg g2_sys[] = {{.role = "system", .content = "S "}, {.role = "user", .content = " U"}};
    check_render(&g2, g2_sys, 2, ENG_CHAT_ADD_ASSISTANT,
                 "<s><start_of_turn>user\nS \n\nU<end_of_turn>\n<start_of_turn>model\n");
    {
        size_t gl;
        char *gt = read_template("gemma2", &gl);
        CHECK(!strncmp(gt, "{{ bos_token }}", 15));
        eng_chat_info g1;
        eng_chat_detect(gt + 15, gl - 15, &g1);
        CHECK(g1.kind == ENG_CHAT_GEMMA && g1.gemma_no_bos);
        check_render(&g1, g2_sys + 1, 1, 0, "<start_of_turn>user\nU<end_of_turn>\n");
        free(gt);
    }

    /* Mistral v3: tool results (they need call ids) and a system message
     * that is not the first are refused */
    eng_chat_info m3 = detect_named("mistral-v3");
    eng_chat_msg m3_tool[] = {{.role = "user", .content = "U"}, {.role = "tool", .content = "1"}};
    eng_chat_msg m3_sys2[] = {{.role = "user", .content = "U"}, {.role = "system", .content = "S"}};
    char b3[128];
    CHECK(eng_chat_render(&m3, m3_tool, 2, NULL, ENG_CHAT_ADD_ASSISTANT, b3, sizeof b3) == -EINVAL);
    CHECK(eng_chat_render(&m3, m3_sys2, 2, NULL, ENG_CHAT_ADD_ASSISTANT, b3, sizeof b3) == -EINVAL);

    /* Mistral refuses system messages and other roles; a system message
     * goes before the next user message, or is a turn of its own */
    eng_chat_info mx = detect_named("mixtral");
    eng_chat_msg sys_user[] = {{.role = "system", .content = "S1"}, {.role = "system", .content = "S2"},
                               {.role = "user", .content = "U"}, {.role = "assistant", .content = "A"},
                               {.role = "system", .content = "S3"}, {.role = "assistant", .content = "B"},
                               {.role = "system", .content = "S4"}};
    check_render(&mx, sys_user, 3, ENG_CHAT_ADD_ASSISTANT, "<s>[INST] S1\n\nS2\n\nU [/INST]");
    check_render(&mx, sys_user, 7, ENG_CHAT_ADD_ASSISTANT,
                 "<s>[INST] S1\n\nS2\n\nU [/INST]A</s>[INST] S3 [/INST]B</s>[INST] S4 [/INST]");
    eng_chat_msg tool[] = {{.role = "user", .content = "U"}, {.role = "tool", .content = "1"}};
    char buf[256];
    CHECK(eng_chat_render(&mx, tool, 2, NULL, ENG_CHAT_ADD_ASSISTANT, buf, sizeof buf) == -EINVAL);
    CHECK(eng_chat_render(&mx, tool, 0, NULL, ENG_CHAT_ADD_ASSISTANT, buf, sizeof buf) == 3 && !strcmp(buf, "<s>"));
    /* tools: not these templates */
    CHECK(eng_chat_render(&mx, tool, 1, "[{\"type\": \"function\"}]", 0, buf, sizeof buf) == -ENOTSUP);

    /* near misses are not taken for these families: a template that only
     * mentions [INST] (Mistral v0.3's differs in spaces) or <|user|> */
    eng_chat_info near;
    const char *v03 = "{{- bos_token }}{%- for message in loop_messages %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}";
    eng_chat_detect(v03, strlen(v03), &near);
    CHECK(near.kind == ENG_CHAT_NONE);
    const char *phi = "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>\\n' }}{% endfor %}";
    eng_chat_detect(phi, strlen(phi), &near);
    CHECK(near.kind == ENG_CHAT_NONE);
}

/* SmolLM3 (the template llama.cpp keeps, Unsloth's edit of the published
 * one) and Granite 3.3: every expected string is jinja2 3.1's rendering
 * (trim_blocks, lstrip_blocks, as transformers) of the stored template. */
#define SMOL3_HEAD(mode) \
    "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: " mode \
    "\n\n## Custom Instructions\n\n"
#define SMOL3_NAME "You are a helpful AI assistant named SmolLM, trained by Hugging Face."
#define EMPTY_THINK "<think>\n\n</think>\n"

/* Conversations the newer families' tests render: one user message; a
 * system message and two turns */
static eng_chat_msg one_user[] = {{.role = "user", .content = "Hi"}};
static eng_chat_msg sys_turns[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U"},
                                   {.role = "assistant", .content = "A"}, {.role = "user", .content = "V"}};

static void test_smollm3_granite(void) {
    size_t len;
    char *t = read_template("smollm3", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_CHATML && info.smollm3 && info.think_switch && !info.tools &&
          info.reasoning && info.default_system[0] == 0);
    size_t th_off, th_len, c_off;
    static const char answer[] = "<think>\nhm\n</think>\nYes.";
    CHECK(eng_chat_split_reasoning(&info, answer, sizeof(answer) - 1, &th_off, &th_len, &c_off) == 0 &&
          th_len > 0 && !strncmp(answer + th_off, "hm", 2) && !strcmp(answer + c_off, "Yes."));
    free(t);
    eng_chat_msg *user = one_user;
    /* reasoning by default: the long instructions (their start and end) */
    char buf[4096];
    int n = eng_chat_render(&info, user, 1, NULL, ENG_CHAT_ADD_ASSISTANT, buf, sizeof(buf));
    static const char head[] = SMOL3_HEAD("/think") SMOL3_NAME " Your role as an assistant involves";
    static const char tail[] = "detail necessary steps needed to reach the conclusion.\n\n<|im_end|>\n"
                               "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    CHECK(n == 1340 && !strncmp(buf, head, sizeof(head) - 1) &&
          !strcmp(buf + n - (sizeof(tail) - 1), tail));
    check_render(&info, user, 1, ENG_CHAT_ADD_ASSISTANT | ENG_CHAT_NO_THINK,
                 SMOL3_HEAD("/no_think") SMOL3_NAME "\n\n<|im_end|>\n"
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" EMPTY_THINK);
    /* the system message's "/no_think" wins; its text less the word and
     * trailing space; answers lose leading newlines; a tool result is a
     * user turn, a later system message nothing */
    eng_chat_msg conv[] = {{.role = "system", .content = "Be terse. /no_think  \n"},
                           {.role = "user", .content = "a"},
                           {.role = "assistant", .content = "\n\nb"},
                           {.role = "tool", .content = "r"},
                           {.role = "system", .content = "late"}};
    check_render(&info, conv, 5, true,
                 SMOL3_HEAD("/no_think") "Be terse.\n\n<|im_end|>\n<|im_start|>user\na<|im_end|>\n"
                 "<|im_start|>assistant\n" EMPTY_THINK "b<|im_end|>\n"
                 "<|im_start|>user\nr<|im_end|>\n<|im_start|>assistant\n" EMPTY_THINK);
    /* both words: "/no_think" counts, both go ("/no_think" first) */
    eng_chat_msg both[] = {{.role = "system", .content = "x/no_think/think y"}, {.role = "user", .content = "q"}};
    check_render(&info, both, 2, true,
                 SMOL3_HEAD("/no_think") "x y\n\n<|im_end|>\n<|im_start|>user\nq<|im_end|>\n"
                 "<|im_start|>assistant\n" EMPTY_THINK);
    /* "/think" in the system message beats ENG_CHAT_NO_THINK, and leaves
     * no instructions of its own: the default */
    eng_chat_msg think[] = {{.role = "system", .content = "/think"}, {.role = "user", .content = "a"},
                            {.role = "assistant", .content = "b"}};
    n = eng_chat_render(&info, think, 3, NULL, ENG_CHAT_NO_THINK, buf, sizeof(buf));
    static const char tail2[] = "conclusion.\n\n<|im_end|>\n<|im_start|>user\na<|im_end|>\n"
                                "<|im_start|>assistant\nb<|im_end|>\n";
    CHECK(n == 1351 && !strncmp(buf, head, sizeof(head) - 1) &&
          !strcmp(buf + n - (sizeof(tail2) - 1), tail2));

    t = read_template("granite3.3", &len);
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_GRANITE && !info.tools && !info.think_switch);
    free(t);
    eng_chat_msg *sys = sys_turns;
    check_render(&info, sys, 4, true,
                 "<|start_of_role|>system<|end_of_role|>S<|end_of_text|>\n"
                 "<|start_of_role|>user<|end_of_role|>U<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>A<|end_of_text|>\n"
                 "<|start_of_role|>user<|end_of_role|>V<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>");
    /* the assistant's header follows a message only */
    check_render(&info, sys, 1, true, "<|start_of_role|>system<|end_of_role|>S<|end_of_text|>\n");
    /* no system message: the template's own, dated today (as jinja2's
     * strftime_now('%B %d, %Y'); compared unless the day changed meanwhile) */
    for (int attempt = 0; attempt < 2; attempt++) {
        char date[64], want[512], again[64];
        time_t now = time(NULL);
        struct tm tm;
        CHECK(localtime_r(&now, &tm) && strftime(date, sizeof(date), "%B %d, %Y", &tm));
        snprintf(want, sizeof(want),
                 "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. "
                 "Today's Date: %s. You are Granite, developed by IBM. You are a helpful AI "
                 "assistant.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>U<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>A<|end_of_text|>\n", date);
        n = eng_chat_render(&info, sys + 1, 2, NULL, 0, buf, sizeof(buf));
        now = time(NULL);
        CHECK(localtime_r(&now, &tm) && strftime(again, sizeof(again), "%B %d, %Y", &tm));
        if (strcmp(date, again))
            continue;
        CHECK(n == (int)strlen(want) && !strcmp(buf, want));
        break;
    }
}

/* EXAONE 3.5 and Granite 3.0 (their GGUFs' templates): jinja2's renderings */
static void test_exaone_granite30(void) {
    size_t len;
    char *t = read_template("exaone3.5", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_EXAONE && !info.tools && !info.think_switch);
    free(t);
    eng_chat_msg *user = one_user;
    check_render(&info, user, 1, true, "[|system|][|endofturn|]\n[|user|]Hi\n[|assistant|]");
    check_render(&info, sys_turns, 4, true,
                 "[|system|]S[|endofturn|]\n[|user|]U\n[|assistant|]A[|endofturn|]\n[|user|]V\n"
                 "[|assistant|]");
    eng_chat_msg tool[] = {{.role = "user", .content = "U"}, {.role = "assistant", .content = "A"},
                           {.role = "tool", .content = "T"}};
    check_render(&info, tool, 3, false,
                 "[|system|][|endofturn|]\n[|user|]U\n[|assistant|]A[|endofturn|]\n"
                 "[|tool|]T[|endofturn|]\n");

    /* EXAONE 4.0's own template (tests/data): plain_cases and tools_cases;
     * a role it does not know is refused, as the template raises */
    t = read_template("exaone4", &len);
    eng_chat_detect(t, len, &info);
    free(t);
    CHECK(info.kind == ENG_CHAT_EXAONE && info.exaone4 && info.tools && info.reasoning);
    eng_chat_msg dev[] = {{.role = "developer", .content = "D"}};
    char buf[64];
    CHECK(eng_chat_render(&info, dev, 1, NULL, 0, buf, sizeof(buf)) == -EINVAL);

    t = read_template("granite3.0", &len);
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_GRANITE && info.granite30 && !info.tools);
    free(t);
    check_render(&info, user, 1, true,
                 "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>");
    /* roles it does not know print nothing; tool_response does */
    eng_chat_msg roles[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U"},
                            {.role = "assistant", .content = "A"}, {.role = "tool", .content = "T"},
                            {.role = "tool_response", .content = "R"}};
    check_render(&info, roles, 5, true,
                 "<|start_of_role|>system<|end_of_role|>S<|end_of_text|>\n"
                 "<|start_of_role|>user<|end_of_role|>U<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>A<|end_of_text|>\n"
                 "<|start_of_role|>tool_response<|end_of_role|>R<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>");
    eng_chat_msg call[] = {{.role = "user", .content = "U"}, {.role = "assistant_tool_call", .content = "C"}};
    check_render(&info, call, 2, false,
                 "<|start_of_role|>user<|end_of_role|>U<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|><|tool_call|>C<|end_of_text|>\n");
}

/* Gemma 4 beyond tools_cases (jinja2's renderings): what we do where the
 * template raises or has no say, its detection, and its answers read back
 * as llama.cpp reads them (common/chat-peg-parser.cpp, its Gemma 4 tests):
 * the reasoning in its thought channel, calls in its own notation. */
static void test_gemma4(void) {
    size_t len;
    char *t = read_template("gemma4", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_GEMMA4 && info.think_switch && info.reasoning && info.tools &&
          !info.default_system[0]);
    /* the earlier template (without the scan of tool messages), which
     * llama.cpp rewrites the history for, is not taken for it */
    char *scan = strstr(t, "loop_messages[k]['role'] != 'tool'");
    CHECK(scan != NULL);
    if (scan) {
        scan[0] = 'L';
        eng_chat_info old;
        eng_chat_detect(t, len, &old);
        CHECK(old.kind == ENG_CHAT_NONE);
    }
    free(t);
    strcpy(info.bos, "<bos>");
    const unsigned A = ENG_CHAT_ADD_ASSISTANT, NT = ENG_CHAT_NO_THINK;

    /* an empty conversation (the template raises without thinking or tools) */
    check_render(&info, NULL, 0, A, "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>model\n");
    check_render(&info, NULL, 0, A | NT, "<bos><|turn>model\n<|channel>thought\n<channel|>");
    /* a result past the calls: named "unknown" (the template raises) */
    static const eng_tool_call f = {(char *)"f", NULL};
    eng_chat_msg extra[] = {
        {.role = "user", .content = "U"},
        {.role = "assistant", .content = "", .tool_calls = &f, .n_tool_calls = 1},
        {.role = "tool", .content = "1"}, {.role = "tool", .content = "2"}};
    check_render(&info, extra, 4, A | NT,
                 "<bos><|turn>user\nU<turn|>\n<|turn>model\n<|tool_call>call:f{}<tool_call|>"
                 "<|tool_response>response:f{value:<|\"|>1<|\"|>}<tool_response|>"
                 "<|tool_response>response:unknown{value:<|\"|>2<|\"|>}<tool_response|>");
    /* tools the template raises on: no "function", a list to iterate that
     * is a number, properties that are not a dict */
    const char *bad[] = {"[5]", "[{\"type\": \"function\"}]",
                         "[{\"function\": {\"name\": \"f\", \"parameters\": {\"required\": 5}}}]",
                         "[{\"function\": {\"name\": \"f\", \"parameters\": "
                         "{\"properties\": [1]}}}]",
                         "[{\"function\": {\"parameters\": {\"properties\": {\"a\": {\"type\": "
                         "\"array\", \"items\": {\"type\": 1}}}}}}]"};
    char buf[256];
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        CHECK(eng_chat_render(&info, extra, 1, bad[k], A, buf, sizeof(buf)) == -EINVAL);
    CHECK(eng_chat_render(&info, extra, 1, "[{\"function\": {}}]", A, buf, sizeof(buf)) > 0);

    /* the reasoning: after "<|channel>thought" and its space up to the
     * first "<channel|>", the content after it */
    static const struct {
        const char *text, *think, *content;
    } splits[] = {
        {"<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", "I'm\nthinking",
         "Hello, world!\nWhat's up?"},
        {"<|channel>thought<channel|>Hello", "", "Hello"},
        {"<|channel><|channel>thought\n<channel|>Hi", "", "Hi"}, /* a stray opening */
        {"<|turn>model\n<|channel>thought\n x<channel|>y<channel|>", "x", "y<channel|>"},
        {"<|channel>thought\nstill thinking", "still thinking", ""}, /* cut short */
        {"Plain.", "", "Plain."},
        {"<|channel>final<channel|>x", "", "<|channel>final<channel|>x"},
        {" <|channel>thought\nx<channel|>y", "", " <|channel>thought\nx<channel|>y"},
    };
    for (size_t k = 0; k < sizeof(splits) / sizeof(splits[0]); k++) {
        const char *a = splits[k].text;
        size_t to = 99, tl = 99, co = 99;
        CHECK(eng_chat_split_reasoning(&info, a, strlen(a), &to, &tl, &co) == 0);
        CHECK(tl == strlen(splits[k].think) && !strncmp(a + to, splits[k].think, tl) &&
              !strcmp(a + co, splits[k].content));
        if (tl != strlen(splits[k].think) || strcmp(a + co, splits[k].content))
            fprintf(stderr, "gemma4 split %zu: [%.*s] [%s]\n", k, (int)tl, a + to, a + co);
    }
    size_t to = 9, tl = 9, co = 9;
    CHECK(eng_chat_split_reasoning(&info, NULL, 0, &to, &tl, &co) == 0 && !to && !tl && !co);

    /* calls: <|tool_call>call:NAME{key:value,...}<tool_call|>, values of
     * every kind (strings between <|"|>, as they are), several, after the
     * reasoning or text, the last one's end eaten by a stop string */
    static const struct {
        const char *text;
        size_t n;
        const char *name[2], *args[2];
        const char *content; /* the text before the calls, from the start */
    } answers[] = {
        {"<|tool_call>call:get_time{city:<|\"|>London<|\"|>}<tool_call|>", 1, {"get_time"},
         {"{\"city\": \"London\"}"}, ""},
        {"Hello, world!\nWhat's up? <|tool_call>call:get_time{city:<|\"|>San Francisco<|\"|>}"
         "<tool_call|>", 1, {"get_time"}, {"{\"city\": \"San Francisco\"}"},
         "Hello, world!\nWhat's up?"},
        {"<|tool_call>call:f{a:42,b:-7,c:3.14,d:true,e:false,f:null,g:[<|\"|>buy milk<|\"|>, 1],"
         "h:{theme:<|\"|>dark<|\"|>,count:3},i:[],j:{},k:1.5e10,l:<|\"|>say \"hi\" \\ \n<|\"|>}"
         "<tool_call|>", 1, {"f"},
         {"{\"a\": 42, \"b\": -7, \"c\": 3.14, \"d\": true, \"e\": false, \"f\": null, \"g\": "
          "[\"buy milk\", 1], \"h\": {\"theme\": \"dark\", \"count\": 3}, \"i\": [], \"j\": {}, "
          "\"k\": 15000000000.0, \"l\": \"say \\\"hi\\\" \\\\ \\n\"}"}, ""},
        {"<|tool_call>call:empty_args{}<tool_call|><|tool_call>call:b.c-d{ x: 1 , y:[ ] }"
         "<tool_call|><|tool_response>", 2, {"empty_args", "b.c-d"},
         {"{}", "{\"x\": 1, \"y\": []}"}, ""},
        {"<|channel>thought\nI'm\nthinking<channel|><|tool_call>call:get_time{city:"
         "<|\"|>Paris<|\"|>}<tool_call|>", 1, {"get_time"}, {"{\"city\": \"Paris\"}"},
         "<|channel>thought\nI'm\nthinking<channel|>"},
        {"<|channel>thought\nx<channel|>Checking.\n<|tool_call>call:f{a:1}", 1, {"f"},
         {"{\"a\": 1}"}, "<|channel>thought\nx<channel|>Checking."},
        /* not calls: the answer stays text */
        {"Plain.", 0, {NULL}, {NULL}, NULL},
        {"<|channel>thought\n<|tool_call>call:f{}<tool_call|><channel|>Done.", 0, {NULL}, {NULL},
         NULL}, /* inside the reasoning */
        {"<|channel>thought\n<|tool_call>call:f{}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:None}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:truex}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:<|\"|>open}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:1,}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{:1}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:.5}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:'x'}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:{a:1}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f {a:1}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>f{a:1}<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:1} x<tool_call|>", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:1", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:1}<tool_call|><|tool_call>call:g{b:}", 0, {NULL}, {NULL}, NULL},
        {"<|tool_call>call:f{a:[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]]]]]]]]}<tool_call|>", 0, {NULL}, {NULL}, NULL}, /* nesting past 32 */
    };
    for (size_t k = 0; k < sizeof(answers) / sizeof(answers[0]); k++) {
        eng_tool_call *calls = (eng_tool_call *)1;
        size_t n = 99, cl = 0;
        const char *a = answers[k].text;
        CHECK(eng_chat_parse_calls(&info, a, strlen(a), &calls, &n, &cl) == 0);
        CHECK(cl == (n && answers[k].content ? strlen(answers[k].content) : strlen(a)));
        CHECK(n == answers[k].n && (n == 0) == (calls == NULL));
        if (n != answers[k].n)
            fprintf(stderr, "gemma4 answer %zu: %zu calls\n", k, n);
        for (size_t j = 0; j < n && n == answers[k].n; j++) {
            CHECK(!strcmp(calls[j].name, answers[k].name[j]) &&
                  !strcmp(calls[j].arguments, answers[k].args[j]));
            if (strcmp(calls[j].arguments, answers[k].args[j]))
                fprintf(stderr, "gemma4 answer %zu call %zu: %s [%s]\n", k, j, calls[j].name,
                        calls[j].arguments);
        }
        eng_tool_calls_free(calls, n);
    }
    /* a call read back renders in the template's notation (null as None, keys sorted) */
    eng_tool_call *calls = NULL;
    size_t n = 0;
    const char *a = answers[2].text;
    CHECK(eng_chat_parse_calls(&info, a, strlen(a), &calls, &n, NULL) == 0 && n == 1);
    if (n == 1) {
        eng_chat_msg back[] = {{.role = "user", .content = "U"},
                               {.role = "assistant", .content = "", .tool_calls = calls,
                                .n_tool_calls = 1}};
        char out[512];
        CHECK(eng_chat_render(&info, back, 2, NULL, NT, out, sizeof(out)) > 0);
        CHECK(strstr(out, "<|tool_call>call:f{a:42,b:-7,c:3.14,d:true,e:false,f:None,"
                          "g:[<|\"|>buy milk<|\"|>,1],h:{count:3,theme:<|\"|>dark<|\"|>},i:[],"
                          "j:{},k:15000000000.0,l:<|\"|>say \"hi\" \\ \n<|\"|>}<tool_call|>"
                          "<|tool_response>") != NULL);
    }
    eng_tool_calls_free(calls, n);
}

/* Mistral's [SYSTEM_PROMPT] templates beyond plain_cases: Mistral Small
 * 3.2's default system prompt with today's date (jinja2 renders 2331 bytes
 * for one user message, the date being 10), a later system message,
 * Ministral 3 Reasoning's [THINK] split. */
static void test_mistral7(void) {
    eng_chat_info info = detect_named("mistral-small3.2");
    CHECK(info.kind == ENG_CHAT_MISTRAL7 && info.dated_default && !info.reasoning);
    char date[2][16];
    const time_t now = time(NULL);
    struct tm tm;
    CHECK(localtime_r(&now, &tm) && strftime(date[0], sizeof(date[0]), "%Y-%m-%d", &tm) == 10);
    char out[4096];
    int r = eng_chat_render(&info, one_user, 1, NULL, ENG_CHAT_ADD_ASSISTANT, out, sizeof(out));
    const time_t later = time(NULL);
    CHECK(localtime_r(&later, &tm) && strftime(date[1], sizeof(date[1]), "%Y-%m-%d", &tm) == 10);
    char want[64];
    bool dated = false;
    for (int k = 0; k < 2; k++) {
        snprintf(want, sizeof(want), "The current date is %s.\n\nWhen you're", date[k]);
        dated |= strstr(out, want) != NULL;
    }
    CHECK(r == 2331 && dated);
    static const char head[] = "<s>[SYSTEM_PROMPT]You are Mistral Small 3, a Large Language Model";
    static const char tail[] = "the moment.[/SYSTEM_PROMPT][INST]Hi[/INST]";
    CHECK(!strncmp(out, head, sizeof(head) - 1));
    CHECK(r > (int)sizeof(tail) && !strcmp(out + r - (int)sizeof(tail) + 1, tail));
    eng_chat_msg late[] = {{.role = "user", .content = "a"}, {.role = "system", .content = "S"}};
    static const char late_tail[] = "[INST]a[/INST][SYSTEM_PROMPT]S[/SYSTEM_PROMPT]";
    r = eng_chat_render(&info, late, 2, NULL, 0, out, sizeof(out));
    CHECK(r > (int)sizeof(late_tail) && !strcmp(out + r - (int)sizeof(late_tail) + 1, late_tail));

    eng_chat_info mr = detect_named("ministral3-reasoning");
    CHECK(mr.kind == ENG_CHAT_MISTRAL7 && mr.reasoning && mr.bracket_think && !mr.dated_default);
    static const char ans[] = "[THINK]\nsum it\n[/THINK]\n\n42";
    size_t to, tl, co;
    CHECK(eng_chat_split_reasoning(&mr, ans, sizeof(ans) - 1, &to, &tl, &co) == 0);
    CHECK(tl == 6 && !strncmp(ans + to, "sum it", 6) && !strcmp(ans + co, "42"));
    /* a Qwen3-style answer is not split on this template */
    static const char qa[] = "<think>x</think>y";
    CHECK(eng_chat_split_reasoning(&mr, qa, sizeof(qa) - 1, &to, &tl, &co) == 0 && tl == 0 && co == 0);
}

/* GLM-4: the 9B-chat template (tests/data, and llama.cpp's rendering of
 * its reference conversation), the named format (llama.cpp's, which
 * prints empty messages), and the lines of the 0414 templates: GLM-Z1's
 * (thinking) and GLM-4-0414's, whose renderings jinja2 3.1 gave. */
#define GLM_SYS_FIRST                                                                          \
    "[gMASK]<sop>{%- for msg in messages %}{%- if msg.role == 'system' %}<|system|>\n"          \
    "{{ msg.content }}{%- endif %}{%- endfor %}"                                               \
    "{%- for message in messages if message.role != 'system' %}"                               \
    "{%- set role = message['role'] %}{%- set content = message['content'] %}"
#define GLM_TURNS(v)                                                                           \
    "{%- set meta = message.get(\"metadata\", \"\") %}"                                        \
    "{%- if role == 'user' %}<|user|>\n{{ " v " }}"                                            \
    "{%- elif role == 'assistant' and not meta %}<|assistant|>\n{{ " v " }}"                   \
    "{%- elif role == 'assistant' and meta %}<|assistant|>{{ meta }}\n{{ " v " }}"             \
    "{%- elif role == 'observation' %}<|observation|>\n{{ " v " }}{%- endif %}{%- endfor %}"

static void test_glm4(void) {
    eng_chat_info info = detect_named("glm4");
    CHECK(info.kind == ENG_CHAT_GLM4 && info.glm_skip_empty && !info.glm_sys_first);
    CHECK(!info.reasoning && !info.r1_think && !info.r1_strip && !info.tools && !info.think_switch);
    static const eng_chat_msg ref[] = {
        {.role = "system", .content = "You are a helpful assistant"},
        {.role = "user", .content = "Hello"},
        {.role = "assistant", .content = "Hi there"},
        {.role = "user", .content = "Who are you"},
        {.role = "assistant", .content = "   I am an assistant   "},
        {.role = "user", .content = "Another question"},
    };
#define GLM_REF                                                                                \
    "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\n"        \
    "Hi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\n"            \
    "Another question"
    check_render(&info, ref, 6, ENG_CHAT_ADD_ASSISTANT, GLM_REF "<|assistant|>\n");
    check_render(&info, ref, 6, 0, GLM_REF);
    check_render(&info, NULL, 0, ENG_CHAT_ADD_ASSISTANT, "[gMASK]<sop><|assistant|>\n");
    size_t to, tl, co;
    CHECK(eng_chat_split_reasoning(&info, "a", 1, &to, &tl, &co) == -ENOTSUP);

    eng_chat_info named;
    eng_chat_named("chatglm4", &named);
    CHECK(named.kind == ENG_CHAT_GLM4 && !named.glm_skip_empty && !named.reasoning);
    check_render(&named, ref, 6, ENG_CHAT_ADD_ASSISTANT, GLM_REF "<|assistant|>\n");
    static const eng_chat_msg empty[] = {{.role = "user", .content = ""},
                                         {.role = "assistant", .content = "x"}};
    check_render(&named, empty, 2, 0, "[gMASK]<sop><|user|>\n<|assistant|>\nx");
    bool listed = false;
    for (const char *const *n = eng_chat_template_names(); *n; n++)
        listed |= !strcmp(*n, "chatglm4");
    CHECK(listed);
#undef GLM_REF

    /* GLM-Z1: systems first, roles it knows, turns after their last
     * "</think>" and stripped, the prompt opening the reasoning */
    static const char z1[] = GLM_SYS_FIRST
        "{%- set visible = content.split('</think>')[-1].strip() %}" GLM_TURNS("visible")
        "{% if add_generation_prompt %}<|assistant|>\n<think>{% endif %}";
    eng_chat_detect(z1, sizeof(z1) - 1, &info);
    CHECK(info.kind == ENG_CHAT_GLM4 && info.glm_sys_first && !info.glm_skip_empty);
    CHECK(info.reasoning && info.r1_think && info.r1_strip && !info.tools);
    static const eng_chat_msg mixed[] = {
        {.role = "user", .content = " a\n"},
        {.role = "assistant", .content = "<think>r</think>x</think>\n b \n"},
        {.role = "tool", .content = "t"},
        {.role = "observation", .content = " 42 "},
        {.role = "system", .content = " S "},
        {.role = "user", .content = ""},
    };
    check_render(&info, mixed, 6, ENG_CHAT_ADD_ASSISTANT,
                 "[gMASK]<sop><|system|>\n S <|user|>\na<|assistant|>\nb<|observation|>\n42"
                 "<|user|>\n<|assistant|>\n<think>");
    /* its answer (the prompt opened the block) split for the history */
    static const char ans[] = "\nsum it\n</think>\n\n42";
    CHECK(eng_chat_split_reasoning(&info, ans, sizeof(ans) - 1, &to, &tl, &co) == 0);
    CHECK(tl == 6 && !strncmp(ans + to, "sum it", 6) && !strcmp(ans + co, "42"));

    /* GLM-4-0414: no thinking; its prompt ends "<|assistant|>" where we
     * print the "\n" the model writes next */
    static const char g0414[] = GLM_SYS_FIRST GLM_TURNS("content")
        "{% if add_generation_prompt %}<|assistant|>{% endif %}";
    eng_chat_detect(g0414, sizeof(g0414) - 1, &info);
    CHECK(info.kind == ENG_CHAT_GLM4 && info.glm_sys_first && !info.glm_skip_empty);
    CHECK(!info.reasoning && !info.r1_think && !info.r1_strip);
    check_render(&info, mixed, 6, 0,
                 "[gMASK]<sop><|system|>\n S <|user|>\n a\n<|assistant|>\n"
                 "<think>r</think>x</think>\n b \n<|observation|>\n 42 <|user|>\n");

    /* GLM-4.5 and later (reasoning_content in their answers) are not this */
    static const char g45[] = "[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>\n"
                              "{% if m.reasoning_content is string %}{% endif %}{% endfor %}";
    eng_chat_detect(g45, sizeof(g45) - 1, &info);
    CHECK(info.kind == ENG_CHAT_NONE);
}
#undef GLM_SYS_FIRST
#undef GLM_TURNS

/* ERNIE 4.5: the model's template (tests/data), rendered as jinja2 renders
 * it with cls_token and sep_token undefined (their defaults print); the
 * jinja2 cross-check is in plain_cases. */
static void test_ernie(void) {
    eng_chat_info info = detect_named("ernie4.5");
    CHECK(info.kind == ENG_CHAT_ERNIE && !info.default_system[0]);
    CHECK(!info.reasoning && !info.r1_think && !info.tools && !info.think_switch);
    static const eng_chat_msg conv[] = {
        {.role = "system", .content = "S"},
        {.role = "user", .content = "U"},
        {.role = "assistant", .content = "A"},
        {.role = "user", .content = "V"},
    };
#define ERNIE_CONV "<|begin_of_sentence|>S\nUser: U\nAssistant: A<|end_of_sentence|>User: V\n"
    check_render(&info, conv, 4, ENG_CHAT_ADD_ASSISTANT, ERNIE_CONV "Assistant: ");
    check_render(&info, conv, 4, 0, ERNIE_CONV);
#undef ERNIE_CONV
    /* a result, and any role the template does not name, prints nothing */
    static const eng_chat_msg tool[] = {
        {.role = "user", .content = "q"},
        {.role = "tool", .content = "42"},
        {.role = "ipython", .content = "43"},
    };
    check_render(&info, tool, 3, ENG_CHAT_ADD_ASSISTANT,
                 "<|begin_of_sentence|>User: q\nAssistant: ");
    check_render(&info, tool + 1, 1, 0, "<|begin_of_sentence|>");
    check_render(&info, NULL, 0, ENG_CHAT_ADD_ASSISTANT, "<|begin_of_sentence|>Assistant: ");
    /* no tool calling, no reasoning */
    char buf[64];
    static const char one_tool[] = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    CHECK(eng_chat_render(&info, conv, 4, one_tool, ENG_CHAT_ADD_ASSISTANT, buf, sizeof(buf)) ==
          -ENOTSUP);
    size_t to, tl, co;
    CHECK(eng_chat_split_reasoning(&info, "a", 1, &to, &tl, &co) == -ENOTSUP);

    /* the markers we print are the template's defaults: one that sets
     * others (or lacks the turn lines) is not taken for it */
    size_t len;
    char *t = read_template("ernie4.5", &len);
    static const char *const marks[] = {"\"<|end_of_sentence|>\"", "\"<|begin_of_sentence|>\"",
                                        "\"Assistant: \" + message", "\"User: \" + message"};
    for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++) {
        char *m = strstr(t, marks[k]);
        CHECK(m != NULL);
        if (!m)
            continue;
        const char saved = m[2];
        m[2] = 'x'; /* "<x..." / "Axsistant" / "Uxer" */
        eng_chat_detect(t, len, &info);
        CHECK(info.kind == ENG_CHAT_NONE);
        m[2] = saved;
    }
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_ERNIE);
    free(t);
}

/* gpt-oss (harmony): the model's template (tests/data), against what
 * jinja2 3.1 renders from it (trim_blocks, lstrip_blocks, Hugging Face's
 * tojson) with strftime_now giving "@DATE@", which the checks replace by
 * today's date; its reasoning effort under ENG_CHAT_NO_THINK (jinja2's
 * with reasoning_effort "low"), its tools and calls; the named format; the
 * split of its answers into reasoning and answer, and their calls. */
#define GO_SYS_HEAD(effort)                                                                        \
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"       \
    "Knowledge cutoff: 2024-06\nCurrent date: @DATE@\n\nReasoning: " effort "\n\n"                 \
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
#define GO_SYS(effort) GO_SYS_HEAD(effort) "<|end|>"
#define GO_SYS_TOOLS                                                                               \
    GO_SYS_HEAD("medium") "\nCalls to these tools must go to the commentary channel: "             \
                          "'functions'.<|end|>"
#define GO_CONV_ADD                                                                                \
    GO_SYS("medium")                                                                               \
    "<|start|>developer<|message|># Instructions\n\nS\n\n<|end|>"                                  \
    "<|start|>user<|message|>U<|end|><|start|>assistant<|channel|>final<|message|>A<|end|>"        \
    "<|start|>user<|message|>V<|end|><|start|>assistant"
#define GO_CONV                                                                                    \
    GO_SYS("medium")                                                                               \
    "<|start|>developer<|message|># Instructions\n\nS\n\n<|end|>"                                  \
    "<|start|>user<|message|>U<|end|><|start|>assistant<|channel|>final<|message|>A<|end|>"        \
    "<|start|>user<|message|>V<|end|>"
#define GO_CONV_ANSWER_LAST                                                                        \
    GO_SYS("medium")                                                                               \
    "<|start|>developer<|message|># Instructions\n\nS\n\n<|end|>"                                  \
    "<|start|>user<|message|>U<|end|><|start|>assistant<|channel|>final<|message|>A<|return|>"
#define GO_LOW                                                                                     \
    GO_SYS("low")                                                                                  \
    "<|start|>user<|message|>U<|end|><|start|>assistant<|channel|>final<|message|>A<|end|>"        \
    "<|start|>user<|message|>V<|end|><|start|>assistant"
#define GO_DEVELOPER                                                                               \
    GO_SYS("medium")                                                                               \
    "<|start|>developer<|message|># Instructions\n\nD\n\n<|end|><|start|>user<|message|> U\n"      \
    "<|end|><|start|>assistant"
#define GO_OTHER_ROLES                                                                             \
    GO_SYS("medium")                                                                               \
    "<|start|>user<|message|>U<|end|><|start|>assistant<|channel|>final<|message|> A \n"           \
    "<|end|><|start|>assistant"
#define GO_EMPTY_SYSTEM                                                                            \
    GO_SYS("medium")                                                                               \
    "<|start|>user<|message|>U<|end|><|start|>assistant"
#define GO_TOOLS                                                                                   \
    GO_SYS_TOOLS                                                                                   \
    "<|start|>developer<|message|># Instructions\n\nS\n\n# Tools\n\n## functions\n\n"              \
    "namespace functions {\n\n// Current weather\nin a city\ntype get_weather = (_: {\n"           \
    "// Name, e.g. \"Paris\"\ncity: string,\n"                                                     \
    "unit?: \"celsius\" | \"fahrenheit\", // default: celsius,\n"                                  \
    "days?: number, // default: 3,\n"                                                              \
    "ratio?: number, // default: {\"a\": [1, 2.5, true, null]},\ntags?: string[],\n"               \
    "nums?: number[] | null,\nflags?: boolean[],\nany?: any[],\ngrid?: number[][],\n"              \
    "objs?: {\na?: \n                string}[],\nwide?: any[],\npair?: any[],\nfits?: {\n"         \
    "\xc3""\xa9""\xc3""\xa9""\xc3""\xa9""aaaaaaaaaaaaaaaaaa?: \n                string}[],\n"      \
    "over?: any[],\nmulti?: string | None | 1.5 | True,\none?: string,\nnested: {\nx: \n"          \
    "                number, y?: \n                {\nz?: \n                boolean}},\n"          \
    "plain?: object,\nns?: string | null,\nen?: \"a\" | \"2\" | \"None\",\n"                       \
    "either?: string// s | \nobject | \n"                                                          \
    "number                    // default: 1.5// default: z,\n// ?\nuntyped?: any,\n"              \
    "\xc3""\xa9""t\xc3""\xa9""?: string,\n}) => any;\n\n// No args\n"                              \
    "type noargs = () => any;\n\n// E\ntype empty = () => any;\n\n// F\ntype f = (_: {\n"          \
    "a: string,\nb?: string,\n}) => any;\n\n} // namespace functions<|end|>"                       \
    "<|start|>user<|message|>U<|end|><|start|>assistant"
/* the developer message of the tool f these conversations have */
#define GO_DEV_F                                                                                   \
    "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// F\n"      \
    "type f = (_: {\na: string,\nb?: string,\n}) => any;\n\n} // namespace functions<|end|>"
#define GO_CALLS_ANSWERED                                                                          \
    GO_SYS_TOOLS                                                                                   \
    GO_DEV_F                                                                                       \
    "<|start|>user<|message|>Weather?<|end|>"                                                      \
    "<|start|>assistant to=functions.get_weather<|channel|>commentary "                            \
    "json<|message|>{\"city\": \"Paris\", \"unit\": \"celsius\"}<|call|>"                          \
    "<|start|>functions.get_weather "                                                              \
    "to=assistant<|channel|>commentary<|message|>\"{\\\"temp\\\": 20}\\n\xc3""\xa9""\"<|end|>"     \
    "<|start|>assistant<|channel|>final<|message|>It is 20.<|end|>"                                \
    "<|start|>user<|message|>Thanks<|end|><|start|>assistant"
#define GO_CALLS_PENDING                                                                           \
    GO_SYS_TOOLS                                                                                   \
    GO_DEV_F                                                                                       \
    "<|start|>user<|message|>Go<|end|>"                                                            \
    "<|start|>assistant<|channel|>analysis<|message|>I should call f.<|end|>"                      \
    "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>"             \
    "<|start|>functions.f to=assistant<|channel|>commentary<|message|>\"r1\"<|end|>"               \
    "<|start|>functions.f to=assistant<|channel|>commentary<|message|>\"r2\"<|end|>"               \
    "<|start|>assistant"
#define GO_CALLS_PENDING_R1                                                                        \
    GO_SYS_TOOLS                                                                                   \
    GO_DEV_F                                                                                       \
    "<|start|>user<|message|>Go<|end|>"                                                            \
    "<|start|>assistant<|channel|>analysis<|message|>I should call f.<|end|>"                      \
    "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>"             \
    "<|start|>functions.f to=assistant<|channel|>commentary<|message|>\"r1\"<|end|>"               \
    "<|start|>assistant"
#define GO_CALL_LAST                                                                               \
    GO_SYS_TOOLS                                                                                   \
    GO_DEV_F                                                                                       \
    "<|start|>user<|message|>Go<|end|>"                                                            \
    "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"a\": [1, "           \
    "2.5]}<|call|>"

/* tools with every kind of schema render_typescript_type has, and one */
static const char go_tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"description\": \"Current weather\\nin a city\","
    "  \"parameters\": {\"type\": \"object\", \"required\": [\"city\", \"nested\"], "
    "\"properties\": {"
    "   \"city\": {\"type\": \"string\", \"description\": \"Name, e.g. \\\"Paris\\\"\"},"
    "   \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"], "
    "\"default\": \"celsius\"},"
    "   \"days\": {\"type\": \"integer\", \"default\": 3, \"description\": \"\"},"
    "   \"ratio\": {\"type\": \"number\", \"default\": {\"a\": [1, 2.50, true, null]}},"
    "   \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
    "   \"nums\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"nullable\": true},"
    "   \"flags\": {\"type\": \"array\", \"items\": {\"type\": \"boolean\"}},"
    "   \"any\": {\"type\": \"array\"},"
    "   \"grid\": {\"type\": \"array\", \"items\": {\"type\": \"array\", "
    "\"items\": {\"type\": \"number\"}}},"
    "   \"objs\": {\"type\": \"array\", \"items\": {\"type\": \"object\", "
    "\"properties\": {\"a\": {\"type\": \"string\"}}}},"
    "   \"wide\": {\"type\": \"array\", \"items\": {\"type\": \"object\", "
    "\"properties\": {\"aaaaaaaaaaaa\": {\"type\": \"string\"}, "
    "\"bbbbbbbbbbbbbbbb\": {\"type\": \"string\"}}}},"
    "   \"pair\": {\"type\": \"array\", \"items\": {\"type\": [\"object\", \"object\"]}},"
    "   \"fits\": {\"type\": \"array\", \"items\": {\"type\": \"object\", "
    "\"properties\": {\"\xc3""\xa9""\xc3""\xa9""\xc3""\xa9""aaaaaaaaaaaaaaaaaa\": {\"type\": \"st"
    "ring\"}}}},"
    "   \"over\": {\"type\": \"array\", \"items\": {\"type\": \"object\", "
    "\"properties\": {\"aaaaaaaaaaaaaaaaaaaaaa\": {\"type\": \"string\"}}}},"
    "   \"multi\": {\"type\": [\"string\", null, 1.50, true]},"
    "   \"one\": {\"type\": [\"string\"]},"
    "   \"nested\": {\"type\": \"object\", \"required\": [\"x\"], "
    "\"properties\": {\"x\": {\"type\": \"number\"}, \"y\": {\"type\": \"object\", "
    "\"properties\": {\"z\": {\"type\": \"boolean\"}}}}},"
    "   \"plain\": {\"type\": \"object\"},"
    "   \"ns\": {\"type\": \"string\", \"nullable\": 1},"
    "   \"en\": {\"type\": \"string\", \"enum\": [\"a\", 2, null], \"nullable\": true},"
    "   \"either\": {\"oneOf\": [{\"type\": \"string\", \"description\": \"s\"}, "
    "{\"type\": \"object\"}, {\"type\": \"number\", \"default\": 1.50}], \"default\": \"z\"},"
    "   \"untyped\": {\"description\": \"?\"},"
    "   \"\\u00e9t\\u00e9\": {\"type\": \"string\"}"
    "  }}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"noargs\", "
    "\"description\": \"No args\"}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"empty\", \"description\": \"E\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"F\", "
    "\"parameters\": {\"type\": \"object\", \"required\": \"xa\", "
    "\"properties\": {\"a\": {\"type\": \"string\"}, \"b\": {\"type\": \"string\"}}}}}"
    "]";
static const char go_small_tool[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"F\", "
    "\"parameters\": {\"type\": \"object\", \"required\": \"xa\", "
    "\"properties\": {\"a\": {\"type\": \"string\"}, \"b\": {\"type\": \"string\"}}}}}]";

static void today(char out[16]) {
    const time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || strftime(out, 16, "%Y-%m-%d", &tm) != 10)
        strcpy(out, "?");
}

/* check_render_tools() with want's "@DATE@" today's date, again where the
 * day changed meanwhile. */
static void check_dated(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n,
                        const char *tools, unsigned flags, const char *want) {
    const char *at = strstr(want, "@DATE@");
    CHECK(at != NULL);
    for (int attempt = 0; at && attempt < 2; attempt++) {
        char date[2][16], w[8192];
        const int before = failures;
        today(date[0]);
        snprintf(w, sizeof(w), "%.*s%s%s", (int)(at - want), want, date[0], at + 6);
        check_render_tools(info, msgs, n, tools, flags, w);
        today(date[1]);
        if (!strcmp(date[0], date[1]))
            return;
        failures = before;
    }
}

/* eng_chat_split_reasoning() of text: its reasoning and its answer. */
static void check_split(const eng_chat_info *info, const char *text, const char *think,
                        const char *answer) {
    size_t to = 99, tl = 99, co = 99;
    const size_t n = strlen(text);
    const int r = eng_chat_split_reasoning(info, text, n, &to, &tl, &co);
    const bool ok = r == 0 && to + tl <= n && tl == strlen(think) &&
                    !memcmp(text + to, think, tl) && co <= n && !strcmp(text + co, answer);
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "split of [%s]: r %d think [%.*s] answer [%s]\n", text, r,
                r == 0 && to + tl <= n ? (int)tl : 0, text + (to <= n ? to : 0),
                co <= n ? text + co : "?");
}

/* eng_chat_parse_calls() of text: one call (name NULL: none) and the
 * length of the text before it. */
static void check_call(const eng_chat_info *info, const char *text, const char *name,
                       const char *args, size_t content_len) {
    eng_tool_call *calls = NULL;
    size_t n = 99, cl = 99;
    const int r = eng_chat_parse_calls(info, text, strlen(text), &calls, &n, &cl);
    const bool ok = r == 0 && n == (name ? 1u : 0u) && cl == content_len &&
                    (!name || (!strcmp(calls[0].name, name) && !strcmp(calls[0].arguments, args)));
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "calls of [%s]: r %d n %zu content %zu: %s %s\n", text, r, n, cl,
                n == 1 ? calls[0].name : "-", n == 1 ? calls[0].arguments : "-");
    eng_tool_calls_free(calls, r == 0 ? n : 0);
}

static void test_gpt_oss(void) {
    eng_chat_info info = detect_named("gpt-oss");
    CHECK(info.kind == ENG_CHAT_GPT_OSS && info.reasoning && info.think_switch && info.tools);
    CHECK(!info.default_system[0] && !info.dated_default && !info.r1_think);
    static const eng_chat_msg conv[] = {
        {.role = "system", .content = "S"},
        {.role = "user", .content = "U"},
        {.role = "assistant", .content = "A"},
        {.role = "user", .content = "V"},
    };
    check_dated(&info, conv, 4, NULL, ENG_CHAT_ADD_ASSISTANT, GO_CONV_ADD);
    check_dated(&info, conv, 4, NULL, 0, GO_CONV);
    /* the last message an answer, no prompt after it: "<|return|>" */
    check_dated(&info, conv, 3, NULL, 0, GO_CONV_ANSWER_LAST);
    check_dated(&info, conv + 1, 3, NULL, ENG_CHAT_ADD_ASSISTANT | ENG_CHAT_NO_THINK, GO_LOW);
    static const eng_chat_msg dev[] = {
        {.role = "developer", .content = "D"},
        {.role = "user", .content = " U\n"},
    };
    check_dated(&info, dev, 2, NULL, ENG_CHAT_ADD_ASSISTANT, GO_DEVELOPER);
    static const eng_chat_msg others[] = {
        {.role = "user", .content = "U"},
        {.role = "system", .content = "late"},
        {.role = "developer", .content = "d"},
        {.role = "ipython", .content = "x"},
        {.role = "assistant", .content = " A \n"},
    };
    check_dated(&info, others, 5, NULL, ENG_CHAT_ADD_ASSISTANT, GO_OTHER_ROLES);
    static const eng_chat_msg empty_sys[] = {
        {.role = "system", .content = ""},
        {.role = "user", .content = "U"},
    };
    check_dated(&info, empty_sys, 2, NULL, ENG_CHAT_ADD_ASSISTANT, GO_EMPTY_SYSTEM);
    /* (jinja2 raises on no messages; llama.cpp's renderer, and we, print
     * the system block) */
    check_dated(&info, NULL, 0, NULL, ENG_CHAT_ADD_ASSISTANT,
                GO_SYS("medium") "<|start|>assistant");

    /* tools, calls and their results */
    check_dated(&info, conv, 2, go_tools, ENG_CHAT_ADD_ASSISTANT, GO_TOOLS);
    static const eng_tool_call weather[] = {
        {(char *)"get_weather", (char *)"{\"city\": \"Paris\", \"unit\":\"celsius\"}"}};
    static const eng_chat_msg answered[] = {
        {"user", "Weather?", NULL, 0},
        {"assistant", "Let me check.", weather, 1},
        {"tool", "{\"temp\": 20}\n\xc3\xa9", NULL, 0},
        {"assistant", "It is 20.", NULL, 0},
        {"user", "Thanks", NULL, 0},
    };
    check_dated(&info, answered, 5, go_small_tool, ENG_CHAT_ADD_ASSISTANT, GO_CALLS_ANSWERED);
    /* no answer after it: its content as its reasoning; the first call only */
    static const eng_tool_call fg[] = {{(char *)"f", (char *)"{}"},
                                       {(char *)"g", (char *)"{\"x\": 1}"}};
    static const eng_chat_msg pending[] = {
        {"user", "Go", NULL, 0},
        {"assistant", "I should call f.", fg, 2},
        {"tool", "r1", NULL, 0},
        {"tool", "r2", NULL, 0},
    };
    check_dated(&info, pending, 4, go_small_tool, ENG_CHAT_ADD_ASSISTANT, GO_CALLS_PENDING);
    static const eng_tool_call fa[] = {{(char *)"f", (char *)"{\"a\": [1, 2.50]}"}};
    static const eng_chat_msg call_last[] = {{"user", "Go", NULL, 0}, {"assistant", "", fa, 1}};
    check_dated(&info, call_last, 2, go_small_tool, 0, GO_CALL_LAST);
    /* a whole answer sent back (which the template refuses): its answer,
     * or with calls its reasoning */
    static const eng_chat_msg whole[] = {
        {"user", "Go", NULL, 0},
        {"assistant",
         "<|channel|>analysis<|message|>I should call f.<|end|><|start|>assistant<|channel|>"
         "commentary to=functions.f <|constrain|>json<|message|>{}", fg, 2},
        {"tool", "r1", NULL, 0},
    };
    check_dated(&info, whole, 3, go_small_tool, ENG_CHAT_ADD_ASSISTANT, GO_CALLS_PENDING_R1);
    static const eng_chat_msg whole_answer[] = {
        {"system", "S", NULL, 0},
        {"user", "U", NULL, 0},
        {"assistant", "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final"
                      "<|message|>A", NULL, 0},
        {"user", "V", NULL, 0},
    };
    check_dated(&info, whole_answer, 4, NULL, ENG_CHAT_ADD_ASSISTANT, GO_CONV_ADD);
    /* where the template raises: a result without a call before it (a
     * later answer forgets it); a tool without a name, a description
     * that is not a string; a tool without a description gets an empty
     * one (llama.cpp's; jinja2 raises) */
    char buf[512];
    static const eng_chat_msg orphan[] = {
        {"user", "Go", NULL, 0}, {"assistant", "", fa, 1}, {"assistant", "x", NULL, 0},
        {"tool", "r", NULL, 0}};
    CHECK(eng_chat_render(&info, orphan, 3, NULL, 0, buf, sizeof(buf)) > 0);
    CHECK(eng_chat_render(&info, orphan, 4, NULL, 0, buf, sizeof(buf)) == -EINVAL);
    CHECK(eng_chat_render(&info, orphan + 2, 2, NULL, 0, buf, sizeof(buf)) == -EINVAL);
    static const char *const bad[] = {
        "[{\"type\": \"function\", \"function\": {\"description\": \"d\"}}]",
        "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": 5}}]",
        "[{\"type\": \"function\", \"name\": \"f\"}]",
        "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"properties\":"
        " {\"a\": {\"description\": 5}}}}}]",
        "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"properties\":"
        " {\"a\": {\"type\": \"string\", \"enum\": [\"x\"], \"default\": 1}}}}}]",
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        CHECK(eng_chat_render(&info, conv + 1, 1, bad[k], 0, buf, sizeof(buf)) == -EINVAL);
    check_dated(&info, conv + 1, 1,
                "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": null}},"
                " {\"type\": \"function\", \"function\": {\"name\": \"g\"}}]",
                0,
                GO_SYS_TOOLS "<|start|>developer<|message|># Tools\n\n## functions\n\n"
                "namespace functions {\n\n// \ntype f = () => any;\n\n// \ntype g = () => any;\n\n"
                "} // namespace functions<|end|><|start|>user<|message|>U<|end|>");

    /* the named format: the template's */
    eng_chat_info named;
    eng_chat_named("gpt-oss", &named);
    CHECK(named.kind == ENG_CHAT_GPT_OSS && named.reasoning && named.think_switch && named.tools);
    check_dated(&named, conv, 4, NULL, ENG_CHAT_ADD_ASSISTANT, GO_CONV_ADD);
    check_dated(&named, answered, 5, go_small_tool, ENG_CHAT_ADD_ASSISTANT, GO_CALLS_ANSWERED);
    bool listed = false;
    for (const char *const *nm = eng_chat_template_names(); *nm; nm++)
        listed |= !strcmp(*nm, "gpt-oss");
    CHECK(listed);

    /* the template's texts we print: one without them is not taken for
     * it; without its functions namespace, it has no tools */
    size_t len;
    char *t = read_template("gpt-oss", &len);
    static const char *const marks[] = {
        "ChatGPT, a large", "Knowledge cutoff: 2024-06", "Current date: \" + strftime_now",
        "# Valid channels: analysis", "<|start|>system<|message|>\"",
        "<|start|>assistant<|channel|>final<|message|>\"", "set reasoning_effort = \"medium\"",
    };
    for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++) {
        char *m = strstr(t, marks[k]), *at[4];
        size_t n_at = 0;
        CHECK(m != NULL);
        for (; m && n_at < 4; m = strstr(m + 1, marks[k])) /* (every copy of it) */
            at[n_at++] = m;
        for (size_t j = 0; j < n_at; j++)
            at[j][3] ^= 0x20;
        eng_chat_detect(t, len, &info);
        CHECK(info.kind == ENG_CHAT_NONE);
        for (size_t j = 0; j < n_at; j++)
            at[j][3] ^= 0x20;
    }
    static const char *const tool_marks[] = {
        "render_tool_namespace(\"functions\", tools)", "\"<|start|>assistant to=\"",
        "to=assistant<|channel|>commentary<|message|>", "Calls to these tools must",
    };
    for (size_t k = 0; k < sizeof(tool_marks) / sizeof(tool_marks[0]); k++) {
        char *m = strstr(t, tool_marks[k]);
        CHECK(m != NULL);
        if (!m)
            continue;
        const char saved = m[3];
        m[3] = 'x';
        eng_chat_detect(t, len, &info);
        CHECK(info.kind == ENG_CHAT_GPT_OSS && !info.tools && info.reasoning);
        CHECK(eng_chat_render(&info, conv, 2, go_small_tool, 0, buf, sizeof(buf)) == -ENOTSUP);
        m[3] = saved;
    }
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_GPT_OSS && info.tools);
    free(t);

    /* answers: reasoning, then the final answer (to the end); without
     * reasoning; cut short in it, before the answer, in a header; a stray
     * commentary header first (llama.cpp's); a preamble; text without a
     * header */
#define GO_T "<|channel|>analysis<|message|>think\n it<|end|>"
#define GO_NEXT "<|start|>assistant"
    check_split(&info, GO_T GO_NEXT "<|channel|>final<|message|>The answer.", "think\n it",
                "The answer.");
    check_split(&info, "<|channel|>final<|message|> A\n", "", " A\n");
    check_split(&info, "<|channel|>analysis<|message|>thinking so fa", "thinking so fa", "");
    check_split(&info, GO_T, "think\n it", "");
    check_split(&info, GO_T GO_NEXT, "think\n it", "");
    check_split(&info, GO_T "<|start|>assist", "think\n it", "");
    check_split(&info, GO_T GO_NEXT "<|channel|>fin", "think\n it", "");
    check_split(&info, "<|channel|>analysis", "", "");
    check_split(&info, "", "", "");
    check_split(&info, "<|channel|>commentary to=assistant" GO_T GO_NEXT
                "<|channel|>final<|message|>A", "think\n it", "A");
    check_split(&info, GO_T GO_NEXT "<|channel|>commentary<|message|>Checking.<|end|>" GO_NEXT
                "<|channel|>final<|message|>A", "think\n it", "A");
    check_split(&info, GO_T GO_NEXT "<|channel|>commentary<|message|>Checking.<|end|>",
                "think\n it", "Checking.<|end|>");
    check_split(&info, "Just text <|channel|>", "", "Just text <|channel|>");
    check_split(&info, GO_T "then text", "think\n it", "then text");
    check_split(&info, GO_T GO_NEXT "<|channel|>analysis<|message|>more<|end|>" GO_NEXT
                "<|channel|>final<|message|>A", "think\n it", "A");

    /* calls: the recipient after the channel (the model's way) or in the
     * role's place (the template's); the text before them the preamble's
     * where there is one; a body that is not an object, another
     * recipient: none */
    check_call(&info, GO_T GO_NEXT "<|channel|>commentary to=functions.get_weather <|constrain|>"
               "json<|message|>{\"city\":\"Paris\", \"n\": 1.50}", "get_weather",
               "{\"city\": \"Paris\", \"n\": 1.5}", 0);
    check_call(&info, " to=functions.f<|channel|>commentary json<|message|> {} ", "f", "{}", 0);
    static const char pre[] = GO_T GO_NEXT "<|channel|>commentary<|message|>Checking.<|end|>"
                              GO_NEXT "<|channel|>commentary to=functions.f<|message|>{}<|call|>";
    const size_t pre_end = (size_t)(strstr(pre, "Checking.") - pre) + 9;
    check_call(&info, pre, "f", "{}", pre_end);
    size_t to, tl, co;
    CHECK(eng_chat_split_reasoning(&info, pre, sizeof(pre) - 1, &to, &tl, &co) == 0 &&
          !strncmp(pre + co, "Checking.", 9));
    static const char cut[] = GO_T GO_NEXT "<|channel|>commentary to=functions.f <|constrain|>json"
                              "<|message|>{\"city\": \"Par";
    check_call(&info, cut, NULL, NULL, sizeof(cut) - 1);
    static const char browse[] = GO_T GO_NEXT "<|channel|>analysis to=browser.search <|constrain|>"
                                 "json<|message|>{\"q\": 1}";
    check_call(&info, browse, NULL, NULL, sizeof(browse) - 1);
    static const char no_call[] = "<|channel|>final<|message|>No call.";
    check_call(&info, no_call, NULL, NULL, sizeof(no_call) - 1);
}
#undef GO_T
#undef GO_NEXT

/* t [0, len) with each "\n" escape written as a newline (the other way
 * round from escape_newlines); its length in *ret_len. */
static char *unescape_newlines(const char *t, size_t len, size_t *ret_len) {
    char *u = malloc(len + 1);
    CHECK(u);
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\\' && i + 1 < len && t[i + 1] == 'n')
            u[k++] = '\n', i++;
        else
            u[k++] = t[i];
    }
    *ret_len = k;
    return u;
}

/* The template with the first occurrence of what changed to to (same
 * length): detected into *ret. */
static void detect_changed(const char *t, size_t len, const char *what, const char *to,
                           eng_chat_info *ret) {
    char *c = malloc(len + 1);
    const char *p = strstr(t, what);
    CHECK(c && p && strlen(to) == strlen(what));
    memcpy(c, t, len + 1);
    if (p)
        memcpy(c + (p - t), to, strlen(to));
    eng_chat_detect(c, len, ret);
    free(c);
}

/* Nemotron 3 Nano beyond tools_cases (jinja2's renderings of its
 * template, tests/data/chat-template-nemotron3-nano.jinja): what makes
 * the format, where the template raises, its answers' reasoning and
 * calls (llama.cpp's test answers for it, in tests/test-chat.cpp, then
 * broken ones). */
static void test_nemotron3(void) {
    size_t len;
    char *t = read_template("nemotron3-nano", &len);
    eng_chat_info info;
    eng_chat_detect(t, len, &info);
    CHECK(info.kind == ENG_CHAT_CHATML && info.nemotron3 && info.reasoning && info.think_switch &&
          info.tools);
    CHECK(!info.xml_calls && !info.think_open && !info.smollm3 && !info.lfm2_calls &&
          !info.default_system[0]);
    /* its literals' newlines written as they are: the same */
    size_t k;
    char *u = unescape_newlines(t, len, &k);
    eng_chat_info raw;
    eng_chat_detect(u, k, &raw);
    CHECK(raw.nemotron3 && raw.tools);
    free(u);
    /* a tool text we would print differently: no tools; a piece of the
     * format gone: not this format (the rest reads as Qwen3.5's) */
    eng_chat_info cut;
    detect_changed(t, len, "'\\n<required>'", "'\\n<Required>'", &cut);
    CHECK(cut.kind == ENG_CHAT_CHATML && cut.nemotron3 && !cut.tools && cut.think_switch);
    detect_changed(t, len, "If you choose", "if you choose", &cut);
    CHECK(cut.nemotron3 && !cut.tools);
    detect_changed(t, len, "loop.previtem and", "loop.nextitem and", &cut);
    CHECK(cut.kind == ENG_CHAT_CHATML && !cut.nemotron3 && cut.xml_calls);
    free(t);
    /* neither Qwen3.5's template nor Nano v2's */
    eng_chat_info other = detect_named("qwen3.5");
    CHECK(other.xml_calls && !other.nemotron3);
    other = detect_named("nemotron-nano-v2");
    CHECK(other.kind == ENG_CHAT_NEMOTRON && !other.nemotron3);

    /* the template reads messages[0]: an empty conversation raises */
    char buf[256];
    CHECK(eng_chat_render(&info, NULL, 0, NULL, ENG_CHAT_ADD_ASSISTANT, buf, sizeof buf) ==
          -EINVAL);
    static const char tools[] = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    CHECK(eng_chat_render(&info, NULL, 0, tools, 0, buf, sizeof buf) == -EINVAL);

    /* an answer sent back as generated prints as the turn the model
     * wrote: the prompt, the answer, "<|im_end|>\n" (thinking on and off) */
    eng_chat_msg turn[] = {{.role = "user", .content = "U"},
                           {.role = "assistant", .content = "R\n</think>\nA"}};
    char want[256];
    for (int off = 0; off < 2; off++) {
        const unsigned nt = off ? ENG_CHAT_NO_THINK : 0;
        turn[1].content = off ? "A" : "R\n</think>\nA";
        const int pl = eng_chat_render(&info, turn, 1, NULL, ENG_CHAT_ADD_ASSISTANT | nt, want,
                                       sizeof want);
        CHECK(pl > 0 && pl < 200);
        snprintf(want + pl, sizeof want - (size_t)pl, "%s<|im_end|>\n", turn[1].content);
        check_render(&info, turn, 2, nt, want);
    }

    /* the answer after the prompt's "<think>\n": its reasoning up to
     * "</think>"; thinking off, all answer */
    check_split(&info, "I'm\nthinking\n</think>\nHello, world!\nWhat's up?", "I'm\nthinking",
                "Hello, world!\nWhat's up?");
    check_split(&info, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?");

    /* its calls: Qwen3.5's <tool_call> blocks, after the reasoning */
    static const char one[] = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n"
                              "</parameter>\n</function>\n</tool_call>\n";
    check_call(&info, one, "special_function", "{\"arg1\": 1}", 0);
    static const char thought[] =
        "I'm\nthinking\n</think>\n<tool_call>\n<function=special_function>\n<parameter=arg1>\n"
        "1\n</parameter>\n</function>\n</tool_call>\n";
    check_call(&info, thought, "special_function", "{\"arg1\": 1}",
               strlen("I'm\nthinking\n</think>\n"));
    check_call(&info,
               "<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n"
               "    print(\"Hello, world!\")\n\nhello()\n</parameter>\n</function>\n</tool_call>\n",
               "python",
               "{\"code\": \"def hello():\\n    print(\\\"Hello, world!\\\")\\n\\nhello()\"}", 0);
    /* text before the call, no "</think>": the calls all the same */
    check_call(&info, "Let me look.\n<tool_call>\n<function=f>\n</function>\n</tool_call>", "f",
               "{}", strlen("Let me look."));
    /* a call the reasoning writes out is not one; the reasoning naming
     * the format does not spoil the answer's call */
    check_call(&info,
               "Use <tool_call>\n<function=f>\n</function>\n</tool_call>?\n</think>\nNo need.",
               NULL, NULL, strlen("Use <tool_call>\n<function=f>\n</function>\n</tool_call>?\n"
                                  "</think>\nNo need."));
    static const char named[] = "Write <tool_call><function=...>\n</think>\n\nOK.\n<tool_call>\n"
                                "<function=g>\n<parameter=x>\nab\n</parameter>\n</function>\n";
    check_call(&info, named, "g", "{\"x\": \"ab\"}", (size_t)(strstr(named, "OK.") - named) + 3);
    /* two calls */
    static const char two[] =
        "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n"
        "<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n"
        "</tool_call>\n";
    eng_tool_call *calls = NULL;
    size_t n = 0, cl = 99;
    CHECK(eng_chat_parse_calls(&info, two, sizeof two - 1, &calls, &n, &cl) == 0 && n == 2 &&
          cl == 0);
    if (n == 2) {
        CHECK(!strcmp(calls[0].name, "special_function") &&
              !strcmp(calls[0].arguments, "{\"arg1\": 1}"));
        CHECK(!strcmp(calls[1].name, "special_function_with_opt") &&
              !strcmp(calls[1].arguments, "{\"arg1\": 1, \"arg2\": 2}"));
    }
    eng_tool_calls_free(calls, n);
    /* malformed calls: no calls, the answer stays text */
    static const char *const bad[] = {
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", /* Qwen3's JSON */
        "<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n<parameter=x>\n1", /* cut short */
        "<tool_call>\n<function=f\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=>\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n</function>\n</tool_call><tool_call>\n<function=g>",
        "<tool_call>\n<function=f>\n<parameter=>\n1\n</parameter>\n</function>\n</tool_call>",
        "x\n</think>\n<tool_call>\n<function=f>\n</function> trailing</tool_call>",
        "<tool_call>",
        "</think><tool_call>\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        calls = (eng_tool_call *)1;
        n = 99;
        cl = 0;
        CHECK(eng_chat_parse_calls(&info, bad[i], strlen(bad[i]), &calls, &n, &cl) == 0 &&
              n == 0 && calls == NULL && cl == strlen(bad[i]));
    }
    CHECK(eng_chat_parse_calls(&info, NULL, 0, &calls, &n, &cl) == 0 && n == 0 && cl == 0);
}

int main(void) {
    test_smollm2();
    test_smollm3_granite();
    test_nemotron();
    test_exaone_granite30();
    test_qwen();
    test_qwen3();
    test_qwen35();
    test_llama3();
    test_detect_edges();
    test_render_errors();
    test_tools();
    test_spm_families();
    test_mistral7();
    test_gemma4();
    test_glm4();
    test_ernie();
    test_gpt_oss();
    test_nemotron3();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
