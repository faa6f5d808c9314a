"""Text side of the edge-char-ctc model: vocabulary, normalisation, numbers.

The model's alphabet is: blank (id 0), the word delimiter "▁" (id 1), the
letters a-z (ids 2..27) and the apostrophe (id 28). Everything the model is
trained on or scored against goes through normalize(): lower case, digits
spelled out as English words, hyphens and other punctuation turned into word
breaks, and every character outside the alphabet dropped.
"""

import re

BLANK = "<blk>"
DELIM = "\u2581"  # "▁", stands for a space between words
SYMBOLS = [BLANK, DELIM] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["'"]
SYMBOL_ID = {s: i for i, s in enumerate(SYMBOLS)}

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = [(10**9, "billion"), (10**6, "million"), (1000, "thousand")]


def number_words(n: int) -> str:
    """Spell a non-negative integer below 10**12 in American English
    (no "and"): 2026 -> "two thousand twenty six"."""
    if n < 0 or n >= 10**12:
        raise ValueError(f"number_words: {n} out of range [0, 1e12)")
    if n < 20:
        return _ONES[n]
    if n < 100:
        t, o = divmod(n, 10)
        return _TENS[t] + ("" if o == 0 else " " + _ONES[o])
    if n < 1000:
        h, r = divmod(n, 100)
        return _ONES[h] + " hundred" + ("" if r == 0 else " " + number_words(r))
    for scale, name in _SCALES:
        if n >= scale:
            q, r = divmod(n, scale)
            return number_words(q) + " " + name + ("" if r == 0 else " " + number_words(r))
    raise AssertionError("unreachable")


def _spell_number(m: re.Match) -> str:
    s = m.group(0).replace(",", "")
    if len(s) > 12:  # long digit strings: read digit by digit
        return " " + " ".join(_ONES[int(c)] for c in s) + " "
    return " " + number_words(int(s)) + " "


_NUM = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|\d+")
_NOT_ALPHABET = re.compile(r"[^a-z' ]+")
_LONE_APOS = re.compile(r"(?<![a-z])'|'(?![a-z])")


def normalize(text: str) -> str:
    """Lower-case text reduced to the model's alphabet, words separated by one
    space: "In 1984, it's 3-D!" -> "in one thousand nine hundred eighty four it's three d"."""
    t = text.lower().replace("\u2019", "'")
    t = _NUM.sub(_spell_number, t)
    t = _NOT_ALPHABET.sub(" ", t)
    t = _LONE_APOS.sub(" ", t)  # quotes, not apostrophes inside words
    return " ".join(t.split())


def encode(text: str) -> list:
    """Token ids of already normalised text (words joined by DELIM)."""
    return [SYMBOL_ID[DELIM if c == " " else c] for c in text]


def decode(ids) -> str:
    """Text of a collapsed, blank-free id sequence."""
    return "".join(" " if i == 1 else SYMBOLS[i] for i in ids if i > 0).strip()


def tokens_txt() -> str:
    """The vocabulary in sherpa-onnx tokens.txt format: "symbol id" per line."""
    return "".join(f"{s} {i}\n" for i, s in enumerate(SYMBOLS))


def edit_distance(a, b) -> int:
    """Levenshtein distance between two sequences."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def load_wordlist(path: str) -> list:
    """Lower-case words of a Debian word list that are made only of a-z and an
    inner apostrophe (proper nouns, accented and odd entries dropped)."""
    ok = re.compile(r"^[a-z]+(?:'[a-z]+)?$")
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            w = line.strip()
            if ok.match(w):
                out.append(w)
    return out


if __name__ == "__main__":
    assert number_words(0) == "zero"
    assert number_words(2026) == "two thousand twenty six"
    assert number_words(1_000_001) == "one million one"
    assert normalize("In 1984, it's 3-D!") == "in one thousand nine hundred eighty four it's three d"
    assert normalize("'Quoted' words' end") == "quoted words end"
    assert normalize("1,250 people") == "one thousand two hundred fifty people"
    assert decode(encode("it's ok")) == "it's ok"
    assert edit_distance("kitten", "sitting") == 3
    print("textnorm self-test ok")
