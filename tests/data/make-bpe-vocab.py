#!/usr/bin/env python3
"""Writes a vocabulary-only GGUF: the tokenizer.* keys of SRC (a model, e.g.
what `si-synth --shape tiny-llama3 --seed 7` writes) with tokenizer.ggml.pre
set to PRE, for testing a pre-tokenizer against llama.cpp without a model of
that family. Needs the PyPI package gguf:

    build/tools/si-synth --shape tiny-llama3 --seed 7 --out /tmp/l3.gguf
    python3 tests/data/make-bpe-vocab.py /tmp/l3.gguf tekken tests/data/vocab-bpe-tekken.gguf
"""
import sys

import gguf

src, pre, out = sys.argv[1:4]
r = gguf.GGUFReader(src)
w = gguf.GGUFWriter(out, "llama")
w.add_name("bpe-%s-test-vocab" % pre)
# the shape keys llama.cpp reads even for a vocabulary-only load
w.add_context_length(512); w.add_embedding_length(64); w.add_block_count(1)
w.add_feed_forward_length(128); w.add_head_count(4); w.add_head_count_kv(4)
w.add_rope_dimension_count(16); w.add_layer_norm_rms_eps(1e-5)
for name, f in r.fields.items():
    if not name.startswith("tokenizer.") or name == "tokenizer.chat_template":
        continue
    if name == "tokenizer.ggml.pre":
        w.add_string(name, pre)
        continue
    t = f.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        et = f.types[1]
        if et == gguf.GGUFValueType.STRING:
            w.add_array(name, [bytes(f.parts[i]) for i in f.data])
        else:
            w.add_array(name, [f.parts[i].tolist()[0] for i in f.data])
    elif t == gguf.GGUFValueType.STRING:
        w.add_string(name, bytes(f.parts[f.data[0]]).decode("utf-8"))
    elif t == gguf.GGUFValueType.BOOL:
        w.add_bool(name, bool(f.parts[f.data[0]][0]))
    else:
        w.add_uint32(name, int(f.parts[f.data[0]][0]))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print("%s: pre %s" % (out, pre), file=sys.stderr)
