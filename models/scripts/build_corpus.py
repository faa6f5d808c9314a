#!/usr/bin/python3
"""build_corpus.py OUTDIR: the text side of the training data, from files any
Debian machine has (no downloads).

Writes to OUTDIR:
  natural_train.txt, natural_test.txt  natural English sentences (normalised,
      one per line), harvested from the prose of the installed manual pages,
      licence texts and Python docstrings; every word of a kept sentence is in
      the word list (so no option names or code), 4..24 words. A sentence goes
      to the test split by a hash of its text (~1.5%), so test sentences are
      never trained on.
  words_train.txt  the random-sentence vocabulary (Debian's american-english
      word list without possessives: ~64k words) minus the held-out words.
  words_heldout.txt  1500 words of that list never seen in training: they
      occur in no natural sentence and are never drawn for training sentences;
      the evaluation spells them (character-level generalisation).
"""

import glob
import gzip
import hashlib
import os
import re
import sys

import textnorm

WORDLIST = "/usr/share/dict/american-english"
BIGLIST = "/usr/share/dict/american-english-large"


def h(s: str) -> int:
    return int.from_bytes(hashlib.sha1(s.encode()).digest()[:8], "little")


_GROFF_ESC = re.compile(r"\\f[BIRP]|\\f\(..|\\\(..|\\\*\(..|\\\*.|\\[&|^e-]|\\s[-+]?\d")


def man_text(path):
    """Prose lines of a gzipped groff man page (macro lines dropped)."""
    out = []
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith((".", "'")):
                    # keep the text argument of font macros (.B word, .I word)
                    m = re.match(r"\.(?:B|I|BR|IR|RB|RI|SM)\s+(.*)", line)
                    if m:
                        out.append(m.group(1).replace('"', ""))
                    else:
                        out.append("\n")
                    continue
                out.append(_GROFF_ESC.sub("", line))
    except (OSError, EOFError):
        return ""
    return " ".join(out)


_DOCSTRING = re.compile(r'"""(.*?)"""', re.S)


def py_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "\n".join(_DOCSTRING.findall(f.read()))
    except OSError:
        return ""


def plain_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])|\n\s*\n")
_BAD = re.compile(r"[=/_<>\[\]{}\\@#$%&*|`~^+;:\"()]")


def sentences(text, known):
    for para in _SPLIT.split(text):
        s = " ".join(para.split())
        if not s or not s[0].isupper() or s[-1] not in ".!?" or _BAD.search(s):
            continue
        if re.search(r"[A-Z]{2,}", s):  # acronyms, headings, constants
            continue
        n = textnorm.normalize(s)
        words = n.split()
        if not 4 <= len(words) <= 24:
            continue
        if all(w in known for w in words):
            yield n


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    known = set(textnorm.load_wordlist(BIGLIST))
    known.update(textnorm.number_words(i) for i in range(20))
    known.update("twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion".split())
    sources = sorted(glob.glob("/usr/share/man/man[1-8]/*.gz"))
    texts = [(p, man_text) for p in sources]
    texts += [(p, plain_text) for p in sorted(glob.glob("/usr/share/common-licenses/*"))]
    texts += [(p, py_text) for p in sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))]
    seen = set()
    for path, reader in texts:
        for s in sentences(reader(path), known):
            seen.add(s)
    natural = sorted(seen)
    test = [s for s in natural if h(s) % 1000 < 15]
    train = [s for s in natural if h(s) % 1000 >= 15]

    words = [w for w in textnorm.load_wordlist(WORDLIST) if not w.endswith("'s")]
    in_natural = {w for s in natural for w in s.split()}
    candidates = sorted((w for w in words if w not in in_natural and len(w) >= 3), key=h)
    heldout = set(candidates[:1500])
    with open(os.path.join(outdir, "natural_train.txt"), "w") as f:
        f.writelines(s + "\n" for s in train)
    with open(os.path.join(outdir, "natural_test.txt"), "w") as f:
        f.writelines(s + "\n" for s in test)
    with open(os.path.join(outdir, "words_train.txt"), "w") as f:
        f.writelines(w + "\n" for w in words if w not in heldout)
    with open(os.path.join(outdir, "words_heldout.txt"), "w") as f:
        f.writelines(w + "\n" for w in sorted(heldout))
    nw = len({w for s in train for w in s.split()})
    print(f"natural sentences: {len(train)} train, {len(test)} test; distinct words in natural train: {nw}; "
          f"random vocabulary: {len(words) - len(heldout)} train words, {len(heldout)} held out")


if __name__ == "__main__":
    main()
