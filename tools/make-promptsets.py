#!/usr/bin/env python3
"""Builds the task prompt sets in profiles/tasks/ from text that Debian ships.

Every prompt comes from real text available offline on a Debian bookworm
machine; nothing is downloaded except Debian's own package metadata through
apt. The sources (see docs/prompt-sets.md for the full story):

  qa.jsonl              bsdgames quiz files (/usr/share/games/bsdgames/quiz)
  translate-en-de.jsonl gettext catalogs (.mo) in /usr/share/locale/de
  translate-en-ro.jsonl gettext catalogs (.mo) in /usr/share/locale/ro
  summarize.jsonl       Debian package long descriptions (document) and
                        their synopsis line (reference summary), from apt's
                        Translation-en index
  chat.jsonl            assistant requests built from other package
                        descriptions (disjoint from summarize's)

With --summarize-extra N it writes only profiles/eval/summarize-extra.jsonl:
N more held-out summarize prompts for a tighter evaluation (no profile part).

Prerequisites (as root):

  apt-get install bsdgames coreutils tar grep sed findutils diffutils apt \
      dpkg bash wget gettext-base gettext man-db procps psmisc xz-utils \
      libglib2.0-data systemd libpam-runtime login gnupg-l10n packagekit \
      appstream python-apt-common
  apt-get -o Acquire::Languages=en update    # fetches Translation-en

Docker-style images that exclude /usr/share/locale through dpkg path-exclude
rules need those rules removed before the install.

Usage: tools/make-promptsets.py [--out profiles/tasks] [--seed 20250101]

The output is deterministic for a given set of installed catalogs and apt
lists: every source is read in sorted order and every random choice comes
from random.Random(seed + per-task constant). Uses only the standard library.
"""

import argparse
import glob
import json
import os
import random
import re
import struct
import subprocess
import sys
import unicodedata

N_PROFILE = 200
N_HELDOUT = 80

QUIZ_DIR = "/usr/share/games/bsdgames/quiz"
LOCALE_DIR = "/usr/share/locale"
APT_LISTS = "/var/lib/apt/lists"

# gettext domains read for the translation sets, and the Debian packages
# that install them (kept in this order; the first catalog that has a
# message wins).
MO_DOMAINS = [
    ("coreutils", "coreutils"), ("tar", "tar"), ("grep", "grep"), ("sed", "sed"),
    ("findutils", "findutils"), ("diffutils", "diffutils"), ("apt", "apt"),
    ("libapt-pkg6.0", "apt"), ("dpkg", "dpkg"), ("bash", "bash"),
    ("wget", "wget"), ("gettext-runtime", "gettext-base"),
    ("gettext-tools", "gettext"), ("man-db", "man-db"), ("procps-ng", "procps"),
    ("psmisc", "psmisc"), ("xz", "xz-utils"), ("glib20", "libglib2.0-data"),
    ("systemd", "systemd"), ("Linux-PAM", "libpam-runtime"), ("shadow", "login"),
    ("gnupg2", "gnupg-l10n"), ("PackageKit", "packagekit"),
    ("appstream", "appstream"), ("python-apt", "python-apt-common"),
]

MAX_TOKENS = {"qa": 24, "translate": 96, "summarize": 48, "chat": 160}


# ---------------------------------------------------------------- helpers

def norm_ws(s):
    return " ".join(s.split())


def split_sets(items, rng, n_profile=N_PROFILE, n_heldout=N_HELDOUT):
    """Shuffles items (already deduplicated, in a deterministic order) and
    returns (profile, heldout)."""
    items = list(items)
    rng.shuffle(items)
    need = n_profile + n_heldout
    if len(items) < need:
        sys.exit(f"make-promptsets: only {len(items)} items, need {need}")
    return items[:n_profile], items[n_profile:need]


def records(task, prefix, profile, heldout, max_tokens):
    out = []
    for split, items in (("profile", profile), ("heldout", heldout)):
        for it in items:
            out.append((split, it))
    # Ids are numbered in file order: profile first, then held-out.
    recs = []
    for i, (split, it) in enumerate(out):
        r = {"task": task, "id": f"{prefix}-{i + 1:04d}", "split": split,
             "source": it["source"], "max_tokens": max_tokens,
             "prompt": it["prompt"], "references": it["references"]}
        recs.append(r)
    return recs


def write_jsonl(path, recs):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    size = os.path.getsize(path)
    if size >= 400 * 1024:
        sys.exit(f"make-promptsets: {path} is {size} bytes, over the 400 KB cap")
    print(f"{path}: {len(recs)} records, {size} bytes", file=sys.stderr)


# ------------------------------------------------------------ bsdgames quiz

class QuizSyntax(Exception):
    pass


def quiz_expand(s, cap=64):
    """Expands one quiz field into its accepted answers.

    The quiz(6) syntax: 'a|b' alternatives, '{x}' optional text (which may
    hold alternatives: '{-| }'), '[a|b]' a group of alternatives. Returns
    the expansions in order; the first is the canonical answer: the first
    alternative everywhere, optional parts included."""
    pos = 0

    def parse_alts(close):
        nonlocal pos
        alts = [[]]
        while pos < len(s):
            c = s[pos]
            if c == close:
                pos += 1
                return alts
            if c == "|":
                alts.append([])
                pos += 1
            elif c == "{":
                pos += 1
                inner = parse_alts("}")
                alts[-1].append(("opt", inner))
            elif c == "[":
                pos += 1
                inner = parse_alts("]")
                alts[-1].append(("grp", inner))
            elif c in "}]":
                raise QuizSyntax(s)
            elif c == "\\" and pos + 1 < len(s):
                alts[-1].append(("lit", s[pos + 1]))
                pos += 2
            else:
                alts[-1].append(("lit", c))
                pos += 1
        if close is not None:
            raise QuizSyntax(s)
        return alts

    def expand_alts(alts):
        out = []
        for seq in alts:
            for e in expand_seq(seq):
                if e not in out:
                    out.append(e)
                if len(out) >= cap:
                    return out
        return out

    def expand_seq(seq):
        acc = [""]
        for kind, val in seq:
            if kind == "lit":
                opts = [val]
            elif kind == "grp":
                opts = expand_alts(val)
            else:  # optional: included first, so the canonical form is full
                opts = expand_alts(val) + [""]
            acc = [a + o for a in acc for o in opts][:cap]
        return acc

    tree = parse_alts(None)
    return [norm_ws(e) for e in expand_alts(tree) if norm_ws(e)]


ACCENT_MARKS = {"'": "\u0301", "^": "\u0302", "~": "\u0303"}


def quiz_accents(field):
    """The quiz spells accents as alternatives: "Asunci['o|o'|o]n". Turns
    such a group into "[\u00f3|o]", so that the first spelling is the
    accented one and the plain one is still accepted."""
    def rep(m):
        alts = m.group(1).split("|")
        letters = {a.strip("'^~") for a in alts}
        marks = {c for a in alts for c in a if c in ACCENT_MARKS}
        if (len(letters) != 1 or len(marks) != 1 or any(len(a) > 2 for a in alts)
                or not next(iter(letters)).isalpha()):
            return m.group(0)
        letter = letters.pop()
        accented = unicodedata.normalize("NFC", letter + ACCENT_MARKS[marks.pop()])
        return f"[{accented}|{letter}]"
    return re.sub(r"\[([^\[\]{}]*)\]", rep, field)


def quiz_read(name):
    """Returns the records of one quiz file as lists of fields."""
    path = os.path.join(QUIZ_DIR, name)
    with open(path, encoding="latin-1") as f:
        text = f.read()
    # Accents are typed as overstrikes: "'", backspace, "o". Drop the
    # backspace; quiz_accents() turns the pair into the accented letter.
    text = text.replace("\\\n", "").replace("\b", "")
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        # ':' separates fields; '\\:' is a literal colon.
        fields, cur, i = [], "", 0
        while i < len(line):
            if line[i] == "\\" and i + 1 < len(line):
                cur += line[i:i + 2]
                i += 2
                continue
            if line[i] == ":":
                fields.append(cur)
                cur = ""
            else:
                cur += line[i]
            i += 1
        fields.append(cur)
        out.append([quiz_accents(f) for f in fields])
    return out


# "King Henry V III-i": the quiz appends act and scene to the play's name.
ACT_SCENE = re.compile(r"\s+[IVX]+-[ivx]+$")
ACT_SCENE_Q = re.compile(r"\s+[IVX]+-[ivx]+(?= says)")


def balanced(items, key, n, rng):
    """Picks n items round-robin over the groups that key() gives, so that no
    one source (103 elements give 309 questions) dominates the set."""
    groups = {}
    for it in items:
        groups.setdefault(key(it), []).append(it)
    for k in sorted(groups):
        rng.shuffle(groups[k])
    out, names = [], sorted(groups)
    while len(out) < n and names:
        for k in list(names):
            if not groups[k]:
                names.remove(k)
                continue
            out.append(groups[k].pop())
            if len(out) == n:
                break
    return out


def quiz_items():
    items = []

    def add(source, prompt, answers):
        # Keep answers that still differ after SQuAD-style normalisation
        # (quiz files list every punctuation variant of a line).
        refs, keys = [], set()
        for a in answers:
            a = ACT_SCENE.sub("", a).strip()
            key = " ".join(re.sub(r"[^\w\s]", "", a.lower()).split())
            if a and key not in keys:
                keys.add(key)
                refs.append(a)
        if refs:
            items.append({"source": "bsdgames quiz/" + source,
                          "prompt": ACT_SCENE_Q.sub("", prompt), "references": refs[:8]})

    def canon(field):
        """The subject of a question: the longest spelling ("South Georgia
        and the South Sandwich Islands", not "SGSSI"); the first on ties."""
        e = quiz_expand(field)
        return max(e, key=len) if e else ""

    def cap_words(s):
        return " ".join(w[:1].upper() + w[1:] for w in s.split())

    for name in ("africa", "america", "asia", "europe"):
        for f in quiz_read(name):
            add(name, f"What is the capital of {canon(f[0])}?", quiz_expand(f[1]))
    for f in quiz_read("province"):
        name = canon(f[0])
        q = ("What is the capital of Canada?" if name == "Canada" else
             f"What is the capital of the Canadian province of {name}?")
        add("province", q, quiz_expand(f[1]))
    for f in quiz_read("state"):
        st = canon(f[0])
        add("state", f"What is the capital of the U.S. state of {st}?", quiz_expand(f[1]))
        if f[3] != "gok":  # "god only knows"
            add("state", f"What is the state flower of {st}?", quiz_expand(f[3]))
    for f in quiz_read("elements"):
        sym, num, name = f[0], f[1], f[3]
        add("elements", f"Which chemical element has the symbol {sym}?", quiz_expand(name))
        add("elements", f"What is the atomic number of {canon(name)}?", [num])
        add("elements", f"What is the chemical symbol of {canon(name)}?", [sym])
    for f in quiz_read("pres"):
        p = canon(f[0])
        if len(f) > 3 and f[3].strip():
            add("pres", f"Who succeeded {p} as President of the United States?", quiz_expand(f[3]))
        if len(f) > 2 and f[2].strip():
            add("pres", f"Who was Vice President of the United States under {p}?", quiz_expand(f[2]))
    for f in quiz_read("sov"):
        if "Part" in f[0] or "Part" in f[2]:
            continue  # the quiz splits Henry IV like Shakespeare's plays
        add("sov", f"Who succeeded {canon(f[0])} on the English throne?", quiz_expand(f[2]))
    for f in quiz_read("inca"):
        add("inca", f"Who succeeded {cap_words(canon(f[0]))} as ruler of the Inca?",
            [cap_words(a) for a in quiz_expand(f[1])])
    for f in quiz_read("babies"):
        add("babies", f"{'An' if canon(f[0])[:1] in 'aeiou' else 'A'} {canon(f[0])} is the young of which animal?", quiz_expand(f[1]))
    for f in quiz_read("collectives"):
        add("collectives", f"What is the collective noun for a group of {canon(f[0])}?",
            quiz_expand(f[1]))
    for f in quiz_read("sexes"):
        m = canon(f[0])
        if len(m) > 1:
            add("sexes", f"What is the female counterpart of a {m}?", quiz_expand(f[1]))
    for f in quiz_read("murders"):
        add("murders", f"Who killed {canon(f[0])}?", quiz_expand(f[1]))
    for f in quiz_read("poetry"):
        if len(f) >= 4:
            add("poetry", f"Who wrote the poem \"{canon(f[2])}\"?", quiz_expand(f[3]))
            add("poetry", f"In the poem \"{canon(f[2])}\", which line follows "
                          f"\"{canon(f[0])}\"?", quiz_expand(f[1]))
    for f in quiz_read("bard"):
        if len(f) >= 4:
            line = canon(f[0])
            add("bard", f"In which play by Shakespeare is the line \"{line}\"?", quiz_expand(f[2]))
            add("bard", f"Which character in Shakespeare's {canon(f[2])} says \"{line}\"?",
                quiz_expand(f[3]))
    for f in quiz_read("latin"):
        add("latin", f"What does the Latin word \"{canon(f[0])}\" mean in English?",
            quiz_expand(f[1]))
    for f in quiz_read("flowers"):
        add("flowers", f"In the Victorian language of flowers, what does "
                       f"\"{canon(f[0]).lower()}\" mean?", quiz_expand(f[1]))
    for f in quiz_read("midearth"):
        add("midearth", f"In Tolkien's Middle-earth, what is the capital of {canon(f[0])}?",
            quiz_expand(f[1]))
    for f in quiz_read("posneg"):
        add("posneg", f"What is the opposite of \"{canon(f[0])}\"?", quiz_expand(f[1]))
    for f in quiz_read("areas"):
        if f[1].strip():
            add("areas", f"Which U.S. state or Canadian province has the telephone "
                         f"area code {f[0]}?", quiz_expand(f[1]))
    for f in quiz_read("seq-easy") + quiz_read("seq-hard"):
        nxt = quiz_expand(f[1])
        # Drop the "(integers)" style hints from the answers.
        nums = []
        for a in nxt:
            a = re.sub(r"\(.*\)", "", a).strip()
            if a and a not in nums:
                nums.append(a)
        add("seq", f"What number comes next in the sequence {f[0].replace(',', ', ')}?", nums)

    # One question per prompt text (Armenia is in both asia and europe).
    seen, uniq = set(), []
    for it in items:
        if it["prompt"] not in seen:
            seen.add(it["prompt"])
            uniq.append(it)
    return uniq


# ------------------------------------------------------ gettext catalogs

def read_mo(path):
    """Reads a GNU .mo file: returns {msgid: msgstr} for singular messages."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 28:
        raise ValueError(f"{path}: too short for a .mo file")
    magic = struct.unpack("<I", data[:4])[0]
    if magic == 0x950412DE:
        e = "<"
    elif magic == 0xDE120495:
        e = ">"
    else:
        raise ValueError(f"{path}: not a .mo file")
    _rev, n, o_orig, o_trans = struct.unpack(e + "4I", data[4:20])
    out = {}
    for i in range(n):
        ml, mo = struct.unpack(e + "2I", data[o_orig + 8 * i:o_orig + 8 * i + 8])
        tl, to = struct.unpack(e + "2I", data[o_trans + 8 * i:o_trans + 8 * i + 8])
        mid, tr = data[mo:mo + ml], data[to:to + tl]
        if b"\x00" in mid:   # plural forms: skip
            continue
        if b"\x04" in mid:   # msgctxt EOT msgid
            mid = mid.split(b"\x04", 1)[1]
        try:
            out[mid.decode("utf-8")] = tr.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return out


FORMAT_HEAVY = re.compile(r"[%{}<>$\\|_=@#]|--|\.\.\.|https?:|\s-\w|^\W")


def good_sentence(s):
    """A real sentence of 5-30 words, not a format string or a help-table row."""
    if "\n" in s or "\t" in s or "  " in s:
        return False
    words = s.split()
    if not 5 <= len(words) <= 30:
        return False
    if FORMAT_HEAVY.search(s) or not re.match(r"[A-Z]", s):
        return False
    letters = sum(c.isalpha() for c in s)
    visible = sum(not c.isspace() for c in s)
    return letters >= 0.8 * visible


def translation_items(lang, lang_name):
    pairs = {}
    origin = {}
    for dom, pkg in MO_DOMAINS:
        path = os.path.join(LOCALE_DIR, lang, "LC_MESSAGES", dom + ".mo")
        if not os.path.exists(path):
            print(f"make-promptsets: note: {path} missing (package {pkg})", file=sys.stderr)
            continue
        cat = read_mo(path)
        for src in sorted(cat):
            tgt = cat[src].strip()
            src = src.strip()
            if not src or src in pairs or not good_sentence(src):
                continue
            if not tgt or "\n" in tgt or "%" in tgt or tgt == src:
                continue
            if tgt.endswith(":") and not src.endswith(":"):
                continue  # the English was cut before a value the program adds
            if len(tgt.split()) > 45:
                continue
            pairs[src] = norm_ws(tgt)
            origin[src] = f"{pkg} {dom}.mo ({lang})"
    # Case-insensitive dedupe: "File not found" and "FILE NOT FOUND".
    seen, items = set(), []
    for src in sorted(pairs):
        key = src.lower().rstrip(".!")
        if key in seen:
            continue
        seen.add(key)
        items.append({"source": "gettext " + origin[src],
                      "prompt": f"Translate to {lang_name}: {src}",
                      "references": [pairs[src]]})
    return items


# ------------------------------------------------- package descriptions

def apt_translation_files():
    files = sorted(glob.glob(os.path.join(APT_LISTS, "*_i18n_Translation-en*")))
    files = [f for f in files if not f.endswith(".diff")]
    if not files:
        sys.exit("make-promptsets: no Translation-en in /var/lib/apt/lists; run "
                 "'apt-get -o Acquire::Languages=en update' first")
    return files


def read_descriptions():
    """Returns {package: (synopsis, [paragraphs])} from apt's Translation-en."""
    descs = {}
    for path in apt_translation_files():
        text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", path],
                              check=True, capture_output=True).stdout.decode("utf-8", "replace")
        for stanza in text.split("\n\n"):
            m_pkg = re.search(r"^Package: (\S+)$", stanza, re.M)
            m_desc = re.search(r"^Description-en: (.*)\n((?: .*(?:\n|$))*)", stanza, re.M)
            if not m_pkg or not m_desc:
                continue
            paras, cur = [], []
            for line in m_desc.group(2).splitlines():
                if line.strip() == ".":
                    if cur:
                        paras.append(cur)
                    cur = []
                else:
                    cur.append(line[1:] if line.startswith(" ") else line)
            if cur:
                paras.append(cur)
            pkg = m_pkg.group(1)
            if pkg not in descs:  # the first list (bookworm main) wins
                descs[pkg] = (m_desc.group(1).strip(), paras)
    return descs


def para_text(lines):
    """A paragraph: flowing text joined, list items ("*", "-", "+") kept on
    their own lines."""
    out = []
    for line in lines:
        s = line.strip()
        if re.match(r"[*+-] ", s) or not out:
            out.append(norm_ws(s))
        else:
            out[-1] += " " + norm_ws(s)
    return "\n".join(out)


SKIP_PKG = re.compile(r"(-dev|-doc|-dbg|-dbgsym|-data|-common|-examples|-tests?|"
                      r"-l10n|-locales?|-dbgsym|-i18n)$|^(lib|fonts-|node-|golang-|"
                      r"r-cran-|r-bioc-|librust-|libghc-|ruby-|php-|texlive-|"
                      r"linux-|python3?-|firmware-|xfonts-|hunspell-|aspell-|myspell-|"
                      r"hyphen-|mythes-|task-|printer-driver-)")
BOILERPLATE = re.compile(r"transitional|dummy package|metapackage|meta-package|"
                         r"debug symbols|this package contains the|this package provides the",
                         re.I)


def description_pool(descs):
    """Candidate packages: stand-alone programs with a real long description."""
    pool = []
    seen_text, seen_syn = set(), set()
    for pkg in sorted(descs):
        syn, paras = descs[pkg]
        if SKIP_PKG.search(pkg) or not paras:
            continue
        doc = "\n\n".join(para_text(p) for p in paras)
        flat = norm_ws(doc)
        words = len(flat.split())
        if not 60 <= words <= 200:
            continue
        if BOILERPLATE.search(flat) or BOILERPLATE.search(syn):
            continue
        if "http" in flat or "\t" in doc or len(syn.split()) < 3:
            continue
        # Families of packages share a description: keep the first.
        key_text = flat[:80].lower()
        key_syn = re.sub(r"\W+", " ", syn.lower()).strip()
        if key_text in seen_text or key_syn in seen_syn:
            continue
        seen_text.add(key_text)
        seen_syn.add(key_syn)
        pool.append((pkg, syn, doc))
    return pool


def summarize_item(pkg, syn, doc):
    return {"source": f"debian package description: {pkg}",
            "prompt": "Summarize the following software description in one short line.\n\n" + doc,
            "references": [syn]}


def first_sentences(text, n):
    flat = norm_ws(text)
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", flat)
    return " ".join(parts[:n])


def chat_item(pkg, syn, doc, rng):
    paras = doc.split("\n\n")
    lead = paras[0]
    bullets = [l[2:] for p in paras for l in p.split("\n") if re.match(r"[*+-] ", l)]
    syn_lc = syn[:1].lower() + syn[1:]
    choices = [
        (f"What is {pkg} and what would I use it for?",
         f"{pkg} is {syn_lc}. " + first_sentences(lead, 2)),
        (f"I am looking for {syn_lc}. Which Debian package could I install?",
         f"You could install {pkg}. " + first_sentences(lead, 2)),
        (f"Write a short paragraph that introduces {pkg} ({syn_lc}) to a new user.",
         first_sentences(doc, 4)),
        (f"Explain in plain words what this software does: {syn}.",
         first_sentences(lead, 3)),
    ]
    if len(bullets) >= 3:
        choices.append((f"List three things that {pkg} can do.",
                        "\n".join("- " + b for b in bullets[:3])))
    prompt, ref = choices[rng.randrange(len(choices))]
    return {"source": f"debian package description: {pkg}", "prompt": prompt,
            "references": [ref]}


def write_summarize_extra(args):
    """More held-out summarize prompts for a tighter evaluation: the same
    pool and order as summarize.jsonl, after the packages that it and
    chat.jsonl use, and none of those (checked against the files in --out,
    which may come from older apt lists)."""
    used = set()
    for name in ("summarize.jsonl", "chat.jsonl"):
        with open(os.path.join(args.out, name), encoding="utf-8") as f:
            for line in f:
                used.add(json.loads(line)["source"])
    pool = description_pool(read_descriptions())
    rng = random.Random(args.seed + 4)
    rng.shuffle(pool)
    items = [summarize_item(*p) for p in pool[2 * (N_PROFILE + N_HELDOUT):]]
    items = [it for it in items if it["source"] not in used][:args.summarize_extra]
    if len(items) < args.summarize_extra:
        sys.exit(f"make-promptsets: only {len(items)} more package descriptions")
    out = os.path.join(args.out, "..", "eval")
    os.makedirs(out, exist_ok=True)
    write_jsonl(os.path.join(out, "summarize-extra.jsonl"),
                records("summarize", "sumx", [], items, MAX_TOKENS["summarize"]))


# ------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..",
                                                  "profiles", "tasks"))
    ap.add_argument("--seed", type=int, default=20250101)
    ap.add_argument("--summarize-extra", type=int, default=0, metavar="N",
                    help="write only ../eval/summarize-extra.jsonl (beside --out): N more "
                         "held-out summarize prompts, packages that no set in --out uses")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.summarize_extra:
        write_summarize_extra(args)
        return

    rng = random.Random(args.seed + 1)
    qa = balanced(quiz_items(), lambda it: it["source"], N_PROFILE + N_HELDOUT, rng)
    prof, held = split_sets(qa, rng)
    write_jsonl(os.path.join(args.out, "qa.jsonl"),
                records("qa", "qa", prof, held, MAX_TOKENS["qa"]))

    for lang, name, k in (("de", "German", 2), ("ro", "Romanian", 3)):
        prof, held = split_sets(translation_items(lang, name), random.Random(args.seed + k))
        write_jsonl(os.path.join(args.out, f"translate-en-{lang}.jsonl"),
                    records(f"translate-en-{lang}", f"en{lang}", prof, held,
                            MAX_TOKENS["translate"]))

    pool = description_pool(read_descriptions())
    rng = random.Random(args.seed + 4)
    rng.shuffle(pool)
    n = N_PROFILE + N_HELDOUT
    if len(pool) < 2 * n:
        sys.exit(f"make-promptsets: only {len(pool)} package descriptions")
    summ, chat = pool[:n], pool[n:2 * n]  # disjoint packages
    summ_items = [summarize_item(*p) for p in summ]
    write_jsonl(os.path.join(args.out, "summarize.jsonl"),
                records("summarize", "sum", summ_items[:N_PROFILE], summ_items[N_PROFILE:],
                        MAX_TOKENS["summarize"]))
    crng = random.Random(args.seed + 5)
    chat_items = [chat_item(*p, crng) for p in chat]
    write_jsonl(os.path.join(args.out, "chat.jsonl"),
                records("chat", "chat", chat_items[:N_PROFILE], chat_items[N_PROFILE:],
                        MAX_TOKENS["chat"]))


if __name__ == "__main__":
    main()
