//! Carries the campaigns' archive seeds (`cmin-*`, `regress-*`) from format version 2 to version 3 (FORMAT.md §6):
//! the version field, and every table set gets `lit_order = 0` with its LIT table in the sparse form (§2.4).
//! Checksums that were valid stay valid; images that do not parse that far only get the version patched, so
//! they still reach the checks behind it. Run once after a format change:
//! `cargo test --manifest-path fuzz/Cargo.toml --no-default-features -- --ignored upgrade_v2_seeds`.

use aceapex::codec::tables::{Table, LIT_ALPHABET};
use aceapex::codec::varint;
use aceapex_fuzz::image::{frame, prepare, reseal, unframe};
use xxhash_rust::xxh3::xxh3_64;

const LEN: usize = 64;

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn sealed(record: &[u8]) -> bool {
    xxh3_64(&record[..56]) == u64_at(record, 56)
}

fn seal(record: &mut [u8]) {
    let sum = xxh3_64(&record[..56]);
    record[56..64].copy_from_slice(&sum.to_le_bytes());
}

/// A version-2 table set (LL, ML, OF, LIT dense) in the version-3 form, or `None` if it does not parse.
fn upgrade_set(set: &[u8]) -> Option<Vec<u8>> {
    let mut pos = 0;
    for (alphabet, what) in [(64, "LL"), (64, "ML"), (96, "OF")] {
        Table::read_at(set, &mut pos, alphabet, what).ok()?;
    }
    let mut out = set[..pos].to_vec();
    let lit = Table::read_at(set, &mut pos, LIT_ALPHABET, "LIT").ok()?;
    if pos != set.len() {
        return None;
    }
    varint::write(0, &mut out);
    lit.write_sparse(&mut out);
    Some(out)
}

/// The version-3 image of a version-2 archive image, or `None` when `a` is not one.
fn upgrade_image(a: &[u8]) -> Option<Vec<u8>> {
    if a.len() < 2 * LEN || &a[..8] != b"ACEAPEX\0" || a[8..10] != [2, 0] {
        return None;
    }
    let mut out = a.to_vec();
    out[8] = 3;
    if sealed(&a[..LEN]) {
        seal(&mut out[..LEN]);
    }
    let f = a.len() - LEN;
    let (total, t, tr, ix) = (u64_at(a, f + 8), u64_at(a, f + 16), u64_at(a, f + 24), u64_at(a, f + 32));
    let (block_log, group_log) = (a[12] as u32, a[15] as u32);
    let parsable = LEN as u64 <= t
        && t <= tr
        && tr <= ix
        && ix <= f as u64
        && (12..=20).contains(&block_log)
        && group_log <= 12
        && total <= 1 << 40;
    if !parsable {
        return Some(out);
    }
    let groups = total.div_ceil(1 << block_log).div_ceil(1 << group_log) as usize;
    let section = &a[t as usize..tr as usize];
    if section.len() < 4 * groups + 8 {
        return Some(out);
    }
    let sets = &section[4 * groups..section.len() - 8];
    let mut start = 0usize;
    let mut new_ends = Vec::new();
    let mut new_sets = Vec::new();
    for g in 0..groups {
        let end = u32::from_le_bytes(section[4 * g..4 * g + 4].try_into().unwrap()) as usize;
        if end < start || end > sets.len() {
            return Some(out);
        }
        let Some(set) = upgrade_set(&sets[start..end]) else { return Some(out) };
        new_sets.extend(set);
        new_ends.extend_from_slice(&(new_sets.len() as u32).to_le_bytes());
        start = end;
    }
    if start != sets.len() {
        return Some(out);
    }
    let mut new_section = new_ends;
    new_section.extend(new_sets);
    let hash_ok = xxh3_64(&section[..section.len() - 8]) == u64_at(section, section.len() - 8);
    let hash = if hash_ok { xxh3_64(&new_section) } else { u64_at(section, section.len() - 8) };
    new_section.extend_from_slice(&hash.to_le_bytes());
    let delta = (new_section.len() as u64).wrapping_sub(section.len() as u64);
    let footer_ok = sealed(&a[f..]);
    let mut image = out[..t as usize].to_vec();
    image.extend_from_slice(&new_section);
    image.extend_from_slice(&a[tr as usize..]);
    let nf = image.len() - LEN;
    for field in [3usize, 4, 5] {
        let at = nf + 8 * field;
        let v = u64_at(&image, at).wrapping_add(delta);
        image[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    if footer_ok {
        seal(&mut image[nf..]);
    }
    Some(image)
}

/// The upgraded seed of an `archive_open` (bare: mode, archive) or framed (`archive_read`, `resolver`) target.
fn upgrade_seed(data: &[u8], framed_target: bool) -> Option<Vec<u8>> {
    if !framed_target {
        let (&mode, archive) = data.split_first()?;
        let mut out = vec![mode];
        out.extend(upgrade_image(archive)?);
        return Some(out);
    }
    let framed = unframe(data);
    let mut image = upgrade_image(framed.archive)?;
    let (_, intact) = prepare(&framed);
    match (&framed.originals, intact) {
        (Some(originals), true) => {
            // An intact seed stays intact: every checksum is valid, and the framing hash is of the new image.
            reseal(&mut image);
            Some(frame(framed.mode, originals, &image))
        }
        _ => {
            let mut out = data[..data.len() - framed.archive.len()].to_vec();
            out.extend(image);
            Some(out)
        }
    }
}

#[test]
#[ignore = "rewrites fuzz/seeds"]
fn upgrade_v2_seeds() {
    for (target, framed) in [("archive_open", false), ("archive_read", true), ("resolver", true)] {
        let mut upgraded = 0;
        for entry in std::fs::read_dir(super::seed_dir(target)).unwrap() {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            if let Some(new) = upgrade_seed(&data, framed) {
                std::fs::write(&path, new).unwrap();
                upgraded += 1;
            }
        }
        eprintln!("{target}: {upgraded} seeds upgraded to version 3");
    }
}
