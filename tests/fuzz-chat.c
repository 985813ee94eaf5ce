/* libFuzzer target for the text clients send: the tokenizer (plain and
 * with special tokens), the detokenizer, the chat templates with messages,
 * tool calls and tool definitions from the input, and the parsing of tool
 * calls and reasoning in an answer. Not built by meson nor run in CI; build
 * and run it by hand with clang, the engine from source with the
 * sanitizers (as fuzz-load.c):
 *
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
 *       -fno-sanitize-recover=all -Iengine tests/fuzz-chat.c \
 *       $(ls engine/[a-z]*.c | grep -v backend-cuda.c) -lm -lpcre2-8 -lpthread \
 *       -o /tmp/fuzz-chat
 *   SI_FUZZ_MODELS=a.gguf:b.gguf:... /tmp/fuzz-chat -max_len=4096 -rss_limit_mb=4096 CORPUS
 *
 * Models: the default model, and tiny si-synth models that carry the
 * templates of tests/data (--shape tiny --chat-template
 * tests/data/chat-template-qwen2.5.jinja --vocab DEFAULT_MODEL, and so for
 * llama3.2, qwen3, deepseek-r1-distill, mistral-v3, gemma3, ...). Input:
 * byte 0 picks what runs (mod 6; bit 7: the no-think flag), byte 1 the
 * model; the rest, for the templates, is NUL-separated segments: the tools
 * JSON, then messages whose first byte picks the role (and whether an
 * assistant message carries calls). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static eng_model *models[16];
static int n_models;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *env = getenv("SI_FUZZ_MODELS");
    char *list = env ? strdup(env) : NULL;
    for (char *p = list ? strtok(list, ":") : NULL; p && n_models < 16; p = strtok(NULL, ":")) {
        eng_model_params mp = eng_model_params_default();
        mp.n_threads = 1;
        eng_error err;
        if (eng_model_load(p, &mp, &models[n_models], &err) < 0) {
            fprintf(stderr, "%s: %s\n", p, err.msg);
            exit(1);
        }
        n_models++;
    }
    free(list);
    if (!n_models) {
        fprintf(stderr, "SI_FUZZ_MODELS: no model\n");
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const int mode = data[0] % 6;
    const bool no_think = data[0] & 0x80;
    const eng_model *m = models[data[1] % n_models];
    size -= 2;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 2, size);
    buf[size] = 0;
    if (mode <= 1) {
        int32_t toks[4096];
        size_t n = 0;
        const unsigned flags = mode ? ENG_TOK_PARSE_SPECIAL | ENG_TOK_ADD_SPECIAL : 0;
        if (eng_tokenize(m, buf, size, flags, toks, 4096, &n) == 0) {
            char piece[512];
            for (size_t i = 0; i < n; i++)
                (void)eng_token_to_piece(m, toks[i], mode == 1, piece, sizeof(piece));
        }
        (void)eng_utf8_complete_prefix(buf, size);
    } else if (mode <= 3) {
        static const char *const roles[] = {"system", "user", "assistant", "tool", "user"};
        static const eng_tool_call calls[2] = {{(char *)"f", (char *)"{\"a\": 1}"}, {(char *)"g", (char *)"{}"}};
        const char *seg[64];
        size_t ns = 0;
        for (const char *p = buf; p <= buf + size && ns < 64; p += strlen(p) + 1)
            seg[ns++] = p;
        eng_chat_msg msgs[63];
        size_t nm = 0;
        for (size_t i = 1; i < ns; i++) {
            const unsigned char c0 = (unsigned char)seg[i][0];
            msgs[nm] = (eng_chat_msg){roles[c0 % 5], c0 ? seg[i] + 1 : seg[i], NULL, 0};
            if (c0 % 5 == 2 && (c0 & 0x40)) {
                msgs[nm].tool_calls = calls;
                msgs[nm].n_tool_calls = (c0 & 0x20) ? 2 : 1;
            }
            nm++;
        }
        static char out[1 << 16];
        const unsigned flags = ENG_CHAT_ADD_ASSISTANT | (no_think ? ENG_CHAT_NO_THINK : 0);
        if (mode == 2) {
            (void)eng_chat_apply(m, msgs, nm, flags, out, sizeof(out));
            (void)eng_chat_apply(m, msgs, nm, 0, out, 16); /* cut short */
        } else {
            (void)eng_chat_apply_tools(m, msgs, nm, seg[0], flags, out, sizeof(out));
        }
    } else if (mode == 4) {
        eng_tool_call *tc = NULL;
        size_t n = 0, content = 0;
        if (eng_chat_tool_calls(m, buf, size, &tc, &n, &content) == 0)
            eng_tool_calls_free(tc, n);
    } else {
        size_t a, b, c;
        (void)eng_chat_reasoning(m, buf, size, &a, &b, &c);
    }
    free(buf);
    return 0;
}
