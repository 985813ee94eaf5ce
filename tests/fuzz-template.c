/* libFuzzer target for the chat template text a GGUF carries
 * (tokenizer.chat_template, untrusted like the rest of the file): the
 * input is the template; it is recognised (eng_chat_detect, which also
 * reads default system prompts out of it), then a fixed conversation is
 * rendered with and without tools, into a buffer too small and one large
 * enough, and an answer's reasoning and calls are split as that template
 * would. Not built by meson nor run in CI; build and run it by hand with
 * clang, the engine from source with the sanitizers (as fuzz-load.c):
 *
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
 *       -fno-sanitize-recover=all -Iengine tests/fuzz-template.c \
 *       $(ls engine/[a-z]*.c | grep -v backend-cuda.c) -lm -lpcre2-8 -lpthread \
 *       -o /tmp/fuzz-template
 *   mkdir -p /tmp/tcorpus && cp tests/data/chat-template-*.jinja /tmp/tcorpus/
 *   /tmp/fuzz-template -max_len=16384 /tmp/tcorpus
 *
 * (clang 14 and "f16c": see fuzz-load.c.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    eng_chat_info info;
    eng_chat_detect((const char *)data, size, &info);
    strcpy(info.bos, "<s>");
    strcpy(info.eos, "</s>");
    static const eng_tool_call call = { (char *)"f", (char *)"{\"x\": 1}" };
    eng_chat_msg msgs[] = {
        { .role = "system", .content = "S" },
        { .role = "user", .content = " a\n" },
        { .role = "assistant", .content = "<think>t</think>[THINK]u[/THINK]b" },
        { .role = "assistant", .content = "", .tool_calls = &call, .n_tool_calls = 1 },
        { .role = "tool", .content = "r" },
        { .role = "tool", .content = "q" },
        { .role = "user", .content = "c" },
    };
    const size_t n = sizeof(msgs) / sizeof(msgs[0]);
    static const char tools[] = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    char small[16], *big = malloc(1 << 16);
    if (!big)
        return 0;
    for (int k = 0; k < 4; k++) {
        const unsigned flags = (k & 1 ? ENG_CHAT_ADD_ASSISTANT : 0) | (k & 2 ? ENG_CHAT_NO_THINK : 0);
        const char *t = k & 2 ? tools : NULL;
        eng_chat_render(&info, msgs, n, t, flags, small, sizeof(small));
        eng_chat_render(&info, msgs, k, t, flags, big, 1 << 16);
        eng_chat_render(&info, msgs + 1, n - 1, t, flags, big, 1 << 16);
    }
    static const char answer[] = "[THINK]a[/THINK]<think>b</think>c<tool_call>{\"name\": \"f\", "
                                 "\"arguments\": {}}</tool_call>";
    size_t to, tl, co;
    eng_chat_split_reasoning(&info, answer, sizeof(answer) - 1, &to, &tl, &co);
    eng_tool_call *calls = NULL;
    size_t nc = 0;
    if (eng_chat_parse_calls(&info, answer, sizeof(answer) - 1, &calls, &nc, NULL) == 0)
        eng_tool_calls_free(calls, nc);
    free(big);
    return 0;
}
