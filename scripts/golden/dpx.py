#!/usr/bin/env python3
"""Golden data for plugins/dpx.

Writes .npy files plus a cases.json manifest into OUTDIR:

  ctc_<case>_{log_probs,targets,alignment,frame_scores}.npy
      CTC forced alignment from torchaudio.functional.forced_align on the CPU
      (the reference whose tie rules plugins/dpx reproduces frame for frame).
      log_probs f32 [T, C] (without the star column), targets i64 [L],
      alignment i32 [T], frame_scores f32 [T]. A case with "star" set was run
      with an extra log-prob column of value star_logprob appended at index C;
      its targets use id C for the wildcard.
  viterbi_<case>_{emissions,transitions,priors,lengths,path,score}.npy
      max-plus HMM decoding, float32 arithmetic, ties to the lowest index.
  dtw_<case>_{cost,lengths,path,path_len,cost_total}.npy
      min-plus DTW, float32 arithmetic, backtrace ties diagonal, up, left.
  fixed_{ctc,viterbi,dtw}_<case>_*.npy
      the int32 fixed-point contracts (scale 1024 quanta per unit, per-frame
      renormalisation, saturation), from the integer loops below, on inputs
      reused from the cases above (CTC inputs from the ctc_ files in OUTDIR).

Viterbi and DTW references are the straightforward numpy loops below; they
run anywhere. The CTC part needs torchaudio (run on the GPU host); without it
the CTC cases are skipped with a message.

Usage: dpx.py OUTDIR [--only ctc,viterbi,dtw,fixed]
"""
import argparse
import json
import os
import sys

import numpy as np


def log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    y = x - m
    return (y - np.log(np.exp(y).sum(axis=axis, keepdims=True))).astype(np.float32)


def random_targets(rng, L, C, blank, repeat_p=0.1):
    """Targets in [0, C) without blank; adjacent repeats with probability repeat_p."""
    ids = [i for i in range(C) if i != blank]
    out = [int(rng.choice(ids))]
    while len(out) < L:
        if rng.random() < repeat_p:
            out.append(out[-1])
        else:
            out.append(int(rng.choice(ids)))
    return np.array(out, dtype=np.int64)


def repeats(tg):
    return int(np.sum(tg[1:] == tg[:-1])) if len(tg) > 1 else 0


def peaky(rng, T, C, tg, blank):
    """CTC-like emissions: mostly blank, one spike per target in order."""
    logits = rng.normal(0, 1, (T, C)).astype(np.float32)
    logits[:, blank] += 4.0
    pos = np.sort(rng.choice(T, size=len(tg), replace=False))
    for p, k in zip(pos, tg):
        logits[p, k] += 9.0
    return log_softmax(logits)


def ctc_cases():
    rng = np.random.default_rng(20261129)
    cases = []

    def add(name, lp, tg, blank=0, star=False, star_logprob=0.0):
        cases.append(dict(name=name, log_probs=np.ascontiguousarray(lp, dtype=np.float32),
                          targets=np.asarray(tg, dtype=np.int64), blank=blank,
                          star=star, star_logprob=star_logprob))

    for name, T, L, C in [("rand_small", 30, 8, 6), ("rand_mid", 200, 60, 32),
                          ("rand_t1500", 1500, 300, 32), ("rand_wide", 120, 25, 257)]:
        tg = random_targets(rng, L, C, 0)
        add(name, log_softmax(rng.normal(0, 2, (T, C))), tg)
    # T exactly L + R, and one frame more.
    tg = random_targets(rng, 20, 10, 0, repeat_p=0.3)
    add("tight", log_softmax(rng.normal(0, 2, (20 + repeats(tg), 10))), tg)
    tg = random_targets(rng, 20, 10, 0, repeat_p=0.3)
    add("tight_plus1", log_softmax(rng.normal(0, 2, (21 + repeats(tg), 10))), tg)
    # Repeats-heavy: runs of the same label, T barely above L + R.
    tg = random_targets(rng, 120, 5, 0, repeat_p=0.7)
    add("repeats", log_softmax(rng.normal(0, 2, (repeats(tg) + 120 + 15, 5))), tg)
    tg = np.full(12, 3, dtype=np.int64)
    add("all_same", log_softmax(rng.normal(0, 1, (40, 6))), tg)
    # Blank last.
    tg = random_targets(rng, 30, 12, 11)
    add("blank_last", log_softmax(rng.normal(0, 2, (100, 12))), tg, blank=11)
    # Peaky CTC-like emissions.
    tg = random_targets(rng, 60, 29, 0)
    add("peaky", peaky(rng, 400, 29, tg, 0), tg)
    # Exact ties: coarse values, all-equal, and a zero star column.
    tg = random_targets(rng, 20, 4, 0, repeat_p=0.2)
    add("ties_coarse", -rng.integers(1, 3, (80, 4)).astype(np.float32), tg)
    tg = random_targets(rng, 10, 5, 0, repeat_p=0.2)
    add("ties_equal", np.zeros((40, 5), np.float32), tg)
    tg = random_targets(rng, 25, 6, 0, repeat_p=0.1)
    tg[rng.random(25) < 0.3] = 6  # star id == C
    add("ties_star", -rng.integers(1, 4, (90, 6)).astype(np.float32), tg, star=True)
    tg = random_targets(rng, 40, 16, 0)
    tg[[3, 4, 17, 30]] = 16
    add("star_peaky", peaky(rng, 160, 16, tg[tg != 16], 0), tg, star=True, star_logprob=-2.5)
    # Zero probabilities (-inf) outside the blank column.
    lp = log_softmax(rng.normal(0, 2, (150, 9)))
    lp[:, 1:][rng.random((150, 8)) < 0.15] = -np.inf
    add("neginf", lp, random_targets(rng, 35, 9, 0))
    add("single", log_softmax(rng.normal(0, 2, (5, 3))), np.array([2], np.int64))
    return cases


def run_ctc(out, manifest):
    try:
        import torch
        import torchaudio.functional as taf
    except Exception as e:  # noqa: BLE001
        print(f"skipping CTC goldens: torchaudio unavailable ({e})", file=sys.stderr)
        return
    import torchaudio
    manifest["torchaudio"] = torchaudio.__version__
    manifest["torch"] = torch.__version__
    for c in ctc_cases():
        lp = c["log_probs"]
        if c["star"]:
            col = np.full((lp.shape[0], 1), c["star_logprob"], np.float32)
            lp = np.concatenate([lp, col], axis=1)
        ali, sc = taf.forced_align(torch.from_numpy(lp)[None], torch.from_numpy(c["targets"])[None],
                                   blank=c["blank"])
        ali = ali[0].numpy().astype(np.int32)
        sc = sc[0].numpy().astype(np.float32)
        # forced_align's scores are the log-probs of the aligned tokens.
        assert np.array_equal(sc, lp[np.arange(lp.shape[0]), ali])
        n = "ctc_" + c["name"]
        np.save(os.path.join(out, n + "_log_probs.npy"), c["log_probs"])
        np.save(os.path.join(out, n + "_targets.npy"), c["targets"])
        np.save(os.path.join(out, n + "_alignment.npy"), ali)
        np.save(os.path.join(out, n + "_frame_scores.npy"), sc)
        manifest["ctc"].append(dict(name=c["name"], blank=c["blank"], star=c["star"],
                                    star_logprob=c["star_logprob"], T=int(lp.shape[0]),
                                    L=int(len(c["targets"])), C=int(c["log_probs"].shape[1])))
        print(f"ctc {c['name']}: T={lp.shape[0]} L={len(c['targets'])} C={lp.shape[1]} "
              f"score={float(sc.astype(np.float64).sum()):.4f}")


def viterbi_ref(em, tr, pr, T):
    """Max-plus Viterbi in float32; ties to the lowest state index."""
    delta = (pr + em[0]).astype(np.float32)
    bps = []
    for t in range(1, T):
        cand = (delta[:, None] + tr).astype(np.float32)  # [from, to]
        bp = np.argmax(cand, axis=0)  # first maximum = lowest index
        delta = (cand[bp, np.arange(len(delta))] + em[t]).astype(np.float32)
        bps.append(bp)
    j = int(np.argmax(delta))
    score = delta[j]
    path = [j]
    for bp in reversed(bps):
        j = int(bp[j])
        path.append(j)
    return np.array(path[::-1], np.int32), np.float32(score)


def viterbi_cases():
    rng = np.random.default_rng(7)
    cases = []
    for name, B, T, S, coarse in [("rand", 3, 50, 7, False), ("wide", 2, 40, 64, False),
                                  ("ties", 3, 30, 5, True)]:
        if coarse:
            em = -rng.integers(0, 3, (B, T, S)).astype(np.float32)
            tr = -rng.integers(0, 2, (S, S)).astype(np.float32)
            pr = np.zeros(S, np.float32)
        else:
            em = log_softmax(rng.normal(0, 2, (B, T, S)))
            tr = log_softmax(rng.normal(0, 1, (S, S)))
            pr = log_softmax(rng.normal(0, 1, (S,)))
        lengths = np.array([T] + [int(x) for x in rng.integers(1, T + 1, B - 1)], np.int64)
        cases.append((name, em, tr, pr, lengths))
    return cases


def run_viterbi(out, manifest):
    for name, em, tr, pr, lengths in viterbi_cases():
        B, T, _ = em.shape
        path = np.full((B, T), -1, np.int32)
        score = np.zeros(B, np.float32)
        for b in range(B):
            p, s = viterbi_ref(em[b], tr, pr, int(lengths[b]))
            path[b, : len(p)] = p
            score[b] = s
        n = "viterbi_" + name
        for k, v in [("emissions", em), ("transitions", tr), ("priors", pr), ("lengths", lengths),
                     ("path", path), ("score", score)]:
            np.save(os.path.join(out, f"{n}_{k}.npy"), v)
        manifest["viterbi"].append(dict(name=name, B=B, T=T, S=int(em.shape[2])))
        print(f"viterbi {name}: B={B} T={T} S={em.shape[2]} score={score.tolist()}")


def dtw_ref(c):
    """Min-plus DTW in float32; backtrace ties: diagonal, then up (i-1), then left (j-1)."""
    N, M = c.shape
    big = np.float32(np.finfo(np.float32).max)
    D = np.zeros((N, M), np.float32)
    for i in range(N):
        for j in range(M):
            if i == 0 and j == 0:
                D[i, j] = c[0, 0]
                continue
            up = D[i - 1, j] if i > 0 else big
            left = D[i, j - 1] if j > 0 else big
            ul = D[i - 1, j - 1] if i > 0 and j > 0 else big
            D[i, j] = np.float32(c[i, j] + min(up, left, ul))
    i, j = N - 1, M - 1
    path = [(i, j)]
    while i > 0 or j > 0:
        up = D[i - 1, j] if i > 0 else big
        left = D[i, j - 1] if j > 0 else big
        ul = D[i - 1, j - 1] if i > 0 and j > 0 else big
        if ul <= up and ul <= left:
            i, j = i - 1, j - 1
        elif up <= left:
            i -= 1
        else:
            j -= 1
        path.append((i, j))
    return np.array(path, np.int32), D[N - 1, M - 1]


def dtw_cases():
    rng = np.random.default_rng(11)
    cases = []
    for name, B, N, M, coarse in [("rand", 3, 20, 27, False), ("square", 2, 40, 40, False),
                                  ("thin", 2, 1, 9, False), ("ties", 3, 12, 15, True)]:
        if coarse:
            cost = rng.integers(0, 3, (B, N, M)).astype(np.float32)
        else:
            cost = rng.random((B, N, M)).astype(np.float32) * 4
        nl = np.array([N] + [int(x) for x in rng.integers(1, N + 1, B - 1)], np.int64)
        ml = np.array([M] + [int(x) for x in rng.integers(1, M + 1, B - 1)], np.int64)
        cases.append((name, cost, np.stack([nl, ml], axis=1)))
    return cases


def run_dtw(out, manifest):
    for name, cost, lengths in dtw_cases():
        B, N, M = cost.shape
        path = np.full((B, N + M, 2), -1, np.int32)
        plen = np.zeros(B, np.int32)
        total = np.zeros(B, np.float32)
        for b in range(B):
            n, m = int(lengths[b, 0]), int(lengths[b, 1])
            p, tot = dtw_ref(cost[b, :n, :m])
            # The stored path runs from (0, 0) to (n-1, m-1).
            path[b, : len(p)] = p[::-1]
            plen[b] = len(p)
            total[b] = tot
        n_ = "dtw_" + name
        for k, v in [("cost", cost), ("lengths", lengths), ("path", path), ("path_len", plen),
                     ("cost_total", total)]:
            np.save(os.path.join(out, f"{n_}_{k}.npy"), v)
        manifest["dtw"].append(dict(name=name, B=B, N=N, M=M))
        print(f"dtw {name}: B={B} N={N} M={M} total={total.tolist()}")


SCALE = 1024
QMAX = 1 << 24


def quantize(x, scale=SCALE):
    """round(x*scale) half away from zero (Go's math.Round), clamped to +-2^24; -inf -> -2^24."""
    v = np.asarray(x, np.float64) * scale
    with np.errstate(invalid="ignore"):
        r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    r = np.where(np.isneginf(v), -QMAX, r)
    return np.clip(r, -QMAX, QMAX).astype(np.int64)


def ctc_fixed_ref(lp, tg, blank):
    """CTC int32 contract: torchaudio's rule and window on quantised values, renormalised each frame."""
    NEG, FLOOR = -(1 << 29), -(1 << 28)
    q = quantize(lp)
    T = q.shape[0]
    L = len(tg)
    S = 2 * L + 1
    lab = [blank if s % 2 == 0 else int(tg[s // 2]) for s in range(S)]
    skip = [s % 2 == 1 and s != 1 and tg[s // 2] != tg[s // 2 - 1] for s in range(S)]
    R = int(np.sum(tg[1:] == tg[:-1]))
    start = 0 if T - (L + R) > 0 else 1
    end = 1 if S == 1 else 2
    prev = [NEG] * S
    for s in range(start, end):
        prev[s] = int(q[0, lab[s]])
    m = max(prev[start:end])
    bp = np.zeros((T, S), np.int8)
    for t in range(1, T):
        if T - t <= L + R:
            if start % 2 == 1 and start // 2 + 1 < L and tg[start // 2] != tg[start // 2 + 1]:
                start += 1
            start += 1
        if t <= L + R:
            if end % 2 == 0 and end < 2 * L and tg[end // 2 - 1] != tg[end // 2]:
                end += 1
            end += 1
        cur = [NEG] * S
        for s in range(start, end):
            x0 = prev[s]
            x1 = prev[s - 1] if s >= 1 else NEG
            x2 = prev[s - 2] if skip[s] else NEG
            if x2 > x1 and x2 > x0:
                r, c = x2, 2
            elif x1 > x0 and x1 > x2:
                r, c = x1, 1
            else:
                r, c = x0, 0
            bp[t, s] = c
            cur[s] = NEG if r == NEG else max(r - m + int(q[t, lab[s]]), FLOOR)
        m = max(cur[start:end])
        prev = cur
    k = S - 1 if prev[S - 1] > prev[S - 2] else S - 2
    path = np.zeros(T, np.int32)
    for t in range(T - 1, -1, -1):
        path[t] = lab[k]
        k -= bp[t, k]
    return path


def viterbi_fixed_ref(em, tr, pr, T):
    """Viterbi int32 contract: renormalise to max 0, clamp candidates at -32768, first maximum."""
    e, trq, prq = quantize(em), quantize(tr), quantize(pr)
    prev = prq + e[0]
    norm = 0
    bps = []
    for t in range(1, T):
        mx = int(prev.max())
        norm += mx
        prev = prev - mx
        cand = np.maximum(prev[:, None] + trq, -32768)
        bp = np.argmax(cand, axis=0)
        prev = cand[bp, np.arange(len(prev))] + e[t]
        bps.append(bp)
    j = int(np.argmax(prev))
    score = np.float32((int(prev[j]) + norm) / SCALE)
    path = [j]
    for bp in reversed(bps):
        j = int(bp[j])
        path.append(j)
    return np.array(path[::-1], np.int32), score


def dtw_fixed_ref(c):
    """DTW int32 contract: quantised costs, integer min-plus, same tie order."""
    q = quantize(c)
    N, M = q.shape
    big = 1 << 62
    D = np.zeros((N, M), np.int64)
    for i in range(N):
        for j in range(M):
            if i == 0 and j == 0:
                D[i, j] = q[0, 0]
                continue
            up = D[i - 1, j] if i > 0 else big
            left = D[i, j - 1] if j > 0 else big
            ul = D[i - 1, j - 1] if i > 0 and j > 0 else big
            D[i, j] = q[i, j] + min(up, left, ul)
    i, j = N - 1, M - 1
    path = [(i, j)]
    while i > 0 or j > 0:
        up = D[i - 1, j] if i > 0 else big
        left = D[i, j - 1] if j > 0 else big
        ul = D[i - 1, j - 1] if i > 0 and j > 0 else big
        if ul <= up and ul <= left:
            i, j = i - 1, j - 1
        elif up <= left:
            i -= 1
        else:
            j -= 1
        path.append((i, j))
    return np.array(path[::-1], np.int32), np.float32(D[N - 1, M - 1] / SCALE)


def run_fixed(out, manifest):
    fixed = {"scale": SCALE, "ctc": [], "viterbi": [], "dtw": []}
    for name in ["rand_mid", "repeats", "peaky", "ties_coarse", "ties_equal", "neginf", "tight", "blank_last"]:
        f = os.path.join(out, f"ctc_{name}_log_probs.npy")
        if not os.path.exists(f):
            print(f"skipping fixed ctc {name}: {f} missing (run the ctc family first)", file=sys.stderr)
            continue
        c = next(c for c in manifest["ctc"] if c["name"] == name)
        lp = np.load(f)
        tg = np.load(os.path.join(out, f"ctc_{name}_targets.npy"))
        np.save(os.path.join(out, f"fixed_ctc_{name}_alignment.npy"), ctc_fixed_ref(lp, tg, c["blank"]))
        fixed["ctc"].append(dict(name=name, blank=c["blank"]))
        print(f"fixed ctc {name}")
    for name, em, tr, pr, lengths in viterbi_cases():
        B, T, _ = em.shape
        path = np.full((B, T), -1, np.int32)
        score = np.zeros(B, np.float32)
        for b in range(B):
            p, s = viterbi_fixed_ref(em[b], tr, pr, int(lengths[b]))
            path[b, : len(p)] = p
            score[b] = s
        np.save(os.path.join(out, f"fixed_viterbi_{name}_path.npy"), path)
        np.save(os.path.join(out, f"fixed_viterbi_{name}_score.npy"), score)
        fixed["viterbi"].append(dict(name=name))
        print(f"fixed viterbi {name}: score={score.tolist()}")
    for name, cost, lengths in dtw_cases():
        B, N, M = cost.shape
        path = np.full((B, N + M, 2), -1, np.int32)
        plen = np.zeros(B, np.int32)
        total = np.zeros(B, np.float32)
        for b in range(B):
            n, m = int(lengths[b, 0]), int(lengths[b, 1])
            p, tot = dtw_fixed_ref(cost[b, :n, :m])
            path[b, : len(p)] = p
            plen[b] = len(p)
            total[b] = tot
        for k, v in [("path", path), ("path_len", plen), ("cost_total", total)]:
            np.save(os.path.join(out, f"fixed_dtw_{name}_{k}.npy"), v)
        fixed["dtw"].append(dict(name=name))
        print(f"fixed dtw {name}: total={total.tolist()}")
    manifest["fixed"] = fixed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--only", default="ctc,viterbi,dtw,fixed")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    only = set(a.only.split(","))
    path = os.path.join(a.outdir, "cases.json")
    manifest = {"ctc": [], "viterbi": [], "dtw": [], "fixed": {}}
    if os.path.exists(path):
        with open(path) as f:
            manifest.update(json.load(f))
    for fam, fn in [("ctc", run_ctc), ("viterbi", run_viterbi), ("dtw", run_dtw), ("fixed", run_fixed)]:
        if fam in only:
            manifest[fam] = [] if fam != "fixed" else {}
            fn(a.outdir, manifest)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
