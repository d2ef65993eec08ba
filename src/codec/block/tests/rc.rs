//! Reverse-complement matches (FORMAT.md §1, §3.2, §3.3, version 5): the byte-wise definition, round trips of
//! explicit and continued RC matches mixed with forward ones (at slice boundaries, for every lane count, with
//! context-coded literals), the exact refusals of hostile payloads, and random token streams against an
//! independent transcription of the definition.

use super::*;

fn fwd(lit_len: u32, match_len: u32, back: u64) -> Token {
    Token { lit_len, match_len, back, rc: false }
}

fn rc(lit_len: u32, match_len: u32, back: u64) -> Token {
    Token { lit_len, match_len, back, rc: true }
}

/// FORMAT.md §1 transcribed a second time, independently of [`reference_block_bytes`]: each match byte by its own
/// formula over absolute positions (bytes before `start` from [`outside_byte`]), with the complement spelled out.
fn naive_bytes(start: u64, tokens: &[Token], literals: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    let at = |out: &Vec<u8>, p: u64| if p < start { outside_byte(p) } else { out[(p - start) as usize] };
    let mut lits = literals.iter();
    for t in tokens {
        out.extend(lits.by_ref().take(t.lit_len as usize));
        let dst = start + out.len() as u64;
        for k in 0..t.match_len as u64 {
            let byte = if t.rc {
                match at(&out, dst - t.back - k) {
                    b'A' => b'T',
                    b'T' => b'A',
                    b'C' => b'G',
                    b'G' => b'C',
                    b'a' => b't',
                    b't' => b'a',
                    b'c' => b'g',
                    b'g' => b'c',
                    other => other,
                }
            } else {
                at(&out, dst - t.back + k % t.back)
            };
            out.push(byte);
        }
    }
    out
}

/// Round trip through [`round_trip`] (tokens of the whole block and of every slice alone), and the bytes of the
/// decoded tokens equal the bytes of the tokens given (the cut changes no byte), by both transcriptions.
fn round_trip_bytes(start: u64, tokens: &[Token], literals: &[u8], lanes: u32) {
    round_trip(start, tokens, literals, lanes);
    let (tables, payload, _) = encode_with_own_tables(start, tokens, literals, lanes);
    let parsed = decode_block(&payload, &tables, shape(start, block_len_of(tokens), lanes)).unwrap();
    let expected = block_bytes(start, tokens, literals);
    assert_eq!(naive_bytes(start, tokens, literals), expected);
    assert_eq!(block_bytes(start, &parsed.tokens, &parsed.literals), expected);
}

#[test]
fn complement_is_an_involution_on_every_byte() {
    for b in 0..=255u8 {
        assert_eq!(COMPLEMENT[COMPLEMENT[b as usize] as usize], b);
    }
    assert_eq!(
        &[b'A', b'C', b'G', b'T', b'a', b'c', b'g', b't', b'N', b'\n'].map(|b| COMPLEMENT[b as usize]),
        b"TGCAtgcaN\n"
    );
}

#[test]
fn reference_bytes_reverse_and_complement_the_source() {
    // ACCGTA, then its reverse complement from back 1 (source ends at the last A): TACGGT.
    let tokens = [rc(6, 6, 1), fwd(0, 0, 0)];
    assert_eq!(block_bytes(0, &tokens, b"ACCGTA"), b"ACCGTATACGGT");
    // A source wholly before the block (start 100): bytes 93 ..= 99 reversed and complemented.
    let tokens = [rc(0, 7, 1), fwd(2, 0, 0)];
    let expected: Vec<u8> = (93..100).rev().map(|p| COMPLEMENT[outside_byte(p) as usize]).chain(*b"xy").collect();
    assert_eq!(block_bytes(100, &tokens, b"xy"), expected);
    assert_eq!(naive_bytes(100, &tokens, b"xy"), expected);
}

#[test]
fn explicit_and_continued_rc_matches_round_trip_for_every_lane_count() {
    // Literals, a forward match, an RC match, one substituted base and its RC continuation at δ = 0 (the same
    // anti-diagonal: back grows by 2·(dst − d)), RC continuations at δ = ±1 after indels, a forward match after
    // them (explicit: a continuation takes the previous match's kind), and a far RC match.
    let lit: Vec<u8> = (0..3000u32).map(|i| b"ACGT"[((i * 7 + i / 11) % 4) as usize]).collect();
    let mut tokens = vec![fwd(300, 40, 120), rc(20, 30, 200)];
    // The RC match above is at dst 360 with back 200; the next starts at 391: back 200 + 2·31.
    tokens.push(rc(1, 25, 200 + 2 * 31));
    // Next at 391 + 25 + 2 = 418, δ = +1: back = 262 + 2·27 − 1.
    tokens.push(rc(2, 10, 262 + 2 * 27 - 1));
    // Next at 418 + 10 + 3 = 431, δ = −1: back = 315 + 2·13 + 1.
    tokens.push(rc(3, 12, 315 + 2 * 13 + 1));
    tokens.push(fwd(4, 9, 342));
    tokens.push(rc(5, 64, 1 << 30));
    tokens.push(fwd(2000, 0, 0));
    let nlit: u32 = tokens.iter().map(|t| t.lit_len).sum();
    let literals = &lit[..nlit as usize];
    let start = 1u64 << 31;
    for lanes in [1, 2] {
        round_trip_bytes(start, &tokens, literals, lanes);
    }
    // The encoder took continuation codes for the three RC continuations, and RC codes for the explicit ones.
    let (tables, _, slices) = encode_with_own_tables(start, &tokens, literals, 1);
    assert_eq!(slices.len(), 2, "all but the final literals in slice 0");
    let (mut prev, mut dst, mut codes) = (None, 0u64, Vec::new());
    for t in &slices[0].tokens[..slices[0].tokens.len() - 1] {
        dst += t.lit_len as u64;
        codes.push(distance_code(t.back, t.rc, dst, prev).0);
        prev = Some(PrevMatch { back: t.back, dst, rc: t.rc });
        dst += t.match_len as u64;
    }
    let base = OF_REVERSE_BASE as u32;
    assert!(codes[0] < 88 && codes[1] >= base && codes[5] < 88 && codes[6] >= base, "{codes:?}");
    assert_eq!(&codes[2..5], &[88, 89, 90], "{codes:?}");
    for &c in &codes {
        assert!(tables.of.freq[c as usize] > 0);
    }
}

#[test]
fn rc_matches_cut_at_slice_boundaries_round_trip() {
    // 2 KiB slices of a 12 KiB block: RC matches that span one and two boundaries, one ending exactly at the
    // block's end, forward matches between them.
    let mut tokens = vec![fwd(3500, 20, 7), rc(10, 3000, 500), fwd(5, 40, 3), rc(0, 4000, 100), rc(1, 30, 6000)];
    let len = block_len_of(&tokens);
    tokens.push(rc(0, 12288 - len, 7000));
    tokens.push(fwd(0, 0, 0));
    let nlit: u32 = tokens.iter().map(|t| t.lit_len).sum();
    let literals: Vec<u8> = (0..nlit).map(|i| b"ACGTN"[(i % 5) as usize]).collect();
    for lanes in [1, 2] {
        round_trip_bytes(0, &tokens, &literals, lanes);
        round_trip_bytes(1 << 40, &tokens, &literals, lanes);
    }
    let (_, _, slices) = encode_with_own_tables(0, &tokens, &literals, 2);
    assert_eq!(slices.len(), 6);
    let rc_pieces = slices.iter().flat_map(|s| &s.tokens).filter(|t| t.rc).count();
    assert!(rc_pieces >= 6, "{rc_pieces} RC pieces");
}

#[test]
fn largest_rc_distance_and_the_start_of_the_stream() {
    // Code 183: back 2^40 (all extra bits set); and sources reaching exactly stream position 0.
    let tokens = [rc(0, 5, MAX_BACK), rc(3, 2, MAX_BACK - 7), fwd(1, 0, 0)];
    let start = MAX_BACK + 4;
    round_trip_bytes(start, &tokens, b"ACGT", 2);
    assert_eq!(distance_code(MAX_BACK, true, 0, None).0, (OF_ALPHABET - 1) as u32);
    let tokens = [rc(4, 4, 1), rc(0, 8, 1), fwd(0, 0, 0)];
    round_trip_bytes(0, &tokens, b"ACGT", 2);
    assert_eq!(block_bytes(0, &tokens, b"ACGT"), b"ACGTACGTACGTACGT");
}

#[test]
fn rc_matches_with_context_coded_literals() {
    for lanes in [1, 2] {
        let lits = contexts::markov_bases(9000, 17 + lanes as u64, 0);
        let mut rng = XorShift(0x5eed ^ lanes as u64);
        // Offsets in the block at 2^20: every source (within 1000 bytes before the block) is valid either way.
        let (mut tokens, mut used, mut dst) = (Vec::new(), 0usize, 0u64);
        while lits.len() - used > 600 {
            let lit_len = (rng.next() % 400) as u32;
            used += lit_len as usize;
            dst += lit_len as u64;
            let match_len = 2 + (rng.next() % 60) as u32;
            let back = 1 + rng.next() % (dst + 1000);
            let t = if rng.next() % 2 == 0 { rc(lit_len, match_len, back) } else { fwd(lit_len, match_len, back) };
            tokens.push(t);
            dst += match_len as u64;
        }
        tokens.push(fwd((lits.len() - used) as u32, 0, 0));
        let coded = contexts::check_round_trip(1 << 20, &tokens, &lits, lanes, 4);
        assert!(coded > 0, "no context-coded slice");
        assert_eq!(naive_bytes(1 << 20, &tokens, &lits), block_bytes(1 << 20, &tokens, &lits));
    }
}

/// A one-slice payload (every symbol in the tables) of the given tokens, each OF field chosen by `of_field(t,
/// token, dst, prev)`, as the encoder would write it except where `of_field` says otherwise.
fn one_slice_payload(
    tokens: &[Token],
    literals: &[u8],
    lanes: u32,
    of_field: impl FnMut(usize, &Token, u64, Option<PrevMatch>) -> (u32, u32, u64),
) -> Vec<u8> {
    let mut slice = Vec::new();
    encode_slice_with(tokens, literals, &TableSet::every_symbol(), lanes, &mut slice, of_field);
    let mut out = Vec::new();
    varint::write(slice.len() as u64, &mut out);
    out.extend_from_slice(&slice);
    out
}

fn as_encoded(_: usize, token: &Token, dst: u64, prev: Option<PrevMatch>) -> (u32, u32, u64) {
    distance_code(token.back, token.rc, dst, prev)
}

#[test]
fn rc_sources_before_the_stream_start_are_refused_exactly() {
    let tables = TableSet::every_symbol();
    for lanes in [1, 2] {
        for start in [0u64, 1000] {
            // back + len − 1 = dst exactly is valid (the source's first byte is stream position 0) ...
            let dst = start + 10;
            let ok = [rc(10, 6, dst - 5), fwd(2, 0, 0)];
            let shape = BlockShape { start, len: 18, slice_log: 9, lanes };
            let payload = one_slice_payload(&ok, &[b'A'; 12], lanes, as_encoded);
            assert_eq!(decode_block(&payload, &tables, shape).unwrap().tokens, ok);
            // ... one more byte reaches before it, though back alone is ≤ dst (a forward match would be valid).
            let bad = [rc(10, 6, dst - 4), fwd(2, 0, 0)];
            let payload = one_slice_payload(&bad, &[b'A'; 12], lanes, as_encoded);
            let code = distance_code(dst - 4, true, 10, None).0;
            let needles = [
                "slice 0".to_string(),
                "token 0".to_string(),
                format!("code {code}"),
                format!("reverse-complement back {}", dst - 4),
                "length 6".to_string(),
                format!("position {dst}"),
            ];
            let needles: Vec<&str> = needles.iter().map(|s| s.as_str()).collect();
            assert_refused(decode_block(&payload, &tables, shape), &needles);
            assert_refused(decode_slice(&payload, &tables, shape, 0), &needles);
            // The same tokens as forward matches are valid.
            let forward = [fwd(10, 6, dst - 4), fwd(2, 0, 0)];
            let payload = one_slice_payload(&forward, &[b'A'; 12], lanes, as_encoded);
            assert_eq!(decode_block(&payload, &tables, shape).unwrap().tokens, forward);
        }
    }
}

#[test]
fn continuations_take_the_previous_match_kind_and_are_checked_as_rc() {
    let tables = TableSet::every_symbol();
    let shape = BlockShape { start: 0, len: 40, slice_log: 9, lanes: 2 };
    // An RC match at 10 (back 1, reading 9 and 8), three literals, then at 15 its continuation at δ = 0:
    // back 1 + 2·5 = 11, source ending at 4. Length 5 reads 4 ..= 0: valid; length 6 reaches before 0.
    for (len2, valid) in [(5u32, true), (6, false)] {
        let tokens = [rc(10, 2, 1), rc(3, len2, 11), fwd(25 - len2, 0, 0)];
        let literals = [b'C'; 38];
        let literals = &literals[..(38 - len2 as usize)];
        let mut codes = Vec::new();
        let payload = one_slice_payload(&tokens, literals, 2, |t, token, dst, prev| {
            let field = as_encoded(t, token, dst, prev);
            codes.push(field.0);
            field
        });
        assert_eq!(codes, [OF_REVERSE_BASE as u32, OF_EXPLICIT_CODES as u32], "explicit RC, then continuation +0");
        let result = decode_block(&payload, &tables, shape);
        if valid {
            assert_eq!(result.unwrap().tokens, tokens);
        } else {
            assert_refused(result, &["token 1", "code 88", "reverse-complement back 11", "length 6", "position 15"]);
        }
    }
    // A continuation code after an RC match reads as an RC match, whatever the encoder meant: the payload below
    // codes token 1 (meant as a forward match of back 11) with continuation +0, which decodes as an RC match of
    // back 1 + 2·(15 − 10) = 11.
    let meant = [rc(10, 2, 1), fwd(3, 5, 11), fwd(20, 0, 0)];
    let payload = one_slice_payload(&meant, &[b'G'; 33], 2, |t, token, dst, prev| {
        if t == 1 {
            (OF_EXPLICIT_CODES as u32, 0, 0)
        } else {
            as_encoded(t, token, dst, prev)
        }
    });
    assert_eq!(decode_block(&payload, &tables, shape).unwrap().tokens, [meant[0], rc(3, 5, 11), meant[2]]);
    // A forward match after an RC one is coded explicitly: no continuation spans two kinds.
    assert_eq!(continuation_index(11, false, 15, Some(PrevMatch { back: 11, dst: 10, rc: true })), None);
    // A continuation of a forward match stays forward, and δ applies as b + δ.
    let tokens = [fwd(10, 2, 4), fwd(3, 5, 5), fwd(20, 0, 0)];
    let mut codes = Vec::new();
    let payload = one_slice_payload(&tokens, &[b'T'; 33], 2, |t, token, dst, prev| {
        let field = as_encoded(t, token, dst, prev);
        codes.push(field.0);
        field
    });
    assert_eq!(codes, [3, 89]);
    assert_eq!(decode_block(&payload, &tables, shape).unwrap().tokens, tokens);
}

#[test]
fn rc_continuations_cannot_fall_below_one_after_a_valid_match() {
    // An RC continuation's back is b + 2·(dst − d) − δ with b ≥ 1, dst − d ≥ 2 (the previous match's length) and
    // δ ≤ 4: at least 1. continued_back still refuses what only a hostile origin could give.
    let prev = PrevMatch { back: 1, dst: 10, rc: true };
    assert_eq!(continued_back(prev, 12, 4), Some(1));
    assert_eq!(continued_back(prev, 11, 4), None);
    assert_eq!(continued_back(prev, 9, 0), None, "a destination before the previous match's");
    assert_eq!(continued_back(PrevMatch { back: u64::MAX - 1, dst: 0, rc: true }, 2, 0), None, "overflow");
    for &delta in &OF_CONTINUATION_DELTAS {
        assert!(continued_back(prev, 12, delta).is_some_and(|b| b >= 1), "delta {delta}");
    }
}

#[test]
fn of_tables_beyond_184_symbols_are_refused() {
    let mut counts = vec![1u64; OF_ALPHABET + 1];
    counts[OF_ALPHABET] = 5;
    let tables = TableSet { of: Table::from_counts(&counts), ..TableSet::every_symbol() };
    let shape = BlockShape { start: 0, len: 12, slice_log: 9, lanes: 1 };
    let payload = one_slice_payload(&[fwd(12, 0, 0)], &[b'A'; 12], 1, as_encoded);
    let err = decode_block(&payload, &tables, shape).unwrap_err().to_string();
    assert!(err.contains("OF table nsym") && err.contains("184"), "{err}");
    // Every code up to 183 is in the alphabet.
    assert_eq!(TableSet::every_symbol().of.nsym(), OF_ALPHABET);
}

/// A random valid token stream of `len` bytes at `start` with RC matches (explicit, continued at every δ,
/// across slices) mixed with forward ones, and its literals: each RC match reads a source range that starts at or
/// after position 0.
fn random_rc_block(seed: u64, start: u64, len: u32) -> (Vec<Token>, Vec<u8>) {
    let mut rng = XorShift(seed | 1);
    let (mut tokens, mut dst) = (Vec::new(), 0u32);
    // Literals of a match that came out invalid, carried into the next token's run.
    let mut carry = 0u32;
    let mut prev: Option<PrevMatch> = None;
    loop {
        let lit_len = rng.length(6).min(len - dst);
        let match_len = (rng.length(30) + 2).min(len - dst - lit_len);
        if match_len < 2 {
            tokens.push(fwd(carry + len - dst, 0, 0));
            break;
        }
        let at = start + (dst + lit_len) as u64;
        let kind_rc = rng.next() % 2 == 0;
        let back = match (rng.next() % 4, prev) {
            // A continuation of the previous match at a random δ (the encoder codes it as one when the kind
            // matches).
            (0 | 1, Some(p)) => {
                let delta = OF_CONTINUATION_DELTAS[(rng.next() % 8) as usize];
                continued_back(p, at, delta).unwrap_or(1)
            }
            (2, _) => 1 + rng.next() % 16,
            _ => 1 + rng.next() % at.max(1),
        };
        let valid = if kind_rc { back + match_len as u64 - 1 <= at } else { back <= at };
        dst += lit_len + match_len;
        if !valid {
            carry += lit_len + match_len;
            continue;
        }
        tokens.push(Token { lit_len: carry + lit_len, match_len, back, rc: kind_rc });
        carry = 0;
        prev = Some(PrevMatch { back, dst: at, rc: kind_rc });
    }
    let nlit: u32 = tokens.iter().map(|t| t.lit_len).sum();
    let literals = (0..nlit).map(|_| b"ACGTacgtN"[(rng.next() % 9) as usize]).collect();
    (tokens, literals)
}

#[test]
fn random_rc_streams_use_every_kind_of_distance_code() {
    // Over a few blocks, explicit RC codes and continuations of RC matches both occur, so the proptest below
    // exercises both paths.
    let (mut explicit, mut continued) = (0, 0);
    for seed in 0..4 {
        let (tokens, literals) = random_rc_block(seed, 1 << 16, 20_000);
        let (_, _, slices) = encode_with_own_tables(1 << 16, &tokens, &literals, 2);
        for s in &slices {
            let (mut prev, mut dst) = (None, 0u64);
            for t in &s.tokens[..s.tokens.len() - 1] {
                dst += t.lit_len as u64;
                let code = distance_code(t.back, t.rc, dst, prev).0 as usize;
                explicit += (code >= OF_REVERSE_BASE) as u32;
                continued += (t.rc && (OF_EXPLICIT_CODES..OF_REVERSE_BASE).contains(&code)) as u32;
                prev = Some(PrevMatch { back: t.back, dst, rc: t.rc });
                dst += t.match_len as u64;
            }
        }
    }
    assert!(explicit > 100 && continued > 100, "{explicit} explicit RC codes, {continued} RC continuations");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_rc_streams_round_trip_to_the_definition(
        seed in any::<u64>(),
        start in prop_oneof![Just(0u64), 0u64..5000, (1u64 << 39)..(1u64 << 40)],
        len in 1u32..12_000,
        lanes in prop_oneof![Just(1u32), Just(2)],
    ) {
        let (tokens, literals) = random_rc_block(seed, start, len);
        round_trip_bytes(start, &tokens, &literals, lanes);
    }
}
