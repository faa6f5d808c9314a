#!/usr/bin/env python3
"""Adds the python sentencepiece and tokenizers ids of the NFKC test texts.

Reads models/testdata/golden/tokenizers_nfkc.json (texts whose NFKC /
nmt_nfkc form is documented), encodes each raw text with the committed test
tokenizers, and writes the file again with "bpe" (the nmt_nfkc SentencePiece
BPE of models/testdata/nemo), "unigram" (the identity-normalised unigram of
models/testdata/spm) and "tokenizer_json" (models/testdata/parakeet, the
transformers conversion of the BPE) ids, plus the packages' versions.

Usage (repository root, needs sentencepiece and tokenizers):
  python3 scripts/golden/tokenizer_nfkc.py [--out FILE]
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TD = os.path.join(ROOT, "models", "testdata")
GOLD = os.path.join(TD, "golden", "tokenizers_nfkc.json")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=GOLD, help="where to write the file (default: in place)")
    args = ap.parse_args()
    import sentencepiece as spm
    import tokenizers

    with open(GOLD, encoding="utf-8") as f:
        g = json.load(f)
    raw = [t["raw"] for t in g["texts"]]
    bpe = spm.SentencePieceProcessor(model_file=os.path.join(TD, "nemo", "a1b2c3d4e5f64789abcdef0123456789_tokenizer.model"))
    uni = spm.SentencePieceProcessor(model_file=os.path.join(TD, "spm", "unigram.model"))
    tj = tokenizers.Tokenizer.from_file(os.path.join(TD, "parakeet", "tokenizer.json"))
    g["bpe"] = {"ids": [bpe.encode(t) for t in raw]}
    if hasattr(bpe, "normalize"):  # sentencepiece >= 0.1.99
        g["bpe"]["normalized"] = [bpe.normalize(t) for t in raw]
    g["unigram"] = {"ids": [uni.encode(t) for t in raw]}
    g["tokenizer_json"] = {"ids": [tj.encode(t, add_special_tokens=False).ids for t in raw]}
    g["versions"] = {"sentencepiece": spm.__version__, "tokenizers": tokenizers.__version__}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(g, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for i, t in enumerate(raw):
        print(repr(t), g["bpe"]["ids"][i], g["tokenizer_json"]["ids"][i], file=sys.stderr)
    print("wrote", args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
