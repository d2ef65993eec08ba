// WordRing1 (the staged K = 1 word stream, shared memory) against a plain reader, driven as the parse drives it
// (staged at the slice's start, the literals from a random word on, a refill every eight renormalisations): every
// take at every byte alignment and start returns the next 16-bit little-endian word, the words past the stream read as
// zeros or stale ring words but never outside the ring (host_shared fails the harness), and `taken_words` counts the
// takes.
#include "prelude.h"
#include "word_ring.inc"

int main() {
    // The ring at a K1_RING_BYTES-aligned offset of a buffer that holds exactly it (an access past it fails).
    std::vector<u8> smem(3 * K1_RING_BYTES);
    host_smem = smem.data();
    host_smem_len = 3 * K1_RING_BYTES;
    for (int it = 0; it < 20000; it++) {
        const u32 nwords = rnd() % 2000, pos = nwords ? rnd() % (nwords + 1) : 0, off = rnd() % 4 + 4 * (rnd() % 3);
        std::vector<u32> store((off + 2 * nwords + 32) / 4 + 1, 0);
        u8* base = (u8*)store.data();
        for (u32 i = 0; i < off + 2 * nwords; i++) base[i] = (u8)rnd();
        const u8* words = base + off;
        for (auto& b : smem) b = (u8)rnd();  // stale words from an earlier slice
        WordRing1 wr;
        wr.init(words, nwords, 2 * K1_RING_BYTES);
        wr.start(pos);
        u32 k = pos;
        // Some cases take more words than the stream has (a corrupt stream): those read as anything.
        const u32 limit = nwords + (rnd() % 4 == 0 ? 1 + rnd() % 1500 : 0);
        for (u32 step = 0; k < limit; step++) {
            if (step % 8 == 0) wr.refill();
            const u32 x = rnd() % 3 == 0 ? rnd() & 0xFFFF : 0x10000 + rnd() % 0xFFFF0000u;
            u32 got = x;
            wr.renorm(&got);
            if (x < 65536) {
                const u32 want = k < nwords ? (x << 16) | words[2 * k] | ((u32)words[2 * k + 1] << 8) : got;
                if (got != want) {
                    printf("FAIL: case %d step %u: %u words from %u at offset %u: word %u got %x, want %x\n", it, step,
                           nwords, pos, off, k, got, want);
                    return 1;
                }
                k++;
            } else if (got != x) {
                printf("FAIL: case %d step %u: a state >= 2^16 changed\n", it, step);
                return 1;
            }
            if (wr.taken_words() != k - pos) {
                printf("FAIL: case %d step %u: taken %u, want %u\n", it, step, wr.taken_words(), k - pos);
                return 1;
            }
        }
    }
    printf("ok\n");
    return 0;
}
