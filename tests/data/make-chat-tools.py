#!/usr/bin/env python3
"""Writes tests/data/chat-tools-cases.h: tool-calling conversations and
what Python's jinja2 renders for them from the stored Qwen, Llama 3.2, Gemma 4,
Nemotron Nano v2 and Nemotron 3 Nano templates (tools_cases, some of Nemotron's
without tools), and plain conversations for the Llama 2, Mistral (v1, v3 and the [SYSTEM_PROMPT]
ones), Zephyr and OLMo 2 templates, Phi-3's, Phi-4-mini's, DeepSeek-R1's, Gemma's, LFM2's,
GLM-4's and ERNIE 4.5's (plain_cases, bos_token "<s>", eos_token "</s>";
LFM2's bos_token empty, as llama.cpp strips it), with
Hugging Face's tojson (json.dumps, ensure_ascii=False, keys unsorted) and
its environment (trim_blocks, lstrip_blocks), as transformers'
apply_chat_template does. tests/test-chat.c renders the same conversations
with the engine and compares bytes.

Gemma 4's cases (bos_token "<bos>") pass enable_thinking as llama.cpp does
(true, false where a case asks for no thinking: ENG_CHAT_NO_THINK), give
each call an id and each tool message the id of the call in its place (the
template names a result by its call's id; the engine, which carries no
ids, by that place), and end, where the template adds no generation
prompt after a closed turn, with llama.cpp's "<|turn>model\n". Nemotron 3
Nano's pass enable_thinking the same way, and give the template an answer
with "</think>" and no "<think>" (one as generated after the prompt's
"<think>\n") with that opening first, as the engine prints it.

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

# Nemotron Nano v2 prints a tool's "function" member, else the tool itself
TOOLS_BARE = r'''[{"name": "ping", "description": "Ping a host", "parameters": {"host": {"type": "string"}}},
 {"type": "function", "function": {"name": "noop"}}]'''
NEM = "nemotron-nano-v2"
NEM3 = "nemotron3-nano"

# Nemotron 3 Nano lists tools as XML, each value through str() (Python's:
# True, None, 1e+16, ['a', None]) or tojson: descriptions to trim, types
# that are not strings, keys its lines do not name at every level, a
# definition without "function", one whose "function" is null, parameters
# or properties that are not objects.
TOOLS_NEM3 = r'''[{"type":"function","function":{"name":"search","description":"  Find pages\n ",
  "parameters":{"type":"object","required":["q"],"additionalProperties":false,"$defs":{"a":1},
    "title":null,"properties":{
    "q":{"type":"string","description":"\u3000query\u00a0","minLength":1,"name":"ignored"},
    "mode":{"type":["string",null],"enum":["fast","d\u00e9ep",null],"default":"fast"},
    "n":{"type":"integer","description":7,"examples":[1,2.50],"nullable":true,"x":1E5},
    "raw":"not a schema","obj":{"description":{"k":"v"},"items":{"type":"string"}}}},
  "strict":true,"version":2.0,"tags":["x"]}},
 {"name":"bare","description":["a", "b'c"],"parameters":{"properties":[1]},"response":{"t":1}},
 {"type":"function","function":{"description":"no name","parameters":"none"}},
 {"type":"function","function":null},
 {"type":"function","function":{"name":"p","parameters":{"required":"q","properties":{}}}}
]'''

CALLS_ONE = [("get_weather", '{"city": "Paris", "unit":"celsius"}')]
CALLS_TWO = [("get_weather", '{ "city" : "Bucure\\u0219ti" }'), ("round", '{"x":3.0}')]
# every kind of value Qwen3.5's XML calls print (a string as it is, an
# object or array as JSON, true/false/null as Python prints them)
CALLS_THREE = [("lookup", '{"q": "a\\nb", "n": 1.50, "big": 1E5, "ok": true, "no": false, '
                          '"none": null, "l": [1, "x"], "o": {"k": {}}}')]

# Gemma 4 turns a tool's JSON schema into its own notation (format_parameters):
# nested objects and arrays, enums, nullable, a list as a type, a property
# named like a schema key (left out), keys sorted without case, a response,
# a tool without parameters and one whose parameters have no type.
TOOLS_G4 = r'''[{"type":"function","function":{"name":"search",
  "description":"Search the \"web\"\nfor pages",
  "parameters":{"type":"object","required":["query","Filters"],"properties":{
    "query":{"type":"string","description":"What to look for"},
    "mode":{"type":"string","enum":["fast","deep"],"nullable":true},
    "limit":{"type":"integer","description":"","minimum":1,"nullable":0.0},
    "Filters":{"type":"object","description":"Narrowing","required":["site"],"properties":{
      "site":{"type":"string"},"after":{"type":"string","nullable":true,"description":"ISO date"}}},
    "tags":{"type":"array","description":"Labels",
      "items":{"type":"string","enum":["a","b"],"maxItems":null}},
    "rows":{"type":"array","items":{"type":"object","required":["id"],"properties":{
      "id":{"type":"integer"},"note":{"type":["string",null]}}}},
    "extra":{"type":"object","additionalProperties":{"type":"number"}},
    "anything":{"description":"no type"},"other":{"description":["don't", "x\\y"],"type":"string"},
    "flags":{"type":"ARRAY","items":{"type":["boolean",null],"required":"xy",
      "default":[true,{"B":1,"a":"\u00e9"}]}},
    "type":{"type":"string"},
    "Zeta":{"type":"number","nullable":false}}},
  "response":{"description":"The pages","type":"object"}}},
 {"type":"function","function":{"name":"noop"}},
 {"type":"function","function":{"name":"ping","description":"Ping","parameters":{"properties":{
   "host":{"type":"string"}}},"response":{"type":"string"}}}
]'''
# Gemma 4's call notation: values of every kind, keys sorted without case
CALLS_G4 = [("search", '{"query": "a <b>\\n\\"c\\"", "limit": 10, "mode": null, '
                        '"Filters": {"site": "x.org", "After": "2024"}, "tags": ["a", "b"], '
                        '"ratio": 1.50, "big": 1E5, "ok": true, "no": false, '
                        '"rows": [{"id": 1, "note": null}], "empty": {}, "none": []}')]


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
    # (a sixth field: True for ENG_CHAT_NO_THINK)
    ("gemma4_user", "gemma4", None, [("user", " Hi \n", None)], True),
    ("gemma4_user_nothink", "gemma4", None, [("user", " Hi \n", None)], True, True),
    ("gemma4_system_turns", "gemma4", None,
     [("system", " Be brief. ", None), ("user", "a", None),
      ("assistant", "<|channel>thought\nr<channel|> b \n", None), ("user", "c", None)], True, True),
    ("gemma4_answers", "gemma4", None,
     [("system", "S", None), ("user", "a", None),
      ("assistant", "x<|channel>y<channel|>z<channel|> w<|channel>v", None),
      ("user", "\u3000c\u00a0", None),
      ("assistant", "\u2028done\u205f", None)], False),
    ("gemma4_odd_roles", "gemma4", None,
     [("user", "a", None), ("assistant", "b", None), ("assistant", "c", None), ("tool", "t", None),
      ("user", "d", None), ("system", " late ", None), ("developer", "dev", None),
      ("tool", "u", None)],
     True),
    ("gemma4_developer", "gemma4", None, [("developer", " D ", None), ("user", "u", None)], True,
     True),
    ("gemma4_empty_system", "gemma4", None, [("system", "", None), ("user", "u", None)], True,
     True),
    ("gemma4_empty_tools", "gemma4", "[]", [("user", "Hi", None)], True, True),
    ("gemma4_tools_user", "gemma4", TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("gemma4_tools_system", "gemma4", TOOLS,
     [("system", "You are terse.", None), ("user", "Weather?", None)], True, True),
    ("gemma4_tools_schemas", "gemma4", TOOLS_G4, [("user", "Find it.", None)], True, True),
    ("gemma4_history", "gemma4", TOOLS, history(""), True),
    ("gemma4_history_reasoning", "gemma4", TOOLS,
     history("<|channel>thought\nTwo cities.<channel|>"), True, True),
    ("gemma4_call_values", "gemma4", TOOLS_G4,
     [("user", "Find it.", None), ("assistant", "", CALLS_G4), ("tool", '{"n": 3}', None)], True),
    ("gemma4_call_types", "gemma4", None,
     [("user", "Weather?", None), ("assistant", "", CALLS_THREE), ("tool", "22", None),
      ("assistant", "22 degrees.", None)], False),
    ("gemma4_calls_unanswered", "gemma4", None,
     [("user", "U", None), ("assistant", "Checking.", CALLS_ONE), ("user", "never mind", None)],
     True),
    ("gemma4_calls_last", "gemma4", None, [("user", "U", None), ("assistant", "", CALLS_TWO)],
     True),
    # Nemotron Nano v2 (its sixth field: ENG_CHAT_NO_THINK, rendered from
    # the template with thinking starting off: see render())
    ("nemotron_user", NEM, None, [("user", "Hello", None)], True),
    ("nemotron_user_nothink", NEM, None, [("user", "Hello", None)], True, True),
    ("nemotron_switches", NEM, None,
     [("system", " Be brief. /no_think\n", None), ("user", " a\n", None),
      ("assistant", "r</think> b </think>c", None), ("user", "c /think", None)], True),
    ("nemotron_system_off", NEM, None,
     [("system", "/no_think", None), ("user", "a", None),
      ("assistant", "<think>\nx\n</think>\n\nb", None), ("user", "c", None)], True),
    ("nemotron_flag_overridden", NEM, None, [("system", "S /think", None), ("user", "a", None)], True,
     True),
    ("nemotron_user_switch_nothink", NEM, None,
     [("user", "a /no_think", None), ("assistant", "b", None), ("user", "/no_/thinkthink c", None)],
     True),
    ("nemotron_turns_no_prompt", NEM, None,
     [("user", "a", None), ("assistant", " b\n", None), ("user", "c", None), ("assistant", "d ", None)],
     False),
    ("nemotron_prefill", NEM, None, [("user", "a", None), ("assistant", "  partial", None)], True),
    ("nemotron_last_answer_nothink", NEM, None,
     [("system", "/no_think", None), ("user", "a", None), ("assistant", "done", None)], False),
    ("nemotron_blank_last_answer", NEM, None, [("user", "a", None), ("assistant", " \n", None)], False),
    ("nemotron_roles", NEM, None,
     [("system", "S", None), ("user", "a", None), ("system", "late /no_think", None),
      ("developer", "d", None), ("tool", "r1", None), ("tool", "\u00e9\n2", None),
      ("user", "\u3000u\u00a0", None), ("tool", " t ", None)], True),
    ("nemotron_empty_system", NEM, None, [("system", "  ", None), ("user", "Hi", None)], True),
    ("nemotron_tools_user", NEM, TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("nemotron_tools_system", NEM, TOOLS_BARE,
     [("system", "You are terse. /no_think", None), ("user", "Weather?", None)], True),
    ("nemotron_tools_blank_system", NEM, TOOLS, [("system", " /think ", None), ("user", "Weather?", None)],
     True, True),
    ("nemotron_history", NEM, TOOLS, history("<think>\nTwo cities.\n</think>\n\n"), True),
    ("nemotron_history_no_prompt", NEM, TOOLS, history("Checking both."), False),
    ("nemotron_calls_last", NEM, None, [("user", "U", None), ("assistant", " Checking.", CALLS_ONE)],
     False),
    ("nemotron_calls_last_empty", NEM, None, [("user", "U", None), ("assistant", "", CALLS_TWO)], False),
    ("nemotron_calls_last_prompt", NEM, None, [("user", "U", None), ("assistant", "x", CALLS_TWO)], True),
    # Nemotron 3 Nano (its sixth field: ENG_CHAT_NO_THINK, enable_thinking
    # false, as llama.cpp passes it; true otherwise)
    ("nem3_user", NEM3, None, [("user", "Hello", None)], True),
    ("nem3_user_nothink", NEM3, None, [("user", "Hello", None)], True, True),
    ("nem3_system_only", NEM3, None, [("system", " S\n", None)], True),
    ("nem3_empty_system", NEM3, None, [("system", "", None), ("user", "Hi", None)], False),
    ("nem3_turns", NEM3, None,
     [("system", " Be brief.\n", None), ("user", " a\n", None), ("assistant", " b \n", None),
      ("user", "c", None), ("assistant", "<think>\nr\n</think>\n x ", None), ("user", "d", None)],
     True),
    ("nem3_past_answers", NEM3, None,
     [("user", "a", None), ("assistant", "r</think> x </think>\ny ", None),
      ("assistant", "x <think> y", None), ("assistant", "<think>r</think>", None),
      ("assistant", "", None), ("assistant", " \n", None),
      ("assistant", "\u3000b\u00a0", None),
      ("assistant", "<think>a</think>b<think>c</think> d", None),
      ("user", "e", None)], True, True),
    ("nem3_answers_kept", NEM3, None,
     [("user", "a", None), ("assistant", "<think>\nr\n</think>\n\nb\n", None),
      ("assistant", " plain ", None), ("assistant", "r2</think>c", None), ("assistant", "", None),
      ("assistant", "\u2028x <think> y\u205f", None)], False),
    ("nem3_roles", NEM3, None,
     [("system", "S", None), ("user", "a", None), ("system", "late", None),
      ("developer", "d", None), ("tool", "r1", None), ("tool", "\u00e9\n2", None),
      ("user", "\u3000u\u00a0", None), ("tool", " t ", None)], True),
    ("nem3_tool_first", NEM3, None,
     [("tool", "r", None), ("tool", "s", None), ("user", "u", None), ("tool", "t", None),
      ("assistant", "v", None)], True, True),
    ("nem3_system_tool_first", NEM3, None,
     [("system", "S", None), ("tool", "r", None), ("user", "u", None)], True),
    ("nem3_tools_user", NEM3, TOOLS, [("user", "What is the weather in Paris?", None)], True),
    ("nem3_tools_system", NEM3, TOOLS_BARE,
     [("system", "You are terse.", None), ("user", "Weather?", None)], True, True),
    ("nem3_tools_empty_system", NEM3, TOOLS, [("system", "", None), ("user", "Weather?", None)],
     True),
    ("nem3_tools_schemas", NEM3, TOOLS_NEM3, [("user", "Find it.", None)], True),
    ("nem3_tools_g4", NEM3, TOOLS_G4, [("system", " ", None), ("user", "Find it.", None)], False),
    ("nem3_empty_tools", NEM3, "[]", [("user", "Hi", None)], True),
    ("nem3_history", NEM3, TOOLS, history("<think>\nTwo cities.\n</think>\n\n"), True),
    ("nem3_history_no_prompt", NEM3, TOOLS, history("Checking both."), False, True),
    ("nem3_history_open_think", NEM3, TOOLS, history(" Both <think> unclosed"), True),
    ("nem3_history_empty", NEM3, TOOLS, history(""), True),
    ("nem3_call_values", NEM3, None,
     [("user", "Weather?", None), ("assistant", "", CALLS_THREE), ("tool", "22", None),
      ("assistant", "<think>\nx\n</think>\n22 degrees.", None)], False),
    ("nem3_calls_kept", NEM3, None,
     [("user", "U", None), ("assistant", " r</think> Checking. ", CALLS_ONE),
      ("assistant", "x <think> y ", CALLS_TWO), ("assistant", "\n", CALLS_ONE)], True),
    ("nem3_after_query", NEM3, TOOLS,
     [("user", "Weather?", None),
      ("assistant", "<think>\nlook it up\n</think>\n\nChecking.", CALLS_THREE),
      ("tool", "22", None), ("assistant", "now answer\n</think>\n22 degrees.", None),
      ("system", "late", None)], True),
    ("nem3_calls_no_tools", NEM3, None,
     [("user", "U", None), ("assistant", "", CALLS_ONE), ("tool", "ok", None)], False),
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
    # llama.cpp's reference conversation (tests/test-chat-template.cpp)
    ("glm4_turns", "glm4",
     [("system", "You are a helpful assistant", None), ("user", "Hello", None),
      ("assistant", "Hi there", None), ("user", "Who are you", None),
      ("assistant", "   I am an assistant   ", None), ("user", "Another question", None)], True),
    ("glm4_turns_no_prompt", "glm4",
     [("system", "S", None), ("user", " a\n", None), ("assistant", "b", None), ("user", "c", None)],
     False),
    ("glm4_empty_and_tool", "glm4",
     [("system", "", None), ("user", "a", None), ("assistant", "", None), ("tool", "42", None),
      ("user", "", None)], True),
    # ERNIE 4.5: cls_token and sep_token left undefined, as llama.cpp does,
    # so the template's defaults print
    ("ernie_user", "ernie4.5", [("user", "Hello", None)], True),
    ("ernie_turns", "ernie4.5",
     [("system", "S", None), ("user", " a\n", None), ("assistant", " b\n", None),
      ("user", "c", None), ("tool", "42", None), ("developer", "d", None), ("user", "", None)],
     True),
    ("ernie_turns_no_prompt", "ernie4.5",
     [("user", "a", None), ("system", "late", None), ("assistant", "", None), ("user", "c", None),
      ("assistant", "d", None)], False),
]


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def render(template, tools, messages, add, no_think=False):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    if template == "mistral-small3.2":
        # a fixed date: no plain case renders its dated default system
        # prompt (test-chat.c checks it with today's); the Llama 3 ones
        # keep their fallback date
        env.globals["strftime_now"] = lambda fmt: "2000-01-01"
    env.filters["tojson"] = tojson
    with open(os.path.join(HERE, "chat-template-%s.jinja" % template)) as f:
        text = f.read()
    if template == NEM and no_think:
        # ENG_CHAT_NO_THINK: the template's thinking starts off (its
        # messages' "/think" still turns it on)
        start = "namespace(enable_thinking=true)"
        assert text.count(start) == 1
        text = text.replace(start, "namespace(enable_thinking=false)")
    t = env.from_string(text)
    gemma4 = template == "gemma4"
    msgs = []
    for k, (role, content, calls) in enumerate(messages):
        if (template == NEM3 and role == "assistant" and "</think>" in content
                and "<think>" not in content):
            # the engine's answer as generated after the prompt's "<think>\n"
            # (the reasoning the prompt opened): the turn with that opening
            content = "<think>\n" + content
        m = {"role": role, "content": content}
        if calls:
            m["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": json.loads(a)}}
                               for n, a in calls]
            for j, c in enumerate(m["tool_calls"]):
                if gemma4:
                    c["id"] = "call_%d_%d" % (k, j)
        if gemma4 and role == "tool":
            # the id of the call in this result's place among those of
            # the answer before the run of results
            a = k
            while messages[a][0] == "tool":
                a -= 1
            m["tool_call_id"] = "call_%d_%d" % (a, k - a - 1)
        msgs.append(m)
    llama3 = template.startswith(("llama3", "qwen"))
    # (LFM2's templates print bos_token first, which llama.cpp takes off
    # again: the tokenizer adds it)
    bos = ("" if template.startswith("lfm2") else "<|begin_of_text|>" if llama3
           else "<bos>" if gemma4 else "<s>")
    extra = {"enable_thinking": not no_think} if gemma4 or template == NEM3 else {}
    out = t.render(messages=msgs, tools=json.loads(tools) if tools else None,
                   add_generation_prompt=add, bos_token=bos, eos_token="</s>", **extra)
    if gemma4 and add and out.endswith("<turn|>\n"):
        out += "<|turn>model\n"  # llama.cpp's, where the template adds nothing
    return out


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
    cases = [c if len(c) == 6 else c + (False,) for c in CASES]
    for name, template, tools, messages, add, _ in cases + [(n, t, None, m, a, False)
                                                             for n, t, m, a in PLAIN_CASES]:
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
      "    bool no_think;\n} tools_cases[] = {\n")
    for name, template, tools, messages, add, no_think in cases:
        want = render(template, tools, messages, add, no_think)
        w("    {%s, %s, %s,\n     %s_msgs, %d, %s,\n     %s%s},\n" %
          (c_str(name), c_str(template), c_str(tools) if tools else "NULL", name, len(messages),
           "true" if add else "false", c_str(want), ", true" if no_think else ", false"))
    w("};\n\nstatic const struct tools_case plain_cases[] = {\n")
    for name, template, messages, add in PLAIN_CASES:
        want = render(template, None, messages, add)
        w("    {%s, %s, NULL,\n     %s_msgs, %d, %s,\n     %s, false},\n" %
          (c_str(name), c_str(template), name, len(messages), "true" if add else "false", c_str(want)))
    w("};\n")


if __name__ == "__main__":
    main()
