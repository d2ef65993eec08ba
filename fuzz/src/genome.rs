//! The genome-mode target: FASTA text split into its layout (line runs, headers, masks) and bases, and the
//! serialised structure read back from hostile bytes: a piece's (version 3) or a file's piece table with its
//! pieces (version 4).

use aceapex::genome::pieces::{self, PieceTable};
use aceapex::genome::{serial, split, Genome};
use xxhash_rust::xxh3::xxh3_64;

/// Mode bit 0: the rest is serialised structure rather than FASTA text.
const STRUCTURE: u8 = 1;
/// Mode bit 1 (structure only): recompute the trailing xxh3 so the mutation reaches the field checks.
const RESEAL: u8 = 2;
/// Mode bit 2 (structure only): the rest is a piece table and its pieces (structure version 4); with
/// [`RESEAL`], the table's checksum is recomputed.
const PIECES: u8 = 4;

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
        // In pieces of a size the input picks: the pieces give the file back, and their bases are the file's.
        let piece_bytes = 1 + salt % 512;
        let mut bases = Vec::new();
        let e =
            pieces::encode_file(rest, piece_bytes, |b| bases.extend_from_slice(b)).expect("pieces of a modelled file");
        assert_eq!(bases, s.bases, "the pieces' bases differ from the file's");
        let (table, genomes) = decode_pieces(&e.structure).expect("an encoded piece table decodes");
        let mut whole = Vec::new();
        for (i, g) in genomes.iter().enumerate() {
            let b = table.bases_of(i);
            whole.extend(g.reconstruct(&bases[b.start as usize..b.end as usize]).expect("piece bases"));
        }
        assert!(whole == rest, "the pieces do not give the file back");
        return;
    }
    if mode & PIECES != 0 {
        let mut bytes = rest.to_vec();
        if mode & RESEAL != 0 {
            reseal_table(&mut bytes);
        }
        let Some((table, genomes)) = decode_pieces(&bytes) else { return };
        assert_eq!(table.len(), genomes.len());
        let (mut total, mut bases) = (0u64, 0u64);
        for (i, g) in genomes.iter().enumerate() {
            assert_eq!(table.bytes(i), total..total + g.total_len());
            assert_eq!(table.bases_of(i), bases..bases + g.bases());
            total += g.total_len();
            bases += g.bases();
        }
        assert_eq!((total, bases), (table.total_len(), table.bases()));
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

/// The piece table of `structure` and its pieces, decoded; `None` where any check refuses them.
fn decode_pieces(structure: &[u8]) -> Option<(PieceTable, Vec<Genome>)> {
    let n = structure.len() as u64;
    let len = pieces::table_len(structure, n).ok()?;
    let table = PieceTable::decode(&structure[..(pieces::PREFIX_LEN + len) as usize], n).ok()?;
    let mut genomes = Vec::new();
    for i in 0..table.len() {
        let c = table.code(i);
        genomes.push(table.decode_piece(i, &structure[c.start as usize..c.end as usize]).ok()?);
    }
    Some((table, genomes))
}

/// Recomputes the checksum at the end of the piece table `bytes` begins with, when its prefix says where that is.
fn reseal_table(bytes: &mut [u8]) {
    if bytes.len() < pieces::PREFIX_LEN as usize {
        return;
    }
    let len = u32::from_le_bytes(bytes[5..9].try_into().expect("4 bytes")) as usize;
    let end = pieces::PREFIX_LEN as usize + len;
    if len < 8 || end > bytes.len() {
        return;
    }
    let sum = xxh3_64(&bytes[..end - 8]);
    bytes[end - 8..end].copy_from_slice(&sum.to_le_bytes());
}
