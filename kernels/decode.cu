// aceapex GPU decode kernels (FORMAT.md §3, version 7), compiled at run time by NVRTC for the GPU's own
// architecture.
//
// The unit of work is a **unit** = one slice of 2^unit_log bytes (FORMAT.md §3: every block is cut into slices,
// each coded on its own like a small block), numbered globally over the stream: unit u covers stream bytes from
// u << unit_log, and its table group is u >> group_shift. Matches never cross a unit boundary; their sources lie
// anywhere before them.
//
// A slice's rANS stream has K = 1 or 2 independent lanes (FORMAT.md §3.4): lane 0 decodes every code and literals
// [0, s) from state[0], its words from the front of the word stream; lane 1 (K = 2) literals [s, nlit) from
// state[1], its words from the back (`lane_split` gives s). At the end both lanes' states are 2^16 and their words
// add up to the stream's. Two paths share the unit parser (`parse_units`: the code phase and the token parse of a
// unit on a thread, or on a warp by group prefix sums; then each lane's literals on a thread, literal_phase_k1, or
// with K = 2 in parse_k1_linear lane 1 on a thread of its own; parse_k1_linear leaves the token parse to
// finish_linear_k1, a warp a unit):
//
//  * Full decode (device-resident throughput): the parser over every unit writes literals to their stream
//    positions and tokens to flat arrays; then, on an archive with few match bytes (the host decides, Resolve::Auto
//    in device.rs), the resident seek's maps below and one `chase_matches` launch that chases every match byte to
//    its literal in place; on a larger one a `copy_flow` launch that copies every match in stream order once its
//    sources are (see "Full decode by copies in stream order"). The alternatives, kept for comparison: match levels (`level_ordered`, `copy_level`, ...), and stamps per byte (literal: 1, match byte:
//    0, written by the parser only for them) with `resolve_round` 0 and the chase: `resolve_round` 0 then
//    resolves every match byte whose source byte is final (stamp = 1 + depth), byte-parallel per warp, reading
//    sources other warps finished earlier in the same launch; what it leaves goes on a list in pieces of at most
//    RESOLVE_PIECE bytes, and `resolve_chase` resolves each of those bytes by following its matches through the
//    tokens to a byte round 0 left final (at most max_depth hops). (ACEAPEX_GPU_RESOLVE_ROUNDS=1 instead runs
//    rounds 1..max_depth, each resolving one more level of the list, as in session 11.)
//
//  * Seek (a batch of requested units): `seed_batch` puts the requested units on a device worklist; then per
//    level d = 0..L: the parser parses the units claimed so far and `expand_ranges` turns the byte ranges
//    needed at level d into their source ranges at level d+1, claiming (atomically) the units that hold them —
//    only the slices holding needed source pieces are parsed. The ranges only ever shrink (a range maps to at
//    most as many source bytes), so the work is bounded by the requested bytes times the depth. `chase_bytes`
//    then resolves every requested byte by following matches through the parsed units (at most L hops) to a
//    literal; `seek_resolve` is the alternative that runs the resolve rounds over all parsed slots.
//    `reset_batch` clears the claims.
//
//  * Resident seek: once the full decode's parse has run over every unit (tokens and literals device-resident),
//    `chase_resident` resolves a request's bytes through those tokens in one launch, with no parse levels.
//
// Every length, count and offset read from the archive is checked; a failure is reported once in
// status[0] = code << 40 | unit, and the host turns it into an error (the caller falls back to the CPU).
//
// Unit metadata (host-validated block directory and slice header, 8 u32 per unit, src/engine/gpu/prep.rs):
//   [0,1] slice payload offset in the file (lo, hi), [2] nmatch, [3] nlit, [4] nwords, [5] extra_len,
//   [6] header length (the four varints) | META_CTX when the unit's literals are context-coded (FORMAT.md §3.5),
//   [7] decoded unit length (0xFFFFFFFF: header invalid).
// Literal context models (FORMAT.md §2.4, §3.5): xgrp holds per group its model's order k (0: none) and the
// index in xtab of its context 0; xtab holds per context (uint2) c1 | c2 << 16 and c3, the cumulative
// frequencies of C, G and T (A starts at 0, the scale ends at 4096). A context-coded literal is decoded by
// comparing the slot with c1, c2, c3; the context of a lane's next literal is ((ctx << 2) | code) & (4^k - 1),
// starting at 0 in every slice.
// Decode tables: per group, per table (LL, ML, OF, LIT), 4096 u32 slot entries
//   sym | (freq - 1) << 8 | cum << 20, or 0xFFFFFFFF for a slot no symbol covers.
// Compact decode tables (the seek path loads them into shared memory, a warp per slice): per group CT_WORDS u32,
//   bytes [0, 4 * 4096): the symbol of every slot, table t (LL, ML, OF, LIT) at t * 4096; then words
//   [CT_FC, CT_FC + 568): freq | cum << 16 per symbol (LL at 0, ML at 64, OF at 128, LIT at 312), freq 0 for a
//   symbol the table does not have (an unused table maps every slot to a symbol of frequency 0).
// Tokens of a parsed unit (index tok_off[entry] + t, t < nmatch + 1):
//   tpos[t] = unit offset where token t's literals start, mpos[t] = where its match starts,
//   back[t] = match distance | RC_FLAG for a reverse-complement match (0 for the final literal-only token). A
//   match ends at tpos[t + 1]. Match byte k of token t copies stream position source_of(base, back[t], k), with
//   base = match start - distance, complemented for a reverse-complement match (FORMAT.md §1, version 5).

// NVRTC compiles this one translation unit. Its parts, each a file, in the order they build on each other (each
// file's head says what it holds); the host puts their text in place of these lines (kernel_source in
// src/engine/gpu/device/compile.rs), so the binary carries them and needs no include path.
#include "common.cuh"
#include "words.cuh"
#include "literals.cuh"
#include "tokens.cuh"
#include "parse.cuh"
#include "seek.cuh"
#include "chase.cuh"
#include "resolve.cuh"
#include "levels.cuh"
#include "flow.cuh"
