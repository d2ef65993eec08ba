// k1_staged8 and k1_place_staged (MODE_STAGE: a K = 1 slice's bases staged 16 a word, 2 bits each, in a column of
// the CTA's staging, then placed run by run) against the byte-by-byte placement: random token layouts as in
// literal_sink.cpp, random bases; every literal lands as "ACGT"[base] at its offset, nothing past the unit.
#include "prelude.h"
#define K1_STAGE_ROWS 257
#include "staged_literals.inc"

int main() {
    const u32 stride = 128, column = 37;
    std::vector<u32> staging(K1_STAGE_ROWS * stride);
    for (int it = 0; it < 100000; it++) {
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
            if (pos + len > unit) {
                for (u32 k = pos; k < unit; k++) is_lit[k] = 1;
                nlit += unit - pos;
                break;
            }
            pos += len;
        }
        std::vector<u8> bases(nlit);
        for (auto& b : bases) b = (u8)(rnd() & 3);
        for (auto& w : staging) w = rnd();  // whatever the column held before
        u32* col = staging.data() + column;
        for (u32 l = 0; l < nlit; l += 16) {
            u32 w = 0;
            for (u32 k = 0; k < 16 && l + k < nlit; k++) w |= (u32)bases[l + k] << (2 * k);
            col[(l / 16) * stride] = w;
        }
        std::vector<u8> out(unit + 16, 0xEE);
        k1_place_staged(tp.data(), li.data(), (u32)tp.size(), nlit, col, stride, out.data());
        u32 k = 0;
        for (u32 p = 0; p < unit; p++) {
            if (!is_lit[p]) continue;
            if (out[p] != (u8)"ACGT"[bases[k]]) {
                printf("FAIL: case %d: unit of %u bytes, %zu tokens: offset %u holds %u, literal %u is %c\n", it, unit,
                       tp.size(), p, out[p], k, "ACGT"[bases[k]]);
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
