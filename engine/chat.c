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
 *   has no system message. Tool-calling branches are not reproduced.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "chat.h"

#define CHATML_START "<|im_start|>"
#define CHATML_END "<|im_end|>"
#define LLAMA3_BOS "<|begin_of_text|>"
#define LLAMA3_HDR_START "<|start_header_id|>"
#define LLAMA3_HDR_END "<|end_header_id|>"
#define LLAMA3_EOT "<|eot_id|>"

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

void eng_chat_detect(const char *tmpl, size_t len, eng_chat_info *ret_info) {
    if (!ret_info)
        return;
    memset(ret_info, 0, sizeof(*ret_info));
    ret_info->kind = ENG_CHAT_NONE;
    if (!tmpl || len == 0 || len > TEMPLATE_MAX_BYTES)
        return;
    /* ChatML first: ChatML fine-tunes of Llama 3 (Hermes) carry both markers
     * in their vocabulary, and the template text says which format is used. */
    if (find_bytes(tmpl, len, CHATML_START)) {
        ret_info->kind = ENG_CHAT_CHATML;
        chatml_find_default(tmpl, len, ret_info);
        ret_info->reasoning = find_bytes(tmpl, len, "reasoning_content") && find_bytes(tmpl, len, "</think>");
        ret_info->think_switch = find_bytes(tmpl, len, "enable_thinking") != NULL;
    } else if (find_bytes(tmpl, len, LLAMA3_HDR_START)) {
        ret_info->kind = ENG_CHAT_LLAMA3;
        llama3_find_preamble(tmpl, len, ret_info);
    }
}

/* snprintf-like output: counts everything, writes what fits. */
typedef struct outbuf {
    char *buf;
    size_t cap; /* bytes available for text (cap - 1 of the caller's) */
    size_t len; /* full length so far */
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

/* Jinja's trim filter. */
static void out_trimmed(outbuf *o, const char *c) {
    size_t n = strlen(c);
    while (n > 0 && is_space(*c))
        c++, n--;
    while (n > 0 && is_space(c[n - 1]))
        n--;
    out_put(o, c, n);
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

/* A Qwen3 answer: the template splits a message with "</think>" into its
 * reasoning (before the first "</think>", after the last "<think>" there,
 * newlines trimmed) and its content (after the last "</think>", leading
 * newlines trimmed), and keeps the reasoning only for answers after the
 * last user message, where there is some or the answer is the last
 * message. */
static void qwen3_answer(outbuf *o, const char *c, bool after_query, bool last) {
    size_t n = strlen(c);
    const char *content = c, *reason = c;
    size_t clen = n, rlen = 0;
    const char *close = find_bytes(c, n, "</think>");
    if (close) {
        const char *lc = find_last(c, n, "</think>");
        content = lc + 8;
        clen = n - (size_t)(content - c);
        strip_nl(&content, &clen, true, false);
        rlen = (size_t)(close - c);
        strip_nl(&reason, &rlen, false, true);
        const char *open = find_last(reason, rlen, "<think>");
        if (open) {
            rlen -= (size_t)(open + 7 - reason);
            reason = open + 7;
        }
        strip_nl(&reason, &rlen, true, false);
    }
    out_str(o, CHATML_START "assistant\n");
    if (after_query && (last || rlen > 0)) {
        strip_nl(&reason, &rlen, true, true);
        out_str(o, "<think>\n");
        out_put(o, reason, rlen);
        out_str(o, "\n</think>\n\n");
        strip_nl(&content, &clen, true, false);
    }
    out_put(o, content, clen);
    out_str(o, CHATML_END "\n");
}

int eng_chat_render(const eng_chat_info *info, const eng_chat_msg *msgs, size_t n_msgs,
                    unsigned flags, char *buf, size_t cap) {
    const bool add_assistant = flags & ENG_CHAT_ADD_ASSISTANT;
    if (!info || (!msgs && n_msgs > 0) || (!buf && cap > 0))
        return -EINVAL;
    if (info->kind != ENG_CHAT_CHATML && info->kind != ENG_CHAT_LLAMA3)
        return -ENOTSUP;
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return -EINVAL;

    outbuf o = {buf, cap > 0 ? cap - 1 : 0, 0};
    if (info->kind == ENG_CHAT_CHATML) {
        size_t dlen = strnlen(info->default_system, sizeof(info->default_system));
        if (n_msgs > 0 && dlen > 0 && strcmp(msgs[0].role, "system") != 0) {
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
        for (size_t i = 0; i < n_msgs; i++) {
            if (info->reasoning && !strcmp(msgs[i].role, "assistant")) {
                qwen3_answer(&o, msgs[i].content, i > last_query, i + 1 == n_msgs);
                continue;
            }
            out_str(&o, CHATML_START);
            out_str(&o, msgs[i].role);
            out_str(&o, "\n");
            out_str(&o, msgs[i].content);
            out_str(&o, CHATML_END "\n");
        }
        if (add_assistant)
            out_str(&o, CHATML_START "assistant\n");
        if (add_assistant && info->think_switch && (flags & ENG_CHAT_NO_THINK))
            out_str(&o, "<think>\n\n</think>\n\n");
    } else {
        size_t plen = strnlen(info->default_system, sizeof(info->default_system));
        size_t first = 0;
        if (n_msgs > 0 || plen > 0)
            out_str(&o, LLAMA3_BOS);
        if (plen > 0) {
            out_str(&o, LLAMA3_HDR_START "system" LLAMA3_HDR_END "\n\n");
            out_put(&o, info->default_system, plen);
            if (n_msgs > 0 && strcmp(msgs[0].role, "system") == 0) {
                out_trimmed(&o, msgs[0].content);
                first = 1;
            }
            out_str(&o, LLAMA3_EOT);
        }
        for (size_t i = first; i < n_msgs; i++) {
            out_str(&o, LLAMA3_HDR_START);
            out_str(&o, msgs[i].role);
            out_str(&o, LLAMA3_HDR_END "\n\n");
            out_trimmed(&o, msgs[i].content);
            out_str(&o, LLAMA3_EOT);
        }
        if (add_assistant)
            out_str(&o, LLAMA3_HDR_START "assistant" LLAMA3_HDR_END "\n\n");
    }
    if (o.len > INT_MAX)
        return -EOVERFLOW;
    if (cap > 0)
        buf[o.len < o.cap ? o.len : o.cap] = '\0';
    return (int)o.len;
}
