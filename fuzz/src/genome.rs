//! The genome-mode target: FASTA text split into its layout (line runs, headers, masks) and bases, and the
//! serialised structure read back from hostile bytes.

use aceapex::genome::{serial, split, Genome};
use xxhash_rust::xxh3::xxh3_64;

/// Mode bit 0: the rest is serialised structure rather than FASTA text.
const STRUCTURE: u8 = 1;
/// Mode bit 1 (structure only): recompute the trailing xxh3 so the mutation reaches the field checks.
const RESEAL: u8 = 2;

/// Reads `[off, off + len)` of `g` with bases from `fetch_base(i)`, checking that the fetch asks for exactly the
/// bases `base_range` names and that no more bytes come back than were asked for.
fn read(g: &Genome, off: u64, len: usize, fetch_base: impl Fn(u64) -> u8) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut asked = None;
    let n = g
        .read_at(off, &mut out, |a, buf: &mut [u8]| {
            asked = Some((a, buf.len() as u64));
            buf.iter_mut().enumerate().for_each(|(i, b)| *b = fetch_base(a + i as u64));
            Ok::<(), ()>(())
        })
        .expect("the fetch never fails");
    assert!(n <= len);
    if let Some((a, count)) = asked {
        assert_eq!(g.base_range(off, len as u64), (a, a + count), "read {len} at {off}");
        assert!(a + count <= g.bases(), "read {len} at {off} asked for bases past the stream");
    }
    out.truncate(n);
    out
}

/// Offsets to read from in a file of `total` bytes: both ends, the middle and a few spread by `salt`.
fn offsets(total: u64, salt: u64) -> Vec<u64> {
    let mut v = vec![0, total / 2, total.saturating_sub(1), total];
    if total > 0 {
        v.extend((0..4).map(|k| (salt.rotate_left(16 * k)) % total));
    }
    v
}

/// `fasta_layout`: `mode, bytes`.
///
/// - FASTA mode: whatever the split models must come back byte for byte — the whole file from its bases, every
///   planned range read, and the structure through its encoding; the bases are pure `ACGT`.
/// - Structure mode: `serial::decode` of hostile bytes returns `Ok` or `Err`, never panics; a structure that
///   decodes survives re-encoding (`decode(encode(g)) == g`, and the encoding is a fixed point: the format
///   allows overlong varints, so the re-encoding may be shorter than the input but never different in meaning),
///   and reads anywhere in it stay within the file and the base stream.
pub fn fasta_layout(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let salt = xxh3_64(rest);
    if mode & STRUCTURE == 0 {
        let Some(s) = split(rest) else { return };
        assert!(s.bases.iter().all(|b| b"ACGT".contains(b)));
        assert_eq!(s.genome.bases(), s.bases.len() as u64);
        assert_eq!(s.genome.total_len(), rest.len() as u64);
        assert_eq!(s.genome.reconstruct(&s.bases).as_deref(), Some(rest), "the split does not give the file back");
        for off in offsets(rest.len() as u64, salt) {
            for len in [1usize, 2, 61, 300] {
                let got = read(&s.genome, off, len, |i| s.bases[i as usize]);
                let end = (off as usize + len).min(rest.len());
                assert!(got == rest[(off as usize).min(end)..end], "read {len} at {off}");
            }
        }
        let bytes = serial::encode(&s.genome);
        assert_eq!(serial::decode(&bytes).as_ref(), Ok(&s.genome), "the structure does not survive its encoding");
        return;
    }
    let mut bytes = rest.to_vec();
    if mode & RESEAL != 0 && bytes.len() >= 8 {
        let body = bytes.len() - 8;
        let sum = xxh3_64(&bytes[..body]);
        bytes[body..].copy_from_slice(&sum.to_le_bytes());
    }
    let Ok(g) = serial::decode(&bytes) else { return };
    let again = serial::encode(&g);
    assert!(again.len() <= bytes.len(), "re-encoding grew the structure");
    assert_eq!(serial::decode(&again).as_ref(), Ok(&g), "a decoded structure does not survive re-encoding");
    assert!(serial::encode(&serial::decode(&again).expect("just checked")) == again);
    // A decoded structure can declare up to 2^40 bytes: read a few small ranges, never the whole file.
    let fake_base = |i: u64| b"ACGT"[(i % 4) as usize];
    for off in offsets(g.total_len(), salt) {
        let got = read(&g, off, 97, fake_base);
        assert_eq!(got.len() as u64, 97.min(g.total_len().saturating_sub(off)));
    }
    if g.total_len() <= 1 << 16 {
        let bases: Vec<u8> = (0..g.bases()).map(fake_base).collect();
        let whole = g.reconstruct(&bases).expect("bases of the declared length");
        assert_eq!(whole.len() as u64, g.total_len());
        let (a, b) = g.base_range(0, g.total_len());
        assert_eq!((a, b), (0, g.bases()));
    }
}
