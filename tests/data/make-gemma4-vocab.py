#!/usr/bin/env python3
"""Writes tests/data/vocab-gemma4.gguf: a vocabulary-only GGUF shaped as
llama.cpp's converter writes Gemma 4's (tokenizer.ggml.model "gemma4":
BPE over raw UTF-8, spaces as U+2581, byte fallback to <0x00>..<0xFF>),
small, trained on the text of profiles/tasks/*.jsonl. The tokenizer test
loads nothing else.

Layout, after Gemma 4's own file (262144 tokens): <pad> <eos> <bos> <unk>
<mask> (ids 0-4, control), [multimodal] and a few <unusedN> (normal, as
Gemma 4 has them), the tool/turn/channel tokens (control; <|tool_call>
<tool_call|> <|tool_response> <tool_response|> <|"|> <|channel> <channel|>
user-defined, as the converter sets them), runs of 1-31 newlines, of 2-31
U+2581, some HTML tags among them <s> and </s> (normal: text, not markers),
the 256 byte tokens, the trained tokens, runs of 1-31 tabs, the image/audio/
video markers (control). Every score is -1000 (LlamaHfVocab's).

Merges: first the runs' (every split of every run, longest left part first,
as Gemma 4's file orders them), then the HTML tags' (one character at a
time), then the trained ones. Unlike Gemma 4's file, newline runs get merges
only up to four newlines: with all of them BPE rebuilds every run anyway,
and llama.cpp's rule that a word made only of newlines is one token when
the vocabulary has it would go unseen.

Trained with the PyPI package tokenizers (BPE; a Metaspace pre-tokenizer,
U+2581 for spaces, no prefix, words cut before each U+2581, so that tokens
are SentencePiece-like "\u2581word" as Gemma 4's are; each line of the
prompts and references apart), written with the PyPI package gguf.
Deterministic: running it again gives the same bytes (tokenizers 0.23.3).

    python3 tests/data/make-gemma4-vocab.py tests/data/vocab-gemma4.gguf
"""
import glob
import json
import os
import sys

import gguf
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

out = sys.argv[1]
SP = "\u2581"
here = os.path.dirname(os.path.abspath(__file__))
root = os.environ.get("SI_ROOT") or os.path.join(here, "..", "..")
lines = []
for path in sorted(glob.glob(os.path.join(root, "profiles", "tasks", "*.jsonl"))):
    for l in open(path, encoding="utf-8"):
        r = json.loads(l)
        lines += [r["prompt"]] + r.get("references", [])
text = [x for x in "\n".join(lines).split("\n") if x.strip()]

tok = Tokenizer(models.BPE(byte_fallback=True))
tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="never", split=True)
trainer = trainers.BpeTrainer(vocab_size=2600, min_frequency=2, show_progress=False,
                              max_token_length=16, limit_alphabet=200)
tok.train_from_iterator(text, trainer)
model = json.loads(tok.to_str())["model"]
trained = sorted(model["vocab"].items(), key=lambda kv: kv[1])
trained_merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1))
                  for m in model["merges"]]

T = gguf.TokenType
C, U, N, B = T.CONTROL, T.USER_DEFINED, T.NORMAL, T.BYTE
toks, types = [], []


def add(t, ty):
    toks.append(t)
    types.append(ty)


for t in ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]:
    add(t, C)
for t in ["[multimodal]", "<unused0>", "<unused1>", "<unused2>"]:
    add(t, N)
for t, ty in [("<|tool>", C), ("<tool|>", C), ("<|tool_call>", U), ("<tool_call|>", U),
              ("<|tool_response>", U), ("<tool_response|>", U), ('<|"|>', U), ("<|think|>", C),
              ("<|channel>", U), ("<channel|>", U), ("<|turn>", C), ("<turn|>", C)]:
    add(t, ty)
for k in range(1, 32):
    add("\n" * k, N)
for k in range(2, 32):
    add(SP * k, N)
TAGS = ["<table>", "<tr>", "<td>", "</table>", "<b>", "<i>", "<s>", "</b>", "</i>", "</s>",
        "<code>", "</code>"]
for t in TAGS:
    add(t, N)
for b in range(256):
    add("<0x%02X>" % b, B)
seen = set(toks)
for t, _ in trained:
    if t not in seen and not (t.startswith("<0x") and len(t) == 6):
        seen.add(t)
        add(t, N)
for k in range(1, 32):
    if "\t" * k not in seen:
        seen.add("\t" * k)
        add("\t" * k, N)

merges, pairs = [], set()


def merge(a, b):
    if (a, b) not in pairs:
        pairs.add((a, b))
        merges.append(a + " " + b)


for left in range(30, 0, -1):
    for right in range(31 - left, 0, -1):
        for ch in ("\n", SP, "\t"):
            if ch != "\n" or left + right <= 4:
                merge(ch * left, ch * right)
for t in TAGS:
    for k in range(2, len(t) + 1):
        if t[:k] not in seen:
            seen.add(t[:k])
            add(t[:k], N)
        merge(t[:k - 1], t[k - 1])
for a, b in trained_merges:
    merge(a, b)
for t in ["<|image>", "<|audio>", "<|image|>", "<|audio|>", "<image|>", "<audio|>", "<|video|>"]:
    add(t, C)
assert len(set(toks)) == len(toks)

w = gguf.GGUFWriter(out, "gemma4")
w.add_name("gemma4-test-vocab")
# the shape keys llama.cpp reads even for a vocabulary-only load
w.add_block_count(2)
w.add_context_length(512)
w.add_embedding_length(64)
w.add_feed_forward_length(128)
w.add_head_count(4)
w.add_head_count_kv(2)
w.add_key_length(16)
w.add_value_length(16)
w.add_layer_norm_rms_eps(1e-6)
w.add_sliding_window(4)
w.add_sliding_window_pattern([True, False])
w.add_tokenizer_model("gemma4")
w.add_token_list([t.encode("utf-8") for t in toks])
w.add_token_scores([-1000.0] * len(toks))
w.add_token_types(types)
w.add_token_merges(merges)
w.add_bos_token_id(2)
w.add_eos_token_id(1)
w.add_unk_token_id(3)
w.add_pad_token_id(0)
w.add_mask_token_id(4)
w.add_add_space_prefix(False)
w.add_add_bos_token(True)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"{len(toks)} tokens, {len(merges)} merges -> {out}", file=sys.stderr)
