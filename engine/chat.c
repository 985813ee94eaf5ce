/* Chat templates: recognising a GGUF's Jinja template and rendering it.
 *
 * We do not run Jinja. The templates the engine supports differ only in a few
 * fixed strings, so detection recognises the family from its marker tokens
 * and lifts out the default system prompt; rendering then reproduces what the
 * Jinja template would print for plain system/user/assistant conversations.
 *
 * ChatML (SmolLM2, Qwen2.5):
 *     [<|im_start|>system\nDEFAULT<|im_end|>\n]     when messages[0] is not system
 *     <|im_start|>ROLE\nCONTENT<|im_end|>\n          per message, content verbatim
 *     <|im_start|>assistant\n                         with add_assistant
 *   SmolLM2 inserts the default only inside its message loop, so an empty
 *   conversation gets none; we follow that (Qwen2.5's template fails on an
 *   empty conversation, so there is nothing to match there). Roles are
 *   printed verbatim, as SmolLM2 does; Qwen2.5's tool-call branches are not
 *   reproduced.
 *
 * Llama 3 (3.0 ... 3.3):
 *     <|begin_of_text|>                               once, first
 *     [<|start_header_id|>system<|end_header_id|>\n\nPREAMBLE[TRIM(SYSTEM)]<|eot_id|>]   3.1+
 *     <|start_header_id|>ROLE<|end_header_id|>\n\nTRIM(CONTENT)<|eot_id|>
 *     <|start_header_id|>assistant<|end_header_id|>\n\n   with add_assistant
 *   Every Llama 3 template prints bos_token ("{{- bos_token }}" in 3.1+,
 *   "bos_token + content" for the first message in 3.0, hence no BOS for an
 *   empty 3.0 conversation), so the rendered text starts with the BOS text
 *   and must be tokenized with special tokens parsed and WITHOUT adding
 *   another BOS. Content goes through Jinja's trim filter (ASCII whitespace
 *   here).
 *   The 3.1+ templates always print a system block that starts with
 *   "Cutting Knowledge Date: December 2023\nToday Date: DATE\n\n" and ends
 *   with the conversation's system message, if any, taken out of the
 *   message list. DATE comes from strftime_now() when the renderer defines
 *   it; we use the template's own fallback date ("26 Jul 2024"), which keeps
 *   the output deterministic. For LLAMA3, default_system holds that preamble
 *   (empty for 3.0): it is what the template inserts when the conversation
 *   has no system message. Tools: below.
 *
 * Tool calling (Llama 3.1+, custom tools in the first user message, the
 * templates' default): with tools the system block starts "Environment:
 * ipython\n", and the first message after it becomes
 *     <|start_header_id|>user<|end_header_id|>\n\nLLAMA_TOOLS_HEAD
 *         (TOOL "\n\n")... TRIM(CONTENT)<|eot_id|>
 *   with each definition through tojson(indent=4). An answer with a call
 *   is {"name": "NAME", "parameters": ARGS} (one call per message: the
 *   template raises on more), a "tool" (or "ipython") message is an
 *   ipython turn whose content the template quotes as a JSON string (a
 *   string is "iterable" to Jinja). The model answers a call with that
 *   JSON and nothing else.
 *
 * Tool calling (Qwen2.5, Qwen3): with tools, the system block is
 *     <|im_start|>system\n[SYSTEM or DEFAULT\n\n]TOOLS_HEAD
 *         ("\n" TOOL)... TOOLS_TAIL<|im_end|>\n
 *   where SYSTEM is messages[0]'s content (then left out of the loop) and
 *   DEFAULT the template's default system prompt (Qwen2.5's; Qwen3 has
 *   none), TOOL each definition through tojson. An assistant message with
 *   calls prints each as "<tool_call>\n{"name": "NAME", "arguments": ARGS}
 *   \n</tool_call>", after "\n" (Qwen2.5: the content, if any, after its
 *   "\n", then every call after a "\n"; Qwen3: a "\n" between the
 *   content and the first call only when there is content). "tool"
 *   messages are results: a run of them is one user turn of
 *   "\n<tool_response>\nCONTENT\n</tool_response>" pieces.
 *
 * Llama 2 chat (BOS/EOS: the vocabulary's texts, "<s>" and "</s>"):
 *     (BOS[INST] STRIP(CONTENT) [/INST] | " " STRIP(CONTENT) " " EOS)...
 *   per user / assistant message, other roles print nothing; a leading
 *   system message goes into the first message as "<<SYS>>\nSYSTEM\n
 *   <</SYS>>\n\n" + content, stripped as a whole (Python's str.strip).
 *
 * Mistral Instruct v0.1 / v0.2, Mixtral:
 *     BOS ("[INST] " CONTENT " [/INST]" | CONTENT EOS[" "])...
 *   the space after EOS in v0.1 only. These templates refuse system
 *   messages; we put them before the next user message's content, with
 *   "\n\n" between, as Mistral's later templates (and Gemma's) do; those
 *   no user message follows make an "[INST] SYSTEM [/INST]" turn. Both
 *   templates also refuse turns that do not alternate; we render them as
 *   the loop would. Other roles are refused (-EINVAL).
 *
 * Zephyr (TinyLlama chat), rendered as transformers does (trim_blocks):
 *     ("<|" ROLE "|>\n" CONTENT EOS "\n")...   user, system, assistant
 *     "<|assistant|>\n"                          with add_assistant, after
 *                                                a message
 *   other roles print nothing.
 *
 * Phi-3 / Phi-3.5 (June 2024 on):
 *     ("<|" ROLE "|>\n" CONTENT "<|end|>\n")...   system, user, assistant
 *     "<|assistant|>\n" with add_assistant, else EOS
 *   Phi-3.5 leaves an empty system message out. Phi-3 (April 2024):
 *     [BOS] ("<|user|>\n" CONTENT "<|end|>\n<|assistant|>\n" |
 *            CONTENT "<|end|>\n")...          user, assistant
 *   that template drops system messages; we print them as the later one
 *   does, "<|system|>\n" CONTENT "<|end|>\n". Phi-3's tokenizer drops the
 *   whitespace after its special tokens (vocab.c), so the "\n"s after the
 *   markers never become tokens.
 *
 * Phi-4-mini:
 *     ("<|" ROLE "|>" CONTENT "<|end|>")...      every role ("tool" too)
 *     "<|assistant|>" with add_assistant, else EOS
 *   A system message's `tools` key (<|tool|>...<|/tool|>) is not part of
 *   our messages and is not printed.
 *
 * DeepSeek-R1's distills (Qwen 1.5B-32B, Llama 8B/70B):
 *     BOS SYSTEM ("<｜User｜>" CONTENT | "<｜Assistant｜>" ANSWER "<｜end▁of▁sentence｜>")...
 *     "<｜Assistant｜><think>\n" with add_assistant (r1_think; earlier
 *     copies: "<｜Assistant｜>")
 *   SYSTEM is the last system message's content, printed once up front;
 *   ANSWER what follows the last "</think>" (r1_strip) or the whole answer.
 *   Tool results: "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" CONTENT
 *   "<｜tool▁output▁end｜>", later ones "\n<｜tool▁output▁begin｜>"...,
 *   closed by "<｜tool▁outputs▁end｜>" before the next answer (or at the end,
 *   without the assistant's header). Calls are not supported.
 *
 * Mistral's v3 templates (Mistral Large 2407 and the models that share
 * it; "v3-tekken": Mistral Nemo), without tools:
 *     BOS ("[INST] " [SYSTEM "\n\n"] CONTENT "[/INST]" | " " TRIM(CONTENT) EOS)...
 *   where SYSTEM (messages[0], if a system message) goes into the user
 *   message only when that is the last message, as the template does;
 *   tekken has no space after "[INST]" and prints answers as they are,
 *   without the space. Tool calls and results are refused (-ENOTSUP,
 *   -EINVAL); so is a system message that is not the first.
 *
 * Gemma 3 (BOS: "<bos>"):
 *     BOS ("<start_of_turn>" ROLE "\n" [SYSTEM "\n\n"] TRIM(CONTENT) "<end_of_turn>\n")...
 *     "<start_of_turn>model\n"                   with add_assistant
 *   ROLE "model" for assistant, other roles verbatim; SYSTEM is messages[0]
 *   when a system message, printed (untrimmed) at the start of the first
 *   message after it (one "\n" after it in some GGUFs' copies of the
 *   template). The template raises where turns do not alternate user,
 *   assistant, user...; we render them as its loop would. Gemma 2's (and
 *   Gemma 1.1's) template is the same without SYSTEM: it raises on a
 *   system message, which we print as Gemma 3's does (llama.cpp merges it
 *   into the first user message the same way); Gemma 1.0's prints no BOS.
 *
 * SmolLM3 (ChatML under a header of metadata, a reasoning switch) and
 * Granite 3.x (<|start_of_role|>ROLE<|end_of_role|>, a dated default
 * system prompt): render_smollm3 and render_granite say how; Nemotron
 * Nano v2 (<SPECIAL_11>User ... <SPECIAL_12>, "/think" and "/no_think"
 * in the messages, <TOOLCALL> calls): render_nemotron; Nemotron 3 Nano
 * (ChatML, a system block always, its tools as XML, answers marked
 * "<think></think>", Qwen3.5's calls): render_nemotron3.
 *
 * EXAONE 3.x:
 *     ["[|system|][|endofturn|]\n"]              when the first is not a system message
 *     ("[|" ROLE "|]" CONTENT ("\n" | "[|endofturn|]\n"))...  "\n" after a user's
 *     "[|assistant|]"                            with add_assistant
 *
 * Gemma 4 (BOS: "<bos>"; the template with the OpenAI tool-message scan):
 *     BOS ["<|turn>system\n" ["<|think|>\n"] [TRIM(SYSTEM)] ("<|tool>" DECL "<tool|>")...
 *          "<turn|>\n"]       with thinking, tools or a system (or developer) message
 *     ("<|turn>" ROLE "\n" TRIM(CONTENT) "<turn|>\n")...      ROLE "model" for assistant
 *     "<|turn>model\n" [EMPTY]                     with add_assistant
 *   Thinking is the template's enable_thinking, on unless ENG_CHAT_NO_THINK
 *   (llama.cpp passes true); off, EMPTY ("<|channel>thought\n<channel|>")
 *   closes the reasoning before the answer. An answer prints without its
 *   "<|channel>...<channel|>" parts (strip_thinking), trimmed; its calls as
 *   "<|tool_call>call:NAME{KEY:VALUE,...}<tool_call|>" before the content,
 *   then each "tool" message that follows it as "<|tool_response>response:
 *   NAME{value:<|"|>RESULT<|"|>}<tool_response|>", NAME the call's in the
 *   same place (the template matches call ids, which we do not carry);
 *   "tool" messages elsewhere print nothing. render_gemma4 says the rest.
 *
 * GLM-4 (llama.cpp's chatglm4; GLM-4-9B-chat, GLM-4-0414, GLM-Z1):
 *     "[gMASK]<sop>" ("<|" ROLE "|>\n" CONTENT)...  roles verbatim
 *     "<|assistant|>\n" [<think>]                   with add_assistant
 *   "[gMASK]<sop>" is the text of the two prefix tokens the model wants (no
 *   BOS). GLM-4-9B-chat's template leaves out a message with empty content
 *   (glm_skip_empty); the 0414 ones print the system messages first, then
 *   only user, assistant and observation turns (glm_sys_first), and close
 *   the prompt with "<|assistant|>", whose "\n" the model writes itself (we
 *   print it, as llama.cpp does: the same token). GLM-Z1's open the
 *   reasoning ("<|assistant|>\n<think>", r1_think) and print every turn but
 *   a system one as what follows its last "</think>", stripped (r1_strip).
 *   Tool calling (the tools in a system block, a call answered as "NAME\n
 *   {ARGS}" in an assistant turn with metadata) is not reproduced: the
 *   9B-chat template reads them from a message's `tools` key, which our
 *   messages lack; a result is an "observation" turn (a "tool" message
 *   prints as "<|tool|>" in 9B-chat's, nothing in the 0414 ones').
 *   GLM-4.5 and later, whose answers carry a think block of their own
 *   (their templates read reasoning_content), are not taken for it.
 *
 * ERNIE 4.5 (ERNIE-4.5-0.3B, ERNIE-4.5-21B-A3B):
 *     CLS ("User: " CONTENT "\n" | "Assistant: " CONTENT SEP | CONTENT "\n")...
 *                                    user, assistant, system; other roles print nothing
 *     "Assistant: "                  with add_assistant
 *   CLS and SEP are the template's defaults for cls_token and sep_token
 *   ("<|begin_of_sentence|>", "<|end_of_sentence|>"): renderers (llama.cpp's,
 *   ours) define bos_token and eos_token only. CLS is not the vocabulary's
 *   BOS ("<s>"): with special tokens parsed it becomes its own token, and
 *   the tokenizer still puts BOS before it where the file asks for one, as
 *   llama.cpp's does. SEP ends an answer, so it ends generation (vocab.c).
 *   The template has no tool calling and no reasoning.
 *
 * gpt-oss (OpenAI's harmony format; llama.cpp's gpt-oss), as its template
 * renders (its texts printed as they are, its tokens' texts included):
 *     "<|start|>system<|message|>" IDENTITY "\nKnowledge cutoff: 2024-06\n"
 *         "Current date: " DATE "\n\nReasoning: " EFFORT "\n\n" CHANNELS
 *         ["\n" TOOLS_NOTE] "<|end|>"
 *     ["<|start|>developer<|message|>" ["# Instructions\n\n" SYSTEM "\n\n"]
 *         ["# Tools\n\n" NAMESPACE] "<|end|>"]   with a system message or tools
 *     ("<|start|>user<|message|>" CONTENT "<|end|>" |
 *      "<|start|>assistant<|channel|>final<|message|>" CONTENT "<|end|>" |
 *      ["<|start|>assistant<|channel|>analysis<|message|>" CONTENT "<|end|>"]
 *          "<|start|>assistant to=functions." NAME "<|channel|>commentary json"
 *          "<|message|>" ARGS "<|call|>" |
 *      "<|start|>functions." NAME " to=assistant<|channel|>commentary<|message|>"
 *          JSON(CONTENT) "<|end|>")...
 *     "<|start|>assistant"                   with add_assistant
 *   DATE is today's (local time, strftime_now("%Y-%m-%d")); EFFORT the
 *   template's reasoning_effort, "medium" by default, "low" under
 *   ENG_CHAT_NO_THINK: the model always reasons, and low is the least it
 *   is asked for. SYSTEM is the first message's when that is a system (or
 *   developer) one; a later system message, and any role but user,
 *   assistant and tool, prints nothing. An answer is its final message;
 *   the last message, an answer without add_assistant, ends "<|return|>"
 *   in place of "<|end|>" (the template's, for training; llama.cpp puts
 *   "<|end|>" back). An answer with calls prints its first call only (the
 *   template's), after its content as reasoning unless an answer without
 *   calls follows it; a "tool" message is the result of the last call
 *   before it (-EINVAL where there is none: the template raises), its
 *   content as a JSON string. Earlier answers carry no reasoning (our
 *   messages have no `thinking`). The template raises on an answer whose
 *   content holds "<|channel|>analysis<|message|>" or "<|channel|>final
 *   <|message|>" (a whole answer sent back, as `sictl chat` does); we
 *   print what harmony_split reads as its answer there (an answer with
 *   calls: its reasoning). An empty conversation, which jinja2 refuses
 *   (messages[0]), gets the system block, as llama.cpp's renderer gives.
 *   NAMESPACE is the tools as TypeScript types, as harmony_namespace
 *   says. The model's answer opens with its channel
 *   ("<|channel|>analysis<|message|>..."): "<|start|>", "<|channel|>",
 *   "<|message|>", "<|constrain|>" and "<|end|>" print as text (vocab.c),
 *   so that harmony_split reads them; "<|return|>" and "<|call|>" end
 *   generation.
 *
 * None of these add a generation prompt of their own except Zephyr and
 * the later Phi-3 templates: the prompt ends with "[/INST]" or the
 * assistant's header.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"
#include "json.h"

#define CHATML_START "<|im_start|>"
/* Qwen3.5's tool section, around the tools' lines (its template's text) */
#define XML_TOOLS_HEAD "# Tools\n\nYou have access to the following functions:\n\n<tools>"
#define XML_TOOLS_TAIL                                                                       \
    "\n\nIf you choose to call a function ONLY reply in the following format with NO "        \
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n"                               \
    "<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"                                 \
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can "   \
    "span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n" \
    "- Function calls MUST follow the specified format: an inner <function=...></function> "  \
    "block must be nested within <tool_call></tool_call> XML tags\n- Required parameters "    \
    "MUST be specified\n- You may provide optional reasoning for your function call in "      \
    "natural language BEFORE the function call, but NOT after\n- If there is no function "    \
    "call available, answer the question like normal with your current knowledge and do not " \
    "tell the user about function calls\n</IMPORTANT>"
#define CHATML_END "<|im_end|>"
#define GRANITE_ROLE "<|start_of_role|>"
#define GRANITE_ROLE_END "<|end_of_role|>"
#define GRANITE_END "<|end_of_text|>"
/* Granite 4's system text around its tools, one JSON line each */
#define GRANITE4_TOOLS_HEAD                                                                        \
    "You are a helpful assistant with access to the following tools. You may call one or more "    \
    "tools to assist with the user query.\n\nYou are provided with function signatures within "    \
    "<tools></tools> XML tags:\n<tools>"
#define GRANITE4_TOOLS_TAIL                                                                        \
    "\n</tools>\n\nFor each tool call, return a json object with function name and arguments "     \
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "          \
    "\"arguments\": <args-json-object>}\n</tool_call>. If a tool does not exist in the "              \
    "provided list of tools, notify the user that you do not have the ability to fulfill the "     \
    "request."
/* SmolLM3's default custom instructions, without and with reasoning */
#define SMOL3_NO_THINK_SYS "You are a helpful AI assistant named SmolLM, trained by Hugging Face."
#define SMOL3_THINK_SYS                                                                            \
    SMOL3_NO_THINK_SYS " "                                                                         \
    "Your role as an assistant involves thoroughly exploring questions through a "                 \
    "systematic thinking process before providing the final precise and accurate "                 \
    "solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, "        \
    "exploration, reassessment, reflection, backtracking, and iteration to develop "               \
    "well-considered thinking process. Please structure your response into two main "              \
    "sections: Thought and Solution using the specified format: <think> Thought section "          \
    "</think> Solution section. In the Thought section, detail your reasoning process in "         \
    "steps. Each step should include detailed considerations such as analysing questions, "        \
    "summarizing relevant findings, brainstorming new ideas, verifying the accuracy of "           \
    "the current steps, refining any errors, and revisiting previous steps. In the "               \
    "Solution section, based on various attempts, explorations, and reflections from the "         \
    "Thought section, systematically present the final solution that you deem correct. "           \
    "The Solution section should be logical, accurate, and concise and detail necessary "          \
    "steps needed to reach the conclusion."
#define LLAMA3_BOS "<|begin_of_text|>"
#define LLAMA3_HDR_START "<|start_header_id|>"
#define LLAMA3_HDR_END "<|end_header_id|>"
#define LLAMA3_EOT "<|eot_id|>"
/* ERNIE 4.5's cls_token and sep_token, as its template sets them */
#define ERNIE_CLS "<|begin_of_sentence|>"
#define ERNIE_SEP "<|end_of_sentence|>"
/* gpt-oss's texts, as its template prints them */
#define HARMONY_IDENTITY "You are ChatGPT, a large language model trained by OpenAI."
#define HARMONY_CHANNELS                                                                           \
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
#define HARMONY_TOOLS_NOTE "Calls to these tools must go to the commentary channel: 'functions'."

/* Nemotron Nano v2's tool section (its template's text, less the list) */
#define NEM_TOOLS_INTRO "You can use the following tools to assist the user if required:"
#define NEM_TOOLS_FORMAT                                                                           \
    "If you decide to call any tool(s), use the following format:\n<TOOLCALL>[{{\"name\": "        \
    "\"tool_name1\", \"arguments\": \"tool_args1\"}}, {{\"name\": \"tool_name2\", \"arguments\": " \
    "\"tool_args2\"}}]</TOOLCALL>\n\nThe user will execute tool-calls and return responses from "   \
    "tool(s) in this format:\n<TOOL_RESPONSE>[{{\"tool_response1\"}}, {{\"tool_response2\"}}]"      \
    "</TOOL_RESPONSE>\n\n"
#define NEM_TOOLS_OUTRO                                                                            \
    "Based on the tool responses, you can call additional tools if needed, correct tool calls "    \
    "if any errors are found, or just respond to the user."
#define NEM_SYS "<SPECIAL_10>System\n"
#define NEM_USER "<SPECIAL_11>User\n"
#define NEM_ASSISTANT "<SPECIAL_11>Assistant\n"
#define NEM_END "\n<SPECIAL_12>\n"

/* Templates are a few KiB; anything past this is not one we know. */
#define TEMPLATE_MAX_BYTES (1u << 20)

static const char *find_bytes(const char *hay, size_t n, const char *needle) {
    size_t m = strlen(needle);
    if (m == 0 || m > n)
        return NULL;
    return memmem(hay, n, needle, m);
}

/* Looks inside one piece of literal output text (a Jinja string literal after
 * unescaping, or raw template text) for "<|im_start|>system\nTEXT<|im_end|>"
 * with TEXT free of template markup: that is a system block the template
 * prints by itself, i.e. its default system prompt. */
static bool chatml_default_in(const char *s, size_t n, eng_chat_info *info) {
    static const char head[] = CHATML_START "system\n";
    const char *p = s, *end = s + n;
    while ((p = find_bytes(p, (size_t)(end - p), head)) != NULL) {
        const char *text = p + sizeof(head) - 1;
        const char *stop = find_bytes(text, (size_t)(end - text), CHATML_END);
        if (stop && stop > text) {
            size_t len = (size_t)(stop - text);
            if (len < sizeof(info->default_system) &&
                !find_bytes(text, len, "<|") && !find_bytes(text, len, "{{") &&
                !memchr(text, '\0', len)) {
                memcpy(info->default_system, text, len);
                info->default_system[len] = '\0';
                return true;
            }
        }
        p = text;
    }
    return false;
}

/* Unescapes the Jinja string literal starting at the quote tmpl[*pos] into
 * out (at most cap bytes, longer literals are truncated: we only look for
 * a short default prompt) and advances *pos past the closing quote. Jinja
 * follows Python's escapes; the ones templates use are \n \t \\ \' \". */
static size_t read_literal(const char *t, size_t n, size_t *pos, char *out, size_t cap) {
    char q = t[*pos];
    size_t i = *pos + 1, o = 0;
    while (i < n && t[i] != q) {
        char c = t[i++];
        if (c == '\\' && i < n) {
            char e = t[i++];
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            default: c = e; break; /* \\ \' \" and anything else: the char itself */
            }
        }
        if (o < cap)
            out[o++] = c;
    }
    *pos = i < n ? i + 1 : n;
    return o;
}

/* Walks the template: raw text outside {{ }} / {% %} is output as is, string
 * literals inside them are output after unescaping; {# #} comments are skipped. */
static void chatml_find_default(const char *t, size_t n, eng_chat_info *info) {
    char lit[1024];
    size_t i = 0, raw_start = 0;
    while (i < n) {
        if (t[i] == '{' && i + 1 < n && (t[i + 1] == '{' || t[i + 1] == '%' || t[i + 1] == '#')) {
            if (i > raw_start && chatml_default_in(t + raw_start, i - raw_start, info))
                return;
            char kind = t[i + 1];
            const char *close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
            i += 2;
            while (i < n) {
                if (kind != '#' && (t[i] == '\'' || t[i] == '"')) {
                    size_t len = read_literal(t, n, &i, lit, sizeof(lit));
                    if (chatml_default_in(lit, len, info))
                        return;
                    continue;
                }
                if (t[i] == close[0] && i + 1 < n && t[i + 1] == close[1]) {
                    i += 2;
                    break;
                }
                i++;
            }
            raw_start = i;
        } else {
            i++;
        }
    }
    if (n > raw_start)
        chatml_default_in(t + raw_start, n - raw_start, info);
}

/* Llama 3.1+: the literal after "Cutting Knowledge Date: " (up to its
 * newline) and the fallback date in `set date_string = "..."`. */
static void llama3_find_preamble(const char *t, size_t n, eng_chat_info *info) {
    static const char ck[] = "Cutting Knowledge Date: ";
    static const char ds[] = "set date_string = ";
    const char *p = find_bytes(t, n, ck);
    const char *d = find_bytes(t, n, ds);
    if (!p || !d)
        return;
    p += sizeof(ck) - 1;
    size_t plen = 0;
    while (p + plen < t + n && plen < 64 && p[plen] != '\\' && p[plen] != '\n' &&
           p[plen] != '"' && p[plen] != '\'')
        plen++;
    /* the first assignment may be strftime_now(...): take the one with a literal */
    size_t pos = n;
    while (d) {
        size_t at = (size_t)(d - t) + sizeof(ds) - 1;
        if (at < n && (t[at] == '"' || t[at] == '\'')) {
            pos = at;
            break;
        }
        d = find_bytes(t + at, n - at, ds);
    }
    if (pos >= n)
        return;
    char date[64];
    size_t dlen = read_literal(t, n, &pos, date, sizeof(date));
    if (plen == 0 || plen >= 64 || dlen == 0 || dlen >= sizeof(date))
        return;
    int w = snprintf(info->default_system, sizeof(info->default_system),
                     "Cutting Knowledge Date: %.*s\nToday Date: %.*s\n\n", (int)plen, p,
                     (int)dlen, date);
    if (w < 0 || (size_t)w >= sizeof(info->default_system))
        info->default_system[0] = '\0';
}

/* Mistral's [SYSTEM_PROMPT] templates set their default system prompt as
 * "{%- set default_system_message = EXPR %}", EXPR string literals and
 * (Mistral Small 3.x) the variable today, strftime_now("%Y-%m-%d"),
 * joined by "+": kept with \x01 for today. Anything else in EXPR leaves no
 * default (rather than a wrong one). */
static void mistral7_find_default(const char *t, size_t n, eng_chat_info *info) {
    static const char set[] = "set default_system_message =";
    const char *p = find_bytes(t, n, set);
    if (!p)
        return;
    size_t i = (size_t)(p - t) + sizeof(set) - 1, o = 0;
    char *d = info->default_system;
    const size_t cap = sizeof(info->default_system) - 1;
    for (;;) {
        while (i < n && t[i] == ' ')
            i++;
        if (i < n && (t[i] == '\'' || t[i] == '"')) {
            o += read_literal(t, n, &i, d + o, cap - o);
        } else if (n - i >= 5 && !memcmp(t + i, "today", 5) &&
                   find_bytes(t, n, "set today = strftime_now(\"%Y-%m-%d\")")) {
            if (o < cap)
                d[o++] = '\x01';
            info->dated_default = true;
            i += 5;
        } else {
            break;
        }
        while (i < n && t[i] == ' ')
            i++;
        if (i < n && t[i] == '+') {
            i++;
            continue;
        }
        break;
    }
    /* the expression must end the statement, whole */
    const bool end = i + 1 < n && (t[i] == '%' || (t[i] == '-' && t[i + 1] == '%'));
    if (!end || o >= cap) {
        d[0] = '\0';
        info->dated_default = false;
        return;
    }
    d[o] = '\0';
}

/* The names llama.cpp gives these formats (its --chat-template), with
 * each one's plainest variant: no default system prompt, no date. */
enum nt_variant { NT_PLAIN, NT_TEKKEN, NT_PHI4, NT_R1, NT_GRANITE4, NT_EXAONE4, NT_OLMO2,
                  NT_GEMMA4, NT_HARMONY };
#define NAMED_TEMPLATES(X)                                                                         \
    X("chatml", ENG_CHAT_CHATML, NT_PLAIN)                                                         \
    X("llama2", ENG_CHAT_LLAMA2, NT_PLAIN)                                                         \
    X("llama3", ENG_CHAT_LLAMA3, NT_PLAIN)                                                         \
    X("mistral-v1", ENG_CHAT_MISTRAL, NT_PLAIN)                                                    \
    X("mistral-v3", ENG_CHAT_MISTRAL3, NT_PLAIN)                                                   \
    X("mistral-v3-tekken", ENG_CHAT_MISTRAL3, NT_TEKKEN)                                           \
    X("mistral-v7-tekken", ENG_CHAT_MISTRAL7, NT_PLAIN)                                            \
    X("zephyr", ENG_CHAT_ZEPHYR, NT_PLAIN)                                                         \
    X("phi3", ENG_CHAT_PHI3, NT_PLAIN)                                                             \
    X("phi4", ENG_CHAT_PHI3, NT_PHI4)                                                              \
    X("gemma", ENG_CHAT_GEMMA, NT_PLAIN)                                                           \
    X("gemma4", ENG_CHAT_GEMMA4, NT_GEMMA4)                                                        \
    X("chatglm4", ENG_CHAT_GLM4, NT_PLAIN)                                                         \
    X("gpt-oss", ENG_CHAT_GPT_OSS, NT_HARMONY)                                                     \
    X("deepseek-r1", ENG_CHAT_DEEPSEEK_R1, NT_R1)                                                  \
    X("granite", ENG_CHAT_GRANITE, NT_GRANITE4)                                                    \
    X("exaone3", ENG_CHAT_EXAONE, NT_PLAIN)                                                        \
    X("exaone4", ENG_CHAT_EXAONE, NT_EXAONE4)                                                      \
    X("tulu", ENG_CHAT_TULU, NT_PLAIN)                                                             \
    X("olmo2", ENG_CHAT_TULU, NT_OLMO2)
#define NT_NAME(name, kind, variant) name,
#define NT_ENTRY(name, kind, variant) { name, kind, variant },

static const struct named_template {
    const char *name;
    eng_chat_template kind;
    enum nt_variant variant;
} named_templates[] = { NAMED_TEMPLATES(NT_ENTRY) };

const char *const *eng_chat_template_names(void) {
    static const char *const names[] = { NAMED_TEMPLATES(NT_NAME) NULL };
    return names;
}

void eng_chat_named(const char *name, eng_chat_info *ret_info) {
    memset(ret_info, 0, sizeof(*ret_info));
    ret_info->kind = ENG_CHAT_NONE;
    for (size_t i = 0; name && i < sizeof(named_templates) / sizeof(named_templates[0]); i++) {
        const struct named_template *t = &named_templates[i];
        if (strcmp(name, t->name) != 0)
            continue;
        ret_info->kind = t->kind;
        ret_info->tekken = t->variant == NT_TEKKEN;
        ret_info->phi4 = t->variant == NT_PHI4;
        ret_info->reasoning = ret_info->r1_think = ret_info->r1_strip = t->variant == NT_R1;
        ret_info->granite4 = ret_info->tools = t->variant == NT_GRANITE4;
        ret_info->exaone4 = t->variant == NT_EXAONE4;
        if (ret_info->exaone4) /* its template's tool calling, its answers' reasoning */
            ret_info->tools = ret_info->reasoning = true;
        ret_info->tulu_bos = t->variant == NT_OLMO2;
        /* (Gemma 4's format for a file whose template is not recognised:
         * its earlier "interleaved" one) */
        if (t->variant == NT_GEMMA4)
            ret_info->think_switch = ret_info->reasoning = ret_info->tools = true;
        /* (gpt-oss's: its template's format, which llama.cpp's own
         * rendering of the name leaves without its system block and
         * channels, so that the model answers out of its format) */
        if (t->variant == NT_HARMONY)
            ret_info->think_switch = ret_info->reasoning = ret_info->tools = true;
        return;
    }
}

/* Nemotron Nano v2's template: the pieces of text that make the format
 * (its markers, its reasoning switch and cut), and those of its tool
 * section, which we print (NEM_TOOLS_*). Newlines as the model's
 * tokenizer_config.json has them (in the literals); a copy that writes
 * them as Jinja's "\n" escapes is found too. */
static const char *const nem_chat[] = {
    "'<SPECIAL_10>System\n'", "'<SPECIAL_11>User\n'", "'<SPECIAL_11>Assistant\n'",
    "'\n<SPECIAL_12>\n'", "'/think' in content", "'/no_think' in content", "'<think></think>'",
    "'<think>\n'", "content.split('</think>')[1]",
};
static const char *const nem_tools[] = {
    "'" NEM_TOOLS_INTRO "'",
    "'\n<AVAILABLE_TOOLS>['",
    "']</AVAILABLE_TOOLS>\n\n'",
    "'If you decide to call any tool(s), use the following format:\n'",
    "'<TOOLCALL>[{{\"name\": \"tool_name1\", \"arguments\": \"tool_args1\"}}, '",
    "'{{\"name\": \"tool_name2\", \"arguments\": \"tool_args2\"}}]</TOOLCALL>\n\n'",
    "'The user will execute tool-calls and return responses from tool(s) in this format:\n'",
    "'<TOOL_RESPONSE>[{{\"tool_response1\"}}, {{\"tool_response2\"}}]</TOOL_RESPONSE>\n\n'",
    "'" NEM_TOOLS_OUTRO "'",
    "'<SPECIAL_11>User\n' + '<TOOL_RESPONSE>['",
    "']</TOOL_RESPONSE>'",
    "'<TOOLCALL>['",
    "'{\"name\": \"' + fn.name + '\", \"arguments\": '",
    "']</TOOLCALL>'",
    "'<SPECIAL_12>\n\n'",
};

/* Nemotron 3 Nano's template (ChatML): the pieces of text that make its
 * format (its system block printed always, its reasoning switch, the
 * "<think></think>" it puts before answers, its history's cut, its tool
 * results), and those of its tool section and calls, which we print
 * (render_nemotron3). Qwen3.5's template has the same tool text and
 * calls, none of the rest. */
static const char *const nem3_chat[] = {
    "set enable_thinking = enable_thinking if enable_thinking is defined else True",
    "set truncate_history_thinking = truncate_history_thinking if truncate_history_thinking is "
    "defined else True",
    "set system_message = \"\"",
    "\"<|im_start|>system\n\" + system_message",
    "\"<think></think>\" ~ content",
    "truncate_history_thinking and loop.index0 < ns.last_user_idx",
    "c.split('</think>')[-1]",
    "c.split('<think>')[0]",
    "\"<think></think>\" ~ c | trim",
    "'<|im_start|>assistant\n' ~ (content | default('', true) | string | trim) ~ '<|im_end|>\n'",
    "'<|im_start|>assistant\n' ~ c ~ '<|im_end|>\n'",
    "'<|im_start|>' + message.role + '\n'",
    "loop.previtem and loop.previtem.role != \"tool\"",
    "'<tool_response>\n'",
    "'\n</tool_response>\n'",
    "'<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n'",
    "'<|im_start|>assistant\n<think>\n'",
    "'<|im_start|>assistant\n<think></think>'",
};
static const char *const nem3_tools[] = {
    "\"# Tools\n\nYou have access to the following functions:\n\n\"", "\"<tools>\"",
    "\"\n<function>\n<name>\" ~ tool.name ~ \"</name>\"",
    "'\n<description>' ~ (tool.description | trim) ~ '</description>'",
    "'\n<parameters>'",
    "tool.parameters.properties|items",
    "'\n<parameter>'",
    "'\n<name>' ~ param_name ~ '</name>'",
    "'\n<type>' ~ (param_fields.type | string) ~ '</type>'",
    "'\n<description>' ~ (param_fields.description | trim) ~ '</description>'",
    "'\n<enum>' ~ (param_fields.enum | tojson | safe) ~ '</enum>'",
    "set handled_keys = ['name', 'type', 'description', 'enum']",
    "render_extra_keys(param_fields, handled_keys)",
    "'\n</parameter>'",
    "set handled_keys = ['type', 'properties', 'required']",
    "render_extra_keys(tool.parameters, handled_keys)",
    "'\n<required>' ~ (tool.parameters.required | tojson | safe) ~ '</required>'",
    "'\n</parameters>'",
    "set handled_keys = ['type', 'name', 'description', 'parameters']",
    "render_extra_keys(tool, handled_keys)",
    "'\n</function>'",
    "for json_key in json_dict if json_key not in handled_keys",
    "'\n<' ~ json_key ~ '>' ~ (json_dict[json_key] | tojson | safe) ~ '</' ~ json_key ~ '>'",
    "'\n<' ~ json_key ~ '>' ~ (json_dict[json_key] | string) ~ '</' ~ json_key ~ '>'",
    "\"\n</tools>\"",
    "'" XML_TOOLS_TAIL "'",
    "'<tool_call>\n<function=' ~ tool_call.name ~ '>\n'",
    "'<parameter=' ~ args_name ~ '>\n'",
    "set args_value = args_value | tojson | safe if args_value is mapping or (args_value is "
    "sequence and args_value is not string) else args_value | string",
    "args_value ~ '\n</parameter>\n'",
    "'</function>\n</tool_call>\n'",
};

/* Every piece in the template, its newlines as they are or as "\n" (a
 * piece too long to escape here: not found). */
static bool nemotron_has(const char *t, size_t n, const char *const *pieces, size_t n_pieces) {
    for (size_t i = 0; i < n_pieces; i++) {
        if (find_bytes(t, n, pieces[i]))
            continue;
        char esc[2048];
        size_t k = 0;
        const char *c = pieces[i];
        for (; *c && k + 2 < sizeof(esc); c++) {
            if (*c == '\n')
                esc[k++] = '\\', esc[k++] = 'n';
            else
                esc[k++] = *c;
        }
        esc[k] = '\0';
        if (*c || !find_bytes(t, n, esc))
            return false;
    }
    return true;
}

void eng_chat_detect(const char *tmpl, size_t len, eng_chat_info *ret_info) {
    if (!ret_info)
        return;
    memset(ret_info, 0, sizeof(*ret_info));
    ret_info->kind = ENG_CHAT_NONE;
    if (!tmpl || len == 0 || len > TEMPLATE_MAX_BYTES)
        return;
    /* ChatML first: ChatML fine-tunes of Llama 3 (Hermes) carry both markers
     * in their vocabulary, and the template text says which format is used. */
    if (find_bytes(tmpl, len, CHATML_START) &&
        nemotron_has(tmpl, len, nem3_chat, sizeof(nem3_chat) / sizeof(nem3_chat[0]))) {
        /* NVIDIA Nemotron 3 Nano: ChatML turns printed its own way (no
         * default system prompt, Qwen3.5's calls, the reasoning switch
         * enable_thinking); its tools where the template has the texts we
         * print */
        ret_info->kind = ENG_CHAT_CHATML;
        ret_info->nemotron3 = ret_info->reasoning = ret_info->think_switch = true;
        ret_info->tools =
            nemotron_has(tmpl, len, nem3_tools, sizeof(nem3_tools) / sizeof(nem3_tools[0]));
    } else if (find_bytes(tmpl, len, CHATML_START)) {
        ret_info->kind = ENG_CHAT_CHATML;
        chatml_find_default(tmpl, len, ret_info);
        ret_info->reasoning = find_bytes(tmpl, len, "reasoning_content") && find_bytes(tmpl, len, "</think>");
        ret_info->think_switch = find_bytes(tmpl, len, "enable_thinking") != NULL;
        /* Qwen3.5's: the answer's reasoning opened by the prompt, and its
         * calls as XML (Qwen3-Coder's format) */
        ret_info->think_open = ret_info->reasoning &&
                               find_bytes(tmpl, len, "{{- '<think>\\n' }}") != NULL;
        ret_info->xml_calls = find_bytes(tmpl, len,
                                         "You have access to the following functions:") &&
                              find_bytes(tmpl, len, "<function=") &&
                              find_bytes(tmpl, len, "<parameter=") &&
                              find_bytes(tmpl, len, "<tool_response>");
        /* Qwen's tool calling, whose fixed text we print (TOOLS_HEAD) */
        ret_info->tools = find_bytes(tmpl, len, "You may call one or more functions to assist with the user query.") &&
                          find_bytes(tmpl, len, "<tool_call>") && find_bytes(tmpl, len, "<tool_response>");
        /* SmolLM3's header of metadata (its own default system prompts) */
        ret_info->smollm3 = find_bytes(tmpl, len, "## Metadata") &&
                            find_bytes(tmpl, len, "Reasoning Mode: ") &&
                            find_bytes(tmpl, len, "## Custom Instructions") &&
                            find_bytes(tmpl, len, SMOL3_NO_THINK_SYS) && !ret_info->tools;
        if (ret_info->smollm3) { /* its answers open with their reasoning, kept in the history */
            ret_info->default_system[0] = 0;
            ret_info->reasoning = true;
        }
        /* LFM2.5 (its thinking models' reasoning left out of earlier
         * answers) and LFM2 (tool results marked) */
        ret_info->lfm2_past = find_bytes(tmpl, len, "keep_past_thinking") &&
                              find_bytes(tmpl, len, "last_assistant_index") &&
                              find_bytes(tmpl, len, "</think>") && !ret_info->tools;
        ret_info->reasoning |= ret_info->lfm2_past;
        ret_info->lfm2_tool = find_bytes(tmpl, len, "\"<|tool_response_start|>\" + content + "
                                                    "\"<|tool_response_end|>\"") &&
                              !ret_info->tools;
        /* their tool lists (llama.cpp's LFM2 and LFM2.5 formats) */
        ret_info->lfm2_marks = find_bytes(tmpl, len, "\"List of tools: <|tool_list_start|>[\"") &&
                               find_bytes(tmpl, len, "\"]<|tool_list_end|>\"");
        ret_info->lfm2_calls = !ret_info->tools && !ret_info->smollm3 &&
                               (ret_info->lfm2_marks ||
                                (find_bytes(tmpl, len, "\"List of tools: [\"") &&
                                 !find_bytes(tmpl, len, "<|tool_list_start|>")));
        ret_info->tools |= ret_info->lfm2_calls || ret_info->xml_calls;
    } else if (nemotron_has(tmpl, len, nem_chat, sizeof(nem_chat) / sizeof(nem_chat[0]))) {
        /* NVIDIA Nemotron Nano v2: its turn markers, its reasoning switch
         * in the messages' text, its answers' reasoning cut; its tools
         * where the template has the texts we print */
        ret_info->kind = ENG_CHAT_NEMOTRON;
        ret_info->think_switch = ret_info->reasoning = true;
        ret_info->tools = nemotron_has(tmpl, len, nem_tools, sizeof(nem_tools) / sizeof(nem_tools[0]));
    } else if (find_bytes(tmpl, len, "'<|tool_call>call:'") &&
               find_bytes(tmpl, len, "'<|turn>system\\n'") &&
               find_bytes(tmpl, len, "'<|channel>thought\\n<channel|>'") &&
               find_bytes(tmpl, len, "'<|think|>\\n'") &&
               find_bytes(tmpl, len, "format_tool_response_block") &&
               find_bytes(tmpl, len, "loop_messages[k]['role'] != 'tool'")) {
        /* Gemma 4: the template that reads OpenAI's tool messages (its
         * forward scan); llama.cpp rewrites the history for the earlier
         * one, which we do not take */
        ret_info->kind = ENG_CHAT_GEMMA4;
        ret_info->think_switch = ret_info->reasoning = ret_info->tools = true;
    } else if (find_bytes(tmpl, len, "\"<|start|>system<|message|>\"") &&
               find_bytes(tmpl, len, "\"<|start|>assistant<|channel|>final<|message|>\"") &&
               find_bytes(tmpl, len, "set model_identity = \"" HARMONY_IDENTITY "\"") &&
               find_bytes(tmpl, len, "\"Knowledge cutoff: 2024-06\\n\"") &&
               find_bytes(tmpl, len, "\"Current date: \" + strftime_now(\"%Y-%m-%d\")") &&
               find_bytes(tmpl, len, "set reasoning_effort = \"medium\"") &&
               find_bytes(tmpl, len, "\"" HARMONY_CHANNELS "\"")) {
        /* gpt-oss: the texts of its system block, which we print; its
         * reasoning effort as the thinking switch; its tools where the
         * template has the functions namespace and the calls we print */
        ret_info->kind = ENG_CHAT_GPT_OSS;
        ret_info->think_switch = ret_info->reasoning = true;
        ret_info->tools =
            find_bytes(tmpl, len, "render_tool_namespace(\"functions\", tools)") &&
            find_bytes(tmpl, len, "\"<|start|>assistant to=\"") &&
            find_bytes(tmpl, len, "\"\\n" HARMONY_TOOLS_NOTE "\"") &&
            find_bytes(tmpl, len, "\" to=assistant<|channel|>commentary<|message|>\"");
    } else if (find_bytes(tmpl, len, "'[SYSTEM_PROMPT]'") &&
               find_bytes(tmpl, len, "'[/SYSTEM_PROMPT]'") &&
               find_bytes(tmpl, len, "'[INST]'") && find_bytes(tmpl, len, "'[/INST]'") &&
               find_bytes(tmpl, len, "bos_token") && find_bytes(tmpl, len, "eos_token")) {
        /* Ministral 3, Mistral Small 3.x (llama.cpp's mistral-v7-tekken) */
        ret_info->kind = ENG_CHAT_MISTRAL7;
        mistral7_find_default(tmpl, len, ret_info);
        ret_info->reasoning = ret_info->bracket_think =
            find_bytes(tmpl, len, "'[THINK]'") && find_bytes(tmpl, len, "'[/THINK]'");
    } else if (find_bytes(tmpl, len, "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n'") &&
               find_bytes(tmpl, len, "bos_token + '[INST] ' + content.strip() + ' [/INST]'") &&
               find_bytes(tmpl, len, "' '  + content.strip() + ' ' + eos_token")) {
        ret_info->kind = ENG_CHAT_LLAMA2;
    } else if (find_bytes(tmpl, len, "{{ bos_token }}") &&
               find_bytes(tmpl, len, "{{ '[INST] ' + message['content'] + ' [/INST]' }}") &&
               find_bytes(tmpl, len, "{{ message['content'] + eos_token")) {
        ret_info->kind = ENG_CHAT_MISTRAL;
        ret_info->eos_space = find_bytes(tmpl, len, "{{ message['content'] + eos_token + ' ' }}") != NULL;
    } else if (find_bytes(tmpl, len, "[gMASK]<sop>") &&
               !find_bytes(tmpl, len, "reasoning_content")) {
        /* GLM-4: its prefix tokens, which no other family prints; which of
         * its templates, from the lines that differ */
        ret_info->kind = ENG_CHAT_GLM4;
        ret_info->glm_skip_empty = find_bytes(tmpl, len, "{% if item['content'] %}") != NULL;
        ret_info->glm_sys_first =
            find_bytes(tmpl, len, "for message in messages if message.role != 'system'") != NULL;
        ret_info->r1_think = find_bytes(tmpl, len, "<|assistant|>\n<think>{% endif %}") != NULL;
        ret_info->r1_strip = find_bytes(tmpl, len, "content.split('</think>')[-1].strip()") != NULL;
        ret_info->reasoning = ret_info->r1_think || ret_info->r1_strip;
    } else if ((find_bytes(tmpl, len, "'<|user|>\n' + message['content'] + eos_token") ||
                find_bytes(tmpl, len, "'<|user|>\\n' + message['content'] + eos_token")) &&
               find_bytes(tmpl, len, "'<|system|>") && find_bytes(tmpl, len, "{{ '<|assistant|>' }}")) {
        ret_info->kind = ENG_CHAT_ZEPHYR;
    } else if ((find_bytes(tmpl, len, "'<|user|>\\n' + message['content'] + '\\n'") ||
                find_bytes(tmpl, len, "'<|user|>\n' + message['content'] + '\n'")) &&
               (find_bytes(tmpl, len, "+ message['content'] + eos_token + '\\n' }}") ||
                find_bytes(tmpl, len, "+ message['content'] + eos_token + '\n' }}")) &&
               (find_bytes(tmpl, len, "{{ '<|assistant|>\\n' }}") ||
                find_bytes(tmpl, len, "{{ '<|assistant|>\n' }}"))) {
        ret_info->kind = ENG_CHAT_TULU; /* Tulu 3, OLMo 2 (with bos_token) */
        ret_info->tulu_bos = find_bytes(tmpl, len, "{{ bos_token }}") != NULL;
    } else if (find_bytes(tmpl, len, "'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'")) {
        ret_info->kind = ENG_CHAT_PHI3;
        ret_info->phi3_legacy = true;
        ret_info->phi3_bos = find_bytes(tmpl, len, "{{ bos_token }}") != NULL;
    } else if ((find_bytes(tmpl, len, "'<|user|>\\n' + message['content'] + '<|end|>\\n'") ||
                find_bytes(tmpl, len, "'<|user|>\n' + message['content'] + '<|end|>\n'")) &&
               (find_bytes(tmpl, len, "{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}") ||
                find_bytes(tmpl, len, "{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}"))) {
        ret_info->kind = ENG_CHAT_PHI3;
        ret_info->phi3_skip_empty_system = find_bytes(tmpl, len, "message['role'] == 'system' and message['content']");
    } else if (find_bytes(tmpl, len, "'<|' + message['role'] + '|>' + message['content'] + '<|end|>'") &&
               find_bytes(tmpl, len, "{{ '<|assistant|>' }}{% else %}{{ eos_token }}")) {
        ret_info->kind = ENG_CHAT_PHI3;
        ret_info->phi4 = true;
    } else if (find_bytes(tmpl, len, "\"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\"") ||
               find_bytes(tmpl, len, "\"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\"")) {
        ret_info->kind = ENG_CHAT_MISTRAL3;
        ret_info->tekken = find_bytes(tmpl, len, "\"[INST]\" + system_message") != NULL;
    } else if (find_bytes(tmpl, len, "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}") &&
               find_bytes(tmpl, len, "{{ message['content'] | trim }}") &&
               find_bytes(tmpl, len, "{{ '<end_of_turn>\\n' }}")) {
        ret_info->kind = ENG_CHAT_GEMMA;
        ret_info->gemma_nl1 = find_bytes(tmpl, len, "messages[0]['content'] + '\\n' -%}") != NULL;
    } else if (find_bytes(tmpl, len, "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
                                     "'<end_of_turn>\\n' }}") &&
               find_bytes(tmpl, len, "{{'<start_of_turn>model\\n'}}")) {
        ret_info->kind = ENG_CHAT_GEMMA; /* Gemma 2, 1.x */
        ret_info->gemma_no_bos = !find_bytes(tmpl, len, "{{ bos_token }}");
    } else if (find_bytes(tmpl, len, "{{'<｜User｜>' + message['content']}}") &&
               find_bytes(tmpl, len, "'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'") &&
               find_bytes(tmpl, len, "{{ns.system_prompt}}")) {
        ret_info->kind = ENG_CHAT_DEEPSEEK_R1;
        ret_info->reasoning = true;
        ret_info->r1_think = find_bytes(tmpl, len, "{{'<｜Assistant｜><think>\\n'}}") != NULL;
        ret_info->r1_strip = find_bytes(tmpl, len, "content.split('</think>')[-1]") != NULL;
    } else if (find_bytes(tmpl, len, "set tools_system_message_prefix = ") &&
               find_bytes(tmpl, len, "set documents_system_message_prefix = ") &&
               find_bytes(tmpl, len, "'" GRANITE_ROLE "system" GRANITE_ROLE_END "'") &&
               find_bytes(tmpl, len, "You are provided with function signatures within <tools>")) {
        /* Granite 4.0 (a default system prompt) and 4.1 (none): its tools
         * in the system message, Qwen's <tool_call> answers */
        ret_info->kind = ENG_CHAT_GRANITE;
        ret_info->granite4 = true;
        ret_info->tools = true;
        const char *d = find_bytes(tmpl, len, "set g4_default_system_message = ");
        const size_t cap = sizeof(ret_info->default_system) - 1;
        size_t at = d ? (size_t)(d - tmpl) + 32 : len, dl = 0;
        if (at < len && (tmpl[at] == '\'' || tmpl[at] == '"') &&
            (dl = read_literal(tmpl, len, &at, ret_info->default_system, cap)) < cap)
            ret_info->default_system[dl] = '\0';
        else
            ret_info->default_system[0] = '\0';
    } else if (find_bytes(tmpl, len, GRANITE_ROLE "system" GRANITE_ROLE_END) &&
               find_bytes(tmpl, len, "Knowledge Cutoff Date: April 2024. Today's Date: ") &&
               find_bytes(tmpl, len, "You are Granite, developed by IBM.")) {
        ret_info->kind = ENG_CHAT_GRANITE; /* 3.3 (4.0's tools are another template) */
    } else if (find_bytes(tmpl, len, "'" GRANITE_ROLE "assistant" GRANITE_ROLE_END "'") &&
               find_bytes(tmpl, len, "message['role'] == 'tool_response'") &&
               !find_bytes(tmpl, len, "Knowledge Cutoff") && !find_bytes(tmpl, len, "<tool_call>")) {
        ret_info->kind = ENG_CHAT_GRANITE; /* 3.0 */
        ret_info->granite30 = true;
    } else if (find_bytes(tmpl, len, "[|system|]") && find_bytes(tmpl, len, "[|assistant|]") &&
               find_bytes(tmpl, len, "[|endofturn|]") && find_bytes(tmpl, len, "[|tool|]")) {
        /* EXAONE 4.0: llama.cpp's test of its template (a tool role); its
         * own rendering (render_exaone4), its tool calling, its answers'
         * reasoning split off */
        ret_info->kind = ENG_CHAT_EXAONE;
        ret_info->exaone4 = true;
        ret_info->tools = find_bytes(tmpl, len, "# Available Tools") && find_bytes(tmpl, len, "<tool_call>");
        ret_info->reasoning = find_bytes(tmpl, len, "</think>") != NULL;
    } else if (find_bytes(tmpl, len, "'[|system|][|endofturn|]") &&
               find_bytes(tmpl, len, "'[|' + message['role'] + '|]' + message['content']")) {
        ret_info->kind = ENG_CHAT_EXAONE;
    } else if (find_bytes(tmpl, len, LLAMA3_HDR_START)) {
        ret_info->kind = ENG_CHAT_LLAMA3;
        llama3_find_preamble(tmpl, len, ret_info);
        /* Llama 3.1+'s custom tools (LLAMA_TOOLS_HEAD), in the first user
         * message as by default; with the preamble that 3.0 lacks */
        ret_info->tools = ret_info->default_system[0] && find_bytes(tmpl, len, "Environment: ipython") &&
                          find_bytes(tmpl, len, "Given the following functions, please respond with a JSON") &&
                          find_bytes(tmpl, len, "\"parameters\": ");
    } else if (find_bytes(tmpl, len, "set cls_token = \"" ERNIE_CLS "\"") &&
               find_bytes(tmpl, len, "set sep_token = \"" ERNIE_SEP "\"") &&
               find_bytes(tmpl, len, "\"User: \" + message[\"content\"] + \"\\n\"") &&
               find_bytes(tmpl, len, "\"Assistant: \" + message[\"content\"] + sep_token")) {
        /* ERNIE 4.5: its defaults for the two markers and its turns' lines,
         * which no other family has; last, so that it takes nothing another
         * branch would */
        ret_info->kind = ENG_CHAT_ERNIE;
    }
}

/* snprintf-like output: counts everything, writes what fits. */
typedef struct outbuf {
    char *buf;
    size_t cap; /* bytes available for text (cap - 1 of the caller's) */
    size_t len; /* full length so far */
    int err;    /* -ENOMEM, or -EINVAL where the template raises, midway (Gemma 4) */
} outbuf;

static void out_put(outbuf *o, const char *s, size_t n) {
    if (o->len < o->cap) {
        size_t room = o->cap - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len = n > SIZE_MAX - o->len ? SIZE_MAX : o->len + n;
}

static void out_str(outbuf *o, const char *s) { out_put(o, s, strlen(s)); }

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Python's whitespace (str.isspace, which str.strip() and so Jinja's trim
 * filter remove), in UTF-8: the ASCII ones, U+001C-U+001F, U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F and U+3000. The
 * length of the one that starts s[0, n) (ends it, with at_end), or 0. */
static size_t py_space(const char *s, size_t n, bool at_end) {
    static const char *const wide[] = {
        "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf",
        "\xe2\x81\x9f", "\xe3\x80\x80",
    };
    if (n == 0)
        return 0;
    const char c = at_end ? s[n - 1] : s[0];
    if (is_space(c) || (c >= 0x1c && c <= 0x1f))
        return 1;
    for (size_t k = 0; k < sizeof(wide) / sizeof(wide[0]); k++) {
        const size_t l = strlen(wide[k]);
        if (n >= l && !memcmp(at_end ? s + n - l : s, wide[k], l))
            return l;
    }
    if (n < 3)
        return 0;
    /* U+2000-U+200A: e2 80 80-8a */
    const unsigned char *t = (const unsigned char *)(at_end ? s + n - 3 : s);
    return t[0] == 0xe2 && t[1] == 0x80 && t[2] >= 0x80 && t[2] <= 0x8a ? 3 : 0;
}

/* The length of s[0, n) without its trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n) {
    for (size_t l; (l = py_space(s, n, true)) > 0;)
        n -= l;
    return n;
}

/* Jinja's trim filter, Python's str.strip(). */
static void out_trimmed(outbuf *o, const char *c) {
    size_t n = strlen(c);
    for (size_t l; (l = py_space(c, n, false)) > 0;)
        c += l, n -= l;
    out_put(o, c, rstrip_len(c, n));
}

/* Tulu 3 and OLMo 2: system and user turns end with "\n", an answer with
 * eos_token (and "\n" unless it is the last message); other roles print
 * nothing; the assistant's header follows the last message only (none for
 * an empty conversation), as the template's loop prints it. */
static void render_tulu(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                        bool add_assistant, outbuf *o) {
    if (info->tulu_bos)
        out_str(o, info->bos);
    for (size_t i = 0; i < n_msgs; i++) {
        const char *role = msgs[i].role;
        if (!strcmp(role, "system") || !strcmp(role, "user")) {
            out_str(o, role[0] == 's' ? "<|system|>\n" : "<|user|>\n");
            out_str(o, msgs[i].content);
            out_str(o, "\n");
        } else if (!strcmp(role, "assistant")) {
            out_str(o, "<|assistant|>\n");
            out_str(o, msgs[i].content);
            out_str(o, info->eos);
            if (i + 1 < n_msgs)
                out_str(o, "\n");
        }
        if (i + 1 == n_msgs && add_assistant)
            out_str(o, "<|assistant|>\n");
    }
}

/* GLM-4, as the comment at the top says. */
static void render_glm4(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                        bool add_assistant, outbuf *o) {
    out_str(o, "[gMASK]<sop>");
    for (int pass = info->glm_sys_first ? 0 : 1; pass < 2; pass++) {
        for (size_t i = 0; i < n_msgs; i++) {
            const char *role = msgs[i].role, *c = msgs[i].content;
            const bool sys = !strcmp(role, "system");
            if (info->glm_sys_first && sys != (pass == 0))
                continue;
            if (info->glm_sys_first && !sys && strcmp(role, "user") && strcmp(role, "assistant") &&
                strcmp(role, "observation"))
                continue;
            if (info->glm_skip_empty && !c[0])
                continue;
            out_str(o, "<|");
            out_str(o, role);
            out_str(o, "|>\n");
            if (!info->r1_strip || sys) {
                out_str(o, c);
                continue;
            }
            for (const char *t; (t = strstr(c, "</think>")) != NULL;)
                c = t + 8;
            out_trimmed(o, c);
        }
    }
    if (add_assistant)
        out_str(o, info->r1_think ? "<|assistant|>\n<think>" : "<|assistant|>\n");
}

/* ERNIE 4.5, as the comment at the top says. */
static void render_ernie(const eng_chat_msg *msgs, size_t n_msgs, bool add_assistant, outbuf *o) {
    out_str(o, ERNIE_CLS);
    for (size_t i = 0; i < n_msgs; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content;
        if (!strcmp(role, "user")) {
            out_str(o, "User: ");
            out_str(o, c);
            out_str(o, "\n");
        } else if (!strcmp(role, "assistant")) {
            out_str(o, "Assistant: ");
            out_str(o, c);
            out_str(o, ERNIE_SEP);
        } else if (!strcmp(role, "system")) {
            out_str(o, c);
            out_str(o, "\n");
        }
    }
    if (add_assistant)
        out_str(o, "Assistant: ");
}

/* Mistral's [SYSTEM_PROMPT] templates (Ministral 3, Mistral Small 3.x):
 * bos_token, the first message's system prompt or the template's default
 * (today's date where it has one), then [INST]user[/INST], answers
 * followed by eos_token, [TOOL_RESULTS]result[/TOOL_RESULTS]; a later
 * system message in its own [SYSTEM_PROMPT] block, as Small 3.x's does
 * (Ministral 3's raises). Generation follows [/INST] directly. */
static void render_mistral7(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                            outbuf *o) {
    out_str(o, info->bos);
    size_t first = 0;
    const char *sys = n_msgs > 0 && !strcmp(msgs[0].role, "system") ? msgs[0].content : NULL;
    if (sys) {
        first = 1;
    } else if (info->default_system[0]) {
        sys = info->default_system;
    }
    if (sys) {
        out_str(o, "[SYSTEM_PROMPT]");
        for (const char *c = sys; *c; c++) {
            if (*c == '\x01' && sys == info->default_system && info->dated_default) {
                char date[32];
                const time_t now = time(NULL);
                struct tm tm;
                if (localtime_r(&now, &tm) && strftime(date, sizeof(date), "%Y-%m-%d", &tm))
                    out_str(o, date);
            } else {
                out_put(o, c, 1);
            }
        }
        out_str(o, "[/SYSTEM_PROMPT]");
    }
    for (size_t i = first; i < n_msgs; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content;
        if (!strcmp(role, "user")) {
            out_str(o, "[INST]");
            out_str(o, c);
            out_str(o, "[/INST]");
        } else if (!strcmp(role, "assistant")) {
            out_str(o, c);
            out_str(o, info->eos);
        } else if (!strcmp(role, "tool")) {
            out_str(o, "[TOOL_RESULTS]");
            out_str(o, c);
            out_str(o, "[/TOOL_RESULTS]");
        } else if (!strcmp(role, "system")) {
            out_str(o, "[SYSTEM_PROMPT]");
            out_str(o, c);
            out_str(o, "[/SYSTEM_PROMPT]");
        }
    }
}

/* The bytes of [s, s + n) without leading (lead) or trailing newlines:
 * Jinja's lstrip('\n') / rstrip('\n'). */
static void strip_nl(const char **s, size_t *n, bool lead, bool trail) {
    while (lead && *n > 0 && **s == '\n')
        (*s)++, (*n)--;
    while (trail && *n > 0 && (*s)[*n - 1] == '\n')
        (*n)--;
}

/* The last occurrence of needle in [s, s + n), or NULL. */
static const char *find_last(const char *s, size_t n, const char *needle) {
    const char *last = NULL, *p = s;
    size_t m = strlen(needle);
    while ((p = find_bytes(p, n - (size_t)(p - s), needle)) != NULL) {
        last = p;
        p += m;
    }
    return last;
}

/* Mistral: the system messages in msgs[from, to), "\n\n" between them;
 * whether there was one. */
static bool out_systems(outbuf *o, const eng_chat_msg *msgs, size_t from, size_t to) {
    bool any = false;
    for (size_t k = from; k < to; k++) {
        if (strcmp(msgs[k].role, "system") != 0)
            continue;
        if (any)
            out_str(o, "\n\n");
        out_str(o, msgs[k].content);
        any = true;
    }
    return any;
}

/* Mistral: system messages no user message follows, as a turn of their own. */
static void out_system_turn(outbuf *o, const eng_chat_msg *msgs, size_t from, size_t to) {
    for (size_t k = from; k < to; k++)
        if (!strcmp(msgs[k].role, "system")) {
            out_str(o, "[INST] ");
            out_systems(o, msgs, from, to);
            out_str(o, " [/INST]");
            return;
        }
}

/* Llama 2, Mistral v0.1/v0.2 and v3, Zephyr, Phi-3 and Gemma, as the comment at the top says. */
static int render_spm_family(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                             bool add_assistant, outbuf *o) {
    if (info->kind == ENG_CHAT_LLAMA2) {
        const char *sys = n_msgs > 0 && !strcmp(msgs[0].role, "system") ? msgs[0].content : NULL;
        for (size_t i = sys ? 1 : 0; i < n_msgs; i++) {
            const eng_chat_msg *m = &msgs[i];
            const bool user = !strcmp(m->role, "user");
            if (!user && strcmp(m->role, "assistant") != 0)
                continue;
            if (user) {
                out_str(o, info->bos);
                out_str(o, "[INST] ");
            } else {
                out_str(o, " ");
            }
            if (sys && i == 1) {
                /* "<<SYS>>..." + content, stripped as one string: only
                 * its end can lose whitespace, up to "<</SYS>>" */
                out_str(o, "<<SYS>>\n");
                out_str(o, sys);
                out_str(o, "\n<</SYS>>");
                size_t cl = rstrip_len(m->content, strlen(m->content));
                if (cl > 0) {
                    out_str(o, "\n\n");
                    out_put(o, m->content, cl);
                }
            } else {
                out_trimmed(o, m->content);
            }
            if (user) {
                out_str(o, " [/INST]");
            } else {
                out_str(o, " ");
                out_str(o, info->eos);
            }
        }
        return 0;
    }
    if (info->kind == ENG_CHAT_MISTRAL) {
        out_str(o, info->bos);
        size_t from = 0; /* system messages from here on wait for a user message */
        for (size_t i = 0; i < n_msgs; i++) {
            const eng_chat_msg *m = &msgs[i];
            if (!strcmp(m->role, "system"))
                continue;
            if (!strcmp(m->role, "user")) {
                out_str(o, "[INST] ");
                if (out_systems(o, msgs, from, i))
                    out_str(o, "\n\n");
                out_str(o, m->content);
                out_str(o, " [/INST]");
            } else if (!strcmp(m->role, "assistant")) {
                out_system_turn(o, msgs, from, i);
                out_str(o, m->content);
                out_str(o, info->eos);
                if (info->eos_space)
                    out_str(o, " ");
            } else {
                return -EINVAL; /* "Only user and assistant roles are supported!" */
            }
            from = i + 1;
        }
        out_system_turn(o, msgs, from, n_msgs);
        return 0;
    }
    if (info->kind == ENG_CHAT_MISTRAL3) {
        out_str(o, info->bos);
        const char *sys = n_msgs > 0 && !strcmp(msgs[0].role, "system") ? msgs[0].content : NULL;
        for (size_t i = sys ? 1 : 0; i < n_msgs; i++) {
            const eng_chat_msg *m = &msgs[i];
            if (!strcmp(m->role, "user")) {
                out_str(o, info->tekken ? "[INST]" : "[INST] ");
                if (sys && i + 1 == n_msgs) {
                    out_str(o, sys);
                    out_str(o, "\n\n");
                }
                out_str(o, m->content);
                out_str(o, "[/INST]");
            } else if (!strcmp(m->role, "assistant")) {
                if (info->tekken) {
                    out_str(o, m->content);
                } else {
                    out_str(o, " ");
                    out_trimmed(o, m->content);
                }
                out_str(o, info->eos);
            } else {
                return -EINVAL; /* tool results need call ids; a later system message is refused */
            }
        }
        return 0;
    }
    if (info->kind == ENG_CHAT_PHI3) {
        if (info->phi3_legacy && info->phi3_bos)
            out_str(o, info->bos);
        for (size_t i = 0; i < n_msgs; i++) {
            const eng_chat_msg *m = &msgs[i];
            const bool sys = !strcmp(m->role, "system"), user = !strcmp(m->role, "user");
            if (info->phi4) {
                out_str(o, "<|");
                out_str(o, m->role);
                out_str(o, "|>");
                out_str(o, m->content);
                out_str(o, "<|end|>");
                continue;
            }
            if (!sys && !user && strcmp(m->role, "assistant") != 0)
                continue;
            if (sys && info->phi3_skip_empty_system && !m->content[0])
                continue;
            if (!info->phi3_legacy || sys || user) {
                out_str(o, "<|");
                out_str(o, m->role);
                out_str(o, "|>\n");
            }
            out_str(o, m->content);
            out_str(o, "<|end|>\n");
            if (info->phi3_legacy && user)
                out_str(o, "<|assistant|>\n");
        }
        if (info->phi4)
            out_str(o, add_assistant ? "<|assistant|>" : info->eos);
        else if (!info->phi3_legacy)
            out_str(o, add_assistant ? "<|assistant|>\n" : info->eos);
        return 0;
    }
    if (info->kind == ENG_CHAT_DEEPSEEK_R1) {
        const char *sys = "";
        for (size_t i = 0; i < n_msgs; i++)
            if (!strcmp(msgs[i].role, "system"))
                sys = msgs[i].content;
        out_str(o, info->bos);
        out_str(o, sys);
        bool in_tool = false, first_output = true;
        for (size_t i = 0; i < n_msgs; i++) {
            const eng_chat_msg *m = &msgs[i];
            if (!strcmp(m->role, "user")) {
                in_tool = false;
                out_str(o, "<｜User｜>");
                out_str(o, m->content);
            } else if (!strcmp(m->role, "assistant") && in_tool) {
                out_str(o, "<｜tool▁outputs▁end｜>");
                out_str(o, m->content);
                out_str(o, "<｜end▁of▁sentence｜>");
                in_tool = false;
            } else if (!strcmp(m->role, "assistant")) {
                const char *c = m->content;
                for (const char *t; info->r1_strip && (t = strstr(c, "</think>")) != NULL;)
                    c = t + 8;
                out_str(o, "<｜Assistant｜>");
                out_str(o, c);
                out_str(o, "<｜end▁of▁sentence｜>");
            } else if (!strcmp(m->role, "tool")) {
                in_tool = true;
                out_str(o, first_output ? "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
                                        : "\n<｜tool▁output▁begin｜>");
                out_str(o, m->content);
                out_str(o, "<｜tool▁output▁end｜>");
                first_output = false;
            }
        }
        if (in_tool)
            out_str(o, "<｜tool▁outputs▁end｜>");
        else if (add_assistant)
            out_str(o, info->r1_think ? "<｜Assistant｜><think>\n" : "<｜Assistant｜>");
        return 0;
    }
    if (info->kind == ENG_CHAT_GEMMA) {
        if (!info->gemma_no_bos)
            out_str(o, info->bos);
        const bool sys = n_msgs > 0 && !strcmp(msgs[0].role, "system");
        for (size_t i = sys ? 1 : 0; i < n_msgs; i++) {
            const eng_chat_msg *m = &msgs[i];
            out_str(o, "<start_of_turn>");
            out_str(o, strcmp(m->role, "assistant") ? m->role : "model");
            out_str(o, "\n");
            if (sys && i == 1) {
                out_str(o, msgs[0].content);
                out_str(o, info->gemma_nl1 ? "\n" : "\n\n");
            }
            out_trimmed(o, m->content);
            out_str(o, "<end_of_turn>\n");
        }
        if (add_assistant)
            out_str(o, "<start_of_turn>model\n");
        return 0;
    }
    for (size_t i = 0; i < n_msgs; i++) { /* Zephyr */
        const eng_chat_msg *m = &msgs[i];
        if (!strcmp(m->role, "user") || !strcmp(m->role, "system") || !strcmp(m->role, "assistant")) {
            out_str(o, "<|");
            out_str(o, m->role);
            out_str(o, "|>\n");
            out_str(o, m->content);
            out_str(o, info->eos);
            out_str(o, "\n");
        }
        if (i + 1 == n_msgs && add_assistant)
            out_str(o, "<|assistant|>\n");
    }
    return 0;
}

/* A Qwen3 answer: the template splits a message with "</think>" into its
 * reasoning (before the first "</think>", after the last "<think>" there,
 * newlines trimmed) and its content (after the last "</think>", leading
 * newlines trimmed), and keeps the reasoning only for answers after the
 * last user message, where there is some or the answer is the last
 * message. */
static void out_call(outbuf *o, const eng_tool_call *tc);
static void out_xml_call(outbuf *o, const eng_tool_call *tc);
static void g4_split(const char *t, size_t n, size_t *think_off, size_t *think_len,
                     size_t *content_off);
static void harmony_split(const char *t, size_t n, size_t *think_off, size_t *think_len,
                          size_t *content_off, size_t *content_end);
static int render_harmony(const eng_chat_msg *msgs, size_t n_msgs, const char *tools,
                          size_t n_tools, unsigned flags, outbuf *o);

/* The template's split of an answer [c, c + n) into reasoning and content. */
static void split_reasoning_tags(const char *c, size_t n, const char *open_tag,
                                 const char *close_tag, const char **reason, size_t *rlen,
                                 const char **content, size_t *clen) {
    *content = c;
    *clen = n;
    *reason = c;
    *rlen = 0;
    const char *close = find_bytes(c, n, close_tag);
    if (!close)
        return;
    const char *lc = find_last(c, n, close_tag);
    *content = lc + strlen(close_tag);
    *clen = n - (size_t)(*content - c);
    strip_nl(content, clen, true, false);
    *rlen = (size_t)(close - c);
    strip_nl(reason, rlen, false, true);
    const char *open = find_last(*reason, *rlen, open_tag);
    if (open) {
        *rlen -= (size_t)(open + strlen(open_tag) - *reason);
        *reason = open + strlen(open_tag);
    }
    strip_nl(reason, rlen, true, false);
}

static void split_reasoning(const char *c, size_t n, const char **reason, size_t *rlen, const char **content,
                            size_t *clen) {
    split_reasoning_tags(c, n, "<think>", "</think>", reason, rlen, content, clen);
}

int eng_chat_split_reasoning(const eng_chat_info *info, const char *text, size_t len, size_t *ret_think_off,
                             size_t *ret_think_len, size_t *ret_content_off) {
    if (!info || (!text && len) || !ret_think_off || !ret_think_len || !ret_content_off)
        return -EINVAL;
    *ret_think_off = *ret_think_len = *ret_content_off = 0;
    if (!info->reasoning)
        return -ENOTSUP;
    if (info->kind == ENG_CHAT_GEMMA4) {
        g4_split(text ? text : "", len, ret_think_off, ret_think_len, ret_content_off);
        return 0;
    }
    if (info->kind == ENG_CHAT_GPT_OSS) {
        size_t end;
        harmony_split(text ? text : "", len, ret_think_off, ret_think_len, ret_content_off, &end);
        return 0;
    }
    const char *reason, *content;
    size_t rlen, clen;
    if (info->bracket_think) /* Ministral 3 Reasoning */
        split_reasoning_tags(text ? text : "", len, "[THINK]", "[/THINK]", &reason, &rlen, &content,
                             &clen);
    else
        split_reasoning(text ? text : "", len, &reason, &rlen, &content, &clen);
    if (text) {
        *ret_think_off = (size_t)(reason - text);
        *ret_content_off = (size_t)(content - text);
    }
    *ret_think_len = rlen;
    return 0;
}

static void qwen3_answer(outbuf *o, const eng_chat_msg *m, bool after_query, bool last,
                         const eng_chat_info *info) {
    const char *c = m->content;
    const char *content, *reason;
    size_t clen, rlen;
    split_reasoning(c, strlen(c), &reason, &rlen, &content, &clen);
    out_str(o, CHATML_START "assistant\n");
    if (after_query && (last || rlen > 0 || info->think_open)) {
        strip_nl(&reason, &rlen, true, true);
        out_str(o, "<think>\n");
        out_put(o, reason, rlen);
        out_str(o, "\n</think>\n\n");
        strip_nl(&content, &clen, true, false);
    }
    out_put(o, content, clen);
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        if (info->xml_calls) { /* (Qwen3.5: a blank line after the text) */
            out_str(o, j > 0 ? "\n" : clen > 0 ? "\n\n" : "");
            out_xml_call(o, &m->tool_calls[j]);
            continue;
        }
        if (j > 0 || clen > 0)
            out_str(o, "\n");
        out_call(o, &m->tool_calls[j]);
    }
    out_str(o, CHATML_END "\n");
}

#define TOOLS_HEAD                                                                          \
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"       \
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
#define TOOLS_TAIL                                                                          \
    "\n</tools>\n\nFor each function call, return a json object with function name and "     \
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "          \
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>"

#define LLAMA_TOOLS_HEAD                                                                    \
    "Given the following functions, please respond with a JSON for a function call with its " \
    "proper arguments that best answers the given prompt.\n\nRespond in the format "          \
    "{\"name\": function name, \"parameters\": dictionary of argument name and its value}."    \
    "Do not use variables.\n\n"

static void out_cb(void *ctx, const char *s, size_t n) { out_put(ctx, s, n); }

static size_t skip_json_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* Whether [s, s + n) is one JSON value, whitespace around it allowed; the
 * value written to o (NULL: only checked). */
static bool json_whole(const char *s, size_t n, outbuf *o) {
    int64_t r = eng__json_value(s, n, o ? out_cb : NULL, o);
    return r >= 0 && skip_json_ws(s, n, (size_t)r) == n;
}

static bool json_is_object(const char *s, size_t n) {
    size_t i = skip_json_ws(s, n, 0);
    return i < n && s[i] == '{' && json_whole(s, n, NULL);
}

/* A call as {"name": "NAME", "arguments": ARGS} (ARGS {} where none). */
static void out_call_json(outbuf *o, const eng_tool_call *tc) {
    out_str(o, "{\"name\": \"");
    out_str(o, tc->name);
    out_str(o, "\", \"arguments\": ");
    if (tc->arguments)
        json_whole(tc->arguments, strlen(tc->arguments), o); /* checked before */
    else
        out_str(o, "{}");
    out_str(o, "}");
}

static void out_call(outbuf *o, const eng_tool_call *tc) {
    out_str(o, "<tool_call>\n");
    out_call_json(o, tc);
    out_str(o, "\n</tool_call>");
}

/* Qwen3.5's call: "<tool_call>\n<function=NAME>\n", each argument as
 * "<parameter=KEY>\nVALUE\n</parameter>\n" (a string as it is, an object
 * or array in json.dumps form, true, false and null as Python prints
 * them), "</function>\n</tool_call>". */
static void out_xml_call(outbuf *o, const eng_tool_call *tc) {
    out_str(o, "<tool_call>\n<function=");
    out_str(o, tc->name);
    out_str(o, ">\n");
    const char *args = tc->arguments ? tc->arguments : "{}";
    const size_t n = strlen(args);
    size_t pos = 0, kl, vl;
    const char *k, *v;
    while (eng__json_next(args, n, &pos, &k, &kl, &v, &vl) == 1) {
        char *key = NULL, *str = NULL;
        out_str(o, "<parameter=");
        if (eng__json_unquote(k, kl, &key) == 0) /* (else out of memory: as written) */
            out_str(o, key);
        else
            out_put(o, k + 1, kl - 2);
        out_str(o, ">\n");
        free(key);
        if (v[0] == '"' && eng__json_unquote(v, vl, &str) == 0)
            out_str(o, str);
        else if (v[0] == '"')
            out_put(o, v + 1, vl - 2);
        else if (v[0] == '{' || v[0] == '[')
            json_whole(v, vl, o);
        else if (vl == 4 && !memcmp(v, "true", 4))
            out_str(o, "True");
        else if (vl == 5 && !memcmp(v, "false", 5))
            out_str(o, "False");
        else if (vl == 4 && !memcmp(v, "null", 4))
            out_str(o, "None");
        else /* (a number, as json.dumps prints it) */
            json_whole(v, vl, o);
        free(str);
        out_str(o, "\n</parameter>\n");
    }
    out_str(o, "</function>\n</tool_call>");
}

/* Elements of a tools array (Jinja's `if tools`: an empty one is none);
 * -EINVAL when it is not a JSON array. */
static int count_tools(const char *tools, size_t *ret) {
    *ret = 0;
    if (!tools)
        return 0;
    const size_t n = strlen(tools);
    size_t i = skip_json_ws(tools, n, 0);
    if (i >= n || tools[i] != '[' || !json_whole(tools, n, NULL))
        return -EINVAL;
    size_t pos = 0, vl;
    const char *v;
    int r;
    while ((r = eng__json_next(tools, n, &pos, NULL, NULL, &v, &vl)) == 1)
        (*ret)++;
    return r;
}

/* Each tool of a JSON array as its template's tojson prints it (json.dumps'
 * separators, keys in the order sent), between pre and post, sep between
 * two: one line each in the Qwen, Granite 4 and EXAONE 4 tool sections,
 * a list in LFM2's. */
static void out_tool_lines(outbuf *o, const char *tools, const char *pre, const char *post,
                           const char *sep) {
    const size_t tl = strlen(tools);
    size_t pos = 0, vl;
    const char *v;
    for (bool first = true; eng__json_next(tools, tl, &pos, NULL, NULL, &v, &vl) == 1;
         first = false) {
        out_str(o, first ? "" : sep);
        out_str(o, pre);
        json_whole(v, vl, o);
        out_str(o, post);
    }
}

/* s with every occurrence of word left out, into o. */
static void out_without(outbuf *o, const char *s, size_t n, const char *word) {
    const size_t wl = strlen(word);
    for (const char *p; n > 0 && (p = find_bytes(s, n, word)) != NULL;) {
        out_put(o, s, (size_t)(p - s));
        n -= (size_t)(p - s) + wl;
        s = p + wl;
    }
    out_put(o, s, n);
}

/* SmolLM3 (the template as llama.cpp keeps it):
 *     "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\n"
 *     "Reasoning Mode: " MODE "\n\n## Custom Instructions\n\n" INSTR "\n\n<|im_end|>\n"
 *     ("<|im_start|>user\n" CONTENT "<|im_end|>\n" |
 *      "<|im_start|>assistant\n" [EMPTY] LSTRIP_NL(CONTENT) "<|im_end|>\n")...
 *     "<|im_start|>assistant\n" [EMPTY]        with add_assistant
 *   MODE is "/no_think" where the first message (a system one) says so,
 *   else "/think" where it says that, else "/think" unless
 *   ENG_CHAT_NO_THINK; EMPTY ("<think>\n\n</think>\n") marks every answer
 *   under "/no_think". INSTR is that system message without the words
 *   "/no_think" and "/think" and without trailing whitespace, or when
 *   that leaves nothing a default per mode. Tool results print as user
 *   turns; system messages print nothing in the loop. */
static int render_smollm3(const eng_chat_msg *msgs, size_t n_msgs, bool add_assistant,
                          bool no_think, outbuf *o) {
    const char *sys = n_msgs > 0 && !strcmp(msgs[0].role, "system") ? msgs[0].content : NULL;
    bool think = !no_think;
    if (sys && find_bytes(sys, strlen(sys), "/no_think"))
        think = false;
    else if (sys && find_bytes(sys, strlen(sys), "/think"))
        think = true;
    out_str(o, CHATML_START "system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\n"
               "Reasoning Mode: ");
    out_str(o, think ? "/think" : "/no_think");
    out_str(o, "\n\n## Custom Instructions\n\n");
    /* the instructions: sys less "/no_think", then less "/think", rstripped */
    size_t il = 0;
    if (sys) {
        const size_t n = strlen(sys);
        char *a = malloc(n + 1), *b = malloc(n + 1);
        if (!a || !b) {
            free(a);
            free(b);
            return -ENOMEM;
        }
        outbuf oa = {a, n, 0, 0}, ob = {b, n, 0, 0};
        out_without(&oa, sys, n, "/no_think");
        out_without(&ob, a, oa.len, "/think");
        il = rstrip_len(b, ob.len);
        out_put(o, b, il);
        free(a);
        free(b);
    }
    if (il == 0)
        out_str(o, think ? SMOL3_THINK_SYS : SMOL3_NO_THINK_SYS);
    out_str(o, "\n\n" CHATML_END "\n");
    for (size_t i = 0; i < n_msgs; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content;
        if (!strcmp(role, "user") || !strcmp(role, "tool")) {
            out_str(o, CHATML_START "user\n");
            out_str(o, c);
            out_str(o, CHATML_END "\n");
        } else if (!strcmp(role, "assistant")) {
            size_t n = strlen(c);
            strip_nl(&c, &n, true, false);
            out_str(o, think ? CHATML_START "assistant\n"
                             : CHATML_START "assistant\n<think>\n\n</think>\n");
            out_put(o, c, n);
            out_str(o, CHATML_END "\n");
        }
    }
    if (add_assistant)
        out_str(o, think ? CHATML_START "assistant\n"
                         : CHATML_START "assistant\n<think>\n\n</think>\n");
    return 0;
}

/* Granite 3.3 (3.0: below):
 *     "<|start_of_role|>system<|end_of_role|>" SYSTEM "<|end_of_text|>\n"
 *     ("<|start_of_role|>" ROLE "<|end_of_role|>" CONTENT "<|end_of_text|>\n")...
 *     "<|start_of_role|>assistant<|end_of_role|>"  with add_assistant,
 *                                                  after a message
 *   SYSTEM is the first message's content when it is a system message
 *   (the loop starts after it), else the template's default with today's
 *   date (local time, as Jinja's strftime_now('%B %d, %Y')). Its tools,
 *   documents and thinking switches are not ours to set. Granite 3.0 has
 *   no system header: its loop prints system, user, assistant and
 *   tool_response messages (assistant_tool_call as the assistant's with
 *   "<|tool_call|>" first), no others. */
/* EXAONE 4.0's template: each role's marker and a newline, turns ended by
 * [|endofturn|] and a newline; an answer after an empty think block (the
 * template's default, thinking off), its own reasoning left out of the
 * history (the text after its last </think>, stripped), its calls as
 * <tool_call>{...}</tool_call> lines; a run of tool results in one tool
 * turn, each <tool_result>{"result": "..."}</tool_result>; tools in the
 * system block after the first message's system prompt. A role it does
 * not know: -EINVAL (the template raises). */
#define EXAONE4_EOT "[|endofturn|]\n"
#define EXAONE4_NO_THINK "<think>\n\n</think>\n\n"
static int render_exaone4(const eng_chat_msg *msgs, size_t n_msgs, const char *tools,
                          size_t n_tools, bool add_assistant, outbuf *o) {
    for (size_t i = 0; i < n_msgs; i++) {
        const char *r = msgs[i].role;
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))
            return -EINVAL;
    }
    for (size_t i = 0; i < n_msgs; i++) {
        const eng_chat_msg *m = &msgs[i];
        const bool sys0 = i == 0 && !strcmp(m->role, "system");
        if (i == 0 && (sys0 || n_tools > 0)) {
            out_str(o, "[|system|]\n");
            if (sys0) {
                out_str(o, m->content);
                if (n_tools > 0)
                    out_str(o, "\n\n");
            }
            if (n_tools > 0) {
                out_str(o, "# Available Tools\nYou can use none, one, or multiple of the following "
                           "tools by calling them as functions to help with the user\u2019s query.\n"
                           "Here are the tools available to you in JSON format within <tool> and "
                           "</tool> tags:\n");
                out_tool_lines(o, tools, "<tool>", "</tool>\n", "");
                out_str(o, "\nFor each function call you want to make, return a JSON object with "
                           "function name and arguments within <tool_call> and </tool_call> tags, "
                           "like:\n<tool_call>{\"name\": function_1_name, \"arguments\": "
                           "{argument_1_name: argument_1_value, argument_2_name: argument_2_value}}"
                           "</tool_call>\n<tool_call>{\"name\": function_2_name, \"arguments\": "
                           "{...}}</tool_call>\n...\nNote that if no argument name is specified for "
                           "a tool, you can just print the argument value directly, without the "
                           "argument name or JSON formatting.");
            }
            out_str(o, EXAONE4_EOT);
            if (sys0)
                continue;
        }
        if (!strcmp(m->role, "assistant")) {
            out_str(o, "[|assistant|]\n");
            const char *c = m->content;
            if (c[0]) {
                out_str(o, EXAONE4_NO_THINK);
                const char *t = find_last(c, strlen(c), "</think>");
                if (t) { /* Python's strip() of what follows */
                    c = t + 8;
                    size_t n = strlen(c);
                    for (size_t l; (l = py_space(c, n, false)) > 0;)
                        c += l, n -= l;
                    out_put(o, c, rstrip_len(c, n));
                } else {
                    out_str(o, c);
                }
            }
            if (m->n_tool_calls > 0)
                out_str(o, m->content[0] ? "\n" : EXAONE4_NO_THINK);
            for (size_t j = 0; j < m->n_tool_calls; j++) {
                const eng_tool_call *tc = &m->tool_calls[j];
                out_str(o, j > 0 ? "\n<tool_call>{\"name\": \"" : "<tool_call>{\"name\": \"");
                out_str(o, tc->name);
                out_str(o, "\", \"arguments\": ");
                if (tc->arguments)
                    json_whole(tc->arguments, strlen(tc->arguments), o);
                else
                    out_str(o, "{}");
                out_str(o, "}</tool_call>");
            }
            out_str(o, EXAONE4_EOT);
        } else if (!strcmp(m->role, "tool")) {
            if (i == 0 || strcmp(msgs[i - 1].role, "tool"))
                out_str(o, "[|tool|]\n");
            out_str(o, "<tool_result>{\"result\": ");
            eng__json_quote(m->content, strlen(m->content), out_cb, o);
            out_str(o, "}</tool_result>");
            out_str(o, i + 1 == n_msgs || strcmp(msgs[i + 1].role, "tool") ? EXAONE4_EOT : "\n");
        } else {
            out_str(o, "[|");
            out_str(o, m->role);
            out_str(o, "|]\n");
            out_str(o, m->content);
            out_str(o, EXAONE4_EOT);
        }
    }
    if (add_assistant)
        out_str(o, "[|assistant|]\n" EXAONE4_NO_THINK);
    return 0;
}

/* Granite 4.0 and 4.1: the system block holds the first message's system
 * prompt, followed by the tools (one JSON line each between their head and
 * tail), or the template's default (4.0) where both are empty; answers
 * carry their calls as Qwen's; each run of tool results is one user turn
 * of <tool_response> blocks; roles other than these print nothing. */
static void render_granite4(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                            const char *tools, size_t n_tools, bool add_assistant, outbuf *o) {
    const bool has_sys = n_msgs > 0 && !strcmp(msgs[0].role, "system");
    const char *sys = has_sys ? msgs[0].content : "";
    if (*sys || n_tools > 0) {
        out_str(o, GRANITE_ROLE "system" GRANITE_ROLE_END);
        out_str(o, sys);
        if (n_tools > 0) {
            if (has_sys) /* even an empty one */
                out_str(o, "\n\n");
            out_str(o, GRANITE4_TOOLS_HEAD);
            out_tool_lines(o, tools, "\n", "", "");
            out_str(o, GRANITE4_TOOLS_TAIL);
        }
        out_str(o, GRANITE_END "\n");
    } else if (info->default_system[0]) {
        out_str(o, GRANITE_ROLE "system" GRANITE_ROLE_END);
        out_str(o, info->default_system);
        out_str(o, GRANITE_END "\n");
    }
    for (size_t i = 0; i < n_msgs; i++) {
        const eng_chat_msg *m = &msgs[i];
        if (!strcmp(m->role, "user") || (!strcmp(m->role, "system") && i > 0)) {
            out_str(o, GRANITE_ROLE);
            out_str(o, m->role);
            out_str(o, GRANITE_ROLE_END);
            out_str(o, m->content);
            out_str(o, GRANITE_END "\n");
        } else if (!strcmp(m->role, "assistant")) {
            out_str(o, GRANITE_ROLE "assistant" GRANITE_ROLE_END);
            out_str(o, m->content);
            for (size_t j = 0; j < m->n_tool_calls; j++) {
                if (j > 0 || m->content[0])
                    out_str(o, "\n");
                out_call(o, &m->tool_calls[j]);
            }
            out_str(o, GRANITE_END "\n");
        } else if (!strcmp(m->role, "tool")) {
            if (i == 0 || strcmp(msgs[i - 1].role, "tool"))
                out_str(o, GRANITE_ROLE "user" GRANITE_ROLE_END);
            out_str(o, "\n<tool_response>\n");
            out_str(o, m->content);
            out_str(o, "\n</tool_response>");
            if (i + 1 == n_msgs || strcmp(msgs[i + 1].role, "tool"))
                out_str(o, GRANITE_END "\n");
        }
    }
    if (add_assistant)
        out_str(o, GRANITE_ROLE "assistant" GRANITE_ROLE_END);
}

static void render_granite(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                           bool add_assistant, outbuf *o) {
    size_t first = 0;
    if (info->granite30) {
        for (size_t i = 0; i < n_msgs; i++) {
            const char *r = msgs[i].role;
            if (!strcmp(r, "assistant_tool_call")) {
                out_str(o, GRANITE_ROLE "assistant" GRANITE_ROLE_END "<|tool_call|>");
            } else if (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") ||
                       !strcmp(r, "tool_response")) {
                out_str(o, GRANITE_ROLE);
                out_str(o, r);
                out_str(o, GRANITE_ROLE_END);
            } else {
                continue;
            }
            out_str(o, msgs[i].content);
            out_str(o, GRANITE_END "\n");
        }
        if (add_assistant && n_msgs > 0)
            out_str(o, GRANITE_ROLE "assistant" GRANITE_ROLE_END);
        return;
    }
    out_str(o, GRANITE_ROLE "system" GRANITE_ROLE_END);
    if (n_msgs > 0 && !strcmp(msgs[0].role, "system")) {
        out_str(o, msgs[0].content);
        first = 1;
    } else {
        char date[64];
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || !strftime(date, sizeof(date), "%B %d, %Y", &tm))
            date[0] = 0;
        out_str(o, "Knowledge Cutoff Date: April 2024. Today's Date: ");
        out_str(o, date);
        out_str(o, ". You are Granite, developed by IBM. You are a helpful AI assistant.");
    }
    out_str(o, GRANITE_END "\n");
    for (size_t i = first; i < n_msgs; i++) {
        out_str(o, GRANITE_ROLE);
        out_str(o, msgs[i].role);
        out_str(o, GRANITE_ROLE_END);
        out_str(o, msgs[i].content);
        out_str(o, GRANITE_END "\n");
    }
    if (add_assistant && first < n_msgs)
        out_str(o, GRANITE_ROLE "assistant" GRANITE_ROLE_END);
}

/* ---- Gemma 4 ---------------------------------------------------------- */

#define G4_Q "<|\"|>" /* Gemma 4's string quote (a token of its own) */

/* The value of key in the JSON object [s, s + n) (its last one, as
 * Python's dict keeps it); false: none, or not an object. */
static bool json_get(const char *s, size_t n, const char *key, const char **v, size_t *vl) {
    const size_t b = skip_json_ws(s, n, 0);
    if (b >= n || s[b] != '{')
        return false;
    bool found = false;
    size_t pos = 0, kl, xl;
    const char *k, *x;
    while (eng__json_next(s, n, &pos, &k, &kl, &x, &xl) == 1)
        if (eng__json_key_is(k, kl, key)) {
            *v = x;
            *vl = xl;
            found = true;
        }
    return found;
}

/* Python's truth of a JSON value (Jinja's `if`): false, null, 0, "", []
 * and {} are false. */
static bool py_truthy(const char *v, size_t vl) {
    size_t pos = 0, xl;
    const char *x;
    switch (v[0]) {
    case 'f':
    case 'n': return false;
    case 't': return true;
    case '"': return vl > 2;
    case '[':
    case '{': return eng__json_next(v, vl, &pos, NULL, NULL, &x, &xl) == 1;
    default: /* a number: zero where its digits before any exponent are */
        for (size_t i = 0; i < vl && v[i] != 'e' && v[i] != 'E'; i++)
            if (v[i] >= '1' && v[i] <= '9')
                return true;
        return false;
    }
}

/* Python's str() of a JSON value, which Jinja prints (repr: its repr()):
 * a string as it is, true/false/null as True/False/None, a number in
 * json.dumps form (Python's digits), a list or dict as Python prints it
 * (non-ASCII characters as they are, where Python escapes those it does
 * not print). A string holding \u0000 is printed as written. */
static void py_str(outbuf *o, const char *v, size_t vl, bool repr) {
    size_t pos = 0, kl, xl;
    const char *k, *x;
    char *s = NULL;
    if (v[0] == 't' || v[0] == 'f' || v[0] == 'n') {
        out_str(o, v[0] == 't' ? "True" : v[0] == 'f' ? "False" : "None");
    } else if (v[0] == '[' || v[0] == '{') {
        const bool obj = v[0] == '{';
        out_str(o, obj ? "{" : "[");
        for (bool first = true; eng__json_next(v, vl, &pos, &k, &kl, &x, &xl) == 1; first = false) {
            out_str(o, first ? "" : ", ");
            if (obj) {
                py_str(o, k, kl, true);
                out_str(o, ": ");
            }
            py_str(o, x, xl, true);
        }
        out_str(o, obj ? "}" : "]");
    } else if (v[0] != '"') {
        json_whole(v, vl, o);
    } else if (eng__json_unquote(v, vl, &s) == -ENOMEM) {
        o->err = -ENOMEM;
    } else if (!s) {
        out_put(o, v + 1, vl - 2);
    } else if (!repr) {
        out_str(o, s);
    } else { /* (Python quotes with ' unless the text has ' and no ") */
        const char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
        out_put(o, &q, 1);
        for (const char *c = s; *c; c++) {
            char e[8];
            if (*c == '\\' || *c == q)
                snprintf(e, sizeof(e), "\\%c", *c);
            else if (*c == '\n' || *c == '\r' || *c == '\t')
                snprintf(e, sizeof(e), "\\%c", *c == '\n' ? 'n' : *c == '\r' ? 'r' : 't');
            else if ((unsigned char)*c < 0x20 || *c == 0x7f)
                snprintf(e, sizeof(e), "\\x%02x", (unsigned)(unsigned char)*c);
            else
                snprintf(e, sizeof(e), "%c", *c);
            out_str(o, e);
        }
        out_put(o, &q, 1);
    }
    free(s);
}

/* Jinja's `x | upper` of a JSON value (v NULL: undefined, ""), malloc'd
 * (NULL: out of memory). Python upper-cases every letter, this ASCII's. */
static char *py_upper(const char *v, size_t vl) {
    outbuf m = {NULL, 0, 0, 0};
    if (v)
        py_str(&m, v, vl, false);
    char *s = m.err ? NULL : calloc(1, m.len + 1);
    outbuf w = {s, m.len, 0, 0};
    if (s && v)
        py_str(&w, v, vl, false);
    if (w.err) {
        free(s);
        return NULL;
    }
    for (char *c = s; c && *c; c++)
        if (*c >= 'a' && *c <= 'z')
            *c = (char)(*c - 'a' + 'A');
    return s;
}

/* An object's member, its key unescaped (dictsort). */
typedef struct g4_member {
    char *key;
    const char *v;
    size_t vl, at;
} g4_member;

/* Jinja's dictsort: keys compared lower-cased (ASCII here, Unicode in
 * Python), equal ones in the order written. */
static int g4_member_cmp(const void *a, const void *b) {
    const g4_member *x = a, *y = b;
    for (const unsigned char *p = (const void *)x->key, *q = (const void *)y->key;; p++, q++) {
        const int cp = *p >= 'A' && *p <= 'Z' ? *p + 32 : *p;
        const int cq = *q >= 'A' && *q <= 'Z' ? *q + 32 : *q;
        if (cp != cq)
            return cp < cq ? -1 : 1;
        if (!cp)
            break;
    }
    return x->at < y->at ? -1 : x->at > y->at;
}

static void g4_members_free(g4_member *m, size_t n) {
    for (size_t i = 0; m && i < n; i++)
        free(m[i].key);
    free(m);
}

/* The members of the JSON object [s, s + n) in dictsort order (none for
 * another value); false: out of memory (o->err set). */
static bool g4_members(outbuf *o, const char *s, size_t n, g4_member **ret, size_t *ret_n) {
    *ret = NULL;
    *ret_n = 0;
    size_t count = 0, pos = 0, kl, vl;
    const char *k, *v;
    while (eng__json_next(s, n, &pos, &k, &kl, &v, &vl) == 1)
        count++;
    const size_t b = skip_json_ws(s, n, 0);
    if (count == 0 || s[b] != '{')
        return true;
    g4_member *m = calloc(count, sizeof(*m));
    pos = 0;
    for (size_t i = 0; m && i < count && eng__json_next(s, n, &pos, &k, &kl, &v, &vl) == 1; i++) {
        m[i] = (g4_member){ NULL, v, vl, i };
        int r = eng__json_unquote(k, kl, &m[i].key);
        if (r == -EINVAL) /* (a \u0000: as written) */
            r = (m[i].key = strndup(k + 1, kl - 2)) ? 0 : -ENOMEM;
        if (r < 0) {
            g4_members_free(m, count);
            m = NULL;
        }
    }
    if (!m) {
        o->err = -ENOMEM;
        return false;
    }
    qsort(m, count, sizeof(*m), g4_member_cmp);
    *ret = m;
    *ret_n = count;
    return true;
}

/* format_argument: a JSON value in Gemma 4's notation: a string between
 * <|"|> as it is, a dict's keys sorted (esc: quoted the same way), numbers
 * as Python prints them, null as None. */
static void g4_arg(outbuf *o, const char *v, size_t vl, bool esc) {
    if (v[0] == '"') {
        out_str(o, G4_Q);
        py_str(o, v, vl, false);
        out_str(o, G4_Q);
    } else if (v[0] == 't' || v[0] == 'f') {
        out_str(o, v[0] == 't' ? "true" : "false");
    } else if (v[0] == '[') {
        size_t pos = 0, xl;
        const char *x;
        out_str(o, "[");
        for (bool first = true; eng__json_next(v, vl, &pos, NULL, NULL, &x, &xl) == 1;
             first = false) {
            out_str(o, first ? "" : ",");
            g4_arg(o, x, xl, esc);
        }
        out_str(o, "]");
    } else if (v[0] == '{') {
        g4_member *m;
        size_t n;
        if (!g4_members(o, v, vl, &m, &n))
            return;
        out_str(o, "{");
        for (size_t i = 0; i < n; i++) {
            out_str(o, i ? "," : "");
            out_str(o, esc ? G4_Q : "");
            out_str(o, m[i].key);
            out_str(o, esc ? G4_Q ":" : ":");
            g4_arg(o, m[i].v, m[i].vl, esc);
        }
        out_str(o, "}");
        g4_members_free(m, n);
    } else {
        py_str(o, v, vl, false); /* a number, or None */
    }
}

/* Jinja's `for x in v` over a JSON value, each x's str() (upper: upper-
 * cased) between <|"|>, "," between: a list's items, a dict's keys, a
 * string's characters; another value raises (-EINVAL). */
static void g4_list(outbuf *o, const char *v, size_t vl, bool upper) {
    size_t pos = 0, kl, xl;
    const char *k, *x;
    char *s = NULL;
    if (v[0] == '[' || v[0] == '{') {
        for (bool first = true; eng__json_next(v, vl, &pos, &k, &kl, &x, &xl) == 1;
             first = false) {
            if (v[0] == '{')
                x = k, xl = kl;
            char *u = upper ? py_upper(x, xl) : NULL;
            out_str(o, first ? G4_Q : "," G4_Q);
            if (upper && u)
                out_str(o, u);
            else if (upper)
                o->err = -ENOMEM;
            else
                py_str(o, x, xl, false);
            out_str(o, G4_Q);
            free(u);
        }
    } else if (v[0] != '"') {
        o->err = -EINVAL;
    } else if (eng__json_unquote(v, vl, &s) == -ENOMEM) {
        o->err = -ENOMEM;
    } else {
        const char *c = s ? s : "";
        for (size_t i = 0, l; c[i]; i += l) { /* one UTF-8 character each */
            for (l = 1; (c[i + l] & 0xc0) == 0x80; l++)
                ;
            out_str(o, i ? "," G4_Q : G4_Q);
            for (size_t j = 0; j < l; j++) {
                const char ch = c[i + j];
                const char u = upper && ch >= 'a' && ch <= 'z' ? (char)(ch - 'a' + 'A') : ch;
                out_put(o, &u, 1);
            }
            out_str(o, G4_Q);
        }
        free(s);
    }
}

static void g4_params(outbuf *o, const char *props, size_t pn);

/* format_parameters' items:{...} of an array: each member of the items
 * schema but nulls, sorted; its properties and required as the
 * parameters', its type upper-cased, anything else as format_argument. */
static void g4_items(outbuf *o, const char *items, size_t il) {
    g4_member *m;
    size_t n;
    if (!g4_members(o, items, il, &m, &n))
        return;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const char *v = m[i].v, *key = m[i].key;
        const size_t vl = m[i].vl;
        if (v[0] == 'n')
            continue;
        out_str(o, first ? "" : ",");
        first = false;
        if (!strcmp(key, "properties")) {
            out_str(o, "properties:{");
            if (v[0] == '{')
                g4_params(o, v, vl);
            out_str(o, "}");
        } else if (!strcmp(key, "required")) {
            out_str(o, "required:[");
            g4_list(o, v, vl, false);
            out_str(o, "]");
        } else if (!strcmp(key, "type") && v[0] == '"') {
            char *t = py_upper(v, vl);
            out_str(o, "type:" G4_Q);
            out_str(o, t ? t : "");
            out_str(o, G4_Q);
            o->err = t ? o->err : -ENOMEM;
            free(t);
        } else if (!strcmp(key, "type")) {
            out_str(o, "type:[");
            g4_list(o, v, vl, true);
            out_str(o, "]");
        } else {
            out_str(o, key);
            out_str(o, ":");
            g4_arg(o, v, vl, true);
        }
    }
    g4_members_free(m, n);
}

/* format_parameters: each property (sorted) but the schema's own keys, as
 * KEY:{description, enum (a string's) or items (an array's), nullable,
 * properties and required (an object's: its own properties, or the
 * schema's other keys), type}. props not an object: dictsort raises. */
static void g4_params(outbuf *o, const char *props, size_t pn) {
    static const char *const schema_keys[] = { "description", "type", "properties", "required",
                                               "nullable" };
    g4_member *m;
    size_t n;
    if (props[0] != '{') {
        o->err = -EINVAL;
        return;
    }
    if (!g4_members(o, props, pn, &m, &n))
        return;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        bool standard = false;
        for (size_t s = 0; s < sizeof(schema_keys) / sizeof(schema_keys[0]); s++)
            standard |= !strcmp(m[i].key, schema_keys[s]);
        if (standard)
            continue;
        const char *v = m[i].v, *x, *t = NULL;
        size_t vl = m[i].vl, xl, tl = 0;
        out_str(o, first ? "" : ",");
        first = false;
        out_str(o, m[i].key);
        out_str(o, ":{");
        bool comma = false; /* (the template's add_comma) */
        if (json_get(v, vl, "description", &x, &xl) && py_truthy(x, xl)) {
            out_str(o, "description:" G4_Q);
            py_str(o, x, xl, false);
            out_str(o, G4_Q);
            comma = true;
        }
        char *type = json_get(v, vl, "type", &t, &tl) ? py_upper(t, tl) : py_upper(NULL, 0);
        if (!type) {
            o->err = -ENOMEM;
            break;
        }
        if (!strcmp(type, "STRING") && json_get(v, vl, "enum", &x, &xl) && py_truthy(x, xl)) {
            out_str(o, comma ? ",enum:" : "enum:");
            comma = true;
            g4_arg(o, x, xl, true);
        } else if (!strcmp(type, "ARRAY") && json_get(v, vl, "items", &x, &xl) && x[0] == '{' &&
                   py_truthy(x, xl)) {
            out_str(o, comma ? ",items:{" : "items:{");
            comma = true;
            g4_items(o, x, xl);
            out_str(o, "}");
        }
        if (json_get(v, vl, "nullable", &x, &xl) && py_truthy(x, xl)) {
            out_str(o, comma ? ",nullable:true" : "nullable:true");
            comma = true;
        }
        if (!strcmp(type, "OBJECT")) {
            out_str(o, comma ? ",properties:{" : "properties:{");
            comma = true;
            if (json_get(v, vl, "properties", &x, &xl) && x[0] == '{')
                g4_params(o, x, xl);
            else /* (the schema itself: its other keys as properties) */
                g4_params(o, v, vl);
            out_str(o, "}");
            if (json_get(v, vl, "required", &x, &xl) && py_truthy(x, xl)) {
                out_str(o, ",required:[");
                g4_list(o, x, xl, false);
                out_str(o, "]");
            }
        }
        out_str(o, comma ? ",type:" G4_Q : "type:" G4_Q);
        out_str(o, type);
        out_str(o, G4_Q "}");
        free(type);
    }
    g4_members_free(m, n);
}

/* format_function_declaration of a tool's "function" object fn. */
static void g4_declaration(outbuf *o, const char *fn, size_t fl) {
    const char *x, *p;
    size_t xl, pl;
    out_str(o, "declaration:");
    if (json_get(fn, fl, "name", &x, &xl))
        py_str(o, x, xl, false);
    out_str(o, "{description:" G4_Q);
    if (json_get(fn, fl, "description", &x, &xl))
        py_str(o, x, xl, false);
    out_str(o, G4_Q);
    if (json_get(fn, fl, "parameters", &p, &pl) && py_truthy(p, pl)) {
        out_str(o, ",parameters:{");
        if (json_get(p, pl, "properties", &x, &xl) && py_truthy(x, xl)) {
            out_str(o, "properties:{");
            g4_params(o, x, xl);
            out_str(o, "},");
        }
        if (json_get(p, pl, "required", &x, &xl) && py_truthy(x, xl)) {
            out_str(o, "required:[");
            g4_list(o, x, xl, false);
            out_str(o, "],");
        }
        /* (the parameters' "}" only with a type, as the template has it) */
        if (json_get(p, pl, "type", &x, &xl) && py_truthy(x, xl)) {
            char *t = py_upper(x, xl);
            out_str(o, "type:" G4_Q);
            out_str(o, t ? t : "");
            out_str(o, G4_Q "}");
            o->err = t ? o->err : -ENOMEM;
            free(t);
        }
    }
    if (json_get(fn, fl, "response", &p, &pl)) {
        out_str(o, ",response:{");
        if (json_get(p, pl, "description", &x, &xl) && py_truthy(x, xl)) {
            out_str(o, "description:" G4_Q);
            py_str(o, x, xl, false);
            out_str(o, G4_Q ",");
        }
        char *t = json_get(p, pl, "type", &x, &xl) ? py_upper(x, xl) : py_upper(NULL, 0);
        if (t && !strcmp(t, "OBJECT"))
            out_str(o, "type:" G4_Q "OBJECT" G4_Q "}");
        o->err = t ? o->err : -ENOMEM;
        free(t);
    }
    out_str(o, "}");
}

/* An answer's call: "<|tool_call>call:NAME{KEY:VALUE,...}<tool_call|>",
 * the arguments sorted, their keys bare. */
static void g4_call(outbuf *o, const eng_tool_call *tc) {
    out_str(o, "<|tool_call>call:");
    out_str(o, tc->name);
    out_str(o, "{");
    g4_member *m = NULL;
    size_t n = 0;
    if (tc->arguments && !g4_members(o, tc->arguments, strlen(tc->arguments), &m, &n))
        return;
    for (size_t i = 0; i < n; i++) {
        out_str(o, i ? "," : "");
        out_str(o, m[i].key);
        out_str(o, ":");
        g4_arg(o, m[i].v, m[i].vl, false);
    }
    g4_members_free(m, n);
    out_str(o, "}<tool_call|>");
}

/* strip_thinking: an answer cut at each "<channel|>", of each piece what
 * comes before its first "<|channel>", the whole trimmed. */
static void g4_answer(outbuf *o, const char *c) {
    const size_t n = strlen(c);
    char *kept = malloc(n + 1);
    if (!kept) {
        o->err = -ENOMEM;
        return;
    }
    size_t k = 0;
    for (const char *p = c, *end = c + n;;) {
        const char *close = find_bytes(p, (size_t)(end - p), "<channel|>");
        const char *piece = close ? close : end;
        const char *open = find_bytes(p, (size_t)(piece - p), "<|channel>");
        const char *stop = open ? open : piece;
        memcpy(kept + k, p, (size_t)(stop - p));
        k += (size_t)(stop - p);
        if (!close)
            break;
        p = close + strlen("<channel|>");
    }
    kept[k] = '\0';
    out_trimmed(o, kept);
    free(kept);
}

/* Gemma 4 (the format at the top). The template's loop, for what ours
 * carry: a message's turn header is left out where it is an answer that
 * follows an answer (tool results between them), the same model turn
 * going on; an answer with calls prints them, then the results of the
 * "tool" messages right after it (a result past the calls is named
 * "unknown"), then its content; it ends with "<|tool_response>" where no
 * result follows, and keeps its turn open where results do and there is
 * no content (the model goes on in that turn). The generation prompt
 * follows a message that has neither; after one whose results are
 * followed by content (its turn closed), "<|turn>model\n", as llama.cpp
 * adds it (the template would add nothing). Tools that are not objects
 * with a "function": -EINVAL (the template raises). */
static void render_gemma4(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                          const char *tools, size_t n_tools, unsigned flags, outbuf *o) {
    const bool think = !(flags & ENG_CHAT_NO_THINK);
    const bool sys = n_msgs > 0 &&
                     (!strcmp(msgs[0].role, "system") || !strcmp(msgs[0].role, "developer"));
    out_str(o, info->bos);
    if (think || n_tools > 0 || sys) {
        out_str(o, "<|turn>system\n");
        out_str(o, think ? "<|think|>\n" : "");
        if (sys)
            out_trimmed(o, msgs[0].content);
        const size_t tl = n_tools > 0 ? strlen(tools) : 0;
        size_t pos = 0, vl, fl;
        const char *v, *f;
        while (n_tools > 0 && eng__json_next(tools, tl, &pos, NULL, NULL, &v, &vl) == 1) {
            if (!json_get(v, vl, "function", &f, &fl)) {
                o->err = -EINVAL;
                return;
            }
            out_str(o, "<|tool>");
            g4_declaration(o, f, fl);
            out_str(o, "<tool|>");
        }
        out_str(o, "<turn|>\n");
    }
    enum { G4_TEXT, G4_CALLED, G4_ANSWERED } state = G4_TEXT;
    bool closed = true;
    const size_t first = sys ? 1 : 0;
    for (size_t i = first; i < n_msgs; i++) {
        const eng_chat_msg *m = &msgs[i];
        if (!strcmp(m->role, "tool"))
            continue;
        const bool model = !strcmp(m->role, "assistant");
        size_t prev = i; /* the message before, tool results passed over */
        while (prev > first && !strcmp(msgs[prev - 1].role, "tool"))
            prev--;
        if (!model || prev == first || strcmp(msgs[prev - 1].role, "assistant") != 0) {
            out_str(o, "<|turn>");
            out_str(o, model ? "model" : m->role);
            out_str(o, "\n");
        }
        state = m->n_tool_calls > 0 ? G4_CALLED : G4_TEXT;
        for (size_t j = 0; j < m->n_tool_calls; j++)
            g4_call(o, &m->tool_calls[j]);
        for (size_t k = i + 1; m->n_tool_calls > 0 && k < n_msgs && !strcmp(msgs[k].role, "tool");
             k++) {
            const size_t at = k - i - 1;
            out_str(o, "<|tool_response>response:");
            out_str(o, at < m->n_tool_calls ? m->tool_calls[at].name : "unknown");
            out_str(o, "{value:" G4_Q);
            out_str(o, msgs[k].content);
            out_str(o, G4_Q "}<tool_response|>");
            state = G4_ANSWERED;
        }
        if (model)
            g4_answer(o, m->content);
        else
            out_trimmed(o, m->content);
        closed = state == G4_TEXT || (state == G4_ANSWERED && m->content[0]);
        if (state == G4_CALLED)
            out_str(o, "<|tool_response>");
        else if (closed)
            out_str(o, "<turn|>\n");
    }
    if ((flags & ENG_CHAT_ADD_ASSISTANT) && state == G4_TEXT)
        out_str(o, think ? "<|turn>model\n" : "<|turn>model\n<|channel>thought\n<channel|>");
    else if ((flags & ENG_CHAT_ADD_ASSISTANT) && closed)
        out_str(o, "<|turn>model\n");
}

/* NVIDIA Nemotron Nano v2 (its 9B and 12B models' template):
 *     "<SPECIAL_10>System\n" [CLEAN(SYSTEM)] [TOOLS] "\n\n"
 *     ("<SPECIAL_11>User\n" CLEAN(CONTENT) "\n" |
 *      "<SPECIAL_11>User\n<TOOL_RESPONSE>[" RESULT (", " RESULT)... "]</TOOL_RESPONSE>" |
 *      "<SPECIAL_11>Assistant\n" ANSWER ["\n" CALLS] "\n<SPECIAL_12>\n")...
 *     "<SPECIAL_11>Assistant\n" OPEN [TRIM(LAST)]         with add_assistant
 *   SYSTEM is messages[0] when a system message (left out of the loop,
 *   where later system messages and other roles print nothing); CLEAN
 *   takes "/think", then "/no_think", out of the text and trims it
 *   (Python's strip). OPEN is "<think>\n" (the answer reasons first), or
 *   "<think></think>" when the last user or system message that names
 *   one of the two switches names "/no_think" (with ENG_CHAT_NO_THINK:
 *   unless it names "/think"; the template starts with thinking on, the
 *   flag starts it off). A run of "tool" messages is one user turn, its
 *   results verbatim and no newline after it. ANSWER is an answer
 *   trimmed, or where it holds "</think>" what lies between its first and
 *   a second "</think>", trimmed (the template's split('</think>')[1]);
 *   CALLS is "<TOOLCALL>[" ({"name": "NAME", "arguments": ARGS}, ...)
 *   "]</TOOLCALL>", the "\n" before it only after an answer's text. A
 *   last message that is an answer (LAST) is taken out of the loop: with
 *   add_assistant the prompt goes on from its text, trimmed (its calls
 *   dropped); without, it prints as "<SPECIAL_11>Assistant\n" OPEN
 *   TRIM(LAST) "\n<SPECIAL_12>\n" when its text is not blank, and its
 *   calls as "<SPECIAL_11>Assistant\n" CALLS "<SPECIAL_12>\n\n". TOOLS:
 *   "\n\n" when CLEAN(SYSTEM) is not empty, NEM_TOOLS_INTRO,
 *   "\n<AVAILABLE_TOOLS>[" each definition's "function" member (the
 *   definition where it has none) through tojson, ", " between,
 *   "]</AVAILABLE_TOOLS>\n\n" NEM_TOOLS_FORMAT NEM_TOOLS_OUTRO. A
 *   conversation with no message after the system one: -EINVAL (the
 *   template raises). */
static bool nem_clean(const char *s, char **ret) {
    const size_t n = strlen(s);
    char *a = malloc(n + 1), *b = malloc(n + 1);
    if (!a || !b) {
        free(a);
        free(b);
        return false;
    }
    outbuf oa = {a, n, 0, 0}, ob = {b, n, 0, 0};
    out_without(&oa, s, n, "/think");
    out_without(&ob, a, oa.len, "/no_think");
    b[ob.len] = '\0';
    free(a);
    *ret = b;
    return true;
}

static void nem_calls(outbuf *o, const eng_chat_msg *m) {
    out_str(o, "<TOOLCALL>[");
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        out_str(o, j > 0 ? ", " : "");
        out_call_json(o, &m->tool_calls[j]);
    }
    out_str(o, "]</TOOLCALL>");
}

/* The length of [s, s + n) trimmed, from *s moved past the leading space. */
static size_t py_strip(const char **s, size_t n) {
    for (size_t l; (l = py_space(*s, n, false)) > 0;)
        *s += l, n -= l;
    return rstrip_len(*s, n);
}

static int render_nemotron(const eng_chat_msg *msgs, size_t n_msgs, const char *tools,
                           size_t n_tools, unsigned flags, outbuf *o) {
    const bool sys = n_msgs > 0 && !strcmp(msgs[0].role, "system");
    const size_t first = sys ? 1 : 0;
    if (n_msgs <= first)
        return -EINVAL;
    bool think = !(flags & ENG_CHAT_NO_THINK);
    for (size_t i = 0; i < n_msgs; i++) {
        const char *r = msgs[i].role, *c = msgs[i].content;
        if (strcmp(r, "user") && strcmp(r, "system"))
            continue;
        if (strstr(c, "/think"))
            think = true;
        else if (strstr(c, "/no_think"))
            think = false;
    }
    const char *open = think ? "<think>\n" : "<think></think>";
    out_str(o, NEM_SYS);
    bool sys_text = false;
    if (sys) {
        char *c;
        if (!nem_clean(msgs[0].content, &c))
            return -ENOMEM;
        const char *cs = c;
        sys_text = py_strip(&cs, strlen(c)) > 0;
        out_trimmed(o, c);
        free(c);
    }
    if (n_tools > 0) {
        out_str(o, sys_text ? "\n\n" NEM_TOOLS_INTRO "\n<AVAILABLE_TOOLS>["
                            : NEM_TOOLS_INTRO "\n<AVAILABLE_TOOLS>[");
        const size_t tl = strlen(tools);
        size_t pos = 0, vl, fl;
        const char *v, *f;
        for (bool one = false; eng__json_next(tools, tl, &pos, NULL, NULL, &v, &vl) == 1; one = true) {
            out_str(o, one ? ", " : "");
            if (json_get(v, vl, "function", &f, &fl))
                json_whole(f, fl, o);
            else
                json_whole(v, vl, o);
        }
        out_str(o, "]</AVAILABLE_TOOLS>\n\n" NEM_TOOLS_FORMAT NEM_TOOLS_OUTRO);
    }
    out_str(o, "\n\n");
    const eng_chat_msg *last = !strcmp(msgs[n_msgs - 1].role, "assistant") ? &msgs[n_msgs - 1] : NULL;
    const size_t end = last ? n_msgs - 1 : n_msgs;
    for (size_t i = first; i < end; i++) {
        const eng_chat_msg *m = &msgs[i];
        if (!strcmp(m->role, "user")) {
            char *c;
            if (!nem_clean(m->content, &c))
                return -ENOMEM;
            out_str(o, NEM_USER);
            out_trimmed(o, c);
            out_str(o, "\n");
            free(c);
        } else if (!strcmp(m->role, "tool")) {
            if (i == first || strcmp(msgs[i - 1].role, "tool"))
                out_str(o, NEM_USER "<TOOL_RESPONSE>[");
            out_str(o, m->content);
            const bool more = i + 1 < end && !strcmp(msgs[i + 1].role, "tool");
            out_str(o, more ? ", " : "]</TOOL_RESPONSE>");
        } else if (!strcmp(m->role, "assistant")) {
            const char *c = m->content;
            size_t cl = strlen(c);
            const char *t = find_bytes(c, cl, "</think>");
            if (t) { /* (between the first "</think>" and any second one) */
                c = t + 8;
                const char *t2 = find_bytes(c, strlen(c), "</think>");
                cl = t2 ? (size_t)(t2 - c) : strlen(c);
            }
            cl = py_strip(&c, cl);
            out_str(o, NEM_ASSISTANT);
            out_put(o, c, cl);
            if (m->n_tool_calls > 0) {
                out_str(o, cl > 0 ? "\n" : "");
                nem_calls(o, m);
            }
            out_str(o, NEM_END);
        }
    }
    const char *lc = last ? last->content : "";
    const size_t ll = py_strip(&lc, strlen(lc));
    if (flags & ENG_CHAT_ADD_ASSISTANT) {
        out_str(o, NEM_ASSISTANT);
        out_str(o, open);
        out_put(o, lc, ll);
        return 0;
    }
    if (ll > 0) {
        out_str(o, NEM_ASSISTANT);
        out_str(o, open);
        out_put(o, lc, ll);
        out_str(o, NEM_END);
    }
    if (last && last->n_tool_calls > 0) {
        out_str(o, NEM_ASSISTANT);
        nem_calls(o, last);
        out_str(o, "<SPECIAL_12>\n\n");
    }
    return 0;
}

/* Nemotron 3 Nano (its template as llama.cpp's tests hold it; llama.cpp
 * reads its answers as Qwen3-Coder's):
 *     "<|im_start|>system\n" SYSTEM [["\n\n"] TOOLS] "<|im_end|>\n"     always
 *     ("<|im_start|>" ROLE "\n" CONTENT "<|im_end|>\n" |    user, a later system, others
 *      "<|im_start|>assistant\n" ANSWER "<|im_end|>\n" |
 *      "<|im_start|>assistant\n" ANSWER "\n" (XML_CALL "\n")... "<|im_end|>\n" |
 *      ["<|im_start|>user\n"] "<tool_response>\n" CONTENT "\n</tool_response>\n"
 *          ["<|im_end|>\n"])...
 *     "<|im_start|>assistant\n<think>\n"      with add_assistant ("<think></think>"
 *                                             under ENG_CHAT_NO_THINK: enable_thinking)
 *   SYSTEM is messages[0]'s content where it is a system message, as it
 *   is (the block prints without one, empty); "\n\n" only after a SYSTEM
 *   that is not empty. A run of "tool" messages is one user turn, whose
 *   header the template prints only after a message (loop.previtem: none
 *   where the run opens the conversation). ANSWER: the content with
 *   "<think></think>" before it where it has neither "<think>" nor
 *   "</think>", trimmed. An answer with "</think>" and no "<think>" is
 *   one as generated after the prompt's "<think>\n": we print that
 *   opening first (the turn as the model wrote it, and as the template
 *   prints llama.cpp's reasoning_content for it), where jinja2 given the
 *   content alone would keep its reasoning unmarked. Before the last
 *   user message (truncate_history_thinking, on by default) an answer
 *   keeps only what follows its last "</think>" behind a
 *   "<think></think>" (with calls and no "</think>": what comes before
 *   its first "<think>", trimmed; without calls, a lone "<think>" cuts
 *   nothing). XML_CALL is Qwen3.5's (out_xml_call). TOOLS:
 *   XML_TOOLS_HEAD, each definition's "function" member (the definition
 *   where it has none) as nem3_tool prints it, "\n</tools>"
 *   XML_TOOLS_TAIL. An empty conversation: -EINVAL (the
 *   template reads messages[0]). */
static const char NEM3_EMPTY[] = "<think></think>", NEM3_OPEN[] = "<think>\n";

/* Jinja's `v | string` of a JSON value (Python's str()), trimmed. */
static void nem3_trimmed(outbuf *o, const char *v, size_t vl) {
    char *s = NULL;
    if (v[0] != '"') { /* (no space at either end of those) */
        py_str(o, v, vl, false);
        return;
    }
    if (eng__json_unquote(v, vl, &s) == -ENOMEM) {
        o->err = -ENOMEM;
        return;
    }
    const char *t = s ? s : v + 1; /* (one holding \u0000: as written, as py_str) */
    /* (stripped first: py_strip moves t, and the order a call's
     * arguments are evaluated in is not C's to say) */
    const size_t tl = py_strip(&t, s ? strlen(s) : vl - 2);
    out_put(o, t, tl);
    free(s);
}

/* "\n" OPEN V CLOSE for the member key of the object [s, s + n) where it
 * has one (Jinja's `is defined`), V its str() (trim: trimmed) or, with
 * json, its tojson. */
static void nem3_member(outbuf *o, const char *s, size_t n, const char *key, const char *open,
                        const char *close, bool trim, bool json) {
    const char *v;
    size_t vl;
    if (!json_get(s, n, key, &v, &vl))
        return;
    out_str(o, open);
    if (json)
        json_whole(v, vl, o);
    else if (trim)
        nem3_trimmed(o, v, vl);
    else
        py_str(o, v, vl, false);
    out_str(o, close);
}

/* The template's render_extra_keys: each member of the object [s, s + n)
 * whose key is not in skip (NULL-ended) as "\n<KEY>VALUE</KEY>", VALUE
 * an object's or array's tojson, any other value's str(); nothing where
 * [s, s + n) is not an object. */
static void nem3_extra(outbuf *o, const char *s, size_t n, const char *const *skip) {
    size_t pos = 0, kl, vl;
    const char *k, *v;
    const size_t b = skip_json_ws(s, n, 0);
    if (b >= n || s[b] != '{')
        return;
    while (eng__json_next(s, n, &pos, &k, &kl, &v, &vl) == 1) {
        bool handled = false;
        for (const char *const *h = skip; *h && !handled; h++)
            handled = eng__json_key_is(k, kl, *h);
        if (handled)
            continue;
        out_str(o, "\n<");
        py_str(o, k, kl, false);
        out_str(o, ">");
        if (v[0] == '{' || v[0] == '[')
            json_whole(v, vl, o);
        else
            py_str(o, v, vl, false);
        out_str(o, "</");
        py_str(o, k, kl, false);
        out_str(o, ">");
    }
}

/* One tool definition [t, t + tl) as Nemotron 3's template lists it:
 *     "\n<function>\n<name>" NAME "</name>" ["\n<description>" TRIM(D) "</description>"]
 *     "\n<parameters>" ("\n<parameter>\n<name>" KEY "</name>" ["\n<type>" T "</type>"]
 *         ["\n<description>" TRIM(D) "</description>"] ["\n<enum>" JSON "</enum>"]
 *         EXTRA "\n</parameter>")... EXTRA ["\n<required>" JSON "</required>"]
 *     "\n</parameters>" EXTRA "\n</function>"
 *   a parameter per member of parameters.properties (where both are
 *   objects), values printed as Python's str() prints them, EXTRA each
 *   member of the object in hand the lines before do not print
 *   (nem3_extra); a definition, parameters object or property that is
 *   not an object has none of its members (Jinja's undefined). */
static void nem3_tool(outbuf *o, const char *t, size_t tl) {
    static const char *const prop_keys[] = { "name", "type", "description", "enum", NULL };
    static const char *const schema_keys[] = { "type", "properties", "required", NULL };
    static const char *const tool_keys[] = { "type", "name", "description", "parameters", NULL };
    const char *f, *p, *props, *k, *v;
    size_t fl, pl = 0, propsl, kl, vl, pos = 0;
    if (json_get(t, tl, "function", &f, &fl))
        t = f, tl = fl;
    out_str(o, "\n<function>\n<name>");
    nem3_member(o, t, tl, "name", "", "", false, false);
    out_str(o, "</name>");
    nem3_member(o, t, tl, "description", "\n<description>", "</description>", true, false);
    out_str(o, "\n<parameters>");
    const bool params = json_get(t, tl, "parameters", &p, &pl);
    if (params && json_get(p, pl, "properties", &props, &propsl) && props[0] == '{') {
        while (eng__json_next(props, propsl, &pos, &k, &kl, &v, &vl) == 1) {
            out_str(o, "\n<parameter>\n<name>");
            py_str(o, k, kl, false);
            out_str(o, "</name>");
            nem3_member(o, v, vl, "type", "\n<type>", "</type>", false, false);
            nem3_member(o, v, vl, "description", "\n<description>", "</description>", true,
                        false);
            nem3_member(o, v, vl, "enum", "\n<enum>", "</enum>", false, true);
            nem3_extra(o, v, vl, prop_keys);
            out_str(o, "\n</parameter>");
        }
    }
    if (params) {
        nem3_extra(o, p, pl, schema_keys);
        nem3_member(o, p, pl, "required", "\n<required>", "</required>", false, true);
    }
    out_str(o, "\n</parameters>");
    nem3_extra(o, t, tl, tool_keys);
    out_str(o, "\n</function>");
}

/* TRIM(pre + [s, s + n)) for pre "" or a mark that starts with no space
 * (kept whole: one ending in a space comes before text that is not). */
static void nem3_trim_after(outbuf *o, const char *pre, const char *s, size_t n) {
    out_str(o, pre);
    if (!*pre)
        n = py_strip(&s, n);
    out_put(o, s, rstrip_len(s, n));
}

static void nem3_answer(outbuf *o, const eng_chat_msg *m, bool past) {
    const char *c = m->content;
    size_t n = strlen(c);
    const bool calls = m->n_tool_calls > 0;
    const char *open = find_bytes(c, n, "<think>"), *close = find_last(c, n, "</think>");
    /* (the template's content: the answer, "<think></think>" first where
     * it has neither tag; an answer that closes a reasoning the prompt
     * opened, as generated, with that "<think>\n" first) */
    const char *pre = !open && !close ? NEM3_EMPTY : !open ? NEM3_OPEN : "";
    out_str(o, CHATML_START "assistant\n");
    if (past && (close || (open && calls))) { /* (without calls: with both tags) */
        if (close) {
            n -= (size_t)(close + 8 - c);
            c = close + 8;
        } else {
            n = (size_t)(open - c);
        }
        pre = NEM3_EMPTY;
    }
    if (past && calls) /* (trimmed before the mark goes on) */
        n = py_strip(&c, n);
    /* (with calls this is never blank, which the template's else would
     * print as "<think></think>": it holds a tag) */
    nem3_trim_after(o, pre, c, n);
    if (calls)
        out_str(o, "\n");
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        out_xml_call(o, &m->tool_calls[j]);
        out_str(o, "\n");
    }
    out_str(o, CHATML_END "\n");
}

static int render_nemotron3(const eng_chat_msg *msgs, size_t n_msgs, const char *tools,
                            size_t n_tools, unsigned flags, outbuf *o) {
    if (n_msgs == 0)
        return -EINVAL;
    const size_t first = !strcmp(msgs[0].role, "system") ? 1 : 0;
    const char *sys = first ? msgs[0].content : "";
    out_str(o, CHATML_START "system\n");
    out_str(o, sys);
    if (n_tools > 0) {
        out_str(o, *sys ? "\n\n" XML_TOOLS_HEAD : XML_TOOLS_HEAD);
        const size_t tl = strlen(tools);
        size_t pos = 0, vl;
        const char *v;
        while (eng__json_next(tools, tl, &pos, NULL, NULL, &v, &vl) == 1)
            nem3_tool(o, v, vl);
        out_str(o, "\n</tools>" XML_TOOLS_TAIL);
    }
    out_str(o, CHATML_END "\n");
    size_t last_user = 0; /* (0: none; else its index + 1) */
    for (size_t i = first; i < n_msgs; i++)
        if (!strcmp(msgs[i].role, "user"))
            last_user = i + 1;
    for (size_t i = first; i < n_msgs; i++) {
        const eng_chat_msg *m = &msgs[i];
        if (!strcmp(m->role, "assistant")) {
            nem3_answer(o, m, i + 1 < last_user);
        } else if (!strcmp(m->role, "tool")) {
            if (i > first && strcmp(msgs[i - 1].role, "tool"))
                out_str(o, CHATML_START "user\n");
            out_str(o, "<tool_response>\n");
            out_str(o, m->content);
            out_str(o, "\n</tool_response>\n");
            if (i + 1 == n_msgs || strcmp(msgs[i + 1].role, "tool"))
                out_str(o, CHATML_END "\n");
        } else {
            out_str(o, CHATML_START);
            out_str(o, m->role);
            out_str(o, "\n");
            out_str(o, m->content);
            out_str(o, CHATML_END "\n");
        }
    }
    if (flags & ENG_CHAT_ADD_ASSISTANT)
        out_str(o, flags & ENG_CHAT_NO_THINK ? CHATML_START "assistant\n<think></think>"
                                             : CHATML_START "assistant\n<think>\n");
    return 0;
}

int eng_chat_render(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                    const char *tools, unsigned flags, char *buf, size_t cap) {
    const bool add_assistant = flags & ENG_CHAT_ADD_ASSISTANT;
    if (!info || (!msgs && n_msgs > 0) || (!buf && cap > 0))
        return -EINVAL;
    if (info->kind == ENG_CHAT_NONE)
        return -ENOTSUP;
    size_t n_tools = 0, n_calls = 0;
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content || (!msgs[i].tool_calls && msgs[i].n_tool_calls))
            return -EINVAL;
        for (size_t j = 0; j < msgs[i].n_tool_calls; j++) {
            const eng_tool_call *tc = &msgs[i].tool_calls[j];
            if (!tc->name || (tc->arguments && !json_is_object(tc->arguments, strlen(tc->arguments))))
                return -EINVAL;
        }
        n_calls += msgs[i].n_tool_calls;
    }
    int r = count_tools(tools, &n_tools);
    if (r < 0)
        return r;
    if ((n_tools > 0 || n_calls > 0) && !info->tools)
        return -ENOTSUP;

    outbuf o = {buf, cap > 0 ? cap - 1 : 0, 0, 0};
    if (info->kind == ENG_CHAT_LLAMA2 || info->kind == ENG_CHAT_MISTRAL || info->kind == ENG_CHAT_ZEPHYR ||
        info->kind == ENG_CHAT_PHI3 || info->kind == ENG_CHAT_MISTRAL3 || info->kind == ENG_CHAT_GEMMA ||
        info->kind == ENG_CHAT_DEEPSEEK_R1) {
        if ((r = render_spm_family(info, msgs, n_msgs, add_assistant, &o)) < 0)
            return r;
    } else if (info->kind == ENG_CHAT_GRANITE && info->granite4) {
        render_granite4(info, msgs, n_msgs, tools, n_tools, add_assistant, &o);
    } else if (info->kind == ENG_CHAT_GRANITE) {
        render_granite(info, msgs, n_msgs, add_assistant, &o);
    } else if (info->kind == ENG_CHAT_GEMMA4) {
        render_gemma4(info, msgs, n_msgs, tools, n_tools, flags, &o);
    } else if (info->kind == ENG_CHAT_MISTRAL7) {
        render_mistral7(info, msgs, n_msgs, &o);
    } else if (info->kind == ENG_CHAT_TULU) {
        render_tulu(info, msgs, n_msgs, add_assistant, &o);
    } else if (info->kind == ENG_CHAT_GLM4) {
        render_glm4(info, msgs, n_msgs, add_assistant, &o);
    } else if (info->kind == ENG_CHAT_ERNIE) {
        render_ernie(msgs, n_msgs, add_assistant, &o);
    } else if (info->kind == ENG_CHAT_GPT_OSS) {
        if ((r = render_harmony(msgs, n_msgs, tools, n_tools, flags, &o)) < 0)
            return r;
    } else if (info->kind == ENG_CHAT_NEMOTRON) {
        if ((r = render_nemotron(msgs, n_msgs, tools, n_tools, flags, &o)) < 0)
            return r;
    } else if (info->kind == ENG_CHAT_EXAONE && info->exaone4) {
        if ((r = render_exaone4(msgs, n_msgs, tools, n_tools, add_assistant, &o)) < 0)
            return r;
    } else if (info->kind == ENG_CHAT_EXAONE) {
        for (size_t i = 0; i < n_msgs; i++) {
            if (i == 0 && strcmp(msgs[0].role, "system") != 0)
                out_str(&o, "[|system|][|endofturn|]\n");
            out_str(&o, "[|");
            out_str(&o, msgs[i].role);
            out_str(&o, "|]");
            out_str(&o, msgs[i].content);
            out_str(&o, strcmp(msgs[i].role, "user") ? "[|endofturn|]\n" : "\n");
        }
        if (add_assistant)
            out_str(&o, "[|assistant|]");
    } else if (info->kind == ENG_CHAT_CHATML && info->nemotron3) {
        if ((r = render_nemotron3(msgs, n_msgs, tools, n_tools, flags, &o)) < 0)
            return r;
    } else if (info->kind == ENG_CHAT_CHATML && info->smollm3) {
        if ((r = render_smollm3(msgs, n_msgs, add_assistant, flags & ENG_CHAT_NO_THINK, &o)) < 0)
            return r;
    } else if (info->kind == ENG_CHAT_CHATML) {
        size_t dlen = strnlen(info->default_system, sizeof(info->default_system));
        size_t first = 0;
        if (n_tools > 0 && info->lfm2_calls) {
            /* LFM2: the list after the system prompt, on a line of its own */
            out_str(&o, CHATML_START "system\n");
            if (n_msgs > 0 && strcmp(msgs[0].role, "system") == 0) {
                out_str(&o, msgs[0].content);
                out_str(&o, msgs[0].content[0] ? "\n" : "");
                first = 1;
            }
            const bool marks = info->lfm2_marks;
            out_str(&o, marks ? "List of tools: <|tool_list_start|>[" : "List of tools: [");
            out_tool_lines(&o, tools, "", "", ", ");
            out_str(&o, marks ? "]<|tool_list_end|>" CHATML_END "\n" : "]" CHATML_END "\n");
        } else if (n_tools > 0 && info->xml_calls) {
            /* Qwen3.5: the tools first, then the system prompt, trimmed */
            out_str(&o, CHATML_START "system\n" XML_TOOLS_HEAD);
            out_tool_lines(&o, tools, "\n", "", "");
            out_str(&o, "\n</tools>" XML_TOOLS_TAIL);
            if (n_msgs > 0 && strcmp(msgs[0].role, "system") == 0) {
                const char *c = msgs[0].content;
                while (*c && is_space(*c))
                    c++;
                out_str(&o, *c ? "\n\n" : "");
                out_trimmed(&o, c);
                first = 1;
            }
            out_str(&o, CHATML_END "\n");
        } else if (n_tools > 0) {
            out_str(&o, CHATML_START "system\n");
            if (n_msgs > 0 && strcmp(msgs[0].role, "system") == 0) {
                out_str(&o, msgs[0].content);
                out_str(&o, "\n\n");
                first = 1;
            } else if (dlen > 0) {
                out_put(&o, info->default_system, dlen);
                out_str(&o, "\n\n");
            }
            out_str(&o, TOOLS_HEAD);
            out_tool_lines(&o, tools, "\n", "", "");
            out_str(&o, TOOLS_TAIL CHATML_END "\n");
        } else if (n_msgs > 0 && dlen > 0 && strcmp(msgs[0].role, "system") != 0) {
            out_str(&o, CHATML_START "system\n");
            out_put(&o, info->default_system, dlen);
            out_str(&o, CHATML_END "\n");
        }
        /* the last user message (the template's last_query_index; the
         * last message when there is none) */
        size_t last_query = n_msgs > 0 ? n_msgs - 1 : 0;
        for (size_t i = n_msgs; i-- > 0;) {
            /* (Qwen3's template passes over tool results sent as user
             * messages) */
            const char *c = msgs[i].content;
            const size_t cl = strlen(c);
            if (!strcmp(msgs[i].role, "user") &&
                !(cl >= 31 && !strncmp(c, "<tool_response>", 15) && !strcmp(c + cl - 16, "</tool_response>"))) {
                last_query = i;
                break;
            }
        }
        size_t last_answer = n_msgs; /* (LFM2.5's last_assistant_index) */
        for (size_t i = 0; i < n_msgs; i++)
            if (!strcmp(msgs[i].role, "assistant"))
                last_answer = i;
        for (size_t i = first; i < n_msgs; i++) {
            const eng_chat_msg *m = &msgs[i];
            /* (LFM2's templates print no empty system prompt) */
            if ((info->lfm2_past || info->lfm2_tool) && i == 0 && !strcmp(m->role, "system") &&
                !m->content[0])
                continue;
            if (info->lfm2_past && i != last_answer && !strcmp(m->role, "assistant")) {
                const char *c = m->content, *after = c;
                for (const char *p = c; (p = strstr(p, "</think>")) != NULL; p += 8)
                    after = p + 8;
                out_str(&o, CHATML_START "assistant\n");
                if (after != c)
                    out_trimmed(&o, after);
                else
                    out_str(&o, c);
                out_str(&o, CHATML_END "\n");
                continue;
            }
            if (info->reasoning && !info->lfm2_past && !strcmp(m->role, "assistant")) {
                qwen3_answer(&o, m, i > last_query, i + 1 == n_msgs, info);
                continue;
            }
            if (info->lfm2_tool && !strcmp(m->role, "tool")) {
                out_str(&o, CHATML_START "tool\n<|tool_response_start|>");
                out_str(&o, m->content);
                out_str(&o, "<|tool_response_end|>" CHATML_END "\n");
                continue;
            }
            if (info->tools && !info->lfm2_calls && !strcmp(m->role, "tool")) {
                if (i == 0 || strcmp(msgs[i - 1].role, "tool") != 0)
                    out_str(&o, CHATML_START "user");
                out_str(&o, "\n<tool_response>\n");
                out_str(&o, m->content);
                out_str(&o, "\n</tool_response>");
                if (i + 1 == n_msgs || strcmp(msgs[i + 1].role, "tool") != 0)
                    out_str(&o, CHATML_END "\n");
                continue;
            }
            /* Qwen2.5's, with calls (LFM2's templates print an answer's
             * text only) */
            if (m->n_tool_calls > 0 && !info->lfm2_calls && !strcmp(m->role, "assistant")) {
                out_str(&o, CHATML_START "assistant");
                if (m->content[0]) {
                    out_str(&o, "\n");
                    out_str(&o, m->content);
                }
                for (size_t j = 0; j < m->n_tool_calls; j++) {
                    out_str(&o, "\n");
                    out_call(&o, &m->tool_calls[j]);
                }
                out_str(&o, CHATML_END "\n");
                continue;
            }
            out_str(&o, CHATML_START);
            out_str(&o, msgs[i].role);
            out_str(&o, "\n");
            if (info->think_open) /* (Qwen3.5's template trims every message) */
                out_trimmed(&o, msgs[i].content);
            else
                out_str(&o, msgs[i].content);
            out_str(&o, CHATML_END "\n");
        }
        if (add_assistant)
            out_str(&o, CHATML_START "assistant\n");
        if (add_assistant && info->think_switch && (flags & ENG_CHAT_NO_THINK))
            out_str(&o, "<think>\n\n</think>\n\n");
        else if (add_assistant && info->think_open)
            out_str(&o, "<think>\n");
    } else {
        size_t plen = strnlen(info->default_system, sizeof(info->default_system));
        size_t first = 0;
        const bool sys = n_msgs > 0 && strcmp(msgs[0].role, "system") == 0;
        /* the template's raise_exception()s: tools need a first message
         * after the system one to go into; one call per answer */
        if (n_tools > 0 && n_msgs <= (sys ? 1u : 0u))
            return -EINVAL;
        for (size_t i = 0; info->tools && i < n_msgs; i++)
            if (msgs[i].n_tool_calls > 1)
                return -EINVAL;
        if (n_msgs > 0 || plen > 0)
            out_str(&o, LLAMA3_BOS);
        if (plen > 0) {
            out_str(&o, LLAMA3_HDR_START "system" LLAMA3_HDR_END "\n\n");
            if (n_tools > 0)
                out_str(&o, "Environment: ipython\n");
            out_put(&o, info->default_system, plen);
            if (sys) {
                out_trimmed(&o, msgs[0].content);
                first = 1;
            }
            out_str(&o, LLAMA3_EOT);
        }
        if (n_tools > 0) { /* tools_in_user_message: into the first message */
            out_str(&o, LLAMA3_HDR_START "user" LLAMA3_HDR_END "\n\n" LLAMA_TOOLS_HEAD);
            const size_t tl = strlen(tools);
            size_t pos = 0, vl;
            const char *v;
            while (eng__json_next(tools, tl, &pos, NULL, NULL, &v, &vl) == 1) {
                eng__json_value_indent(v, vl, 4, out_cb, &o);
                out_str(&o, "\n\n");
            }
            out_trimmed(&o, msgs[first].content);
            out_str(&o, LLAMA3_EOT);
            first++;
        }
        for (size_t i = first; i < n_msgs; i++) {
            const eng_chat_msg *m = &msgs[i];
            if (info->tools && (!strcmp(m->role, "tool") || !strcmp(m->role, "ipython"))) {
                /* a string is "iterable" to Jinja: the template quotes it */
                out_str(&o, LLAMA3_HDR_START "ipython" LLAMA3_HDR_END "\n\n");
                eng__json_quote(m->content, strlen(m->content), out_cb, &o);
                out_str(&o, LLAMA3_EOT);
                continue;
            }
            if (info->tools && m->n_tool_calls == 1) {
                out_str(&o, LLAMA3_HDR_START "assistant" LLAMA3_HDR_END "\n\n{\"name\": \"");
                out_str(&o, m->tool_calls[0].name);
                out_str(&o, "\", \"parameters\": ");
                if (m->tool_calls[0].arguments)
                    json_whole(m->tool_calls[0].arguments, strlen(m->tool_calls[0].arguments), &o);
                else
                    out_str(&o, "{}");
                out_str(&o, "}" LLAMA3_EOT);
                continue;
            }
            out_str(&o, LLAMA3_HDR_START);
            out_str(&o, m->role);
            out_str(&o, LLAMA3_HDR_END "\n\n");
            out_trimmed(&o, m->content);
            out_str(&o, LLAMA3_EOT);
        }
        if (add_assistant)
            out_str(&o, LLAMA3_HDR_START "assistant" LLAMA3_HDR_END "\n\n");
    }
    if (o.err)
        return o.err;
    if (o.len > INT_MAX)
        return -EOVERFLOW;
    if (cap > 0)
        buf[o.len < o.cap ? o.len : o.cap] = '\0';
    return (int)o.len;
}

/* ---- tool calls in an answer ---------------------------------------------- */

typedef struct growbuf {
    char *p;
    size_t n, cap;
    bool failed;
} growbuf;

static void grow_put(void *ctx, const char *s, size_t n) {
    growbuf *g = ctx;
    if (g->failed)
        return;
    if (n + 1 > g->cap - g->n) {
        size_t cap = g->cap ? g->cap : 64;
        while (n + 1 > cap - g->n)
            cap *= 2;
        char *p = realloc(g->p, cap);
        if (!p) {
            g->failed = true;
            return;
        }
        g->p = p;
        g->cap = cap;
    }
    memcpy(g->p + g->n, s, n);
    g->n += n;
    g->p[g->n] = '\0';
}

void eng_tool_calls_free(eng_tool_call *calls, size_t n) {
    for (size_t i = 0; calls && i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}

/* One block's object: its name and its arguments ("arguments", or Llama's
 * "parameters") in json.dumps form. 1: a call; 0: not a call; -ENOMEM. */
static int read_call(const char *s, size_t n, eng_tool_call *tc) {
    size_t pos = 0, kl = 0, vl = 0;
    const char *k = NULL, *v = NULL, *name = NULL, *args = NULL;
    size_t name_len = 0, args_len = 0;
    int r;
    while ((r = eng__json_next(s, n, &pos, &k, &kl, &v, &vl)) == 1) {
        if (eng__json_key_is(k, kl, "name")) {
            name = v;
            name_len = vl;
        } else if (eng__json_key_is(k, kl, "arguments") || eng__json_key_is(k, kl, "parameters")) {
            args = v;
            args_len = vl;
        }
    }
    if (r < 0 || !name || (args && args[0] != '{'))
        return 0;
    r = eng__json_unquote(name, name_len, &tc->name);
    if (r < 0)
        return r == -ENOMEM ? r : 0;
    growbuf g = {0};
    if (args)
        eng__json_value(args, args_len, grow_put, &g);
    else
        grow_put(&g, "{}", 2);
    if (g.failed) {
        free(g.p);
        return -ENOMEM;
    }
    tc->arguments = g.p;
    return 1;
}

/* Llama 3.1+: the whole answer is one {"name": ..., "parameters": {...}}
 * (after <|python_tag|>, where the model puts one). */
static int llama_call(const char *text, size_t len, eng_tool_call **ret_calls, size_t *ret_n) {
    static const char tag[] = "<|python_tag|>";
    size_t b = skip_json_ws(text, len, 0);
    if (len - b >= sizeof(tag) - 1 && !memcmp(text + b, tag, sizeof(tag) - 1))
        b = skip_json_ws(text, len, b + sizeof(tag) - 1);
    if (b >= len || text[b] != '{' || !json_whole(text + b, len - b, NULL))
        return 0;
    eng_tool_call *call = calloc(1, sizeof(*call));
    if (!call)
        return -ENOMEM;
    int r = read_call(text + b, len - b, call);
    if (r <= 0) {
        eng_tool_calls_free(call, 1);
        return r;
    }
    *ret_calls = call;
    *ret_n = 1;
    return 0;
}

/* ---- LFM2's calls: [name(arg=value, ...), ...], values Python literals -- */

/* A Python string literal at s[*i] (either quote; Python's escapes) as a
 * JSON string into g. false: not one. */
static bool py_string(const char *s, size_t n, size_t *i, growbuf *g) {
    const char q = s[*i];
    size_t k = *i + 1;
    grow_put(g, "\"", 1);
    for (; k < n && s[k] != q; k++) {
        char e[8];
        if (s[k] != '\\') {
            if ((unsigned char)s[k] < 0x20)
                snprintf(e, sizeof(e), "\\u%04x", (unsigned)s[k]);
            else
                snprintf(e, sizeof(e), s[k] == '"' ? "\\\"" : "%c", s[k]);
            grow_put(g, e, strlen(e));
            continue;
        }
        if (++k >= n)
            return false;
        const char c = s[k];
        size_t hex = c == 'u' ? 4 : c == 'x' ? 2 : 0;
        for (size_t j = 1; j <= hex; j++)
            if (k + j >= n || !isxdigit((unsigned char)s[k + j]))
                return false;
        if (hex > 0) { /* \xHH is U+00HH */
            snprintf(e, sizeof(e), "\\u%s%.*s", hex == 2 ? "00" : "", (int)hex, s + k + 1);
            k += hex;
        } else if (c == '\n') { /* a continued line */
            e[0] = '\0';
        } else {
            const char *m = memchr("nrtbf\\\"/", c, 8);
            /* (an escape Python does not know keeps its backslash) */
            snprintf(e, sizeof(e), m ? "\\%c" : c == '\'' ? "'" : "\\\\%c", c);
        }
        grow_put(g, e, strlen(e));
    }
    if (k >= n)
        return false;
    grow_put(g, "\"", 1);
    *i = k + 1;
    return true;
}

/* A Python literal at s[*i] as JSON into g: strings, numbers as written
 * (JSON's grammar checks them after), True / False / None and JSON's
 * spellings of them (llama.cpp takes both), lists and dicts (string keys,
 * a trailing comma allowed). false: not one. */
/* A number's characters as they stand (digits, signs, '.', exponents),
 * copied to g; false where none start at *i. */
static bool json_number(const char *s, size_t n, size_t *i, growbuf *g) {
    size_t k = *i;
    while (k < n && (isdigit((unsigned char)s[k]) || memchr("+-.eE", s[k], 5)))
        k++;
    if (k == *i)
        return false;
    grow_put(g, s + *i, k - *i);
    *i = k;
    return true;
}

static bool py_literal(const char *s, size_t n, size_t *i, growbuf *g, int depth) {
    if (*i >= n || depth > 32)
        return false;
    const char c = s[*i];
    if (c == '"' || c == '\'')
        return py_string(s, n, i, g);
    if (c == '[' || c == '{') {
        const char close = c == '[' ? ']' : '}';
        grow_put(g, &c, 1);
        size_t k = skip_json_ws(s, n, *i + 1);
        for (bool first = true; k < n && s[k] != close; first = false) {
            if (!first) {
                if (s[k] != ',')
                    return false;
                k = skip_json_ws(s, n, k + 1);
                if (k < n && s[k] == close)
                    break;
                grow_put(g, ", ", 2);
            }
            if (c == '{') {
                if (k >= n || (s[k] != '"' && s[k] != '\'') || !py_string(s, n, &k, g))
                    return false;
                k = skip_json_ws(s, n, k);
                if (k >= n || s[k] != ':')
                    return false;
                grow_put(g, ": ", 2);
                k = skip_json_ws(s, n, k + 1);
            }
            if (!py_literal(s, n, &k, g, depth + 1))
                return false;
            k = skip_json_ws(s, n, k);
        }
        if (k >= n)
            return false;
        grow_put(g, &close, 1);
        *i = k + 1;
        return true;
    }
    static const char *const words[][2] = { { "True", "true" }, { "False", "false" },
                                            { "None", "null" }, { "true", "true" },
                                            { "false", "false" }, { "null", "null" } };
    for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
        const size_t wl = strlen(words[w][0]);
        if (n - *i >= wl && !memcmp(s + *i, words[w][0], wl) &&
            (n - *i == wl || !(isalnum((unsigned char)s[*i + wl]) || s[*i + wl] == '_'))) {
            grow_put(g, words[w][1], strlen(words[w][1]));
            *i += wl;
            return true;
        }
    }
    return json_number(s, n, i, g);
}

static bool py_ident(char c, bool first) {
    return isalpha((unsigned char)c) || c == '_' ||
           (!first && (isdigit((unsigned char)c) || c == '.' || c == '-'));
}

/* One call name(arg=value, ...) at s[*i] into tc, its arguments in
 * json.dumps form. 1: a call; 0: not one; -ENOMEM. */
static int py_call(const char *s, size_t n, size_t *i, eng_tool_call *tc) {
    size_t k = *i;
    while (k < n && py_ident(s[k], k == *i))
        k++;
    const size_t name_end = k;
    k = skip_json_ws(s, n, k);
    if (name_end == *i || k >= n || s[k] != '(')
        return 0;
    growbuf raw = {0};
    grow_put(&raw, "{", 1);
    k = skip_json_ws(s, n, k + 1);
    bool ok = true;
    for (bool first = true; ok && k < n && s[k] != ')'; first = false) {
        if (!first) {
            ok = s[k] == ',';
            k = skip_json_ws(s, n, k + 1);
            if (!ok || (k < n && s[k] == ')'))
                break;
            grow_put(&raw, ", ", 2);
        }
        const size_t a = k;
        while (k < n && py_ident(s[k], k == a) && s[k] != '.' && s[k] != '-')
            k++;
        grow_put(&raw, "\"", 1);
        grow_put(&raw, s + a, k - a);
        grow_put(&raw, "\": ", 3);
        k = skip_json_ws(s, n, k);
        ok = k > a && k < n && s[k] == '=';
        if (ok) {
            k = skip_json_ws(s, n, k + 1);
            ok = py_literal(s, n, &k, &raw, 0);
            k = skip_json_ws(s, n, k);
        }
    }
    grow_put(&raw, "}", 1);
    growbuf args = {0};
    int64_t e = ok && k < n && !raw.failed ? eng__json_value(raw.p, raw.n, grow_put, &args) : -1;
    free(raw.p);
    if (raw.failed || args.failed) {
        free(args.p);
        return -ENOMEM;
    }
    if (e < 0 || (size_t)e != raw.n) {
        free(args.p);
        return 0;
    }
    if (!(tc->name = strndup(s + *i, name_end - *i))) {
        free(args.p);
        return -ENOMEM;
    }
    tc->arguments = args.p;
    *i = k + 1;
    return 1;
}

/* text[*i..] starts with s (advanced past it)? */
static bool eat(const char *text, size_t len, size_t *i, const char *s) {
    const size_t n = strlen(s);
    if (len - *i < n || memcmp(text + *i, s, n))
        return false;
    *i += n;
    return true;
}

/* Calls as a parse collects them. */
typedef struct call_list {
    eng_tool_call *calls;
    size_t count, cap;
} call_list;

/* The next call's slot, emptied (count not yet counting it); NULL: out
 * of memory. */
static eng_tool_call *call_slot(call_list *l) {
    if (l->count == l->cap) {
        const size_t nc = l->cap ? 2 * l->cap : 4;
        eng_tool_call *c = realloc(l->calls, nc * sizeof(*c));
        if (!c)
            return NULL;
        l->calls = c;
        l->cap = nc;
    }
    l->calls[l->count] = (eng_tool_call){ NULL, NULL };
    return &l->calls[l->count];
}

/* The calls of every open ... close block of an answer, each block's body
 * read by block (from *i, past it; 1: its calls added, 0: not calls,
 * -ENOMEM) and closed by close (which may be missing at the very end: a
 * stop string); the answer's text is what comes before the first block,
 * less trailing space. Any block not that: no calls. */
static int parse_blocks(const char *text, size_t len, const char *open, const char *close,
                        int (*block)(const char *, size_t, size_t *, call_list *),
                        eng_tool_call **ret_calls, size_t *ret_n, size_t *ret_content_len) {
    const char *first = find_bytes(text, len, open);
    if (!first)
        return 0;
    call_list l = { NULL, 0, 0 };
    size_t i = (size_t)(first - text);
    int r = 1;
    while (r > 0 && i < len) {
        const char *p = find_bytes(text + i, len - i, open);
        if (!p)
            break;
        i = (size_t)(p - text) + strlen(open);
        r = block(text, len, &i, &l);
        i = skip_json_ws(text, len, i);
        if (r > 0 && i < len && !eat(text, len, &i, close))
            r = 0;
    }
    if (r <= 0 || l.count == 0) {
        eng_tool_calls_free(l.calls, l.count);
        return r < 0 ? r : 0;
    }
    *ret_calls = l.calls;
    *ret_n = l.count;
    if (ret_content_len) {
        size_t c = (size_t)(first - text);
        while (c > 0 && is_space(text[c - 1]))
            c--;
        *ret_content_len = c;
    }
    return 0;
}

/* A bracketed list of calls [CALL, CALL, ...] at *i (blanks around
 * each), each read by item, which takes *i from the call's start past its
 * end: 1 with *i past the ']', 0 where the text is not such a list, < 0 an
 * error (item's). LFM2's and Nemotron Nano v2's blocks hold one each. */
static int call_list_of(const char *text, size_t len, size_t *i, call_list *l,
                        int (*item)(const char *, size_t, size_t *, eng_tool_call *)) {
    *i = skip_json_ws(text, len, *i);
    if (*i >= len || text[*i] != '[')
        return 0;
    *i = skip_json_ws(text, len, *i + 1);
    for (bool one = false; *i < len && text[*i] != ']'; one = true) {
        if (one && text[*i] != ',')
            return 0;
        *i = skip_json_ws(text, len, *i + (one ? 1 : 0));
        eng_tool_call *tc = call_slot(l);
        if (!tc)
            return -ENOMEM;
        int r = item(text, len, i, tc);
        if (r <= 0)
            return r;
        l->count++;
        *i = skip_json_ws(text, len, *i);
    }
    if (*i >= len)
        return 0;
    (*i)++;
    return 1;
}

/* LFM2: a <|tool_call_start|>[call, ...]<|tool_call_end|> block's calls
 * (parse_blocks), Python calls (py_call). */
static int lfm2_block(const char *text, size_t len, size_t *i, call_list *l) {
    return call_list_of(text, len, i, l, py_call);
}

/* One {"name": ..., "arguments": {...}} object at *i, as read_call reads
 * it; *i past it. */
static int json_call_at(const char *text, size_t len, size_t *i, eng_tool_call *tc) {
    if (*i >= len || text[*i] != '{')
        return 0;
    const int64_t e = eng__json_value(text + *i, len - *i, NULL, NULL);
    if (e <= 0)
        return 0;
    const int r = read_call(text + *i, (size_t)e, tc);
    *i += (size_t)e;
    return r;
}

/* Nemotron Nano v2: a <TOOLCALL>[{"name": ..., "arguments": {...}}, ...]
 * </TOOLCALL> block's calls (parse_blocks). */
static int nem_block(const char *text, size_t len, size_t *i, call_list *l) {
    return call_list_of(text, len, i, l, json_call_at);
}

/* One "<function=NAME>\n(<parameter=KEY>\nVALUE\n</parameter>\n)*</function>"
 * at text[*i] into tc: a value that is a whole JSON number, object, array,
 * true, false or null is that value (the format gives no types: a string
 * of digits reads as a number), any other one a string; one newline on
 * each side of it is the format's. 1: a call, 0: not one; -ENOMEM. */
static int xml_call(const char *text, size_t len, size_t *i, eng_tool_call *tc) {
    *i = skip_json_ws(text, len, *i);
    if (!eat(text, len, i, "<function="))
        return 0;
    const char *gt = memchr(text + *i, '>', len - *i);
    if (!gt || gt == text + *i || memchr(text + *i, '\n', (size_t)(gt - text - *i)))
        return 0;
    growbuf g = {0};
    grow_put(&g, "{", 1);
    const size_t name0 = *i, name_len = (size_t)(gt - text) - *i;
    *i = (size_t)(gt - text) + 1;
    bool ok = false;
    for (int k = 0;; k++) {
        *i = skip_json_ws(text, len, *i);
        if (eat(text, len, i, "</function>")) {
            ok = true;
            break;
        }
        if (!eat(text, len, i, "<parameter="))
            break;
        const char *kg = memchr(text + *i, '>', len - *i);
        const char *end = kg ? find_bytes(kg, len - (size_t)(kg - text), "</parameter>") : NULL;
        if (!kg || kg == text + *i || !end)
            break;
        const char *v = kg + 1;
        size_t vl = (size_t)(end - v);
        if (vl > 0 && v[0] == '\n')
            v++, vl--;
        if (vl > 0 && v[vl - 1] == '\n')
            vl--;
        grow_put(&g, k ? ", " : "", k ? 2 : 0);
        eng__json_quote(text + *i, (size_t)(kg - text) - *i, grow_put, &g);
        grow_put(&g, ": ", 2);
        const size_t b = skip_json_ws(v, vl, 0);
        if (b < vl && v[b] != '"' && json_whole(v, vl, NULL))
            eng__json_value(v, vl, grow_put, &g);
        else
            eng__json_quote(v, vl, grow_put, &g);
        *i = (size_t)(end - text) + strlen("</parameter>");
    }
    grow_put(&g, "}", 1);
    char *name = ok && !g.failed ? malloc(name_len + 1) : NULL;
    if (!name) {
        const bool oom = ok;
        free(g.p);
        return oom ? -ENOMEM : 0;
    }
    memcpy(name, text + name0, name_len);
    name[name_len] = '\0';
    tc->name = name;
    tc->arguments = g.p;
    return 1;
}

/* Qwen3.5: a "<tool_call>\n" xml_call "\n</tool_call>" block's call
 * (parse_blocks; text after the last block is dropped). */
static int xml_block(const char *text, size_t len, size_t *i, call_list *l) {
    eng_tool_call *tc = call_slot(l);
    if (!tc)
        return -ENOMEM;
    int r = xml_call(text, len, i, tc);
    l->count += r > 0;
    return r;
}

/* ---- Gemma 4's calls: <|tool_call>call:NAME{key:value,...}<tool_call|> -- */

static bool g4_value(const char *s, size_t n, size_t *i, growbuf *g, int depth);

/* A Gemma 4 dict at s[*i] ('{') as a JSON object into g: keys bare (up
 * to their ':', no '}' in them; as written, leading space dropped), one
 * or more members or none. false: not one. */
static bool g4_dict(const char *s, size_t n, size_t *i, growbuf *g, int depth) {
    size_t k = skip_json_ws(s, n, *i + 1);
    grow_put(g, "{", 1);
    for (bool first = true; k < n && s[k] != '}'; first = false) {
        if (!first) {
            if (s[k] != ',')
                return false;
            k = skip_json_ws(s, n, k + 1);
            grow_put(g, ", ", 2);
        }
        const size_t a = k;
        while (k < n && s[k] != ':' && s[k] != '}')
            k++;
        if (k == a || k >= n || s[k] != ':')
            return false;
        eng__json_quote(s + a, k - a, grow_put, g);
        grow_put(g, ": ", 2);
        k = skip_json_ws(s, n, k + 1);
        if (!g4_value(s, n, &k, g, depth + 1))
            return false;
        k = skip_json_ws(s, n, k);
    }
    if (k >= n)
        return false;
    grow_put(g, "}", 1);
    *i = k + 1;
    return true;
}

/* A Gemma 4 value at s[*i] as JSON into g, as llama.cpp reads them: a
 * string between <|"|> (as it is: no escapes), a dict, a list, a JSON
 * number, true, false or null (JSON's words: None is not one). false:
 * not one (numbers are checked with the whole object after). */
static bool g4_value(const char *s, size_t n, size_t *i, growbuf *g, int depth) {
    static const char q[] = G4_Q;
    if (*i >= n || depth > 32)
        return false;
    const char c = s[*i];
    if (n - *i >= sizeof(q) - 1 && !memcmp(s + *i, q, sizeof(q) - 1)) {
        const size_t a = *i + sizeof(q) - 1;
        const char *end = find_bytes(s + a, n - a, q);
        if (!end)
            return false;
        eng__json_quote(s + a, (size_t)(end - s) - a, grow_put, g);
        *i = (size_t)(end - s) + sizeof(q) - 1;
        return true;
    }
    if (c == '{')
        return g4_dict(s, n, i, g, depth);
    if (c == '[') {
        size_t k = skip_json_ws(s, n, *i + 1);
        grow_put(g, "[", 1);
        for (bool first = true; k < n && s[k] != ']'; first = false) {
            if (!first) {
                if (s[k] != ',')
                    return false;
                k = skip_json_ws(s, n, k + 1);
                grow_put(g, ", ", 2);
            }
            if (!g4_value(s, n, &k, g, depth + 1))
                return false;
            k = skip_json_ws(s, n, k);
        }
        if (k >= n)
            return false;
        grow_put(g, "]", 1);
        *i = k + 1;
        return true;
    }
    static const char *const words[] = { "true", "false", "null" };
    for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++)
        if (eat(s, n, i, words[w])) {
            grow_put(g, words[w], strlen(words[w]));
            return true;
        }
    return json_number(s, n, i, g);
}

/* Gemma 4: a <|tool_call>call:NAME{...}<tool_call|> block's call
 * (parse_blocks), its arguments in json.dumps form. NAME: the bytes up to
 * the "{", none of them space, '<', '>' or '}'. */
static int g4_block(const char *text, size_t len, size_t *i, call_list *l) {
    if (!eat(text, len, i, "call:"))
        return 0;
    const size_t name0 = *i;
    while (*i < len && text[*i] != '{' && !is_space(text[*i]) && !memchr("<>}", text[*i], 3))
        (*i)++;
    if (*i == name0 || *i >= len || text[*i] != '{')
        return 0;
    const size_t name_len = *i - name0;
    growbuf raw = {0}, args = {0};
    const bool ok = g4_dict(text, len, i, &raw, 0);
    int64_t e = ok && !raw.failed ? eng__json_value(raw.p, raw.n, grow_put, &args) : -1;
    free(raw.p);
    eng_tool_call *tc = e >= 0 && (size_t)e == raw.n && !args.failed ? call_slot(l) : NULL;
    if (tc && !(tc->name = strndup(text + name0, name_len)))
        tc = NULL;
    if (!tc) {
        const bool oom = raw.failed || args.failed || (e >= 0 && (size_t)e == raw.n);
        free(args.p);
        return oom ? -ENOMEM : 0;
    }
    tc->arguments = args.p;
    l->count++;
    return 1;
}

/* Gemma 4's answer: [<|turn>model\n] [<|channel>...] <|channel>thought
 * REASONING <channel|> CONTENT as llama.cpp reads it: the reasoning from
 * after "thought" and its white space to the first "<channel|>" (to the
 * end where there is none: cut short), the content after it; without
 * that opening, all content. (llama.cpp also drops a stray "<channel|>"
 * or empty thought at the content's end; our content runs to the end.) */
static void g4_split(const char *t, size_t n, size_t *think_off, size_t *think_len,
                     size_t *content_off) {
    static const char open[] = "<|channel>", close[] = "<channel|>";
    const size_t ol = sizeof(open) - 1;
    size_t i = 0;
    eat(t, n, &i, "<|turn>model\n");
    *think_off = *content_off = i;
    *think_len = 0;
    size_t j = i; /* (past openings not followed by "thought", as llama.cpp) */
    while (n - j >= ol && !memcmp(t + j, open, ol) &&
           !(n - j - ol >= 7 && !memcmp(t + j + ol, "thought", 7)))
        j += ol;
    if (!eat(t, n, &j, "<|channel>thought"))
        return;
    j = skip_json_ws(t, n, j);
    const char *c = find_bytes(t + j, n - j, close);
    *think_off = j;
    *think_len = c ? (size_t)(c - t) - j : n - j;
    *content_off = c ? (size_t)(c - t) + sizeof(close) - 1 : n;
}

/* ---- gpt-oss (harmony) ---------------------------------------------------- */

/* One message of a harmony answer: where its header starts (past its
 * "<|start|>assistant"), its body [body, end), where the next one starts;
 * its channel (after the header's last "<|channel|>": a stray
 * "<|channel|>commentary to=assistant" may come first) and its recipient
 * (after " to=", unless that is "assistant"), each up to a space or a '<'
 * (NULL: none). */
typedef struct hmsg {
    size_t head, body, end, next;
    const char *chan, *to;
    size_t chan_len, to_len;
} hmsg;

static size_t harmony_word(const char *s, const char *e) {
    size_t n = 0;
    while (s + n < e && s[n] != ' ' && s[n] != '<' && s[n] != '\n')
        n++;
    return n;
}

static bool span_is(const char *s, size_t n, const char *want) {
    return s && n == strlen(want) && !memcmp(s, want, n);
}

/* The message at t[i, n): 1; 0 where no header opens there (text); -1
 * where the text ends before its body starts (cut short). Its body ends
 * at "<|end|>", or at "<|call|>" or "<|return|>" (which end generation,
 * so that only a rendered history holds them), or at the end. */
static int harmony_next(const char *t, size_t n, size_t i, hmsg *m) {
    static const char start[] = "<|start|>assistant", chan[] = "<|channel|>", to[] = " to=";
    static const char *const ends[] = { "<|end|>", "<|call|>", "<|return|>" };
    if (n - i < sizeof(start) - 1 && !memcmp(t + i, start, n - i))
        return -1;
    eat(t, n, &i, start);
    if (i == n || (n - i < sizeof(to) - 1 && !memcmp(t + i, to, n - i)))
        return -1;
    if (memcmp(t + i, chan, n - i < sizeof(chan) - 1 ? n - i : sizeof(chan) - 1) &&
        (n - i < sizeof(to) - 1 || memcmp(t + i, to, sizeof(to) - 1)))
        return 0;
    const char *h = t + i, *msg = find_bytes(h, n - i, "<|message|>");
    if (!msg)
        return -1;
    m->head = i;
    m->chan = find_last(h, (size_t)(msg - h), chan);
    if (m->chan) {
        m->chan += sizeof(chan) - 1;
        m->chan_len = harmony_word(m->chan, msg);
    }
    m->to = find_bytes(h, (size_t)(msg - h), to);
    if (m->to) {
        m->to += sizeof(to) - 1;
        m->to_len = harmony_word(m->to, msg);
        if (span_is(m->to, m->to_len, "assistant"))
            m->to = NULL;
    }
    m->body = (size_t)(msg - t) + 11;
    m->end = m->next = n;
    for (size_t k = 0; k < sizeof(ends) / sizeof(ends[0]); k++) {
        const char *e = find_bytes(t + m->body, m->end - m->body, ends[k]);
        if (e) {
            m->end = (size_t)(e - t);
            m->next = m->end + strlen(ends[k]);
        }
    }
    return 1;
}

/* A gpt-oss answer as eng_chat_reasoning() documents; *content_end: where
 * the body that is its answer ends (the end for text). */
static void harmony_split(const char *t, size_t n, size_t *think_off, size_t *think_len,
                          size_t *content_off, size_t *content_end) {
    size_t i = 0, fin = SIZE_MAX, fin_end = n, pre = SIZE_MAX, pre_end = n;
    bool thought = false;
    hmsg m = { 0 };
    int r;
    *think_off = *think_len = 0;
    while ((r = harmony_next(t, n, i, &m)) == 1) {
        if (span_is(m.chan, m.chan_len, "analysis") && !m.to && !thought) {
            *think_off = m.body;
            *think_len = m.end - m.body;
            thought = true;
        } else if (span_is(m.chan, m.chan_len, "final") && !m.to && fin == SIZE_MAX) {
            fin = m.body;
            fin_end = m.end;
        } else if (span_is(m.chan, m.chan_len, "commentary") && !m.to && pre == SIZE_MAX) {
            pre = m.body; /* (a preamble: llama.cpp's content too) */
            pre_end = m.end;
        }
        i = m.next;
    }
    if (fin == SIZE_MAX && pre != SIZE_MAX) {
        fin = pre;
        fin_end = pre_end;
    }
    if (fin == SIZE_MAX && r == 0) /* text where no header opens */
        fin = i;
    *content_off = fin == SIZE_MAX ? n : fin;
    *content_end = fin == SIZE_MAX ? n : fin_end;
}

/* The calls of a gpt-oss answer (eng_chat_parse_calls): every message to
 * "functions.NAME", its body a JSON object (any that is not: no calls). */
static int harmony_calls(const char *t, size_t n, eng_tool_call **ret_calls, size_t *ret_n,
                         size_t *ret_content_len) {
    static const char fns[] = "functions.";
    const size_t fl = sizeof(fns) - 1;
    call_list l = { NULL, 0, 0 };
    size_t i = 0, first = n;
    hmsg m = { 0 };
    int r = 1;
    while (r > 0 && harmony_next(t, n, i, &m) == 1) {
        i = m.next;
        if (!m.to || m.to_len <= fl || memcmp(m.to, fns, fl))
            continue;
        if (!json_is_object(t + m.body, m.end - m.body)) {
            r = 0;
            break;
        }
        eng_tool_call *tc = call_slot(&l);
        growbuf args = { 0 };
        if (tc) {
            eng__json_value(t + m.body, m.end - m.body, grow_put, &args);
            tc->name = strndup(m.to + fl, m.to_len - fl);
        }
        if (!tc || !tc->name || args.failed) {
            if (tc)
                free(tc->name);
            free(args.p);
            r = -ENOMEM;
            break;
        }
        tc->arguments = args.p;
        l.count++;
        if (first == n)
            first = m.head;
    }
    if (r <= 0 || l.count == 0) {
        eng_tool_calls_free(l.calls, l.count);
        return r < 0 ? r : 0;
    }
    *ret_calls = l.calls;
    *ret_n = l.count;
    if (ret_content_len) {
        size_t to, tl, co, ce;
        harmony_split(t, n, &to, &tl, &co, &ce);
        *ret_content_len = co < first ? ce : 0;
    }
    return 0;
}

static void gstr(growbuf *g, const char *s) { grow_put(g, s, strlen(s)); }

/* Python's str() of a JSON value (py_str) into g. */
static void gpy(growbuf *g, const char *v, size_t vl) {
    outbuf m = { NULL, 0, 0, 0 };
    py_str(&m, v, vl, false);
    char *s = m.err ? NULL : malloc(m.len + 1);
    outbuf w = { s, m.len, 0, 0 };
    if (s)
        py_str(&w, v, vl, false);
    if (!s || w.err)
        g->failed = true;
    else
        grow_put(g, s, m.len);
    free(s);
}

/* A JSON string's text into g; -EINVAL for another value (Jinja's "+"
 * raises), -ENOMEM. */
static int gtext(growbuf *g, const char *v, size_t vl) {
    char *s = NULL;
    int r = v[0] == '"' ? eng__json_unquote(v, vl, &s) : -EINVAL;
    if (r == 0)
        gstr(g, s);
    free(s);
    return r;
}

static bool json_str_is(const char *v, size_t vl, const char *want) {
    return v[0] == '"' && eng__json_key_is(v, vl, want);
}

/* Whether JSON value v (with vl) is there and true to Python. */
static bool harmony_true(const char *s, size_t n, const char *key) {
    const char *v;
    size_t vl;
    return json_get(s, n, key, &v, &vl) && py_truthy(v, vl);
}

/* Jinja's `NAME in (SCHEMA.required or [])`: a list's member, a string's
 * part, an object's key; false, null, 0 and empty ones are []. -EINVAL
 * where Python raises (true, a number). */
static int harmony_in(const char *schema, size_t sl, const char *name, bool *ret) {
    const char *v, *x, *k;
    size_t vl, xl, kl, pos = 0;
    char *s = NULL;
    *ret = false;
    if (!json_get(schema, sl, "required", &v, &vl) || !py_truthy(v, vl))
        return 0;
    if (v[0] == '"') {
        int r = eng__json_unquote(v, vl, &s);
        *ret = r == 0 && strstr(s, name);
        free(s);
        return r;
    }
    if (v[0] != '[' && v[0] != '{')
        return -EINVAL;
    while (eng__json_next(v, vl, &pos, &k, &kl, &x, &xl) == 1)
        if (v[0] == '[' ? x[0] == '"' && eng__json_key_is(x, xl, name)
                        : eng__json_key_is(k, kl, name))
            *ret = true;
    return 0;
}

/* Characters (code points) of UTF-8 text: Jinja's length. */
static size_t utf8_chars(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* The template's render_typescript_type of a JSON schema, into g; a value
 * that is not an object has no keys ("any"). Its oneOf branch never takes
 * "any" for object variants: the flag the loop sets does not leave the
 * loop (Jinja's scoping). A oneOf or an enum that is not a list (which
 * Jinja would iterate) is refused, -EINVAL; so is what Jinja raises on. */
static int harmony_type(growbuf *g, const char *s, size_t n) {
    const char *type = NULL, *x, *k;
    size_t tl = 0, xl, kl, pos = 0;
    const bool typed = json_get(s, n, "type", &type, &tl);
    int r = 0;
    if (typed && json_str_is(type, tl, "array")) {
        const char *it, *itype;
        size_t il, itl;
        const bool ityped = json_get(s, n, "items", &it, &il) && py_truthy(it, il) &&
                            json_get(it, il, "type", &itype, &itl);
        if (!json_get(s, n, "items", &it, &il) || !py_truthy(it, il)) {
            gstr(g, "any[]");
        } else if (ityped && json_str_is(itype, itl, "string")) {
            gstr(g, "string[]");
        } else if (ityped &&
                   (json_str_is(itype, itl, "number") || json_str_is(itype, itl, "integer"))) {
            gstr(g, "number[]");
        } else if (ityped && json_str_is(itype, itl, "boolean")) {
            gstr(g, "boolean[]");
        } else {
            growbuf in = { 0 };
            if ((r = harmony_type(&in, it, il)) == 0 && !in.failed) {
                const char *t = in.p ? in.p : "";
                if (!strcmp(t, "object | object") || utf8_chars(t, in.n) > 50) {
                    gstr(g, "any[]");
                } else {
                    gstr(g, t);
                    gstr(g, "[]");
                }
            }
            g->failed |= in.failed;
            free(in.p);
        }
        if (harmony_true(s, n, "nullable"))
            gstr(g, " | null");
        return r;
    }
    if (typed && type[0] == '[' && py_truthy(type, tl)) {
        for (bool first = true; eng__json_next(type, tl, &pos, NULL, NULL, &x, &xl) == 1;
             first = false) {
            gstr(g, first ? "" : " | ");
            gpy(g, x, xl);
        }
        return 0;
    }
    if (json_get(s, n, "oneOf", &x, &xl) && py_truthy(x, xl)) {
        if (x[0] != '[')
            return -EINVAL;
        const char *v, *d;
        size_t vl, dl;
        for (bool first = true; r == 0 && eng__json_next(x, xl, &pos, NULL, NULL, &v, &vl) == 1;
             first = false) {
            gstr(g, first ? "" : " | \n");
            if ((r = harmony_type(g, v, vl)) < 0)
                break;
            if (json_get(v, vl, "description", &d, &dl) && py_truthy(d, dl)) {
                gstr(g, "// ");
                r = gtext(g, d, dl);
            }
            if (r == 0 && json_get(v, vl, "default", &d, &dl)) {
                gstr(g, "                    // default: "); /* (the template's indent) */
                eng__json_value(d, dl, grow_put, g);
            }
        }
        return r;
    }
    if (typed && json_str_is(type, tl, "string")) {
        if (json_get(s, n, "enum", &x, &xl) && py_truthy(x, xl)) {
            if (x[0] != '[')
                return -EINVAL;
            gstr(g, "\"");
            for (bool first = true; eng__json_next(x, xl, &pos, NULL, NULL, &k, &kl) == 1;
                 first = false) {
                gstr(g, first ? "" : "\" | \"");
                gpy(g, k, kl);
            }
            gstr(g, "\"");
        } else {
            gstr(g, harmony_true(s, n, "nullable") ? "string | null" : "string");
        }
        return 0;
    }
    if (typed && (json_str_is(type, tl, "number") || json_str_is(type, tl, "integer"))) {
        gstr(g, "number");
    } else if (typed && json_str_is(type, tl, "boolean")) {
        gstr(g, "boolean");
    } else if (typed && json_str_is(type, tl, "object")) {
        if (!json_get(s, n, "properties", &x, &xl) || !py_truthy(x, xl)) {
            gstr(g, "object");
            return 0;
        }
        if (x[0] != '{')
            return -EINVAL; /* (.items() of a list) */
        const char *v;
        size_t vl;
        gstr(g, "{\n");
        for (bool first = true; r == 0 && eng__json_next(x, xl, &pos, &k, &kl, &v, &vl) == 1;
             first = false) {
            char *name = NULL;
            bool req = false;
            if ((r = eng__json_unquote(k, kl, &name)) == 0 &&
                (r = harmony_in(s, n, name, &req)) == 0) {
                gstr(g, first ? "" : ", ");
                gstr(g, name);
                /* (the template's line break and indent before the type) */
                gstr(g, req ? ": \n                " : "?: \n                ");
                r = harmony_type(g, v, vl);
            }
            free(name);
        }
        gstr(g, "}");
    } else {
        gstr(g, "any");
    }
    return r;
}

/* The template's render_tool_namespace("functions", tools) into g: per
 * tool "// DESCRIPTION\ntype NAME = " and "() => any;\n\n", or, where its
 * parameters have properties, "(_: {\n" a line per property ("// " its
 * description, its name, "?" unless required, ": " its type, its default)
 * "}) => any;\n\n". A tool without a description gets an empty one, as
 * llama.cpp's renderer gives it (jinja2 raises); one without a name, or
 * a non-string where the template adds strings, -EINVAL. */
static int harmony_namespace(growbuf *g, const char *tools) {
    const size_t tn = strlen(tools);
    size_t tp = 0, vl, fl, xl, pl, propl, dl, kl;
    const char *v, *fn, *x, *params, *props, *d, *k;
    int r = 0;
    gstr(g, "## functions\n\nnamespace functions {\n\n");
    while (r == 0 && eng__json_next(tools, tn, &tp, NULL, NULL, &v, &vl) == 1) {
        if (!json_get(v, vl, "function", &fn, &fl) || !json_get(fn, fl, "name", &x, &xl))
            return -EINVAL;
        gstr(g, "// ");
        if (json_get(fn, fl, "description", &d, &dl) && d[0] != 'n' && (r = gtext(g, d, dl)) < 0)
            return r;
        gstr(g, "\ntype ");
        if ((r = gtext(g, x, xl)) < 0)
            return r;
        gstr(g, " = ");
        if (!json_get(fn, fl, "parameters", &params, &pl) || !py_truthy(params, pl) ||
            !json_get(params, pl, "properties", &props, &propl) || !py_truthy(props, propl)) {
            gstr(g, "() => any;\n\n");
            continue;
        }
        if (props[0] != '{')
            return -EINVAL;
        gstr(g, "(_: {\n");
        for (size_t pos = 0; r == 0 && eng__json_next(props, propl, &pos, &k, &kl, &v, &vl) == 1;) {
            /* (v, vl: the property's schema from here on) */
            char *name = NULL;
            bool req = false;
            if (json_get(v, vl, "description", &d, &dl) && py_truthy(d, dl)) {
                gstr(g, "// ");
                if ((r = gtext(g, d, dl)) < 0)
                    break;
                gstr(g, "\n");
            }
            if ((r = eng__json_unquote(k, kl, &name)) == 0 &&
                (r = harmony_in(params, pl, name, &req)) == 0) {
                gstr(g, name);
                gstr(g, req ? ": " : "?: ");
                r = harmony_type(g, v, vl);
            }
            free(name);
            if (r == 0 && json_get(v, vl, "default", &d, &dl)) {
                const bool oneof = !harmony_true(v, vl, "enum") && harmony_true(v, vl, "oneOf");
                gstr(g, oneof ? "// default: " : ", // default: ");
                if (harmony_true(v, vl, "enum") || oneof)
                    r = gtext(g, d, dl);
                else
                    eng__json_value(d, dl, grow_put, g);
            }
            gstr(g, ",\n");
        }
        gstr(g, "}) => any;\n\n");
    }
    gstr(g, "} // namespace functions");
    return r;
}

/* gpt-oss's answer text for the history (an answer whose content is a
 * whole harmony answer: its answer, or with calls its reasoning), as
 * the comment at the top says. */
static void harmony_answer(const char *c, bool calls, const char **ret, size_t *ret_len) {
    const size_t n = strlen(c);
    *ret = c;
    *ret_len = n;
    if (!strstr(c, "<|channel|>analysis<|message|>") && !strstr(c, "<|channel|>final<|message|>"))
        return;
    size_t to, tl, co, ce;
    harmony_split(c, n, &to, &tl, &co, &ce);
    *ret = calls ? c + to : c + co;
    *ret_len = calls ? tl : n - co;
}

/* gpt-oss (harmony), as the comment at the top says. */
static int render_harmony(const eng_chat_msg *msgs, size_t n_msgs, const char *tools,
                          size_t n_tools, unsigned flags, outbuf *o) {
    char date[32];
    const time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || !strftime(date, sizeof(date), "%Y-%m-%d", &tm))
        date[0] = '\0';
    out_str(o, "<|start|>system<|message|>" HARMONY_IDENTITY "\nKnowledge cutoff: 2024-06\n"
               "Current date: ");
    out_str(o, date);
    out_str(o, flags & ENG_CHAT_NO_THINK ? "\n\nReasoning: low\n\n" : "\n\nReasoning: medium\n\n");
    out_str(o, n_tools > 0 ? HARMONY_CHANNELS "\n" HARMONY_TOOLS_NOTE "<|end|>"
                           : HARMONY_CHANNELS "<|end|>");
    size_t first = 0;
    const char *dev = "";
    if (n_msgs > 0 && (!strcmp(msgs[0].role, "system") || !strcmp(msgs[0].role, "developer"))) {
        dev = msgs[0].content;
        first = 1;
    }
    if (dev[0] || n_tools > 0) {
        out_str(o, "<|start|>developer<|message|>");
        if (dev[0]) {
            out_str(o, "# Instructions\n\n");
            out_str(o, dev);
            out_str(o, "\n\n");
        }
        if (n_tools > 0) {
            growbuf g = { 0 };
            out_str(o, "# Tools\n\n");
            int r = harmony_namespace(&g, tools);
            if (r == 0 && g.failed)
                r = -ENOMEM;
            if (r == 0)
                out_put(o, g.p, g.n);
            free(g.p);
            if (r < 0)
                return r;
        }
        out_str(o, "<|end|>");
    }
    const char *last_call = NULL;
    for (size_t i = first; i < n_msgs; i++) {
        const eng_chat_msg *m = &msgs[i];
        const char *c;
        size_t cl;
        if (!strcmp(m->role, "user")) {
            out_str(o, "<|start|>user<|message|>");
            out_str(o, m->content);
            out_str(o, "<|end|>");
        } else if (!strcmp(m->role, "tool")) {
            if (!last_call)
                return -EINVAL;
            out_str(o, "<|start|>functions.");
            out_str(o, last_call);
            out_str(o, " to=assistant<|channel|>commentary<|message|>");
            eng__json_quote(m->content, strlen(m->content), out_cb, o);
            out_str(o, "<|end|>");
        } else if (!strcmp(m->role, "assistant") && m->n_tool_calls > 0) {
            bool final_later = false;
            for (size_t j = i + 1; j < n_msgs; j++)
                final_later |= !strcmp(msgs[j].role, "assistant") && msgs[j].n_tool_calls == 0;
            harmony_answer(m->content, true, &c, &cl);
            if (cl > 0 && !final_later) {
                out_str(o, "<|start|>assistant<|channel|>analysis<|message|>");
                out_put(o, c, cl);
                out_str(o, "<|end|>");
            }
            const eng_tool_call *tc = &m->tool_calls[0];
            out_str(o, "<|start|>assistant to=functions.");
            out_str(o, tc->name);
            out_str(o, "<|channel|>commentary json<|message|>");
            if (tc->arguments)
                json_whole(tc->arguments, strlen(tc->arguments), o);
            else
                out_str(o, "{}");
            out_str(o, "<|call|>");
            last_call = tc->name;
        } else if (!strcmp(m->role, "assistant")) {
            harmony_answer(m->content, false, &c, &cl);
            out_str(o, "<|start|>assistant<|channel|>final<|message|>");
            out_put(o, c, cl);
            out_str(o, i + 1 == n_msgs && !(flags & ENG_CHAT_ADD_ASSISTANT) ? "<|return|>"
                                                                            : "<|end|>");
            last_call = NULL;
        }
    }
    if (flags & ENG_CHAT_ADD_ASSISTANT)
        out_str(o, "<|start|>assistant");
    return 0;
}

int eng_chat_parse_calls(const eng_chat_info *info, const char *text, size_t len,
                         eng_tool_call **ret_calls, size_t *ret_n, size_t *ret_content_len) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    if (!info || (!text && len > 0) || !ret_calls || !ret_n)
        return -EINVAL;
    *ret_calls = NULL;
    *ret_n = 0;
    if (ret_content_len)
        *ret_content_len = len;
    if (!info->tools)
        return -ENOTSUP;
    if (info->lfm2_calls)
        return parse_blocks(text ? text : "", len, "<|tool_call_start|>", "<|tool_call_end|>",
                            lfm2_block, ret_calls, ret_n, ret_content_len);
    if (info->xml_calls)
        return parse_blocks(text ? text : "", len, open, close, xml_block, ret_calls, ret_n,
                            ret_content_len);
    /* Gemma 4, Nemotron Nano v2 and 3: the blocks after the reasoning, not
     * in it (which may name the format) */
    const char *t = text ? text : "", *bo = NULL, *bc = NULL;
    int (*block)(const char *, size_t, size_t *, call_list *) = NULL;
    size_t co = 0;
    if (info->kind == ENG_CHAT_GEMMA4) {
        size_t to, tl;
        g4_split(t, len, &to, &tl, &co);
        bo = "<|tool_call>", bc = "<tool_call|>", block = g4_block;
    } else if (info->kind == ENG_CHAT_NEMOTRON || info->nemotron3) {
        const char *reason, *content;
        size_t rlen, clen;
        split_reasoning(t, len, &reason, &rlen, &content, &clen);
        co = len - clen;
        if (info->nemotron3) /* (Qwen3.5's calls) */
            bo = open, bc = close, block = xml_block;
        else
            bo = "<TOOLCALL>", bc = "</TOOLCALL>", block = nem_block;
    }
    if (block) {
        int r = parse_blocks(t + co, len - co, bo, bc, block, ret_calls, ret_n, ret_content_len);
        if (r == 0 && *ret_n > 0 && ret_content_len)
            *ret_content_len += co;
        return r;
    }
    if (info->kind == ENG_CHAT_GPT_OSS)
        return harmony_calls(text ? text : "", len, ret_calls, ret_n, ret_content_len);
    if (info->kind == ENG_CHAT_LLAMA3) {
        int r = llama_call(text, len, ret_calls, ret_n);
        if (r == 0 && *ret_n > 0 && ret_content_len)
            *ret_content_len = 0; /* the answer is the call */
        return r;
    }
    size_t count = 0;
    for (const char *p = text; (p = find_bytes(p, len - (size_t)(p - text), open)) != NULL; p += sizeof(open) - 1)
        count++;
    if (count == 0)
        return 0;
    eng_tool_call *calls = calloc(count, sizeof(*calls));
    if (!calls)
        return -ENOMEM;
    const char *p = text;
    size_t k = 0;
    for (; k < count; k++) {
        p = find_bytes(p, len - (size_t)(p - text), open) + sizeof(open) - 1;
        const size_t rest = len - (size_t)(p - text);
        const size_t b = skip_json_ws(p, rest, 0);
        int64_t e = b < rest && p[b] == '{' ? eng__json_value(p, rest, NULL, NULL) : -EINVAL;
        if (e < 0)
            break;
        /* the block closes, or the text ends (a stop string ate the tag) */
        const size_t after = skip_json_ws(p, rest, (size_t)e);
        if (after < rest && (rest - after < sizeof(close) - 1 || memcmp(p + after, close, sizeof(close) - 1)))
            break;
        int r = read_call(p, (size_t)e, &calls[k]);
        if (r < 0) {
            eng_tool_calls_free(calls, count);
            return r;
        }
        if (r == 0)
            break;
        p += after;
    }
    if (k < count) { /* not all calls: the answer stays text */
        eng_tool_calls_free(calls, count);
        return 0;
    }
    *ret_calls = calls;
    *ret_n = count;
    if (ret_content_len) { /* the text before the first block, less its trailing space */
        size_t c = (size_t)(find_bytes(text, len, open) - text);
        while (c > 0 && is_space(text[c - 1]))
            c--;
        *ret_content_len = c;
    }
    return 0;
}
