#!/usr/bin/env python3
"""Writes the bundled demo sample, samples/genome/, deterministically (same bytes on every run and machine).

Pseudo-random DNA shaped like a real assembly so that every part of the FASTA handling is exercised:
  - several records per file, 60-column lines, a short last line per record;
  - interspersed repeats (mutated copies of earlier segments, some reverse-complemented);
  - soft-masked (lowercase) runs and runs of N, and a few IUPAC codes (R, Y, K, M, S, W);
  - a second "assembly" that is a mutated copy of the first (cross-file matches, as between related species).
Usage: python3 scripts/gen-sample.py [OUTDIR]   (default: samples/genome next to this script's repo root)
"""

import os
import sys


class XorShift64:
    """xorshift64*: tiny, portable, and fully specified here, so the sample never depends on a library's RNG."""

    def __init__(self, seed):
        self.state = seed or 0x9E3779B97F4A7C15

    def next(self):
        x = self.state
        x ^= (x >> 12)
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27)
        self.state = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        return self.next() % n

    def chance(self, per_million):
        return self.below(1_000_000) < per_million


COMPLEMENT = str.maketrans("ACGTacgtNn", "TGCAtgcaNn")


def random_bases(rng, n):
    return "".join("ACGT"[rng.below(4)] for _ in range(n))


def mutate(rng, seq, per_million):
    out = list(seq)
    for i in range(len(out)):
        if out[i] in "ACGT" and rng.chance(per_million):
            out[i] = "ACGT"[rng.below(4)]
    return "".join(out)


def chromosome(rng, length):
    """Random sequence with repeats, then masking, N runs and IUPAC codes painted over it."""
    seq = []
    size = 0
    while size < length:
        if size > 2000 and rng.chance(350_000):
            # An interspersed repeat: a (mutated, maybe reverse-complemented) copy of an earlier segment.
            whole = "".join(seq)
            span = 200 + rng.below(2500)
            start = rng.below(max(1, len(whole) - span))
            piece = mutate(rng, whole[start : start + span], 20_000)
            if rng.chance(300_000):
                piece = piece.translate(COMPLEMENT)[::-1]
        elif rng.chance(50_000):
            # A microsatellite: a short unit repeated.
            unit = random_bases(rng, 1 + rng.below(6))
            piece = unit * (10 + rng.below(60))
        else:
            piece = random_bases(rng, 100 + rng.below(900))
        seq.append(piece)
        size += len(piece)
    chars = list("".join(seq)[:length])
    paint_runs(rng, chars, count=length // 4000, max_len=3000, paint=str.lower)
    paint_runs(rng, chars, count=max(1, length // 40000), max_len=1500, paint=lambda c: "N")
    for _ in range(length // 20000):
        chars[rng.below(length)] = "RYKMSW"[rng.below(6)]
    return "".join(chars)


def paint_runs(rng, chars, count, max_len, paint):
    for _ in range(count):
        start = rng.below(len(chars))
        for i in range(start, min(len(chars), start + 1 + rng.below(max_len))):
            chars[i] = paint(chars[i])


def fasta(records, width=60):
    lines = []
    for name, seq in records:
        lines.append(">" + name)
        lines.extend(seq[i : i + width] for i in range(0, len(seq), width))
    return ("\n".join(lines) + "\n").encode("ascii")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "samples", "genome")
    os.makedirs(out_dir, exist_ok=True)
    rng = XorShift64(20261129)
    chr1 = chromosome(rng, 150_000)
    chr2 = chromosome(rng, 61_234)
    mito = chromosome(rng, 9_999)
    # The related assembly: the same chromosome with 1% substitutions and one region deleted.
    rel1 = mutate(rng, chr1[:70_000] + chr1[82_000:], 10_000)
    files = {
        "speciesA.fa": fasta([("chr1 speciesA synthetic chromosome 1", chr1), ("chr2 speciesA", chr2),
                              ("chrM speciesA mitochondrion", mito)]),
        "speciesB.fa": fasta([("chr1 speciesB synthetic, related to speciesA chr1", rel1)]),
    }
    for name, data in files.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    link = os.path.join(out_dir, "reference.fa")
    if not os.path.islink(link):
        os.symlink("speciesA.fa", link)


if __name__ == "__main__":
    main()
