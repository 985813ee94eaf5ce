/* Tool calling through a loaded model: synthetic models (si-synth) that
 * carry the real Qwen2.5, Qwen3.5, Llama 3.2 and Gemma 4 templates
 * (tests/data), so that the template is found in the GGUF's metadata as a
 * user's file has it. For
 * each: the model says it can call tools; eng_chat_apply_tools renders the
 * conversations of tests/data/chat-tools-cases.h as jinja2 did; the
 * rendered prompt tokenizes with the template's turn markers as single
 * tokens, one per turn the template printed; a generation from
 * it runs; eng_chat_tool_calls reads a call in the model's format. A
 * model without tool calling (the plain synthetic template) refuses.
 *
 * si-generate --tools (when given): refused by the plain template and
 * for tools that are not an array, run on Qwen's.
 *
 * The SentencePiece families the same way: a synthetic model with the
 * vocabulary of tests/data/vocab-spm.gguf (si-synth --vocab) and the Llama
 * 2, Mistral and Zephyr templates renders plain_cases as jinja2 did, the
 * prompt starts with one BOS (those templates print it, the vocabulary
 * adds it: one is kept), and a generation runs.
 *
 * usage: test-tools SI_SYNTH [SI_GENERATE]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "test-util.h"

#include "data/chat-tools-cases.h"

static const char *synth_bin;

/* the synthetic `shape` with the template tests/data/chat-template-NAME.jinja
 * (NULL: the family's plain one), loaded */
static eng_model *load_with_vocab(const char *shape, const char *tmpl, const char *vocab, char *path)
{
    snprintf(path, 32, "/tmp/si-tools-XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    const char *root = getenv("SI_SOURCE_ROOT");
    const char *wrap = getenv("SI_EXE_WRAPPER");
    char opt[1024] = "";
    if (tmpl)
        snprintf(opt, sizeof opt, "--chat-template '%s/tests/data/chat-template-%s.jinja'", root ? root : ".",
                 tmpl);
    if (vocab)
        snprintf(opt + strlen(opt), sizeof opt - strlen(opt), " --vocab '%s/tests/data/%s'", root ? root : ".",
                 vocab);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s '%s' --shape %s --out '%s' --seed 7 %s", wrap ? wrap : "", synth_bin, shape,
             path, opt);
    int st = system(cmd);
    CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", cmd);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *m = NULL;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s: %s", path, err.msg);
    return m;
}

static eng_model *load_with(const char *shape, const char *tmpl, char *path)
{
    return load_with_vocab(shape, tmpl, NULL, path);
}

static const struct tools_case *find_case(const char *name)
{
    for (size_t k = 0; k < sizeof(tools_cases) / sizeof(tools_cases[0]); k++)
        if (!strcmp(tools_cases[k].name, name))
            return &tools_cases[k];
    CHECKF(0, "no case %s", name);
    return NULL;
}

static int count_token(const int32_t *t, size_t n, int32_t id)
{
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += t[i] == id;
    return c;
}

/* A rendered prompt's tokens, as the daemon makes them. */
static int32_t *prompt_tokens(const eng_model *m, const char *text, size_t len, size_t *n)
{
    eng_tokenize(m, text, len, ENG_TOK_ADD_SPECIAL | ENG_TOK_PARSE_SPECIAL, NULL, 0, n);
    int32_t *toks = malloc(*n * sizeof(*toks));
    CHECK(toks && eng_tokenize(m, text, len, ENG_TOK_ADD_SPECIAL | ENG_TOK_PARSE_SPECIAL, toks, *n, n) == 0);
    return toks;
}

/* A generation of 4 tokens from the prompt runs. */
static void generate_from(eng_model *m, const int32_t *toks, size_t n)
{
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = (int)n + 16;
    eng_session *s;
    CHECK(eng_session_new(m, &sp, &s) == 0);
    eng_gen_params gp = eng_gen_params_default();
    gp.max_tokens = 4;
    eng_gen_stats st;
    CHECK(eng_generate(s, toks, n, &gp, NULL, NULL, &st) == 0 && st.n_prompt == (int)n);
    eng_session_free(s);
}

static void check_model(const char *shape, const char *tmpl, const char *case_name, const char *marker,
                        int marker_count, const char *answer, const char *want_args, const char *want_content)
{
    char path[32];
    eng_model *m = load_with(shape, tmpl, path);
    CHECKF(eng_model_chat_can_call_tools(m), "%s: no tool calling", tmpl);
    const struct tools_case *c = find_case(case_name);
    const unsigned flags = c->add ? ENG_CHAT_ADD_ASSISTANT : 0;
    int len = eng_chat_apply_tools(m, c->msgs, c->n_msgs, c->tools, flags, NULL, 0);
    CHECKF(len == (int)strlen(c->want), "%s: %d bytes, want %zu", case_name, len, strlen(c->want));
    char *text = malloc((size_t)len + 1);
    CHECK(text && eng_chat_apply_tools(m, c->msgs, c->n_msgs, c->tools, flags, text, (size_t)len + 1) == len);
    CHECKF(!strcmp(text, c->want), "%s: rendering differs", case_name);

    /* the marker is one token, and the prompt holds it where the text does */
    int32_t one[8];
    size_t n1 = 0;
    int tr = eng_tokenize(m, marker, strlen(marker), ENG_TOK_PARSE_SPECIAL, one, 8, &n1);
    CHECKF(tr == 0, "%s: tokenizing %s: %d (%zu tokens)", tmpl, marker, tr, n1);
    CHECKF(n1 == 1, "%s: %s is %zu tokens", tmpl, marker, n1);
    size_t n = 0;
    int32_t *toks = prompt_tokens(m, text, (size_t)len, &n);
    int in_text = 0;
    for (const char *p = c->want; (p = strstr(p, marker)) != NULL; p += strlen(marker))
        in_text++;
    CHECKF(in_text == marker_count && count_token(toks, n, one[0]) == marker_count, "%s: %s %d times, %d in the text, want %d",
           tmpl, marker, count_token(toks, n, one[0]), in_text, marker_count);
    /* one BOS: the Llama template prints it, the vocabulary would add it */
    const int32_t bos = eng_token_bos(m);
    CHECKF(bos < 0 || count_token(toks, n, bos) <= 1, "%s: %d BOS tokens", tmpl, count_token(toks, n, bos));

    /* a generation from the tools prompt runs to its length */
    generate_from(m, toks, n);

    /* the model's way of calling */
    eng_tool_call *calls = NULL;
    size_t n_calls = 0;
    size_t content = 99;
    CHECK(eng_chat_tool_calls(m, answer, strlen(answer), &calls, &n_calls, &content) == 0);
    CHECKF(content == strlen(want_content), "%s: content %zu bytes", tmpl, content);
    CHECKF(n_calls == 1 && !strcmp(calls[0].name, "get_weather") && !strcmp(calls[0].arguments, want_args),
           "%s: %zu calls", tmpl, n_calls);
    eng_tool_calls_free(calls, n_calls);
    free(toks);
    free(text);
    eng_model_free(m);
    unlink(path);
}

static void check_spm_family_on(const char *shape, const char *vocab, const char *tmpl, eng_chat_template kind,
                                const char *case_name, int want_bos)
{
    char path[32];
    eng_model *m = load_with_vocab(shape, tmpl, vocab, path);
    CHECKF(eng_model_chat_template(m) == kind, "%s: template kind %d", tmpl, eng_model_chat_template(m));
    const struct tools_case *c = NULL;
    for (size_t k = 0; k < sizeof(plain_cases) / sizeof(plain_cases[0]); k++)
        if (!strcmp(plain_cases[k].name, case_name))
            c = &plain_cases[k];
    CHECKF(c != NULL, "no case %s", case_name);
    const unsigned flags = c->add ? ENG_CHAT_ADD_ASSISTANT : 0;
    int len = eng_chat_apply(m, c->msgs, c->n_msgs, flags, NULL, 0);
    char *text = malloc(len > 0 ? (size_t)len + 1 : 1);
    CHECK(text && len > 0 && eng_chat_apply(m, c->msgs, c->n_msgs, flags, text, (size_t)len + 1) == len);
    CHECKF(!strcmp(text, c->want), "%s: rendering differs: [%s]", case_name, text);
    size_t n = 0;
    int32_t *toks = prompt_tokens(m, text, (size_t)len, &n);
    const int32_t bos = eng_token_bos(m);
    CHECKF(bos >= 0 && (want_bos == 0 || toks[0] == bos) && count_token(toks, n, bos) == want_bos,
           "%s: %d BOS, want %d", tmpl, count_token(toks, n, bos), want_bos);
    if (kind == ENG_CHAT_PHI3) {
        /* each <|end|> one token, and the "\n" after it dropped (Phi-3's
         * tokenizer): no token but <|end|>'s ends with a newline there.
         * Phi-4-mini prints every message (a tool result too), no "\n" */
        const int want_ends = !strcmp(tmpl, "phi4-mini") ? (int)c->n_msgs : 4;
        int32_t end[4], nl[4];
        size_t ne = 0, nn = 0;
        CHECK(eng_tokenize(m, "<|end|>", 7, ENG_TOK_PARSE_SPECIAL, end, 4, &ne) == 0 && ne == 1);
        CHECK(eng_tokenize(m, "\n", 1, 0, nl, 4, &nn) == 0 && nn >= 1);
        int ends = 0, after = 0;
        for (size_t i = 0; i < n; i++)
            if (toks[i] == end[0]) {
                ends++;
                after += i + 1 < n && toks[i + 1] == nl[nn - 1];
            }
        CHECKF(ends == want_ends && after == 0 && eng_token_is_eog(m, end[0]),
               "%s: %d <|end|>, %d followed by a newline", tmpl, ends, after);
    }
    if (kind == ENG_CHAT_GEMMA) {
        /* the turn markers are control tokens, one each, three turns */
        int32_t st[4], en[4];
        size_t ns = 0, nd = 0;
        CHECK(eng_tokenize(m, "<start_of_turn>", 15, ENG_TOK_PARSE_SPECIAL, st, 4, &ns) == 0 && ns == 1);
        CHECK(eng_tokenize(m, "<end_of_turn>", 13, ENG_TOK_PARSE_SPECIAL, en, 4, &nd) == 0 && nd == 1);
        CHECKF(count_token(toks, n, st[0]) == 3 && count_token(toks, n, en[0]) == 3 && eng_token_is_eog(m, en[0]),
               "%s: %d <start_of_turn>, %d <end_of_turn>", tmpl, count_token(toks, n, st[0]),
               count_token(toks, n, en[0]));
    }
    generate_from(m, toks, n);
    free(toks);
    free(text);
    eng_model_free(m);
    unlink(path);
}

/* A DeepSeek-R1 distill: qwen2 layers, Qwen's pre-tokenizer under R1's
 * name, its marker tokens, BOS printed by the template and added by the
 * vocabulary yet once in the prompt, and an answer opening in the
 * reasoning. */
static void check_deepseek_r1(void)
{
    char path[32];
    eng_model *m = load_with_vocab("tiny-qwen2", "deepseek-r1-distill", "vocab-bpe-r1.gguf", path);
    CHECK(eng_model_chat_template(m) == ENG_CHAT_DEEPSEEK_R1);
    const struct tools_case *c = NULL;
    for (size_t k = 0; k < sizeof(plain_cases) / sizeof(plain_cases[0]); k++)
        if (!strcmp(plain_cases[k].name, "r1_turns"))
            c = &plain_cases[k];
    CHECK(c != NULL && !strncmp(c->want, "<s>", 3));
    int len = eng_chat_apply(m, c->msgs, c->n_msgs, ENG_CHAT_ADD_ASSISTANT, NULL, 0);
    char *text = malloc(len > 0 ? (size_t)len + 1 : 1);
    CHECK(text && len > 0 && eng_chat_apply(m, c->msgs, c->n_msgs, ENG_CHAT_ADD_ASSISTANT, text, (size_t)len + 1) == len);
    /* the case was rendered with bos_token "<s>" */
    static const char bos_text[] = "<｜begin▁of▁sentence｜>";
    CHECKF(!strncmp(text, bos_text, strlen(bos_text)) && !strcmp(text + strlen(bos_text), c->want + 3),
           "r1_turns: rendering differs: [%s]", text);
    size_t n = 0;
    int32_t *toks = prompt_tokens(m, text, (size_t)len, &n);
    int32_t mk[3][4];
    size_t nk[3] = { 0, 0, 0 };
    static const char *const markers[3] = { "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>" };
    for (int k = 0; k < 3; k++)
        CHECK(eng_tokenize(m, markers[k], strlen(markers[k]), ENG_TOK_PARSE_SPECIAL, mk[k], 4, &nk[k]) == 0 &&
              nk[k] == 1);
    const int32_t bos = eng_token_bos(m);
    CHECKF(toks[0] == bos && count_token(toks, n, bos) == 1 && count_token(toks, n, mk[0][0]) == 2 &&
               count_token(toks, n, mk[1][0]) == 2 && count_token(toks, n, mk[2][0]) == 1 &&
               eng_token_is_eog(m, mk[2][0]) && mk[2][0] == eng_token_eos(m),
           "r1: %d BOS, %d User, %d Assistant", count_token(toks, n, bos), count_token(toks, n, mk[0][0]),
           count_token(toks, n, mk[1][0]));
    size_t to, tl, co;
    const char *ans = "hmm\n</think>\n\nyes";
    CHECK(eng_chat_reasoning(m, ans, strlen(ans), &to, &tl, &co) == 0 && tl == 3 && !strcmp(ans + co, "yes"));
    generate_from(m, toks, n);
    free(toks);
    free(text);
    eng_model_free(m);
    unlink(path);
}

/* A Gemma 4 (tiny-gemma4, the Gemma 4 vocabulary, its template): the
 * history of calls and results rendered as jinja2 does, its markers one
 * token each (<bos> once: printed, not added again), the end of a turn and
 * the tool-response opening (where a model stops after its calls) ends of
 * generation; an answer's markers come back in its text, so that its
 * reasoning and calls are read from what generation streams. */
static void check_gemma4(void)
{
    char path[32];
    eng_model *m = load_with_vocab("tiny-gemma4", "gemma4", "vocab-gemma4.gguf", path);
    CHECK(eng_model_chat_template(m) == ENG_CHAT_GEMMA4 && eng_model_chat_can_think(m) &&
          eng_model_chat_can_call_tools(m));
    const struct tools_case *c = find_case("gemma4_history");
    const unsigned flags =
        (c->add ? ENG_CHAT_ADD_ASSISTANT : 0) | (c->no_think ? ENG_CHAT_NO_THINK : 0);
    int len = eng_chat_apply_tools(m, c->msgs, c->n_msgs, c->tools, flags, NULL, 0);
    char *text = malloc(len > 0 ? (size_t)len + 1 : 1);
    const size_t cap = len > 0 ? (size_t)len + 1 : 1;
    CHECK(text && len > 0);
    CHECK(eng_chat_apply_tools(m, c->msgs, c->n_msgs, c->tools, flags, text, cap) == len);
    CHECKF(!strcmp(text, c->want), "gemma4_history: rendering differs: [%s]", text);
    size_t n = 0;
    int32_t *toks = prompt_tokens(m, text, (size_t)len, &n);
    static const char *const markers[] = { "<bos>", "<|turn>", "<turn|>", "<|tool_call>",
                                           "<tool_call|>", "<|tool_response>", "<tool_response|>",
                                           "<|\"|>", "<|think|>" };
    for (size_t k = 0; k < sizeof(markers) / sizeof(markers[0]); k++) {
        int32_t one[4];
        size_t n1 = 0, in_text = 0;
        const size_t ml = strlen(markers[k]);
        CHECK(eng_tokenize(m, markers[k], ml, ENG_TOK_PARSE_SPECIAL, one, 4, &n1) == 0 && n1 == 1);
        for (const char *p = text; (p = strstr(p, markers[k])) != NULL; p += strlen(markers[k]))
            in_text++;
        CHECKF(in_text > 0 && count_token(toks, n, one[0]) == (int)in_text,
               "gemma4: %s %d times, %zu in the text", markers[k], count_token(toks, n, one[0]),
               in_text);
        CHECKF(eng_token_is_eog(m, one[0]) == (k == 2 || k == 5),
               "gemma4: %s an end of generation: %d", markers[k], eng_token_is_eog(m, one[0]));
    }
    CHECK(toks[0] == eng_token_bos(m));
    generate_from(m, toks, n);

    /* an answer as the model writes it, back through the tokens */
    static const char answer[] = "<|channel>thought\nTwo cities.<channel|>Checking.<|tool_call>"
                                 "call:get_weather{city:<|\"|>Paris<|\"|>,days:2}<tool_call|>";
    size_t na = 0;
    int32_t at[64];
    CHECK(eng_tokenize(m, answer, strlen(answer), ENG_TOK_PARSE_SPECIAL, at, 64, &na) == 0 &&
          na < 64);
    char back[256];
    size_t bl = 0;
    for (size_t i = 0; i < na; i++) {
        const int r = eng_token_to_piece(m, at[i], false, back + bl, sizeof(back) - 1 - bl);
        CHECK(r >= 0 && bl + (size_t)r < sizeof(back));
        bl += r > 0 ? (size_t)r : 0;
    }
    back[bl] = '\0';
    CHECKF(!strcmp(back, answer), "gemma4: the answer's text [%s]", back);
    size_t to, tl, co, cl = 0, n_calls = 0;
    eng_tool_call *calls = NULL;
    CHECK(eng_chat_reasoning(m, back, bl, &to, &tl, &co) == 0 && tl == 11 &&
          !strncmp(back + to, "Two cities.", tl));
    CHECK(eng_chat_tool_calls(m, back, bl, &calls, &n_calls, &cl) == 0 && n_calls == 1 &&
          !strcmp(calls[0].name, "get_weather") &&
          !strcmp(calls[0].arguments, "{\"city\": \"Paris\", \"days\": 2}"));
    CHECK(cl > co && cl - co == strlen("Checking.") && !strncmp(back + co, "Checking.", cl - co));
    eng_tool_calls_free(calls, n_calls);
    /* the format by its name (a file whose template is not recognised):
     * the same prompt, thinking and calls */
    CHECK(eng_model_set_chat_template(m, "gemma4") == 0 &&
          eng_model_chat_template(m) == ENG_CHAT_GEMMA4 && eng_model_chat_can_think(m) &&
          eng_model_chat_can_call_tools(m));
    char *named = malloc(cap);
    CHECK(named && eng_chat_apply_tools(m, c->msgs, c->n_msgs, c->tools, flags, named, cap) == len &&
          !strcmp(named, text));
    free(named);
    free(toks);
    free(text);
    eng_model_free(m);
    unlink(path);
}

static void check_spm_family(const char *tmpl, eng_chat_template kind, const char *case_name, int want_bos)
{
    check_spm_family_on("tiny", "vocab-spm.gguf", tmpl, kind, case_name, want_bos);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test-tools SI_SYNTH [SI_GENERATE]\n");
        return 2;
    }
    synth_bin = argv[1];
    /* Qwen2.5: a turn for the system block with the tools, each message
     * but the second tool result (one user turn holds both), the answer's
     * header (the tiny vocabulary has no <tool_call> token) */
    check_model("tiny-qwen2", "qwen2.5", "qwen25_history", "<|im_start|>", 9,
                "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n"
                "</tool_call>",
                "{\"city\": \"Paris\"}", "Checking.");
    /* Qwen3.5 (a tiny-qwen35: delta nets and gated attention): the same
     * turns, tools before the system prompt, calls as XML */
    check_model("tiny-qwen35", "qwen3.5", "qwen35_history", "<|im_start|>", 9,
                "Checking.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                "</parameter>\n</function>\n</tool_call>",
                "{\"city\": \"Paris\"}", "Checking.");
    /* Llama 3.2: system, the first user message with the tools, the
     * call, the ipython turn, the answer, the next question, the header */
    check_model("tiny-llama3", "llama3.2", "llama32_history", "<|start_header_id|>", 7,
                "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\":\"celsius\"}}",
                "{\"city\": \"Paris\", \"unit\": \"celsius\"}", "");

    /* SentencePiece families: Llama 2 prints BOS before each user turn */
    check_spm_family("llama2", ENG_CHAT_LLAMA2, "llama2_turns", 2);
    check_spm_family("mistral-v0.1", ENG_CHAT_MISTRAL, "mistral_turns", 1);
    check_spm_family("mixtral", ENG_CHAT_MISTRAL, "mixtral_turns", 1);
    check_spm_family("zephyr", ENG_CHAT_ZEPHYR, "zephyr_system", 1);
    check_spm_family("mistral-v3", ENG_CHAT_MISTRAL3, "mistral3_turns", 1);
    /* a Phi-3: fused tensors, a vocabulary named Phi-3 with its chat tokens */
    check_spm_family_on("tiny-phi3", "vocab-spm-phi3.gguf", "phi3.5", ENG_CHAT_PHI3, "phi35_turns", 1);
    /* a Phi-4-mini: partial rotation, GPT-4o's pre-tokenizer with its turn
     * tokens, no BOS, its compact template */
    check_spm_family_on("tiny-phi4", "vocab-bpe-gpt4o.gguf", "phi4-mini", ENG_CHAT_PHI3, "phi4_empty_system", 0);
    /* a Gemma 3: its layers, a Gemma-like vocabulary (no space put first) */
    check_spm_family_on("tiny-gemma3", "vocab-spm-gemma.gguf", "gemma3", ENG_CHAT_GEMMA, "gemma_turns", 1);
    check_spm_family_on("tiny-gemma2", "vocab-spm-gemma.gguf", "gemma2", ENG_CHAT_GEMMA, "gemma2_turns", 1);

    check_deepseek_r1();
    check_gemma4();

    /* SmolLM3, Granite 3.x/4, EXAONE 3.5/4, Ministral 3, OLMo 2 and ERNIE 4.5 files: their
     * layers, their templates (the reasoning switch SmolLM3's reads), a chat answered */
    static const struct {
        const char *shape, *tmpl, *head;
        eng_chat_template kind;
        bool think;
    } fam[] = {
        { "tiny-smollm3", "smollm3", "<|im_start|>system\n## Metadata\n", ENG_CHAT_CHATML, true },
        { "tiny-granite", "granite3.3", "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff",
          ENG_CHAT_GRANITE, false },
        { "tiny-granite", "granite3.0", "<|start_of_role|>user<|end_of_role|>Name", ENG_CHAT_GRANITE,
          false },
        { "tiny-granite", "granite4.0", "<|start_of_role|>system<|end_of_role|>You are a helpful assistant. "
          "Please ensure", ENG_CHAT_GRANITE, false },
        { "tiny-exaone4", "exaone4", "[|user|]\nName a color.[|endofturn|]\n[|assistant|]\n<think>",
          ENG_CHAT_EXAONE, false },
        { "tiny-exaone", "exaone3.5", "[|system|][|endofturn|]\n[|user|]Name", ENG_CHAT_EXAONE, false },
        { "tiny-ministral3", "ministral3-reasoning", "<|begin_of_text|>[SYSTEM_PROMPT]# HOW YOU SHOULD",
          ENG_CHAT_MISTRAL7, false },
        { "tiny-olmo2", "olmo2", "<|begin_of_text|><|user|>\nName a color.\n<|assistant|>\n", ENG_CHAT_TULU,
          false },
        { "tiny-ernie4_5", "ernie4.5", "<|begin_of_sentence|>User: Name a color.\nAssistant: ",
          ENG_CHAT_ERNIE, false },
        { "tiny-nemotron-h", "nemotron-nano-v2",
          "<SPECIAL_10>System\n\n\n<SPECIAL_11>User\nName a color.\n<SPECIAL_11>Assistant\n<think>\n",
          ENG_CHAT_NEMOTRON, true },
    };
    for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
        char fp[32];
        eng_model *fm = load_with(fam[i].shape, fam[i].tmpl, fp);
        CHECKF(eng_model_chat_template(fm) == fam[i].kind &&
               eng_model_chat_can_think(fm) == fam[i].think, "%s: template kind %d",
               fam[i].tmpl, eng_model_chat_template(fm));
        /* Granite 4 calls tools as Qwen does, EXAONE 4 in its own blocks */
        CHECK(eng_model_chat_can_call_tools(fm) ==
              (!strcmp(fam[i].tmpl, "granite4.0") || !strcmp(fam[i].tmpl, "exaone4") ||
               !strcmp(fam[i].tmpl, "nemotron-nano-v2")));
        eng_chat_msg q[] = {{.role = "user", .content = "Name a color."}};
        char text[4096];
        const int len = eng_chat_apply(fm, q, 1, ENG_CHAT_ADD_ASSISTANT, text, sizeof(text));
        CHECKF(len > 0 && len < (int)sizeof(text) && !strncmp(text, fam[i].head, strlen(fam[i].head)),
               "%s: [%s]", fam[i].tmpl, text);
        size_t n = 0;
        int32_t *toks = prompt_tokens(fm, text, (size_t)len, &n);
        generate_from(fm, toks, n);
        free(toks);
        eng_model_free(fm);
        unlink(fp);
    }

    /* a template by name, or from Jinja text, in place of the file's: every
     * name renders; an unknown one, or text in no known format, changes
     * nothing */
    {
        char tp[32];
        eng_model *tm = load_with("tiny-qwen2", NULL, tp);
        eng_chat_msg q[] = {{.role = "user", .content = "Hi"}};
        char text[512];
        int k = 0;
        for (const char *const *nm = eng_chat_template_names(); *nm; nm++, k++) {
            CHECKF(eng_model_set_chat_template(tm, *nm) == 0 && eng_model_chat_template(tm) != ENG_CHAT_NONE,
                   "%s", *nm);
            const int len = eng_chat_apply(tm, q, 1, ENG_CHAT_ADD_ASSISTANT, text, sizeof(text));
            CHECKF(len > 2 && strstr(text, "Hi"), "%s: [%s]", *nm, text);
        }
        CHECK(k >= 17);
        CHECK(eng_model_set_chat_template(tm, "chatml") == 0);
        CHECK(eng_chat_apply(tm, q, 1, ENG_CHAT_ADD_ASSISTANT, text, sizeof(text)) > 0 &&
              !strcmp(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
        CHECK(eng_model_set_chat_template(tm, "nosuch") == -ENOTSUP &&
              eng_model_chat_template(tm) == ENG_CHAT_CHATML);
        CHECK(eng_model_set_chat_template_text(tm, "hello {{ x }}", 13) == -ENOTSUP &&
              eng_model_chat_template(tm) == ENG_CHAT_CHATML);
        CHECK(eng_model_set_chat_template(tm, NULL) == -EINVAL);
        /* llama3's header and the vocabulary's BOS text kept for it */
        CHECK(eng_model_set_chat_template(tm, "llama3") == 0 &&
              eng_chat_apply(tm, q, 1, ENG_CHAT_ADD_ASSISTANT, text, sizeof(text)) > 0 &&
              strstr(text, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"));
        eng_model_free(tm);
        unlink(tp);
    }

    /* the plain synthetic templates have no tool calling */
    char path[32];
    eng_model *m = load_with("tiny-qwen2", NULL, path);
    CHECK(!eng_model_chat_can_call_tools(m));
    eng_chat_msg u[] = {{.role = "user", .content = "x"}};
    CHECK(eng_chat_apply_tools(m, u, 1, "[{\"type\": \"function\"}]", ENG_CHAT_ADD_ASSISTANT, NULL, 0) == -ENOTSUP);
    CHECK(eng_chat_apply_tools(m, u, 1, "[]", ENG_CHAT_ADD_ASSISTANT, NULL, 0) > 0);
    eng_tool_call *calls = (eng_tool_call *)1;
    size_t n_calls = 5;
    CHECK(eng_chat_tool_calls(m, "{}", 2, &calls, &n_calls, NULL) == -ENOTSUP && n_calls == 0 && calls == NULL);
    eng_model_free(m);

    /* si-generate --tools: refused by the plain template, run by Qwen's */
    if (argc > 2) {
        const char *wrap = getenv("SI_EXE_WRAPPER");
        const char *tools = "'[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]'";
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s '%s' -m '%s' -p x -n 2 -t 1 --tools %s 2>/dev/null >/dev/null", wrap ? wrap : "",
                 argv[2], path, tools);
        int st = system(cmd);
        CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "si-generate --tools on a plain template");
        unlink(path);
        m = load_with("tiny-qwen2", "qwen2.5", path);
        eng_model_free(m);
        snprintf(cmd, sizeof cmd, "%s '%s' -m '%s' -p x -n 2 -t 1 --tools %s 2>/dev/null >/dev/null", wrap ? wrap : "",
                 argv[2], path, tools);
        st = system(cmd);
        CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "si-generate --tools on Qwen2.5's template");
        snprintf(cmd, sizeof cmd, "%s '%s' -m '%s' -p x -n 2 -t 1 --tools '{}' 2>/dev/null >/dev/null",
                 wrap ? wrap : "", argv[2], path);
        st = system(cmd);
        CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "si-generate --tools '{}'");
        /* --chat-template: a name it lists, one it does not, a file */
        snprintf(cmd, sizeof cmd, "%s '%s' -m '%s' -p x -n 2 -t 1 --chat-template tulu 2>/dev/null >/dev/null",
                 wrap ? wrap : "", argv[2], path);
        st = system(cmd);
        CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "si-generate --chat-template tulu");
        snprintf(cmd, sizeof cmd, "%s '%s' -m '%s' -p x -n 2 --chat-template nosuch 2>/dev/null >/dev/null",
                 wrap ? wrap : "", argv[2], path);
        st = system(cmd);
        CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2, "si-generate --chat-template nosuch");
        const char *root = getenv("SI_SOURCE_ROOT");
        snprintf(cmd, sizeof cmd, "%s '%s' -m '%s' -p x -n 2 -t 1 --chat-template-file "
                 "'%s/tests/data/chat-template-olmo2.jinja' 2>/dev/null >/dev/null",
                 wrap ? wrap : "", argv[2], path, root ? root : ".");
        st = system(cmd);
        CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "si-generate --chat-template-file");
    }
    unlink(path);
    printf("tools: ok\n");
    return 0;
}
