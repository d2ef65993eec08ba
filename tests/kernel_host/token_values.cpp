// k1_token_values (the staged K = 1 token parse: BitReader1, one token a step) against the group loop at W = 1
// (group_token_values, cut from the kernels like it, with a host Group<1> whose collectives are identities), on
// random slices: valid token streams with their extra bits (explicit forward and reverse-complement matches,
// continuations, the last token's literals), and the same with a code, an extra bit, the stream's length or the
// unit's length disturbed. Both must
// refuse the same slices, and on the others leave the same tokens, bits, literals and span. The extra stream lies at
// every byte alignment in a buffer that ends with its last aligned word, so a load past the stream would read
// outside it (AddressSanitizer or a crash).
#include "prelude.h"

// kernels/common.cuh's Group<W> at W = 1, on the host: one lane, every collective an identity.
template <int W>
struct Group {
    static_assert(W == 1, "the host runs one lane");
    u32 lane = 0;
    bool any(bool p) const { return p; }
    void sync() const {}
    u32 scan(u32 v) const { return v; }
    u64 seg_scan(u64 v, bool*) const { return v; }
    u32 last(u32 v) const { return v; }
    u64 last64(u64 v) const { return v; }
};

#include "token_values.inc"

// The group loop at W = 1 (kernels/tokens.cuh group_token_values, which finish_linear_k1 runs on a warp), on the codes
// the code phase left in tp / mp / bk.
static bool reference(u32* tp, u32* mp, u32* li, u64* bk, u32 ntok, u32 nmatch, const u8* extra, u32 extra_len,
                      u32 unit_len, u64 unit_start, u64* bits, u32* lits, u32* span) {
    return group_token_values<1>(Group<1>(), tp, mp, li, bk, ntok, nmatch, extra, extra_len, unit_len, unit_start,
                                 bits, lits, span);
}

// LSB-first bit writer (FORMAT.md §3.2's extra stream).
struct Bits {
    std::vector<u8> bytes;
    u64 n = 0;
    void put(u64 v, u32 k) {
        for (u32 i = 0; i < k; i++, n++) {
            if (n % 8 == 0) bytes.push_back(0);
            bytes.back() |= (u8)(((v >> i) & 1) << (n % 8));
        }
    }
};

// The log code of v (FORMAT.md §3.2) and its extra bits.
static u32 code_of(u64 v, Bits& b) {
    if (v < 16) return (u32)v;
    u32 h = 63 - __builtin_clzll(v);
    const u32 m = (u32)((v >> (h - 1)) & 1);
    b.put(v - (1ull << h) - ((u64)m << (h - 1)), h - 1);
    return 16 + 2 * (h - 4) + m;
}

// (Each draw its own statement: the order of two calls in one expression is the compiler's choice.)
static u64 wide() {
    const u64 hi = rnd();
    return (hi << 32) | rnd();
}
// A draw below `big` one time in `rare`, else below `small`.
static u32 draw(u32 rare, u32 big, u32 small) {
    const u32 bound = rnd() % rare == 0 ? big : small;
    return rnd() % bound;
}

int main() {
    u32 refused = 0, accepted = 0;
    for (int it = 0; it < 200000; it++) {
        const u32 ntok = 1 + draw(4, 300, 12), nmatch = ntok - 1;
        const u64 unit_start = rnd() % 2 ? wide() % (1ull << 40) & ~4095ull : 0;
        std::vector<u32> tp(ntok), mp(ntok, 0);
        std::vector<u64> bk(ntok, 0);
        Bits bits;
        u64 pos = 0;
        bool have_prev = false;  // a continuation only after an explicit match (else it is refused: some are)
        for (u32 t = 0; t < ntok; t++) {
            const u64 lit = rnd() % 3 == 0 ? 0 : draw(8, 70000, 40);
            tp[t] = code_of(lit, bits);
            if (t == nmatch) break;
            const u64 len = 2 + draw(8, 5000, 30);
            mp[t] = code_of(len - 2, bits);
            const u64 dst = unit_start + pos + lit, room = dst ? dst : 1;
            const u32 kind = rnd() % 4;
            if (kind == 0 && have_prev) {
                const u32 k = rnd() % 8;  // a continuation: no extra bits
                bk[t] = OF_EXPLICIT + k;
            } else if (kind == 1 && dst >= len) {
                const u64 dist = 1 + wide() % (dst - len + 1);  // a reverse complement: dist + len - 1 <= dst
                const u32 c = code_of(dist - 1, bits);
                bk[t] = OF_REVERSE + c;
                have_prev = true;
            } else {
                const u64 dist = 1 + wide() % room;
                bk[t] = code_of(dist - 1, bits);
                have_prev = true;
            }
            pos += lit + len;
        }
        std::vector<u8> extra = bits.bytes;
        // The span the reference finds over these codes and extra bits (when it refuses, as far as it got).
        auto span_of = [&]() {
            std::vector<u32> a(tp), b(mp), l(ntok);
            std::vector<u64> c(bk);
            u64 rb;
            u32 rl, rs;
            reference(a.data(), b.data(), l.data(), c.data(), ntok, nmatch, extra.data(), (u32)extra.size(),
                      0xFFFFFFFFu, unit_start, &rb, &rl, &rs);
            return rs;
        };
        const u32 clean = span_of();
        // Disturb some cases: a changed value keeps its slice valid when the unit's length follows it (0 to 3);
        // a stream made shorter or longer (4, 5, 8) or a unit's length changed (6, 7) must be refused.
        const u32 what = rnd() % 10;
        if (what == 0 && !extra.empty()) {
            const size_t at = rnd() % extra.size();
            extra[at] ^= (u8)(1u << (rnd() % 8));
        }
        if (what == 1) tp[rnd() % ntok] = rnd() % 64;
        if (what == 2 && nmatch) mp[rnd() % nmatch] = rnd() % 64;
        if (what == 3 && nmatch) bk[rnd() % nmatch] = rnd() % 200;
        if (what == 4 && !extra.empty()) extra.resize(rnd() % extra.size());
        if (what == 5) extra.push_back((u8)rnd());
        if (what == 8 && !extra.empty()) extra.pop_back();  // a few bits short
        u32 unit_len = what <= 3 ? span_of() : clean;
        if (what == 6) unit_len = clean ? clean - 1 - rnd() % clean : 0;
        if (what == 7) unit_len = clean + 1 + rnd() % 100;
        // The stream at a random alignment, in a buffer that ends with its last aligned word.
        const u32 off = rnd() % 4, len = (u32)extra.size();
        std::vector<u32> store((off + len + 3) / 4 + (off + len == 0 ? 1 : 0));
        u8* buf = (u8*)store.data();
        for (size_t i = 0; i < 4 * store.size(); i++) buf[i] = (u8)rnd();
        if (len) memcpy(buf + off, extra.data(), len);
        std::vector<u32> a1(tp), b1(mp), l1(ntok, 0), a2(tp), b2(mp), l2(ntok, 0);
        std::vector<u64> c1(bk), c2(bk);
        u64 rb = 0, gb = 0;
        u32 rl = 0, rs = 0, gl = 0, gs = 0;
        const bool rbad = reference(a1.data(), b1.data(), l1.data(), c1.data(), ntok, nmatch, buf + off, len,
                                    unit_len, unit_start, &rb, &rl, &rs);
        const bool gbad = k1_token_values(a2.data(), b2.data(), l2.data(), c2.data(), ntok, nmatch, buf + off, len,
                                          unit_len, unit_start, &gb, &gl, &gs);
        if (rbad != gbad) {
            printf("FAIL: case %d (disturbance %u, %u tokens): reference refuses %d, k1_token_values %d\n", it, what,
                   ntok, rbad, gbad);
            return 1;
        }
        if (rbad) {
            refused++;
            continue;
        }
        accepted++;
        if (rb != gb || rl != gl || rs != gs || a1 != a2 || b1 != b2 || l1 != l2 || c1 != c2) {
            printf("FAIL: case %d (disturbance %u, %u tokens): bits %llu/%llu literals %u/%u span %u/%u, tokens %s\n",
                   it, what, ntok, (unsigned long long)rb, (unsigned long long)gb, rl, gl, rs, gs,
                   a1 == a2 && b1 == b2 && l1 == l2 && c1 == c2 ? "equal" : "differ");
            return 1;
        }
    }
    // Both kinds must be common, or the comparison proves little.
    if (refused < 20000 || accepted < 20000) {
        printf("FAIL: %u refused, %u accepted: the cases do not cover both\n", refused, accepted);
        return 1;
    }
    printf("ok\n");
    return 0;
}
