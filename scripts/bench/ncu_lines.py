#!/usr/bin/env python3
"""Per-source-line instruction counts and stall samples of one kernel.

Joins Nsight Compute's per-instruction source counters (the CSV of
`ncu -i REPORT --page source --print-source sass --csv`, from a report taken
with `--section SourceCounters`) with the line table of the same kernel's SASS
(`nvdisasm -g -c` of the fatbin's cubin: the fatbin is built with -lineinfo),
by address from the kernel's first instruction. Prints, for the lines that
hold at least --min percent of the executed warp instructions, the percent of
instructions, the percent of warp-stall samples, the warp instructions a unit
(--per: frames, rows, ...) and the source text; then the totals per named line
range of a file (--range NAME=FILE:FIRST-LAST, repeatable).

  ncu --clock-control none -k regex:fbank_logmel -c 1 --section SourceCounters \\
      -o rep ./fbank.test -test.run '^$' -test.bench 'CUDAFbankGeometry/whisper-128/B64/w4s8$' \\
      -test.skip '/.*/.*/.*/.' -test.benchtime 1x
  ncu -i rep.ncu-rep --page source --print-source sass --csv > src.csv
  cuobjdump -xelf all kernels/edge.fatbin && nvdisasm -g -c edge_kernels.sm_90a.cubin > sass.txt
  python3 scripts/bench/ncu_lines.py --csv src.csv --sass sass.txt \\
      --kernel fbank_logmel_n400_wide --per 192064 --src kernels \\
      --range mel4=fbank_frame.cuh:455-490

(The kernel, the fatbin and the report must be the same build; 192064 is the
frames of the 64 x 30 s Whisper batch. -test.skip there is go test's filter
of the benchmark's variant sub-benchmarks, so that ncu sees only the op's own
launch; no test is skipped.)
"""
import argparse
import collections
import csv
import os
import re
import sys


def line_table(path, kernel):
    """Address -> (file basename, line) for the kernel's instructions."""
    table, inside, cur = {}, False, None
    with open(path) as f:
        for text in f:
            if text.startswith(".text."):
                inside = text.strip() == f".text.{kernel}:"
                continue
            if not inside:
                continue
            m = re.search(r'File "([^"]+)", line (\d+)', text)
            if m:
                cur = (os.path.basename(m.group(1)), int(m.group(2)))
                continue
            m = re.search(r"/\*([0-9a-f]{4,})\*/\s+\S", text)
            if m:
                table[int(m.group(1), 16)] = cur
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", required=True, help="ncu --page source --print-source sass --csv output")
    ap.add_argument("--sass", required=True, help="nvdisasm -g -c output of the kernel's cubin")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--per", type=float, default=1.0, help="divide instruction counts by this (e.g. frames)")
    ap.add_argument("--min", type=float, default=0.5, help="lines under this percent of instructions are left out")
    ap.add_argument("--src", default=".", help="directory of the source files, to print their lines")
    ap.add_argument("--range", action="append", default=[], help="NAME=FILE:FIRST-LAST")
    a = ap.parse_args()

    table = line_table(a.sass, a.kernel)
    if not table:
        sys.exit(f"ncu_lines: no .text.{a.kernel} in {a.sass}")
    with open(a.csv) as f:
        rows = list(csv.reader(f))
    head = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if head is None:
        sys.exit(f"ncu_lines: {a.csv} has no Address column (want --page source --print-source sass --csv)")
    cols = rows[head]
    i_addr, i_src = cols.index("Address"), cols.index("Source")
    i_exec = cols.index("Instructions Executed")
    i_samp = cols.index("Warp Stall Sampling (All Samples)")

    inst, samp = collections.Counter(), collections.Counter()
    base, missing = None, 0
    for r in rows[head + 1:]:
        if len(r) <= max(i_exec, i_samp) or not r[i_addr].startswith("0x"):
            continue
        addr = int(r[i_addr], 16)
        base = addr if base is None else base
        where = table.get(addr - base)
        if where is None:
            missing += 1
            continue
        inst[where] += int(r[i_exec] or 0)
        samp[where] += int(r[i_samp] or 0)
    total_i, total_s = sum(inst.values()), max(1, sum(samp.values()))
    if total_i == 0:
        sys.exit("ncu_lines: no executed instructions matched (another build, or another kernel?)")
    if missing:
        print(f"# {missing} instructions of the report have no line in {a.sass}: another build?", file=sys.stderr)

    def source(where):
        try:
            with open(os.path.join(a.src, where[0])) as f:
                return f.read().splitlines()[where[1] - 1].strip()[:90]
        except (OSError, IndexError):
            return ""

    print(f"{a.kernel}: {total_i} warp instructions, {total_i / a.per:.1f} a unit; {total_s} stall samples")
    print("  %inst  %stall   /unit  line")
    for where, n in inst.most_common():
        if 100 * n / total_i < a.min:
            break
        print(f"{100 * n / total_i:7.2f} {100 * samp[where] / total_s:7.2f} {n / a.per:7.1f}  "
              f"{where[0]}:{where[1]}  {source(where)}")
    for spec in a.range:
        name, rest = spec.split("=", 1)
        fname, span = rest.split(":")
        lo, hi = (int(x) for x in span.split("-"))
        n = sum(v for w, v in inst.items() if w[0] == fname and lo <= w[1] <= hi)
        s = sum(v for w, v in samp.items() if w[0] == fname and lo <= w[1] <= hi)
        print(f"{name}: {100 * n / total_i:.2f}% of instructions, {100 * s / total_s:.2f}% of stall samples, "
              f"{n / a.per:.1f} a unit")


if __name__ == "__main__":
    main()
