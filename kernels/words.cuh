// A rANS lane's word stream as one thread reads it (FORMAT.md §3.4: lane 0 from the stream's front, lane 1 from
// its back): `WordReader1` / `WordReader1Back` from global memory, and the rings `WordRing1` / `WordRing1Back` the
// staged parses fill in shared memory ahead of the chain.
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

// Lane 0's words of a slice's rANS stream (from its front), read as aligned 32-bit words: the one holding the next
// word's first byte and the two after it. Only aligned words that start before the stream's end are loaded (the payload buffer
// is padded, so they lie inside it); a word taken past the end is whatever bytes follow or a stale word, and
// `taken` exceeding the stream's words refuses the slice after the loop.
struct WordReader1 {
    const u32* p;    // the next aligned 32-bit word to load (into c2)
    const u32* end;  // the first aligned word wholly past the stream: it and those after it are not loaded
    u32 c0, c1, c2;  // three aligned words from the one holding the next word's first byte
    u32 sel;         // PRMT selector of the next word's two bytes in (c0, c1): b | (b + 1) << 4, b its byte in c0
    u32 taken;       // words taken (checked against the stream's length after the last literal)

    // *a where `load` holds and `a` lies before `end`, else `otherwise` (a predicated load, not a branch).
    __device__ __forceinline__ u32 ld_if(const u32* a, bool load, u32 otherwise) const {
        u32 v = otherwise;
        asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.nc.u32 %0, [%1];\n\t}"
            : "+r"(v)
            : "l"(a), "r"((u32)(load && a < end)));
        return v;
    }
    __device__ __forceinline__ void init(const u8* words, u32 nwords, u32 pos) {
        const u8* a = words + 2ull * pos;
        end = (const u32*)(((u64)(words + 2ull * nwords) + 3) & ~3ull);
        taken = 0;
        const u32* a0 = (const u32*)((u64)a & ~3ull);
        const u32 b = (u32)((u64)a & 3u);  // payloads are byte-aligned, so a word may straddle two aligned words
        sel = b | ((b + 1) << 4);
        c0 = ld_if(a0, true, 0u);
        c1 = ld_if(a0 + 1, true, 0u);
        c2 = ld_if(a0 + 2, true, 0u);
        p = a0 + 3;
    }
    // Renormalises `x` (FORMAT.md §3.4: below 2^16 it takes the next word). Branch-free: the 32 lanes of a warp
    // decode 32 slices, and some lane takes a word in nearly every step, so a branch here ran its body for a few
    // lanes in most steps (session 23 run 1: 16.8 of 32 lanes active; entropy alone on atha_chr1 1.06 -> 0.88 ms
    // predicated, run 2). Two PRMTs take the word (x << 16 | w); the words move on by one aligned word every
    // second take, the new one loaded two moves before it is read. (Session 23's 64-bit bit buffer took more
    // instructions in shifts; session 24 run 3 measured the two within ±2 % of each other.)
    __device__ __forceinline__ void renorm(u32* x) {
        const bool need = *x < 65536u;
        const u32 w = __byte_perm(c0, c1, sel);
        *x = need ? __byte_perm(*x, w, 0x1054u) : *x;
        taken += need ? 1u : 0u;
        const bool move = need && (sel & 2u) != 0;  // b >= 2: the next word starts in c1
        const u32 b = ((sel & 3u) + (need ? 2u : 0u)) & 3u;
        sel = b | ((b + 1) << 4);
        c0 = move ? c1 : c0;
        c1 = move ? c2 : c1;
        // Nothing but a move reads c2, so its load has two takes to land. (`move ? 0 : c2` as the value kept read
        // it in every take: 16 % of the loop's stall samples waited on that load, session 24 run 4.) Past the
        // stream c2 keeps a stale word; a stream that takes it is refused by `taken`.
        c2 = ld_if(p, move, c2);
        p += move ? 1 : 0;
    }
    __device__ __forceinline__ void refill() {}  // its loads run ahead by themselves (see WordRing1)
    __device__ __forceinline__ u32 taken_words() const { return taken; }
};

// Lane 1's words (FORMAT.md §3.4: a K = 2 slice's lane 1 takes the word stream from its back, word[nwords - 1]
// first) read as aligned 32-bit words going down, as WordReader1 reads lane 0's going up: the aligned word holding
// the next word's high byte and the two below it. Only aligned words that hold a byte of the stream are loaded (so
// every load lies inside the stream's payload); a word taken past the stream's front is a stale word or zeros, and
// the two lanes' words not adding up to the stream's refuses the slice after the loop.
struct WordReader1Back {
    const u32* p;      // the next aligned 32-bit word to load (into c2), going down
    const u32* begin;  // the aligned word holding the stream's first byte: those below it are not loaded
    const u32* end;    // the first aligned word wholly past the stream
    u32 c0, c1, c2;    // c0: the aligned word holding the next word's high byte, c1 the one below it, c2 below c1
    u32 sel;           // PRMT selector of the next word's two bytes in (c1, c0): (3 + b) | (4 + b) << 4, with b
                       // the high byte's place in c0 (b = 0: the low byte is c1's last)
    u32 taken;         // words taken

    __device__ __forceinline__ u32 ld_if(const u32* a, bool load, u32 otherwise) const {
        u32 v = otherwise;
        asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.nc.u32 %0, [%1];\n\t}"
            : "+r"(v)
            : "l"(a), "r"((u32)(load && a >= begin && a < end)));
        return v;
    }
    __device__ __forceinline__ void init(const u8* words, u32 nwords) {
        const u64 hi = (u64)words + 2ull * nwords - 1;  // the last word's high byte (nwords = 0: none is loaded)
        begin = (const u32*)((u64)words & ~3ull);
        end = (const u32*)(((u64)(words + 2ull * nwords) + 3) & ~3ull);
        taken = 0;
        const u32* a0 = (const u32*)(hi & ~3ull);
        const u32 b = (u32)(hi & 3u);
        sel = (3u + b) | ((4u + b) << 4);
        c0 = ld_if(a0, true, 0u);
        c1 = ld_if(a0 - 1, true, 0u);
        c2 = ld_if(a0 - 2, true, 0u);
        p = a0 - 3;
    }
    // As WordReader1::renorm, two bytes further down the stream a take.
    __device__ __forceinline__ void renorm(u32* x) {
        const bool need = *x < 65536u;
        const u32 w = __byte_perm(c1, c0, sel);
        *x = need ? __byte_perm(*x, w, 0x1054u) : *x;
        taken += need ? 1u : 0u;
        const u32 b0 = (sel & 15u) - 3u;
        const bool move = need && b0 < 2u;  // the next word's high byte is in c1
        const u32 b = (b0 + (need ? 2u : 0u)) & 3u;
        sel = (3u + b) | ((4u + b) << 4);
        c0 = move ? c1 : c0;
        c1 = move ? c2 : c1;
        c2 = ld_if(p, move, c2);
        p -= move ? 1 : 0;
    }
    __device__ __forceinline__ void refill() {}
    __device__ __forceinline__ u32 taken_words() const { return taken; }
    // Starts lane 1 of a slice whose `nwords` words are at `words` (see WordRing1::begin_lane).
    __device__ __forceinline__ void begin_lane(const u8* words, u32 nwords) { init(words, nwords); }
};

// Shared-memory loads and stores at shared window addresses (volatile: the ring below is written and read by the
// same thread, and volatile asm statements keep their order; no memory clobber, so global loads may pass them).
__device__ __forceinline__ u32 lds16(u32 a) {
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ void sts32(u32 a, u32 v) { asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v)); }
// Loads from tables the CTA wrote before a barrier and only reads after it (not volatile: they may move).
__device__ __forceinline__ u32 lds_u8(u32 a) {
    u32 v;
    asm("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ u32 lds32(u32 a) {
    u32 v;
    asm("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}

// A rANS lane's word stream staged in a ring of K1_RING_WORDS words in shared memory (the staged parses,
// parse_k1_staged and parse_k1_linear): a renormalisation is a compare, a PRMT, an add and the next word's shared load
// (~5 instructions), where WordReader1's aligned-word window took ~19 a literal and its global loads stalled the
// chain (long scoreboard, 0.40 of 3.2 cycles an instruction, session 30 run 1). Ring word i % K1_RING_WORDS holds
// stream word i. The parse stages the first ring's worth when it starts the slice (`init`, beside the payload's
// prefetch, before the code phase: staged after the token parse, the loads missed L1 and cost atha_chr1's parse 0.08
// ms, session 31 run 1); the literal phase starts at the word the code phase left (`start`), and `refill`, called
// every eight literals (which take at most eight words), keeps at least half a ring staged ahead, half a ring at a
// time: aligned 32-bit words, sixteen loads in flight, funnel-shifted to the stream's byte offset. The ring is
// aligned to its size, so a word's address is one LOP3. Words past the stream stage as zeros (aligned words wholly
// past it are not loaded, as in WordReader1), and a stream that takes more words than it has reads whatever the
// ring holds: taking more words than the stream has refuses the slice after the loop, as with WordReader1.
// K1_RING_BYTES (a power of two, 512 to 4096) and K1_STAGED_PREFETCH (1: the parse prefetches the whole word
// stream into L1 as the other parses do; 0: only its first 256 bytes, for the code phase) are measurement knobs: the
// host sets them from ACEAPEX_GPU_K1_RING_BYTES and ACEAPEX_GPU_K1_STAGED_PREFETCH.
#ifndef K1_RING_BYTES
#define K1_RING_BYTES 1024
#endif
#ifndef K1_STAGED_PREFETCH
#define K1_STAGED_PREFETCH 1
#endif
#define K1_RING_WORDS (K1_RING_BYTES / 2u)
// BACK: lane 1's words (FORMAT.md §3.4: taken from the stream's back, word[nwords - 1] first), staged in the order
// the lane takes them, so ring word i % K1_RING_WORDS holds the lane's i-th word, stream word nwords - 1 - i, and
// the renormalisation is the forward ring's. A staged 32-bit ring word holds two stream words swapped, so each is
// one PRMT of two aligned words (its selector fixed by the stream end's byte offset) going down from the end.
template <bool BACK>
struct WordRingT {
    const u32* src0;  // forward: the aligned global word holding the stream's first byte; BACK: the aligned word
                      // holding the byte at words + 2 nwords - 4 (where the lane's first two words start)
    const u32* lo;    // BACK: the aligned word holding the stream's first byte: those below it are not loaded
    const u32* end;   // the first aligned word wholly past the stream: it and those after it are not loaded
    u32 shift;        // forward: 8 x the stream's byte offset in an aligned word; BACK: the PRMT selector
    u32 ring;         // shared window address of the ring (aligned to K1_RING_BYTES)
    u32 at;           // 2 x the next word's index: its byte offset in the ring, unwrapped
    u32 w;            // the next word (ring byte offset at % K1_RING_BYTES)
    u32 staged;       // words [0, staged) have been staged (the last K1_RING_WORDS of them are in the ring)
    u32 avail;        // words the stream has
    u32 first;        // the word the literal phase started at

    __device__ __forceinline__ u32 ld(const u32* a) const {
        if constexpr (BACK) return a >= lo && a < end ? __ldg(a) : 0u;
        return a < end ? __ldg(a) : 0u;
    }
    // Stages words [staged, staged + K1_RING_WORDS / 2) into the half of the ring they map to.
    __device__ __forceinline__ void stage() {
        const u32 dst = ring + 2u * (staged % K1_RING_WORDS);
        if constexpr (BACK) {
            // Ring word pair q (the lane's words staged + 2q and + 2q + 1) is stream words j and j - 1, j = nwords -
            // 1 - staged - 2q: the four bytes at words + 2 (j - 1), which start in aligned word s - q.
            const u32* s = src0 - staged / 2u;
            u32 cur = ld(s + 1);
            for (u32 q = 0; q < K1_RING_WORDS / 4; q += 16) {
                u32 v[16];
#pragma unroll
                for (u32 k = 0; k < 16; k++) v[k] = ld(s - (q + k));
#pragma unroll
                for (u32 k = 0; k < 16; k++) {
                    sts32(dst + 4u * (q + k), __byte_perm(v[k], cur, shift));
                    cur = v[k];
                }
            }
        } else {
            const u32* s = src0 + staged / 2u;
            u32 cur = ld(s);
            for (u32 q = 0; q < K1_RING_WORDS / 4; q += 16) {
                u32 v[16];
#pragma unroll
                for (u32 k = 0; k < 16; k++) v[k] = ld(s + q + k + 1);
#pragma unroll
                for (u32 k = 0; k < 16; k++) {
                    sts32(dst + 4u * (q + k), __funnelshift_r(cur, v[k], shift));
                    cur = v[k];
                }
            }
        }
        staged += K1_RING_WORDS / 2;
    }
    // The slice's `nwords` words at `words` (byte-aligned), into the ring at shared window address `ring_`.
    __device__ __forceinline__ void init(const u8* words, u32 nwords, u32 ring_) {
        end = (const u32*)(((u64)(words + 2ull * nwords) + 3) & ~3ull);
        if constexpr (BACK) {
            const u64 t = (u64)words + 2ull * nwords - 4;
            src0 = (const u32*)(t & ~3ull);
            lo = (const u32*)((u64)words & ~3ull);
            const u32 o = (u32)(t & 3u);  // the bytes of the pair at t: o .. o + 3 of (aligned word, next one)
            shift = (o + 2u) | ((o + 3u) << 4) | (o << 8) | ((o + 1u) << 12);
        } else {
            src0 = (const u32*)((u64)words & ~3ull);
            shift = 8u * (u32)((u64)words & 3u);
        }
        ring = ring_;
        avail = nwords;
        staged = 0;
        at = 0;
        first = 0;
        stage();
        if (avail > K1_RING_WORDS / 2) stage();
    }
    // Keeps half a ring staged ahead of the next word (the half behind it is taken, so it can be overwritten).
    __device__ __forceinline__ void refill() {
        while (staged < avail && at / 2u + K1_RING_WORDS / 2 >= staged) stage();
    }
    // The next word is word `pos` (where the code phase left the stream); words staged before it that the ring no
    // longer needs are skipped.
    __device__ __forceinline__ void start(u32 pos) {
        at = 2u * pos;
        first = pos;
        if (pos >= staged) staged = pos & ~(K1_RING_WORDS / 2 - 1u);
        refill();
        w = lds16(ring | (at & (K1_RING_BYTES - 2u)));
    }
    // BACK: starts lane 1 of a slice whose `nwords` words are at `words`, in this ring (`ring` set; a slice's lane
    // 1 after its lane 0 in one thread takes over lane 0's ring).
    __device__ __forceinline__ void begin_lane(const u8* words, u32 nwords) {
        init(words, nwords, ring);
        start(0);
    }
    __device__ __forceinline__ void renorm(u32* x) {
        const bool need = *x < 65536u;
        *x = need ? __byte_perm(*x, w, 0x1054u) : *x;
        at += need ? 2u : 0u;
        w = lds16(ring | (at & (K1_RING_BYTES - 2u)));
    }
    __device__ __forceinline__ u32 taken_words() const { return at / 2u - first; }
};
typedef WordRingT<false> WordRing1;      // lane 0: the stream from its front
typedef WordRingT<true> WordRing1Back;  // lane 1: from its back
