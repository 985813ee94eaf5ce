/* Chat templates (private to the engine). */
#ifndef ENGINE_CHAT_H
#define ENGINE_CHAT_H

#include <stddef.h>

#include "engine.h"

typedef struct eng_chat_info {
    eng_chat_template kind;
    /* The system prompt the template inserts when the conversation has none
     * (SmolLM2 and Qwen2.5 templates do); empty when none. */
    char default_system[4096];
    /* ChatML with reasoning (Qwen3): an earlier answer's <think> part is
     * left out of the history, as the template does */
    bool reasoning;
    bool think_switch; /* the template reads enable_thinking */
    bool xml_calls;    /* Qwen3.5 (ChatML): tools listed before the system prompt, calls
                        * as <tool_call><function=NAME><parameter=KEY>VALUE... */
    bool think_open;   /* Qwen3.5: the prompt opens the reasoning ("<think>\n") unless
                        * ENG_CHAT_NO_THINK, every answer after the last query
                        * shows its <think> block, every message is trimmed */
    bool tools;        /* tool calling, Qwen's <tool_call> blocks */
    bool eos_space;    /* Mistral v0.1: a space after each answer's eos_token */
    bool phi3_legacy;  /* Phi-3 (April 2024): the user turn ends with the
                        * assistant's header; bos_token first where phi3_bos */
    bool phi3_bos;
    bool phi3_skip_empty_system; /* Phi-3.5: an empty system message prints nothing */
    bool phi4;         /* Phi-4-mini: no "\n" after the markers, every role printed */
    bool tekken;       /* Mistral v3-tekken: no space after [INST], answers untrimmed */
    bool gemma_nl1;    /* Gemma: one "\n" after the system prefix, not two */
    bool gemma_no_bos; /* Gemma (1.0's template): no bos_token printed */
    bool r1_think;     /* DeepSeek-R1: the prompt opens the reasoning ("<think>\n"; GLM-Z1:
                        * "<think>") */
    bool r1_strip;     /* DeepSeek-R1: an earlier answer's reasoning left out (GLM-Z1:
                        * every turn's but a system one's, the rest stripped) */
    bool smollm3;      /* ChatML under SmolLM3's metadata header (render_smollm3) */
    bool nemotron3;    /* Nemotron 3 Nano (ChatML): always a system block, tools in it as
                        * XML, answers marked "<think></think>", calls as xml_calls'
                        * (render_nemotron3) */
    bool lfm2_past;    /* LFM2.5 (ChatML): each answer but the last only after its
                        * last "</think>", trimmed */
    bool lfm2_tool;    /* LFM2 (ChatML): a tool result between <|tool_response_start|>
                        * and <|tool_response_end|> */
    bool lfm2_calls;   /* LFM2, LFM2.5 (ChatML): tools listed in the system block
                        * (lfm2_marks: between <|tool_list_start|> and
                        * <|tool_list_end|>), calls as Python calls between
                        * <|tool_call_start|> and <|tool_call_end|> */
    bool lfm2_marks;
    bool bracket_think; /* Ministral 3 Reasoning: [THINK] ... [/THINK], not <think> */
    bool dated_default; /* Mistral Small 3.x: default_system has a \x01 where today's
                         * date goes (strftime_now("%Y-%m-%d")) */
    bool tulu_bos;     /* Tulu 3 / OLMo 2: the template prints bos_token first */
    bool exaone4;      /* EXAONE 4.0: llama.cpp's rendering (tool turns, trimmed) */
    bool granite4;     /* Granite 4.0/4.1: tools in the system block, default system
                        * prompt (4.0) in default_system */
    bool granite30;    /* Granite 3.0: no default system prompt, some roles only */
    bool glm_skip_empty; /* GLM-4-9B-chat: a message with empty content prints nothing */
    bool glm_sys_first;  /* GLM-4-0414: system messages first, then user, assistant
                          * and observation turns only */
    /* the texts of bos_token and eos_token, which Llama 2, Mistral and
     * Zephyr templates print (the loader fills them from the vocabulary) */
    char bos[64], eos[64];
} eng_chat_info;

/* A template by name (eng_chat_template_names()); kind NONE for another. */
void eng_chat_named(const char *name, eng_chat_info *ret_info);

/* Recognises a template from tokenizer.chat_template (NULL/0: none). */
void eng_chat_detect(const char *tmpl, size_t len, eng_chat_info *ret_info);

/* Renders as eng_chat_apply_tools() documents (flags ENG_CHAT_*). */
int eng_chat_render(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                    const char *tools, unsigned flags, char *buf, size_t cap);

/* eng_chat_reasoning() on a template. */
int eng_chat_split_reasoning(const eng_chat_info *info, const char *text, size_t len, size_t *ret_think_off,
                             size_t *ret_think_len, size_t *ret_content_off);

/* eng_chat_tool_calls() on a template. */
int eng_chat_parse_calls(const eng_chat_info *info, const char *text, size_t len,
                         eng_tool_call **ret_calls, size_t *ret_n, size_t *ret_content_len);

#endif
