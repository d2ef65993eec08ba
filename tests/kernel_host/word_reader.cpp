// WordReader1 (K = 1 rANS word stream) against a plain reader: every take at every byte alignment returns the
// next 16-bit little-endian word, and `taken` counts the takes.
#include "prelude.h"
#include "word_reader.inc"

int main() {
    for (int it = 0; it < 100000; it++) {
        const u32 nwords = rnd() % 600, pos = nwords ? rnd() % (nwords + 1) : 0, off = rnd() % 4 + 4 * (rnd() % 3);
        // A 4-aligned buffer, as a device allocation, with zero padding after the stream (FILE_PAD).
        std::vector<u32> store((off + 2 * nwords + 32) / 4 + 1, 0);
        u8* base = (u8*)store.data();
        for (u32 i = 0; i < off + 2 * nwords; i++) base[i] = (u8)rnd();
        const u8* words = base + off;
        WordReader1 wr;
        wr.init(words, nwords, pos);
        u32 k = pos;
        for (int step = 0; step < 2000 && k < nwords; step++) {
            const u32 x = rnd() % 3 == 0 ? rnd() & 0xFFFF : 0x10000 + rnd() % 0xFFFF0000u;
            u32 want = x;
            if (x < 65536) want = (x << 16) | words[2 * k] | ((u32)words[2 * k + 1] << 8), k++;
            u32 got = x;
            wr.renorm(&got);
            if (got != want || wr.taken != k - pos) {
                printf("FAIL: case %d step %d: %u words from %u at offset %u: got %x, want %x (taken %u of %u)\n", it,
                       step, nwords, pos, off, got, want, wr.taken, k - pos);
                return 1;
            }
        }
    }
    printf("ok\n");
    return 0;
}
