//! Context-coded literals (FORMAT.md §3.5): round trips for every order and lane count through whole-block,
//! single-slice, lock-step and prefix decoding; slices with other bytes falling back to the LIT table; and
//! refusal of a context flag without a model.

use super::*;
use crate::codec::context::{for_each_context, CtxModel, LitContext, MAX_LIT_ORDER};
use std::sync::Arc;

/// Bases from an order-3 Markov source (so that contexts matter), with a non-base byte every `other` literals
/// (0: none) so that some slices must fall back to the LIT table.
pub(super) fn markov_bases(n: usize, seed: u64, other: usize) -> Vec<u8> {
    let mut rng = XorShift(seed | 1);
    let mut h = 0usize;
    (0..n)
        .map(|i| {
            if other > 0 && i % other == other - 1 {
                return b'N';
            }
            // Each 3-base history strongly prefers one base.
            let r = rng.next() % 8;
            let s = if r < 5 { (h * 7 + 3) % 4 } else { (r % 4) as usize };
            h = (h * 4 + s) % 64;
            b"ACGT"[s]
        })
        .collect()
}

/// A block of `literals` with a few matches cut in; the literals are used in order.
fn block_of(literals: &[u8], seed: u64) -> (Vec<Token>, Vec<u8>) {
    let mut rng = XorShift(seed | 1);
    let mut tokens = Vec::new();
    let mut used = 0usize;
    let mut dst = 0u64;
    while literals.len() - used > 600 {
        let lit_len = (rng.next() % 500) as u32;
        used += lit_len as usize;
        dst += lit_len as u64;
        let match_len = 2 + (rng.next() % 40) as u32;
        let back = 1 + rng.next() % (dst + 1000);
        tokens.push(Token { lit_len, match_len, back, rc: false });
        dst += match_len as u64;
    }
    tokens.push(Token { lit_len: (literals.len() - used) as u32, match_len: 0, back: 0, rc: false });
    (tokens, literals.to_vec())
}

/// Encodes with the block's own tables plus a context model of `order` built from the slices it codes.
fn encode_with_model(
    start: u64,
    tokens: &[Token],
    literals: &[u8],
    lanes: u32,
    order: u8,
) -> (TableSet, Vec<u8>, Vec<SliceTokens>) {
    let block = block_bytes(start, tokens, literals);
    let slice_len = 1usize << test_slice_log(block.len() as u32);
    let slices = cut_slices(tokens, literals, &block, slice_len);
    let mut counts = vec![[0u64; 4]; 1 << (2 * order)];
    let mask = (1u32 << (2 * order)) - 1;
    for s in slices.iter().filter(|s| codes_with_contexts(&s.literals)) {
        let first = 3 * (s.tokens.len() - 1) + 1;
        for_each_context(&s.literals, first, lanes as usize, mask, |_, ctx, code| {
            counts[ctx as usize][code as usize] += 1
        });
    }
    let model = Arc::new(CtxModel::from_counts(order, &counts));
    let mut stats = SymbolStats::default();
    count_slices(&slices, true, &mut stats);
    let tables = TableSet { ctx: Some(LitContext { back: 0, model }), ..TableSet::from_stats(&stats) };
    let mut payload = Vec::new();
    encode_slices(&slices, &tables, lanes, &mut payload);
    (tables, payload, slices)
}

/// Whether slice `j` of a payload flags context-coded literals.
fn flagged(payload: &[u8], shape: BlockShape, j: usize) -> bool {
    let (lanes, n) = shape.check().unwrap();
    let slice = SliceDirectory::parse(payload, n).unwrap().slice(j).unwrap();
    SliceHead::read(slice, lanes, shape.slice_span(j).1).unwrap().contexts
}

/// Encodes with a model, then decodes the whole block, each slice alone, all slices in one lock step, and
/// prefixes, checking each against the cut parse.
pub(super) fn check_round_trip(start: u64, tokens: &[Token], literals: &[u8], lanes: u32, order: u8) -> usize {
    let (tables, payload, slices) = encode_with_model(start, tokens, literals, lanes, order);
    let len = block_len_of(tokens);
    let shape = shape(start, len, lanes);
    check_block_and_slices(&payload, &tables, shape, &slices);
    let slice_len = 1u32 << shape.slice_log;
    let mut coded = 0;
    for (j, s) in slices.iter().enumerate() {
        assert_eq!(flagged(&payload, shape, j), codes_with_contexts(&s.literals), "slice {j}");
        coded += codes_with_contexts(&s.literals) as usize;
    }
    let jobs: Vec<SliceJob> = (0..slices.len()).map(|j| (&payload[..], shape, j, &tables)).collect();
    for (j, (got, s)) in decode_slices(&jobs).into_iter().zip(&slices).enumerate() {
        check_parsed(&got.expect("lock step decodes"), &s.tokens, &s.literals, start + (j as u32 * slice_len) as u64);
    }
    let ends: Vec<u32> = (0..slices.len()).map(|j| (j as u32 * 377) % slice_len + 1).collect();
    for ((got, s), &end) in decode_slice_prefixes(&jobs, &ends).into_iter().zip(&slices).zip(&ends) {
        let got = got.expect("prefix decodes");
        let kept = (end as usize).min(s.literals.len());
        assert_eq!(got.tokens, s.tokens);
        assert_eq!(got.literals, s.literals[..kept]);
    }
    coded
}

#[test]
fn every_order_and_lane_count_round_trips() {
    for order in 1..=MAX_LIT_ORDER {
        for lanes in [1, 2] {
            // Pure bases, and bases with an N now and then (those slices use the LIT table).
            for (other, seed) in [(0usize, 3u64), (3000, 5)] {
                let lits = markov_bases(12_000, seed + order as u64, other);
                let (tokens, literals) = block_of(&lits, seed * 31 + lanes as u64);
                let coded = check_round_trip(1 << 20, &tokens, &literals, lanes, order);
                assert!(coded > 0, "order {order} lanes {lanes}: no slice used the model");
            }
        }
    }
}

#[test]
fn long_fills_and_short_literal_runs() {
    // A long periodic fill (the cut leaves a literal or so per slice) and then a literal-only slice.
    let lits = markov_bases(2049, 9, 0);
    let tokens = vec![
        Token { lit_len: 1, match_len: 4095, back: 1, rc: false },
        Token { lit_len: 2048, match_len: 0, back: 0, rc: false },
    ];
    check_round_trip(0, &tokens, &lits, 1, 4);
    check_round_trip(0, &tokens, &lits, 2, 2);
}

#[test]
fn context_coding_pays_on_structured_bases() {
    let lits = markov_bases(16_000, 11, 0);
    let tokens = [Token { lit_len: lits.len() as u32, match_len: 0, back: 0, rc: false }];
    let (_, plain, _) = encode_with_own_tables(0, &tokens, &lits, 1);
    let (_, ctx, _) = encode_with_model(0, &tokens, &lits, 1, 3);
    assert!(ctx.len() * 10 < plain.len() * 9, "context-coded {} bytes, plain {}", ctx.len(), plain.len());
}

#[test]
fn a_context_flag_without_a_model_is_refused() {
    let lits = markov_bases(5000, 13, 0);
    let tokens = [Token { lit_len: 5000, match_len: 0, back: 0, rc: false }];
    let (tables, payload, _) = encode_with_model(0, &tokens, &lits, 1, 2);
    let shape = shape(0, 5000, 1);
    let no_model = TableSet { ctx: None, ..tables.clone() };
    let err = decode_block(&payload, &no_model, shape).unwrap_err();
    assert!(matches!(err, DecodeError::Invalid { what: "lit_field", .. }), "{err}");
    assert!(decode_slice(&payload, &no_model, shape, 1).is_err());
    let jobs = vec![(&payload[..], shape, 0, &no_model), (&payload[..], shape, 1, &tables)];
    let got = decode_slices(&jobs);
    assert!(got[0].is_err() && got[1].is_ok());
    // Another model of the same order decodes garbage that the final rANS state check refuses.
    let counts: Vec<[u64; 4]> = (0..16u64).map(|i| [1 + i, 40, 3, 9]).collect();
    let other = TableSet {
        ctx: Some(LitContext { back: 0, model: Arc::new(CtxModel::from_counts(2, &counts)) }),
        ..tables.clone()
    };
    assert!(decode_block(&payload, &other, shape).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_base_blocks_round_trip(n in 1usize..20_000, seed in 1u64.., other in prop_oneof![Just(0usize), 2usize..5000],
                                     order in 1u8..=MAX_LIT_ORDER, lane_log in 0u32..2, start in 0u64..(1 << 30)) {
        let lits = markov_bases(n, seed, other);
        let (tokens, literals) = block_of(&lits, seed ^ 0x55);
        check_round_trip(start + 4096, &tokens, &literals, 1 << lane_log, order);
    }

    #[test]
    fn corrupt_context_payloads_never_panic(seed in 1u64.., order in 1u8..=MAX_LIT_ORDER, lane_log in 0u32..2,
                                            flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4)) {
        let lits = markov_bases(6000, seed, 0);
        let (tokens, literals) = block_of(&lits, seed);
        let lanes = 1 << lane_log;
        let (tables, mut payload, _) = encode_with_model(4096, &tokens, &literals, lanes, order);
        for (at, x) in flips {
            let n = payload.len();
            payload[at % n] ^= x;
        }
        let shape = shape(4096, block_len_of(&tokens), lanes);
        if let Ok(parsed) = decode_block(&payload, &tables, shape) {
            prop_assert_eq!(*parsed.token_pos.last().unwrap(), parsed.len);
        }
        for j in 0..slice_count(shape.len, shape.slice_log) {
            let _ = decode_slice(&payload, &tables, shape, j);
        }
    }
}

#[test]
fn codes_with_contexts_equals_a_byte_check() {
    // Every length around the 8-byte words, a non-base at every position (lower case, N, a byte with a base's
    // low bits, zero).
    for len in 0..40 {
        let bases: Vec<u8> = (0..len).map(|i| b"ACGT"[(i * 7 + i / 3) % 4]).collect();
        assert_eq!(codes_with_contexts(&bases), len > 0, "len {len}");
        for at in 0..len {
            for bad in [b'a', b'N', 0xc1, 0x01, 0, b'U'] {
                let mut v = bases.clone();
                v[at] = bad;
                assert!(!codes_with_contexts(&v), "len {len}, {bad:#x} at {at}");
            }
        }
    }
}

#[test]
fn blocks_decoded_together_equal_each_alone() {
    // Two blocks with models of different orders through one entropy stage: the same parse as `decode_block` of
    // each, and a corrupt one named by its index.
    let make = |seed: u64, order: u8| {
        let lits = markov_bases(15_000, seed, 0);
        let (tokens, literals) = block_of(&lits, seed * 7);
        let start = seed << 16;
        let (tables, payload, _) = encode_with_model(start, &tokens, &literals, 2, order);
        (tables, payload, shape(start, block_len_of(&tokens), 2))
    };
    let (a, b) = (make(11, 4), make(13, 6));
    let alone = [decode_block(&a.1, &a.0, a.2).unwrap(), decode_block(&b.1, &b.0, b.2).unwrap()];
    let together = decode_blocks(&[(&a.1[..], &a.0, a.2), (&b.1[..], &b.0, b.2)]).unwrap();
    for (k, (t, one)) in together.iter().zip(&alone).enumerate() {
        assert_eq!((&t.tokens, &t.literals), (&one.tokens, &one.literals), "block {k}");
    }
    let mut bad = b.1.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x5a;
    assert!(decode_block(&bad, &b.0, b.2).is_err(), "the flip at {at} is caught alone");
    let err = decode_blocks(&[(&a.1[..], &a.0, a.2), (&bad[..], &b.0, b.2)]);
    assert_eq!(err.map_err(|(k, _)| k).err(), Some(1));
}
