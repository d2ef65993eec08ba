// LiteralSink1 (where a K = 1 slice's literals go) against the byte-by-byte placement: random token layouts
// (empty, short and long literal runs between matches), literals placed eight at a time and then one at a time;
// every literal byte lands at its offset and nothing past the unit's last aligned word is written.
#include "prelude.h"
#include "literal_sink.inc"

int main() {
    for (int it = 0; it < 200000; it++) {
        const u32 unit = 64 + rnd() % 4033;
        std::vector<u32> tp, li;
        std::vector<int> is_lit(unit, 0);
        u32 pos = 0, nlit = 0;
        for (;;) {
            u32 lit = rnd() % 4 == 0 ? 0 : rnd() % (rnd() % 3 == 0 ? 300 : 12);
            if (pos + lit > unit) lit = unit - pos;
            tp.push_back(pos);
            li.push_back(nlit);
            for (u32 k = 0; k < lit; k++) is_lit[pos + k] = 1;
            pos += lit;
            nlit += lit;
            if (pos == unit) break;
            const u32 len = 2 + rnd() % (rnd() % 2 ? 6 : 100);
            if (pos + len > unit) {  // the last token is literal-only: the rest of the unit joins its run
                for (u32 k = pos; k < unit; k++) is_lit[k] = 1;
                nlit += unit - pos;
                break;
            }
            pos += len;
        }
        std::vector<u8> out(unit + 16, 0xEE), lits(nlit);
        for (auto& c : lits) c = (u8)(1 + rnd() % 250);
        LiteralSink1 sink;
        sink.init(tp.data(), li.data(), (u32)tp.size(), nlit);
        u32 l = 0;
        if (rnd() % 8 != 0)
            for (; l + 8 <= nlit; l += 8) {
                u64 v = 0;
                for (int j = 0; j < 8; j++) v |= (u64)lits[l + j] << (8 * j);
                sink.put8<K1_WORDS>(out.data(), nullptr, l, v);
            }
        for (; l < nlit; l++) sink.put<K1_WORDS>(out.data(), nullptr, l, lits[l]);
        u32 k = 0;
        for (u32 p = 0; p < unit; p++) {
            if (!is_lit[p]) continue;
            if (out[p] != lits[k]) {
                printf("FAIL: case %d: unit of %u bytes, %zu tokens: offset %u holds %u, literal %u is %u\n", it, unit,
                       tp.size(), p, out[p], k, lits[k]);
                return 1;
            }
            k++;
        }
        for (u32 p = (unit + 7) & ~7u; p < unit + 16; p++)
            if (out[p] != 0xEE) {
                printf("FAIL: case %d: offset %u, past the unit of %u bytes, was written\n", it, p, unit);
                return 1;
            }
    }
    printf("ok\n");
    return 0;
}
