/* si-generate: one-shot generation from a GGUF model, without the daemon.
 *
 *   si-generate -m model.gguf -p "What is the capital of France?"
 *
 * The prompt is a chat message rendered with the model's chat template
 * unless --raw is given. Text streams to stdout; statistics go to stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "si-util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: si-generate -m MODEL -p PROMPT [options]\n"
            "  -m, --model PATH        GGUF model\n"
            "  -p, --prompt TEXT       user message (or raw text with --raw)\n"
            "  -s, --system TEXT       system message\n"
            "      --raw               do not apply the chat template\n"
            "      --chat-template NAME  render chats as NAME instead of the file's template\n"
            "                          (chatml, llama3, gemma, ...: --chat-template list)\n"
            "      --chat-template-file F  ... as the Jinja template in F (a format we know)\n"
            "  -n, --max-tokens N      tokens to generate (default 128)\n"
            "  -t, --threads N         worker threads (default: all CPUs)\n"
            "  -c, --ctx N             context length (default 2048)\n"
            "      --temp F            temperature (default 0: greedy)\n"
            "      --top-k N, --top-p F, --min-p F, --repeat-penalty F, --seed N\n"
            "      --frequency-penalty F, --presence-penalty F\n"
            "      --stop TEXT         stop string (repeatable)\n"
            "      --format json       the output is one JSON object (ends where it closes)\n"
            "      --format SCHEMA     ... one matching this JSON Schema ('{\"type\": ...}')\n"
            "      --no-think          a template with a thinking switch (Qwen3, SmolLM3):\n"
            "                          no reasoning\n"
            "      --tools JSON        functions the model may call (a JSON array, OpenAI's form;\n"
            "                          Qwen2.5, Qwen3, Llama 3.1+, Granite 4, EXAONE 4): each\n"
            "                          call printed after the answer as \"tool call: NAME ARGS\"\n"
            "      --context-shift     a full context drops the older half of what follows the\n"
            "                          first --keep N tokens (default 0) and goes on, the keys\n"
            "                          rotated; --shift-reeval: evaluated again instead\n"
            "      --f32               keep weights in f32 instead of f16\n"
            "      --q8                every matrix and the FFN in Q8_0 (CPU): half the memory\n"
            "      --prefill-q8        the prompt's products with Q8_0/Q4_1/Q4_0/Q4_K/Q5_K rows\n"
            "                          take x rounded to 8 bits (CPUs with AVX-512 VNNI;\n"
            "                          faster prefill)\n"
            "      --backend NAME      cpu (default), cuda or auto (CUDA when a GPU is usable)\n"
            "      --device N          the GPU for cuda/auto (default 0)\n");
}

/* the answer so far, for the tool calls in it */
typedef struct answer {
    char *text;
    size_t len, cap;
    bool oom;
} answer;

static int on_text(void *ud, const char *text, size_t len)
{
    answer *a = ud;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (a && !a->oom && a->len + len > a->cap) {
        size_t cap = a->cap ? a->cap : 1024;
        while (cap < a->len + len)
            cap *= 2;
        char *t = realloc(a->text, cap);
        if (!t)
            a->oom = true;
        else
            a->text = t, a->cap = cap;
    }
    if (a && !a->oom) {
        memcpy(a->text + a->len, text, len);
        a->len += len;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *prompt = NULL, *system = NULL, *tools = NULL;
    bool raw = false, no_think = false;
    const char *tmpl_name = NULL, *tmpl_file = NULL;
    const char *stops[16];
    size_t n_stop = 0;
    eng_model_params mp = eng_model_params_default();
    eng_session_params sp = eng_session_params_default();
    eng_gen_params gp = eng_gen_params_default();
    gp.max_tokens = 128;

    enum { O_RAW = 256, O_TEMP, O_TOPK, O_TOPP, O_MINP, O_REP, O_SEED, O_STOP, O_F32, O_BACKEND,
           O_DEVICE, O_Q8, O_FORMAT, O_NO_THINK, O_TMPL, O_TMPL_FILE,
           O_FREQ, O_PRES, O_SHIFT, O_REEVAL, O_KEEP, O_TOOLS,
           O_PREFILL_Q8 };
    static const struct option opts[] = {
        { "model", required_argument, 0, 'm' },   { "prompt", required_argument, 0, 'p' },
        { "system", required_argument, 0, 's' },  { "raw", no_argument, 0, O_RAW },
        { "max-tokens", required_argument, 0, 'n' }, { "threads", required_argument, 0, 't' },
        { "ctx", required_argument, 0, 'c' },     { "temp", required_argument, 0, O_TEMP },
        { "top-k", required_argument, 0, O_TOPK }, { "top-p", required_argument, 0, O_TOPP },
        { "min-p", required_argument, 0, O_MINP }, { "repeat-penalty", required_argument, 0, O_REP },
        { "seed", required_argument, 0, O_SEED }, { "stop", required_argument, 0, O_STOP },
        { "f32", no_argument, 0, O_F32 },         { "help", no_argument, 0, 'h' },
        { "q8", no_argument, 0, O_Q8 },          { "format", required_argument, 0, O_FORMAT },
        { "prefill-q8", no_argument, 0, O_PREFILL_Q8 },
        { "no-think", no_argument, 0, O_NO_THINK }, { "tools", required_argument, 0, O_TOOLS },
        { "context-shift", no_argument, 0, O_SHIFT }, { "shift-reeval", no_argument, 0, O_REEVAL },
        { "keep", required_argument, 0, O_KEEP },
        { "chat-template", required_argument, 0, O_TMPL },
        { "chat-template-file", required_argument, 0, O_TMPL_FILE },
        { "frequency-penalty", required_argument, 0, O_FREQ },
        { "presence-penalty", required_argument, 0, O_PRES },
        { "backend", required_argument, 0, O_BACKEND }, { "device", required_argument, 0, O_DEVICE },
        { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "m:p:s:n:t:c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'p': prompt = optarg; break;
        case 's': system = optarg; break;
        case 'n': gp.max_tokens = atoi(optarg); break;
        case 't': mp.n_threads = atoi(optarg); break;
        case 'c': sp.n_ctx = atoi(optarg); break;
        case O_RAW: raw = true; break;
        case O_NO_THINK: no_think = true; break;
        case O_TMPL: tmpl_name = optarg; break;
        case O_TMPL_FILE: tmpl_file = optarg; break;
        case O_TOOLS: tools = optarg; break;
        case O_SHIFT: gp.context_shift = true; break;
        case O_REEVAL: gp.context_shift = gp.shift_reeval = true; break;
        case O_KEEP: gp.n_keep = atoi(optarg); break;
        case O_TEMP: gp.sampler.temperature = strtof(optarg, NULL); break;
        case O_TOPK: gp.sampler.top_k = atoi(optarg); break;
        case O_TOPP: gp.sampler.top_p = strtof(optarg, NULL); break;
        case O_MINP: gp.sampler.min_p = strtof(optarg, NULL); break;
        case O_REP: gp.sampler.repeat_penalty = strtof(optarg, NULL); break;
        case O_FREQ: gp.sampler.freq_penalty = strtof(optarg, NULL); break;
        case O_PRES: gp.sampler.presence_penalty = strtof(optarg, NULL); break;
        case O_SEED: gp.sampler.seed = strtoull(optarg, NULL, 10); break;
        case O_STOP:
            if (n_stop == sizeof(stops) / sizeof(stops[0])) {
                fprintf(stderr, "too many --stop strings (at most 16)\n");
                return 2;
            }
            stops[n_stop++] = optarg;
            break;
        case O_F32: mp.storage = ENG_DTYPE_F32; break;
        case O_Q8: mp.q8_matrices = true; break;
        case O_PREFILL_Q8: mp.prefill_q8 = true; break;
        case O_BACKEND:
            if (si_backend_parse(optarg, &mp.backend) < 0) {
                fprintf(stderr, "unknown backend '%s' (cpu, cuda, auto)\n", optarg);
                return 2;
            }
            break;
        case O_DEVICE: mp.device = atoi(optarg); break;
        case O_FORMAT: {
            /* a JSON Schema: "{...}" */
            char why[256];
            int fr = optarg[0] == '{' ? eng_json_schema_check(optarg, why, sizeof(why)) : 0;
            if (fr < 0) {
                fprintf(stderr, "--format: %s\n", why);
                return 2;
            }
            if (optarg[0] == '{') {
                gp.format = ENG_FORMAT_JSON;
                gp.json_schema = optarg;
            } else if (eng_format_parse(optarg, &gp.format) < 0) {
                fprintf(stderr, "unknown format '%s' (text, json, or a JSON Schema)\n", optarg);
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (tmpl_name && !strcmp(tmpl_name, "list")) {
        for (const char *const *t = eng_chat_template_names(); *t; t++)
            printf("%s\n", *t);
        return 0;
    }
    char default_path[4096];
    if (!model_path)
        model_path = si_default_model(default_path, sizeof(default_path));
    if (!model_path || !prompt) {
        usage(stderr);
        return 2;
    }
    gp.stop = stops;
    gp.n_stop = n_stop;

    eng_error err;
    eng_model *model;
    uint64_t t0 = eng_time_ns();
    int r = eng_model_load(model_path, &mp, &model, &err);
    if (r < 0) {
        fprintf(stderr, "Failed to load model '%s': %s\n", model_path, err.msg);
        return 1;
    }
    uint64_t t_load = eng_time_ns() - t0;
    if (tmpl_name && eng_model_set_chat_template(model, tmpl_name) < 0) {
        fprintf(stderr, "unknown chat template '%s' (--chat-template list names them)\n",
                tmpl_name);
        eng_model_free(model);
        return 2;
    }
    if (tmpl_file) {
        size_t tl = 0;
        char *t = si_read_file(tmpl_file, 1u << 20, &tl);
        r = t ? eng_model_set_chat_template_text(model, t, tl) : -EIO;
        free(t);
        if (r < 0) {
            fprintf(stderr, "%s: %s\n", tmpl_file,
                    r == -EIO ? "cannot read it (at most 1 MiB)"
                              : "not a chat template format we render");
            eng_model_free(model);
            return 2;
        }
    }

    char *text = NULL;
    size_t text_len;
    if (raw) {
        text = strdup(prompt);
        text_len = strlen(prompt);
    } else {
        eng_chat_msg msgs[2];
        size_t n = 0;
        if (system)
            msgs[n++] = (eng_chat_msg){ .role = "system", .content = system };
        msgs[n++] = (eng_chat_msg){ .role = "user", .content = prompt };
        const unsigned flags = ENG_CHAT_ADD_ASSISTANT | (no_think ? ENG_CHAT_NO_THINK : 0);
        int len = eng_chat_apply_tools(model, msgs, n, tools, flags, NULL, 0);
        if (len < 0) {
            if (len == -ENOTSUP && eng_model_chat_template(model) != ENG_CHAT_NONE)
                fprintf(stderr, "--tools: the model's chat template has no tool calling\n");
            else if (len == -EINVAL && tools)
                fprintf(stderr, "--tools: not a JSON array of tool definitions\n");
            else
                fprintf(stderr, "The model has no chat template I know; use --raw (%s)\n",
                        strerror(-len));
            eng_model_free(model);
            return 1;
        }
        text = malloc((size_t)len + 1);
        if (text)
            eng_chat_apply_tools(model, msgs, n, tools, flags, text, (size_t)len + 1);
        text_len = (size_t)len;
    }
    if (!text) {
        fprintf(stderr, "out of memory\n");
        eng_model_free(model);
        return 1;
    }

    size_t n_tok = 0;
    unsigned flags = ENG_TOK_ADD_SPECIAL | ENG_TOK_PARSE_SPECIAL;
    eng_tokenize(model, text, text_len, flags, NULL, 0, &n_tok);
    int32_t *toks = malloc((n_tok + 1) * sizeof(*toks));
    if (!toks || eng_tokenize(model, text, text_len, flags, toks, n_tok, &n_tok) < 0) {
        fprintf(stderr, "cannot tokenize the prompt\n");
        free(text);
        free(toks);
        eng_model_free(model);
        return 1;
    }

    eng_session *sess;
    if ((r = eng_session_new(model, &sp, &sess)) < 0) {
        fprintf(stderr, "cannot create a session: %s\n", strerror(-r));
        free(text);
        free(toks);
        eng_model_free(model);
        return 1;
    }
    eng_gen_stats st;
    answer ans = {0};
    r = eng_generate(sess, toks, n_tok, &gp, on_text, tools ? &ans : NULL, &st);
    printf("\n");
    if (r == 0 && tools && !raw) {
        eng_tool_call *calls = NULL;
        size_t n_calls = 0;
        if (ans.oom || eng_chat_tool_calls(model, ans.text, ans.len, &calls, &n_calls, NULL) == -ENOMEM)
            fprintf(stderr, "out of memory reading the tool calls\n");
        for (size_t i = 0; i < n_calls; i++)
            printf("tool call: %s %s\n", calls[i].name, calls[i].arguments);
        eng_tool_calls_free(calls, n_calls);
    }
    free(ans.text);
    if (r < 0) {
        fprintf(stderr, "generation failed: %s\n", strerror(-r));
    } else {
        eng_model_info info;
        eng_model_get_info(model, &info);
        if (st.n_shifts > 0) /* first: scripts read the stop reason at the end */
            fprintf(stderr, "context shifts: %d\n", st.n_shifts);
        fprintf(stderr,
                "model %s (%s), %s backend, %d threads, load %.0f ms\n"
                "prompt %d tokens, %.1f tok/s; generated %d tokens, %.1f tok/s; stop: %s\n",
                info.name, info.arch, eng_backend_name(model), info.n_threads, t_load / 1e6,
                st.n_prompt,
                st.prefill_ns ? st.n_prompt * 1e9 / st.prefill_ns : 0.0, st.n_generated,
                st.decode_ns ? st.n_generated * 1e9 / st.decode_ns : 0.0,
                eng_stop_reason_name(st.stop_reason));
    }
    eng_session_free(sess);
    free(text);
    free(toks);
    eng_model_free(model);
    return r < 0 ? 1 : 0;
}
