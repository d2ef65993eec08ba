"""Writes 1000 random samtools regions (up to 1000 bases each, sequences drawn uniformly) for a FASTA's .fai.

Usage: python3 bench/faidx-regions.py FASTA.fai OUT [SEED]   (default seed 3). bench/mount-bench.sh and the device
suite (bench/gpu/suite.sh, part faidx) draw the same regions from the same file with it.
"""
import random
import sys

random.seed(int(sys.argv[3]) if len(sys.argv) > 3 else 3)
seqs = [(line.split("\t")[0], int(line.split("\t")[1])) for line in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for _ in range(1000):
        name, n = random.choice(seqs)
        s = random.randrange(1, max(2, n - 1000))
        f.write(f"{name}:{s}-{min(n, s + random.randrange(1, 1000))}\n")
