#!/usr/bin/env python3
"""Writes tests/data/metrics-fixture.tsv: metric values computed by the
reference implementations, which tests/test-metrics.c compares evalkit with.

Needs sacrebleu (2.4) and rouge-score from PyPI (not needed to run the tests):
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install sacrebleu==2.4.3 rouge-score
    /tmp/venv/bin/python tests/data/make-metrics-fixture.py > tests/data/metrics-fixture.tsv

Cases are perturbations (dropped, shuffled, upper-cased, truncated words,
other records' references, tricky strings) of the shipped references in
profiles/tasks/, seeded. The SQuAD functions are copied from the official
SQuAD v2.0 evaluation script's normalize_answer/compute_exact/compute_f1.

Format, one case per line, fields separated by tabs, each field escaped
(\\\\ \\t \\n): "case", hypothesis, sentence BLEU (add-k 1), EM, F1,
ROUGE-L F, 13a tokens, SQuAD-normalised hypothesis, then the references.
The last line: "corpus", corpus BLEU (no smoothing) of all cases against
their last reference.
"""
import collections
import json
import os
import random
import re
import string

import sacrebleu
from rouge_score import rouge_scorer
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def normalize_answer(s):
    def remove_articles(text):
        return re.sub(re.compile(r"\b(a|an|the)\b", re.UNICODE), " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def get_tokens(s):
    return normalize_answer(s).split() if s else []


def compute_f1(a_gold, a_pred):
    gold, pred = get_tokens(a_gold), get_tokens(a_pred)
    common = collections.Counter(gold) & collections.Counter(pred)
    same = sum(common.values())
    if not gold or not pred:
        return int(gold == pred)
    if same == 0:
        return 0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def esc(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def main():
    rng = random.Random(7)
    refs = []
    for name in ("translate-en-de", "translate-en-ro", "summarize", "qa"):
        with open(os.path.join(ROOT, "profiles", "tasks", name + ".jsonl"), encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["references"] and len(r["references"][0]) < 300:
                    refs.append(r["references"])
    extra = ["The value is 3.5, not 3,5.", "Pages 10-20 &amp; more", "a-\nb and c\n",
             "  The  an a   THE.  ", "", "It's the cat's toy!",
             "\u00c9lan vital \u2014 the \u201cquoted\u201d text\u2026", "U.S.A. 1,000,000 people.",
             "foo<skipped>bar", "x&amp;lt;y", "Gr\u00f6\u00dfe \u00fcber Stra\u00dfe",
             "\u0218tiin\u021b\u0103 \u0219i tehnic\u0103", "the", "A", "don't stop-believing",
             "tab\tseparated\u00a0nbsp", "(parenthesised) [bracketed] {braced} /slashed/"]
    sc = rouge_scorer.RougeScorer(["rougeL"])
    tk = Tokenizer13a()
    cases = []
    for _ in range(240):
        rs = rng.choice(refs)
        base = rng.choice(rs)
        w = base.split()
        k = rng.randrange(10)
        if k == 0:
            hyp = base
        elif k == 1:
            hyp = " ".join(x for x in w if rng.random() > 0.3)
        elif k == 2:
            rng.shuffle(w)
            hyp = " ".join(w)
        elif k == 3:
            hyp = base.upper()
        elif k == 4:
            hyp = rng.choice(rng.choice(refs))
        elif k == 5:
            hyp = rng.choice(extra)
        elif k == 6:
            hyp = base + " " + rng.choice(extra)
        elif k == 7:
            hyp = " ".join(w[:max(1, len(w) // 2)])
        elif k == 8:
            hyp = base.replace(" ", "  ").replace(".", " .")
        else:
            hyp = "the " + base.lower() + " a"
        rl = list(rs)
        if rng.random() < 0.2:
            rl = [rng.choice(extra) or "x"] + rl
        cases.append((hyp, rl))
    for hyp, rl in cases:
        sb = sacrebleu.sentence_bleu(hyp, rl, smooth_method="add-k", smooth_value=1).score
        em = max(int(normalize_answer(r) == normalize_answer(hyp)) for r in rl)
        f1 = max(compute_f1(r, hyp) for r in rl)
        rg = max(sc.score(r, hyp)["rougeL"].fmeasure for r in rl)
        fields = ["case", esc(hyp), f"{sb:.10f}", str(em), f"{f1:.10f}", f"{rg:.10f}",
                  esc(tk(hyp.rstrip())), esc(normalize_answer(hyp))] + [esc(r) for r in rl]
        print("\t".join(fields))
    corpus = sacrebleu.corpus_bleu([h for h, _ in cases], [[rl[-1] for _, rl in cases]],
                                   smooth_method="none")
    print(f"corpus\t{corpus.score:.10f}")


if __name__ == "__main__":
    main()
