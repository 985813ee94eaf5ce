#!/usr/bin/env python3
"""Our pre-tokenizer splits (PCRE2) against Python's `regex` module running
the patterns as published in the models' tokenizer.json files (tekken and
gpt-4o: as llama.cpp rewrites them, see below).

Usage: test-pretok.py PRETOK_DUMP CORPUS

For each pre-tokenizer, the corpus cases plus a seeded set of random strings
(mixing the character classes the patterns distinguish) go through
pretok-dump; every case's pieces must equal the reference split. Exit 0 pass,
1 fail, 77 skip (no `regex` module).
"""
import os
import random
import subprocess
import sys
import tempfile

try:
    import regex
except ImportError:
    print("SKIP: python3-regex is not installed")
    sys.exit(77)

# Hugging Face tokenizer.json patterns, verbatim (note the case-insensitive
# contraction group of llama-bpe and qwen2; our engine spells it out in ASCII).
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
          r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
         r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
# Qwen3.5's: Qwen2's with combining marks inside words
QWEN35 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"""
          r"""| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
DIGITS = r"""\p{N}"""  # SmolLM2: Digits(individual_digits=true) before ByteLevel
# Mistral Nemo ("tekken") and GPT-4o ("gpt-4o"): words split where the case
# changes. These two as llama.cpp runs them, not verbatim: an "upper" letter
# is any letter but a-z, a "lower" one any letter but A-Z, marks are no
# letters (its regex engine has no \p{Lu}; engine/vocab.c says more). The
# llama.cpp rows of tests/data/tokenizer-bpe-{tekken,gpt4o}.tsv pin that down.
UPPER = r"""(?:(?=\p{L})[^a-z])"""
LOWER = r"""(?:(?=\p{L})[^A-Z])"""
CONTRACTION = r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"""
TEKKEN = (r"""[^\r\n\p{L}\p{N}]?""" + UPPER + "*" + LOWER + "+"
          r"""|[^\r\n\p{L}\p{N}]?""" + UPPER + "+" + LOWER + "*"
          r"""|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
GPT4O = (r"""[^\r\n\p{L}\p{N}]?""" + UPPER + "*" + LOWER + "+" + CONTRACTION + "?"
         r"""|[^\r\n\p{L}\p{N}]?""" + UPPER + "+" + LOWER + "*" + CONTRACTION + "?"
         r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# Each pre-tokenizer is a sequence of splits; a split keeps both the matches
# and the text between them (HF "Isolated" behaviour), and the next split
# works inside each piece.
PRETOKENIZERS = {
    "gpt2": [GPT2],
    "smollm": [DIGITS, GPT2],
    "llama-bpe": [LLAMA3],
    "qwen2": [QWEN2],
    "qwen35": [QWEN35],
    "tekken": [TEKKEN],
    "gpt-4o": [GPT4O],
    # names llama.cpp gives the same patterns
    "phi-2": [GPT2],
    "falcon3": [LLAMA3],
    "glm4": [LLAMA3],
    "deepseek-r1-qwen": [QWEN2],
    "llama4": [GPT4O],
    # Gemma 4's: llama.cpp runs BPE over whole lines, cut from runs of
    # newlines (engine/vocab.c)
    "gemma4": [r"""[^\n]+|[\n]+"""],
}


def split_keep(pattern, text):
    out, pos = [], 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            out.append(text[pos:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def reference(patterns, text):
    pieces = [text] if text else []
    for p in patterns:
        pieces = [q for piece in pieces for q in split_keep(p, piece)]
    return pieces


def unescape(line):
    out, i = bytearray(), 0
    b = line.encode("utf-8")
    while i < len(b):
        c = b[i]
        if c != 0x5C:
            out.append(c)
            i += 1
            continue
        e = chr(b[i + 1])
        if e == "n":
            out.append(10)
        elif e == "r":
            out.append(13)
        elif e == "t":
            out.append(9)
        elif e == "\\":
            out.append(0x5C)
        elif e == "x":
            out.append(int(b[i + 2:i + 4], 16))
            i += 2
        else:
            raise ValueError("bad escape in %r" % line)
        i += 2
    return bytes(out)


def escape(s):
    out = []
    for i, ch in enumerate(s):
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or o == 0x7F or (i == 0 and ch == "#"):  # a leading '#' would be a comment
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    return "".join(out)


# Characters the patterns treat differently: letters (ASCII, accented, CJK,
# Arabic), combining marks, digits of several scripts, other numbers,
# whitespace of several kinds, newlines, apostrophes and contraction letters,
# punctuation, symbols and emoji (with ZWJ and variation selectors).
ALPHABET = (
    list("abcdeSTtRrVvMmLlDdZ") + list("éÅßñøçæ") + list("你好世界カナ") + list("مرحبا") +
    ["\u01c5", "\u02b0", "\u00c9"] +  # titlecase Dž, modifier letter ʰ, É (tekken's classes)
    ["\u0301", "\u0308", "\u093e", "\u094d"] +
    list("0123456789") + ["\u0663", "\u00b2", "\u00bd", "\u216b", "\u2460"] +
    [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u000b", "\u000c"] +
    ["'", "'", "'s", "'T", "'re", "'VE", "'m", "'ll", "'D", "\u2019"] +
    list(".,;:!?-_()[]{}<>/\\\"#$%&*+=@^`|~") +
    ["\U0001F999", "\U0001F468\u200D\U0001F469", "\u2764\uFE0F", "\U0001F44D\U0001F3FD", "\u20ac", "\u2211"]
)


def random_cases(seed, n):
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        k = rng.randint(1, 40)
        cases.append("".join(rng.choice(ALPHABET) for _ in range(k)))
    return cases


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 1
    dump, corpus = sys.argv[1], sys.argv[2]

    texts = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue
            raw = unescape(line)
            try:
                texts.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                # Malformed input is replaced by U+FFFD before splitting, with
                # llama.cpp's per-byte rule, not Python's: covered by the
                # tokenizer test instead.
                continue
    texts += random_cases(20241129, 1500)

    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as tf:
        for t in texts:
            tf.write(escape(t) + "\n")
        cases_path = tf.name

    failures = 0
    try:
        for name, patterns in PRETOKENIZERS.items():
            compiled = [regex.compile(p) for p in patterns]
            res = subprocess.run([dump, name, cases_path], capture_output=True)
            if res.returncode != 0:
                print("FAIL: %s %s exited %d: %s" % (dump, name, res.returncode, res.stderr.decode(errors="replace")))
                failures += 1
                continue
            lines = res.stdout.decode("ascii").split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if len(lines) != len(texts):
                print("FAIL: %s: %d output lines for %d cases" % (name, len(lines), len(texts)))
                failures += 1
                continue
            bad = 0
            for text, line in zip(texts, lines):
                got = [bytes.fromhex(h).decode("utf-8") for h in line.split(" ") if h] if line else []
                want = reference(compiled, text)
                if got != want:
                    bad += 1
                    if bad <= 5:
                        print("FAIL: %s on %r\n  want %r\n  got  %r" % (name, text, want, got))
            print("%s: %d cases, %d mismatches" % (name, len(texts), bad))
            failures += bad
    finally:
        os.unlink(cases_path)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
