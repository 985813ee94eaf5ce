#!/usr/bin/env python3
"""Writes tests/data/chat-tools-cases.h: tool-calling conversations and
what Python's jinja2 renders for them from the stored Qwen and Llama 3.2 templates
(tools_cases), and plain conversations for the Llama 2, Mistral (v1, v3 and the [SYSTEM_PROMPT]
ones), Zephyr and OLMo 2 templates, Phi-3's, Phi-4-mini's, DeepSeek-R1's, Gemma's and LFM2's (plain_cases, bos_token "<s>", eos_token "</s>";
LFM2's bos_token empty, as llama.cpp strips it), with
Hugging Face's tojson (json.dumps, ensure_ascii=False, keys unsorted) and
its environment (trim_blocks, lstrip_blocks), as transformers'
apply_chat_template does. tests/test-chat.c renders the same conversations
with the engine and compares bytes.

    python3 tests/data/make-chat-tools.py > tests/data/chat-tools-cases.h
"""
import json
import os
import sys

import jinja2

HERE = os.path.dirname(os.path.abspath(__file__))

# Tools as a client would send them: odd whitespace, escapes that json.dumps
# writes differently (\/, \u00e9, a surrogate pair), numbers Python reprints
# (1.50, 1E5, -0, 2.5e-7, 1e16), nesting, a key order that is not sorted.
TOOLS = r'''[ {"type":"function","function":{"name":"get_weather",
  "description":"Current weather in a city\/region, \u00e9t\u00e9 or winter \ud83c\udf1e",
  "parameters":{"type":"object","required":["city"],"properties":{
    "city":{"type":"string","description":"Name, e.g. \"Paris\"\n(no country)"},
    "unit":{"type":"string","enum":["celsius","fahrenheit"],"default":null}}}}},
 {"type":"function","function":{"name":"round","parameters":{"type":"object","properties":{
   "x":{"type":"number","minimum":-0,"maximum":1E5,"multipleOf":2.5e-7,"examples":[1.50,1e16,0.0001,100.0,true,false]}}}}}
]'''

CALLS_ONE = [("get_weather", '{"city": "Paris", "unit":"celsius"}')]
CALLS_TWO = [("get_weather", '{ "city" : "Bucure\\u0219ti" }'), ("round", '{"x":3.0}')]
# every kind of value Qwen3.5's XML calls print (a string as it is, an
# object or array as JSON, true/false/null as Python prints them)
CALLS_THREE = [("lookup", '{"q": "a\\nb", "n": 1.50, "big": 1E5, "ok": true, "no": false, '
                          '"none": null, "l": [1, "x"], "o": {"k": {}}}')]


def history(first_answer):
    """Two calls answered by two results, then a turn with one call."""
    return [("user", "Weather in Paris and Bucharest?", None),
            ("assistant", first_answer, CALLS_TWO),
            ("tool", '{"temp": 21}', None),
            ("tool", "3", None),
            ("assistant", "21 degrees.", None),
            ("user", "And now?", None),
            ("assistant", "Let me look.", CALLS_ONE),
            ("tool", "22", None)]


CASES = [
    # name, template, tools (None: none), messages, add_generation_prompt
    ("qwen25_tools_user", "qwen2.5", TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("qwen25_tools_system", "qwen2.5", TOOLS,
     [("system", "You are terse.", None), ("user", "Weather?", None)], True),
    ("qwen25_history", "qwen2.5", TOOLS, history(""), True),
    ("qwen25_calls_no_tools", "qwen2.5", None,
     [("user", "U", None), ("assistant", "", CALLS_ONE), ("tool", "ok", None)], False),
    ("qwen25_empty_tools", "qwen2.5", "[]", [("user", "Hi", None)], True),
    ("qwen3_tools_user", "qwen3", TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("qwen3_tools_system", "qwen3", TOOLS,
     [("system", "You are terse.", None), ("user", "Weather?", None)], True),
    ("qwen3_history", "qwen3", TOOLS, history("<think>\nTwo cities.\n</think>\n\n"), True),
    ("qwen3_after_query", "qwen3", TOOLS,
     [("user", "Weather?", None),
      ("assistant", "<think>\nlook it up\n</think>\n\nChecking.", CALLS_ONE),
      ("tool", "22", None),
      ("assistant", "<think>\nnow answer\n</think>\n\n22 degrees.", None)], False),
    ("qwen35_tools_user", "qwen3.5", TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("qwen35_tools_system", "qwen3.5", TOOLS,
     [("system", " You are terse.\n", None), ("user", "Weather?", None)], True),
    ("qwen35_tools_empty_system", "qwen3.5", TOOLS, [("system", " ", None), ("user", "Weather?", None)],
     True),
    ("qwen35_history", "qwen3.5", TOOLS, history("<think>\nTwo cities.\n</think>\n\n"), True),
    ("qwen35_after_query", "qwen3.5", TOOLS,
     [("user", "Weather?", None),
      ("assistant", "<think>\nlook it up\n</think>\n\nChecking.", CALLS_THREE),
      ("tool", "22", None),
      ("assistant", "<think>\nnow answer\n</think>\n\n22 degrees.", None)], False),
    ("qwen35_calls_no_tools", "qwen3.5", None,
     [("user", "U", None), ("assistant", "", CALLS_ONE), ("tool", "ok", None)], False),
    ("granite40_tools_user", "granite4.0", TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("granite40_tools_system", "granite4.0", TOOLS,
     [("system", "You are terse.", None), ("user", "Weather?", None)], True),
    ("granite40_tools_empty_system", "granite4.0", TOOLS,
     [("system", "", None), ("user", "Weather?", None)], True),
    ("granite40_history", "granite4.0", TOOLS, history(""), True),
    ("granite41_history", "granite4.1", TOOLS, history("Checking both."), False),
    ("granite40_calls_no_tools", "granite4.0", None,
     [("user", "U", None), ("assistant", "", CALLS_ONE), ("tool", "ok", None)], False),
    ("lfm2_tools_user", "lfm2", TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("lfm2_tools_system", "lfm2", TOOLS, [("system", "You are terse.", None), ("user", "Weather?", None)], True),
    ("lfm2_tools_empty_system", "lfm2", TOOLS, [("system", "", None), ("user", "Weather?", None)], True),
    ("lfm2_history", "lfm2", TOOLS, history("<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>"),
     True),
    ("lfm25_tools_system", "lfm2.5", TOOLS, [("system", "You are terse.", None), ("user", "Weather?", None)],
     True),
    ("lfm25_history", "lfm2.5", TOOLS, history("<think>two</think>Checking."), False),
    ("lfm25_empty_tools", "lfm2.5", "[]", [("user", "Hi", None)], True),
    ("exaone4_tools_user", "exaone4", TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("exaone4_tools_system", "exaone4", TOOLS,
     [("system", "You are terse.", None), ("user", "Weather?", None)], True),
    ("exaone4_history", "exaone4", TOOLS, history("<think>\nTwo cities.\n</think>\n\n Both: "), True),
    ("exaone4_calls_no_tools", "exaone4", None,
     [("user", "U", None), ("assistant", "", CALLS_ONE), ("tool", "ok \"quoted\"", None)], False),
    ("llama32_tools_user", "llama3.2", TOOLS, [("user", " What is the weather in Paris? ", None)], True),
    ("llama32_tools_system", "llama3.2", TOOLS,
     [("system", "You are terse.", None), ("user", "Weather?", None), ("assistant", "Which city?", None),
      ("user", "Paris", None)], True),
    ("llama32_history", "llama3.2", TOOLS,
     [("user", "Weather in Bucharest?", None),
      ("assistant", "", [CALLS_TWO[0]]),
      ("tool", '{"temp": 21, "sky": "clear\\n"}', None),
      ("assistant", "21 degrees.", None),
      ("user", "And now?", None)], True),
    ("llama32_calls_no_tools", "llama3.2", None,
     [("user", "U", None), ("assistant", "", CALLS_ONE), ("ipython", "ok \"quoted\"", None)], False),
]


# Conversations the templates render (none of their raise_exception paths:
# test-chat.c checks what we do there by hand).
PLAIN_CASES = [
    ("llama2_user", "llama2", [("user", "Hello", None)], True),
    ("llama2_system", "llama2", [("system", "You are terse.", None), ("user", " Hi there \n", None)], True),
    ("llama2_turns", "llama2",
     [("system", " Be brief. ", None), ("user", "Hi", None), ("assistant", "  Hello!  ", None),
      ("user", "\tAnd you?\x1f", None)], True),
    ("llama2_system_blank_user", "llama2", [("system", "S", None), ("user", "  \n ", None)], True),
    ("llama2_no_system", "llama2", [("user", "a", None), ("assistant", "b", None), ("user", "c", None)], False),
    ("mistral_user", "mistral-v0.1", [("user", "Hello", None)], True),
    ("mistral_turns", "mistral-v0.1",
     [("user", " What? ", None), ("assistant", "This.", None), ("user", "Why?\n", None)], True),
    ("mixtral_turns", "mixtral",
     [("user", " What? ", None), ("assistant", "This.", None), ("user", "Why?", None)], True),
    ("zephyr_user", "zephyr", [("user", "Hello", None)], True),
    ("zephyr_system", "zephyr", [("system", "You are a pirate.", None), ("user", "Hi\n", None)], True),
    ("zephyr_turns", "zephyr",
     [("system", "S", None), ("user", "a", None), ("assistant", "b", None), ("user", "c", None)], False),
    ("zephyr_tool_last", "zephyr", [("user", "a", None), ("tool", "42", None)], True),
    ("ministral3r_user", "ministral3-reasoning", [("user", "Hello", None)], True),
    ("ministral3r_turns", "ministral3-reasoning",
     [("system", "Be brief.", None), ("user", " a\n", None), ("assistant", "[THINK]x[/THINK]b", None),
      ("user", "c", None)], True),
    ("ministral3r_tool", "ministral3-reasoning",
     [("user", "q", None), ("assistant", "calling", None), ("tool", "{\"t\": 1}", None),
      ("user", "next", None)], False),
    ("mistral_small32_turns", "mistral-small3.2",
     [("system", "S", None), ("user", "a", None), ("assistant", "b", None), ("user", "c", None)], True),
    ("granite40_user", "granite4.0", [("user", "Hello", None)], True),
    ("granite40_turns", "granite4.0",
     [("system", "S", None), ("user", "a", None), ("assistant", "b", None), ("system", "late", None),
      ("user", "c", None), ("developer", "d", None)], True),
    ("granite40_empty_system", "granite4.0", [("system", "", None), ("user", "Hi", None)], False),
    ("granite41_user", "granite4.1", [("user", "Hello", None)], True),
    ("exaone4_user", "exaone4", [("user", "Hello", None)], True),
    ("exaone4_turns", "exaone4",
     [("system", "S", None), ("user", " a\n", None), ("assistant", "<think>\nr\n</think>\n\n b \n", None),
      ("user", "c", None), ("assistant", "d", None)], False),
    ("exaone4_tool_results", "exaone4",
     [("user", "q", None), ("tool", "r1", None), ("tool", "é\n2", None), ("user", "more", None)], True),
    ("olmo2_user", "olmo2", [("user", "Hello", None)], True),
    ("olmo2_turns", "olmo2",
     [("system", "S", None), ("user", " a\n", None), ("assistant", "b", None), ("user", "c", None),
      ("assistant", "d", None)], False),
    ("olmo2_tool_last", "olmo2",
     [("user", "a", None), ("assistant", "b", None), ("tool", "42", None)], True),
    ("olmo2_answer_last", "olmo2", [("user", "a", None), ("assistant", "b", None)], True),
    ("llama2_unicode_space", "llama2",
     [("user", "\u3000\u00a0hi\u2003\u0085", None), ("assistant", "\u2028b\u205f\u200a", None),
      ("user", "\u200bzero width is no space\u00a0", None)], True),
    ("mistral3_user", "mistral-v3", [("user", "Hello", None)], True),
    ("mistral3_unicode_space", "mistral-v3",
     [("user", "a", None), ("assistant", "\u1680\u202fb\u3000", None), ("user", "c", None)], True),
    ("mistral3_turns", "mistral-v3",
     [("system", "Be brief.", None), ("user", "a", None), ("assistant", "  b\n", None), ("user", "c", None)], True),
    ("mistral3_system_dropped", "mistral-v3",
     [("system", "S", None), ("user", "a", None), ("assistant", "b", None)], False),
    ("tekken_turns", "mistral-v3-tekken",
     [("system", "Be brief.", None), ("user", "a", None), ("assistant", "  b\n", None), ("user", "c", None)], True),
    ("phi3_user", "phi3-mini", [("user", "Hello", None)], True),
    ("phi3_turns", "phi3-mini", [("user", " a ", None), ("assistant", "b\n", None), ("user", "c", None)], False),
    ("phi35_user", "phi3.5", [("user", "Hello", None)], True),
    ("phi35_empty_system", "phi3.5", [("system", "", None), ("user", "Hi", None)], True),
    ("phi35_turns", "phi3.5",
     [("system", "Be brief.", None), ("user", "a", None), ("assistant", "b", None), ("user", "c", None),
      ("tool", "t", None)], False),
    ("phi4_user", "phi4-mini", [("user", "Hello", None)], True),
    ("phi4_turns", "phi4-mini",
     [("system", "Be brief.", None), ("user", " a\n", None), ("assistant", "b", None), ("user", "c", None),
      ("tool", "{\"t\": 1}", None)], False),
    ("phi4_empty_system", "phi4-mini", [("system", "", None), ("user", "Hi", None)], True),
    ("r1_user", "deepseek-r1-distill", [("user", "Hello", None)], True),
    ("r1_turns", "deepseek-r1-distill",
     [("system", "Be brief.", None), ("user", "a", None), ("assistant", "think</think>x</think>\n\nb", None),
      ("user", "c\n", None)], True),
    ("r1_systems", "deepseek-r1-distill",
     [("system", "A", None), ("user", "x", None), ("system", "B", None), ("user", "y", None)], True),
    ("r1_tool_results", "deepseek-r1-distill",
     [("user", "q", None), ("assistant", "calling", None), ("tool", "r1", None), ("tool", "r2", None)], True),
    ("r1_tool_answer", "deepseek-r1-distill",
     [("user", "q", None), ("tool", "r", None), ("assistant", "done", None), ("user", "more", None),
      ("tool", "s", None), ("assistant", "ok", None)], False),
    ("r1v0_turns", "deepseek-r1-distill-v0",
     [("user", "a", None), ("assistant", "think</think>b", None), ("user", "c", None)], True),
    ("gemma_user", "gemma3", [("user", "Hello", None)], True),
    ("gemma_system", "gemma3", [("system", " Be brief.\n", None), ("user", " Hi \n", None)], True),
    ("gemma_turns", "gemma3",
     [("system", "S", None), ("user", "a", None), ("assistant", "  b\n", None), ("user", "c", None)], False),
    ("gemma_unicode_space", "gemma3",
     [("user", "\u3000hi\u00a0", None), ("assistant", "\u2028b\u205f", None), ("user", "\tc", None)], True),
    ("lfm2_turns", "lfm2",
     [("system", "Be brief.", None), ("user", " a\n", None), ("assistant", "<think>x</think>b", None),
      ("user", "c", None), ("tool", "{\"t\": 1}", None)], True),
    ("lfm2_empty_system", "lfm2", [("system", "", None), ("user", "Hi", None)], True),
    ("lfm25_user", "lfm2.5", [("user", "Hello", None)], True),
    ("lfm25_turns", "lfm2.5",
     [("system", "S", None), ("user", "a", None), ("assistant", "<think>r</think>\n b \n", None),
      ("user", "c", None), ("assistant", "plain\n", None), ("tool", "42", None),
      ("assistant", "<think>x</think>y</think> z", None), ("user", "d", None),
      ("assistant", "<think>last</think>\nkept ", None)], False),
    ("lfm25_empty_system", "lfm2.5", [("system", "", None), ("user", "Hi", None)], True),
    ("gemma2_user", "gemma2", [("user", " Hello\n", None)], True),
    ("gemma2_turns", "gemma2",
     [("user", "a", None), ("assistant", "  b\n", None), ("user", "c\u00a0", None)], False),
]


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def render(template, tools, messages, add):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    if template == "mistral-small3.2":
        # a fixed date: no plain case renders its dated default system
        # prompt (test-chat.c checks it with today's); the Llama 3 ones
        # keep their fallback date
        env.globals["strftime_now"] = lambda fmt: "2000-01-01"
    env.filters["tojson"] = tojson
    with open(os.path.join(HERE, "chat-template-%s.jinja" % template)) as f:
        t = env.from_string(f.read())
    msgs = []
    for role, content, calls in messages:
        m = {"role": role, "content": content}
        if calls:
            m["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": json.loads(a)}}
                               for n, a in calls]
        msgs.append(m)
    llama3 = template.startswith(("llama3", "qwen"))
    # (LFM2's templates print bos_token first, which llama.cpp takes off
    # again: the tokenizer adds it)
    bos = "" if template.startswith("lfm2") else "<|begin_of_text|>" if llama3 else "<s>"
    return t.render(messages=msgs, tools=json.loads(tools) if tools else None, add_generation_prompt=add,
                    bos_token=bos, eos_token="</s>")


def c_str(s):
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif 0x20 <= b < 0x7f:
            out.append(c)
        else:
            out.append('\\x%02x""' % b)
    return '"' + "".join(out) + '"'


def main():
    w = sys.stdout.write
    w("/* Generated by tests/data/make-chat-tools.py with jinja2 %s: do not edit. */\n\n" % jinja2.__version__)
    for name, template, tools, messages, add in CASES + [(n, t, None, m, a) for n, t, m, a in PLAIN_CASES]:
        for k, (role, content, calls) in enumerate(messages):
            if calls:
                w("static const eng_tool_call %s_calls%d[] = {\n" % (name, k))
                for n, a in calls:
                    w("    {(char *)%s, (char *)%s},\n" % (c_str(n), c_str(a)))
                w("};\n")
        w("static const eng_chat_msg %s_msgs[] = {\n" % name)
        for k, (role, content, calls) in enumerate(messages):
            if calls:
                w("    {%s, %s, %s_calls%d, %d},\n" % (c_str(role), c_str(content), name, k, len(calls)))
            else:
                w("    {%s, %s, NULL, 0},\n" % (c_str(role), c_str(content)))
        w("};\n\n")
    w("static const struct tools_case {\n    const char *name, *template, *tools;\n"
      "    const eng_chat_msg *msgs;\n    size_t n_msgs;\n    bool add;\n    const char *want;\n"
      "} tools_cases[] = {\n")
    for name, template, tools, messages, add in CASES:
        want = render(template, tools, messages, add)
        w("    {%s, %s, %s,\n     %s_msgs, %d, %s,\n     %s},\n" %
          (c_str(name), c_str(template), c_str(tools) if tools else "NULL", name, len(messages),
           "true" if add else "false", c_str(want)))
    w("};\n\nstatic const struct tools_case plain_cases[] = {\n")
    for name, template, messages, add in PLAIN_CASES:
        want = render(template, None, messages, add)
        w("    {%s, %s, NULL,\n     %s_msgs, %d, %s,\n     %s},\n" %
          (c_str(name), c_str(template), name, len(messages), "true" if add else "false", c_str(want)))
    w("};\n")


if __name__ == "__main__":
    main()
