// WordReader1Back (a K = 2 slice's rANS lane 1, FORMAT.md §3.4: the word stream from its back) against a plain
// reader: every take at every byte alignment returns the stream's next word from the back (word[nwords - 1]
// first), `taken` counts the takes, and no load touches an aligned word that holds no byte of the stream (the
// harness's load stand-in fails otherwise). Past the stream's front a take reads anything.
#include "prelude.h"

static u32 host_load(const u32* a) {
    TestStream::check_load(a);
    return *a;
}
#include "word_reader_back.inc"

int main() {
    for (int it = 0; it < 100000; it++) {
        const u32 nwords = rnd() % 600, off = rnd() % 4 + 4 * (rnd() % 3);
        std::vector<u32> store;
        const u8* words = TestStream::random(store, nwords, off);
        WordReader1Back wr;
        wr.init(words, nwords);
        u32 k = 0;
        const u32 limit = nwords + (rnd() % 4 == 0 ? 1 + rnd() % 40 : 0);
        for (int step = 0; step < 4000 && k < limit; step++) {
            const u32 x = rnd() % 3 == 0 ? rnd() & 0xFFFF : 0x10000 + rnd() % 0xFFFF0000u;
            u32 got = x;
            wr.renorm(&got);
            if (x < 65536) {
                if (k < nwords) {
                    const u32 i = nwords - 1 - k;
                    const u32 want = (x << 16) | words[2 * i] | ((u32)words[2 * i + 1] << 8);
                    if (got != want) {
                        printf("FAIL: case %d step %d: %u words at offset %u: word %u from the back got %x, want %x\n",
                               it, step, nwords, off, k, got, want);
                        return 1;
                    }
                }
                k++;
            } else if (got != x) {
                printf("FAIL: case %d step %d: a state >= 2^16 changed\n", it, step);
                return 1;
            }
            if (wr.taken != k) {
                printf("FAIL: case %d step %d: taken %u, want %u\n", it, step, wr.taken, k);
                return 1;
            }
        }
    }
    printf("ok\n");
    return 0;
}
