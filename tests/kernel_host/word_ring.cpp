// WordRing1 and WordRing1Back (the staged word streams of rANS lanes 0 and 1, shared memory) against a plain
// reader, driven as the parse drives them (staged at the slice's start, the literals from a random word on, a refill
// every eight renormalisations): every take at every byte alignment and start returns the lane's next 16-bit
// little-endian word (lane 0: word[k]; lane 1, FORMAT.md §3.4: word[nwords - 1 - k]), the words past the stream read
// as zeros or stale ring words but never outside the ring (host_shared fails the harness), no global load touches
// an aligned word with no byte of the stream, and `taken_words` counts the takes.
#include "prelude.h"

template <class T>
static inline T checked_ldg(const T* p) {
    TestStream::check_load(p);
    return *p;
}
#define __ldg checked_ldg
#include "word_ring.inc"

template <bool BACK>
static int run() {
    // The ring at a K1_RING_BYTES-aligned offset of a buffer that holds exactly it (an access past it fails).
    std::vector<u8> smem(3 * K1_RING_BYTES);
    host_smem = smem.data();
    host_smem_len = 3 * K1_RING_BYTES;
    for (int it = 0; it < 20000; it++) {
        const u32 nwords = rnd() % 2000, pos = nwords ? rnd() % (nwords + 1) : 0, off = rnd() % 4 + 4 * (rnd() % 3);
        std::vector<u32> store;
        const u8* words = TestStream::random(store, nwords, off);
        for (auto& b : smem) b = (u8)rnd();  // stale words from an earlier slice
        WordRingT<BACK> wr;
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
                const u32 i = BACK ? nwords - 1 - k : k;
                const u32 want = k < nwords ? (x << 16) | words[2 * i] | ((u32)words[2 * i + 1] << 8) : got;
                if (got != want) {
                    printf("FAIL: back %d case %d step %u: %u words from %u at offset %u: word %u got %x, want %x\n",
                           BACK, it, step, nwords, pos, off, k, got, want);
                    return 1;
                }
                k++;
            } else if (got != x) {
                printf("FAIL: back %d case %d step %u: a state >= 2^16 changed\n", BACK, it, step);
                return 1;
            }
            if (wr.taken_words() != k - pos) {
                printf("FAIL: back %d case %d step %u: taken %u, want %u\n", BACK, it, step, wr.taken_words(),
                       k - pos);
                return 1;
            }
        }
    }
    return 0;
}

int main() {
    if (run<false>() || run<true>()) return 1;
    printf("ok\n");
    return 0;
}
