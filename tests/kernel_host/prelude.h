// Host stand-ins for what the K = 1 helpers of the kernels (kernels/words.cuh, literals.cuh, ...) use from CUDA, so
// that the structs themselves (copied out of the kernel source by tests/kernel_host_model.rs) compile with the host C++ compiler.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;
#define __device__
#define __forceinline__ inline
#define NO_SLOT 0xFFFFFFFFu
using std::min;
// PRMT: result byte i is byte s_i (bits 4i .. 4i + 2) of {a, b}, or its sign replicated when bit 4i + 3 is set.
static inline u32 __byte_perm(u32 a, u32 b, u32 s) {
    u8 by[8];
    for (int i = 0; i < 4; i++) {
        by[i] = (u8)(a >> (8 * i));
        by[4 + i] = (u8)(b >> (8 * i));
    }
    u32 r = 0;
    for (int i = 0; i < 4; i++) {
        const u32 n = (s >> (4 * i)) & 0xF;
        u8 v = by[n & 7];
        if (n & 8) v = (v & 0x80) ? 0xFF : 0;
        r |= (u32)v << (8 * i);
    }
    return r;
}
static u64 rng_state = 88172645463325252ull;
static inline u32 rnd() {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (u32)rng_state;
}
// The CUDA vector types, and shared memory as a host buffer: a shared window address is an offset into
// `host_smem` (the literal chain's shared-memory path reads its model's copies there).
struct uint2 {
    u32 x, y;
};
struct uint4 {
    u32 x, y, z, w;
};
static inline uint2 make_uint2(u32 x, u32 y) { return uint2{x, y}; }
static inline uint4 make_uint4(u32 x, u32 y, u32 z, u32 w) { return uint4{x, y, z, w}; }
[[maybe_unused]] static u8* host_smem = nullptr;
[[maybe_unused]] static size_t host_smem_len = 0;  // bytes at host_smem: an access past them fails the harness
// A shared access of `n` bytes at window address `a`, checked against host_smem_len.
[[maybe_unused]] static u8* host_shared(u32 a, u32 n) {
    if ((size_t)a + n > host_smem_len) {
        printf("FAIL: shared access at %u (+%u) past the %zu bytes of shared memory\n", a, n, host_smem_len);
        exit(1);
    }
    return host_smem + a;
}
template <class T>
static inline T __ldg(const T* p) {
    return *p;
}
static inline u32 __funnelshift_r(u32 lo, u32 hi, u32 s) { return (u32)((((u64)hi << 32) | lo) >> (s & 31)); }
static inline size_t __cvta_generic_to_shared(const void* p) { return (size_t)((const u8*)p - host_smem); }
static inline u32 __clz(u32 v) { return v ? (u32)__builtin_clz(v) : 32u; }
struct Dim3 {
    u32 x;
};
[[maybe_unused]] static Dim3 threadIdx{0};  // a harness that runs a warp's threads one by one sets x

// The word stream a reader test reads: `nwords` 16-bit words at byte offset `off` of a 4-aligned buffer (`store`) of
// random bytes, as in a device allocation (the states and header before it, the extra bits and the next slice
// after); its bytes are [lo, hi), and `check_load` fails the harness on a load of an aligned word that holds none of
// them (the readers' global-load stand-ins call it).
struct TestStream {
    static inline const u8* lo = nullptr;
    static inline const u8* hi = nullptr;
    static const u8* random(std::vector<u32>& store, u32 nwords, u32 off) {
        store.assign((off + 2 * nwords + 32) / 4 + 1, 0);
        u8* base = (u8*)store.data();
        for (size_t i = 0; i < 4 * store.size(); i++) base[i] = (u8)rnd();
        lo = base + off;
        hi = lo + 2 * nwords;
        return lo;
    }
    static void check_load(const void* p) {
        if ((const u8*)p + 4 <= lo || (const u8*)p >= hi) {
            printf("FAIL: a load of an aligned word with no byte of the stream\n");
            exit(1);
        }
    }
};
