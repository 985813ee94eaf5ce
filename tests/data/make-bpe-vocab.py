#!/usr/bin/env python3
"""Writes a vocabulary-only GGUF: the tokenizer.* keys of SRC (a model, e.g.
what `si-synth --shape tiny-llama3 --seed 7` writes) with tokenizer.ggml.pre
set to PRE, for testing a pre-tokenizer against llama.cpp without a model of
that family. Needs the PyPI package gguf:

    build/tools/si-synth --shape tiny-llama3 --seed 7 --out /tmp/l3.gguf
    python3 tests/data/make-bpe-vocab.py /tmp/l3.gguf tekken tests/data/vocab-bpe-tekken.gguf

With `--pieces CORPUS` (several files: comma-separated; and the PyPI package regex) every piece the
published pattern of PRE cuts the corpus into becomes one token, reached by
merges appended after SRC's (left to right, one byte-level character at a
time). A tokenizer that cuts a text where the pattern does not then cannot
form those tokens, so its ids differ: with SRC's 1024 tokens alone the ids
hardly depend on the pre-tokenizer.

`--pieces-pre A,B` takes the pieces of those patterns instead of PRE's
(tokens a pre-tokenizer that does not cut where PRE's does would reach).
`--unmerged A,B,...` (corpus pieces, with --pieces) makes those tokens
without their last merge. `--specials A,B,...` appends control tokens; `--bos T`, `--eos T` (tokens
by text) and `--add-bos 0|1` set those keys. Phi-4-mini's turn tokens, its
BOS = EOS <|endoftext|> and no BOS added:

    python3 tests/data/make-bpe-vocab.py /tmp/l3.gguf gpt-4o tests/data/vocab-bpe-gpt4o.gguf \\
        --pieces tests/data/tokenizer-corpus.txt,tests/data/tokenizer-corpus-case.txt \\
        --specials '<|endoftext|>,<|system|>,<|user|>,<|assistant|>,<|end|>,<|tool|>,<|/tool|>,<|tool_call|>,<|/tool_call|>' \\
        --bos '<|endoftext|>' --eos '<|endoftext|>' --add-bos 0
"""
import sys

import gguf

# Hugging Face tokenizer.json patterns, verbatim
PATTERNS = {
    # Qwen2's, DeepSeek-R1-Distill-Qwen's name for it
    "deepseek-r1-qwen": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
                        r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "tekken": r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
              r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
              r"""|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    # cl100k's (OLMo 2's tokenizer.json; llama.cpp's DBRX type)
    "dbrx": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
            r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    # Hunyuan's dense models: three patterns in turn, as llama.cpp splits
    # (each one's matches and the text between them go to the next)
    "hunyuan-dense": [r"\p{N}{1,3}", r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                      r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
                      r"""| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""],
    # its word pattern alone: pieces that cross the CJK cut (--pieces-pre)
    "hunyuan-words": r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
                     r"""| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "gpt-4o": r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
              r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
              r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}


def byte_chars():
    """GPT-2's byte -> printable character map of byte-level BPE."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def unescape(s):
    out, i, b = bytearray(), 0, s.encode("utf-8")
    while i < len(b):
        if b[i] != 0x5C:
            out.append(b[i])
            i += 1
            continue
        n = b[i + 1:i + 2]
        if n == b"x":
            out.append(int(b[i + 2:i + 4], 16))
            i += 4
            continue
        out += {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"\\": b"\\"}[n]
        i += 2
    return bytes(out)


def split_all(pats, text):
    """The pieces of text under patterns applied in turn: each pattern's
    matches and the gaps between them go to the next one."""
    if not pats:
        return [text] if text else []
    out, pos = [], 0
    for m in pats[0].finditer(text):
        if m.start() > pos:
            out += split_all(pats[1:], text[pos:m.start()])
        if m.end() > m.start():
            out += split_all(pats[1:], m.group(0))
        pos = m.end()
    if pos < len(text):
        out += split_all(pats[1:], text[pos:])
    return out


def corpus_pieces(path, pre):
    import regex
    pats = PATTERNS[pre] if isinstance(PATTERNS[pre], list) else [PATTERNS[pre]]
    pats = [regex.compile(p) for p in pats]
    pieces = []
    lines = [l for p in path.split(",") for l in open(p, encoding="utf-8", newline="\n")]
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("#"):
            continue
        # invalid UTF-8 cannot go through the pattern; its pieces are skipped
        text = unescape(line).decode("utf-8", errors="ignore")
        pieces += [p.encode("utf-8") for p in split_all(pats, text)]
    return pieces


def main():
    args = sys.argv[1:]
    opts = {}
    for o in ("--pieces", "--specials", "--bos", "--eos", "--add-bos", "--unmerged", "--pieces-pre"):
        if o in args:
            k = args.index(o)
            opts[o] = args[k + 1]
            del args[k:k + 2]
    pieces_path = opts.get("--pieces")
    src, pre, out = args[:3]
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("bpe-%s-test-vocab" % pre)
    # the shape keys llama.cpp reads even for a vocabulary-only load
    w.add_context_length(512); w.add_embedding_length(64); w.add_block_count(1)
    w.add_feed_forward_length(128); w.add_head_count(4); w.add_head_count_kv(4)
    w.add_rope_dimension_count(16); w.add_layer_norm_rms_eps(1e-5)
    keys, arrays = [], {}  # in SRC's order
    for name, f in r.fields.items():
        if not name.startswith("tokenizer.") or name == "tokenizer.chat_template":
            continue
        t = f.types[0]
        if name == "tokenizer.ggml.pre":
            keys.append((name, w.add_string, pre))
        elif t == gguf.GGUFValueType.ARRAY:
            et = f.types[1]
            if et == gguf.GGUFValueType.STRING:
                arrays[name] = [bytes(f.parts[i]) for i in f.data]
            else:
                arrays[name] = [f.parts[i].tolist()[0] for i in f.data]
            keys.append((name, w.add_array, arrays[name]))
        elif t == gguf.GGUFValueType.STRING:
            keys.append((name, w.add_string, bytes(f.parts[f.data[0]]).decode("utf-8")))
        elif t == gguf.GGUFValueType.BOOL:
            v = bool(f.parts[f.data[0]][0])
            if name == "tokenizer.ggml.add_bos_token" and "--add-bos" in opts:
                v = opts["--add-bos"] == "1"
            keys.append((name, w.add_bool, v))
        else:
            keys.append((name, w.add_uint32, int(f.parts[f.data[0]][0])))
    if pieces_path:
        tokens, types = arrays["tokenizer.ggml.tokens"], arrays["tokenizer.ggml.token_type"]
        merges = arrays["tokenizer.ggml.merges"]
        have = set(tokens)
        have_merge = set(merges)
        bc = byte_chars()
        # pieces that become tokens without the last merge that would form
        # them: only a tokenizer that takes whole-token pieces as they are
        # (llama.cpp's ignore_merges) yields them
        unmerged = {u.encode("utf-8") for u in opts.get("--unmerged", "").split(",") if u}
        pieces = [p for name in opts.get("--pieces-pre", pre).split(",")
                  for p in corpus_pieces(pieces_path, name)]
        for p in pieces:
            chars = [bc[b] for b in p]
            if len(chars) > 24:  # long runs: their prefixes are enough
                chars = chars[:24]
            cur = chars[0]
            for c in chars[1:]:
                m = (cur + " " + c).encode("utf-8")
                cur += c
                if m not in have_merge and not (p in unmerged and len(cur) == len(chars)):
                    have_merge.add(m)
                    merges.append(m)
                if cur.encode("utf-8") not in have:
                    have.add(cur.encode("utf-8"))
                    tokens.append(cur.encode("utf-8"))
                    types.append(1)
        if "tokenizer.ggml.scores" in arrays:
            arrays["tokenizer.ggml.scores"] += [0.0] * (len(tokens) - len(arrays["tokenizer.ggml.scores"]))
        print("%d tokens, %d merges" % (len(tokens), len(merges)), file=sys.stderr)
    tokens, types = arrays["tokenizer.ggml.tokens"], arrays["tokenizer.ggml.token_type"]
    for sp in opts.get("--specials", "").split(",") if "--specials" in opts else []:
        tokens.append(sp.encode("utf-8"))
        types.append(3)  # control
    if "tokenizer.ggml.scores" in arrays:
        arrays["tokenizer.ggml.scores"] += [0.0] * (len(tokens) - len(arrays["tokenizer.ggml.scores"]))
    ids = {"--bos": "tokenizer.ggml.bos_token_id", "--eos": "tokenizer.ggml.eos_token_id"}
    for k, (name, add, v) in enumerate(keys):
        for o, key in ids.items():
            if name == key and o in opts:
                keys[k] = (name, add, tokens.index(opts[o].encode("utf-8")))
    for name, add, v in keys:
        add(name, v)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    print("%s: pre %s" % (out, pre), file=sys.stderr)


main()
