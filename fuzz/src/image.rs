//! Archive images as fuzz inputs: the seed framing, resealing, and opening an image.
//!
//! **Framing** (`archive_read`, `resolver`): `mode: u8, originals_len: u32, originals, hash(originals): u64,
//! hash(archive): u64, archive` (keyed xxh3, compared through [`hash_matches`] so the fuzzer cannot forge them). `originals` is `count: u32` then `(path_len: u16, path, len: u32, bytes)` per
//! file: the files the seed archive was packed from, kept beside it so that a target can compare what it reads
//! with the truth. The two hashes tell the target which parts the fuzzer left alone: while the originals are
//! intact, every read that succeeds must give their bytes; while the archive is intact too, every read must
//! succeed. Input that does not frame is taken as a bare archive with nothing to compare against.
//!
//! **Resealing** (mode bit 0): every checksum of the image (header, the three sections, footer) is recomputed
//! and the footer's `file_len` set to the real length before the image is parsed, so a mutated count, offset
//! or tree entry is judged by the validators behind the checksums instead of stopping at them. Without it a
//! fuzzer practically never gets past the first xxh3.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Mode bit: recompute every checksum before parsing.
pub const RESEAL: u8 = 1;

/// One file the seed archive was packed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    /// The path inside the archive (as `Tree::path_of` gives it).
    pub path: Vec<u8>,
    pub bytes: Vec<u8>,
}

/// A fuzz input split into its parts.
pub struct Framed<'a> {
    pub mode: u8,
    /// The originals, when they framed and their hash matched.
    pub originals: Option<Vec<Original>>,
    /// The framing hash of the archive as the seed wrote it (`None` for a bare archive, which is then never taken as intact).
    pub archive_hash: Option<u64>,
    pub archive: &'a [u8],
}

/// Little-endian field reader over fuzzer bytes: `None` past the end.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(out)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

fn parse_originals(section: &[u8]) -> Option<Vec<Original>> {
    let mut f = Fields { bytes: section, at: 0 };
    let count = f.u32()?;
    // Every file takes at least 6 bytes, so a lying count cannot make this reserve more than the input holds.
    let mut out = Vec::with_capacity((count as usize).min(section.len() / 6));
    for _ in 0..count {
        let path_len = f.u16()? as usize;
        let path = f.take(path_len)?.to_vec();
        let len = f.u32()? as usize;
        out.push(Original { path, bytes: f.take(len)?.to_vec() });
    }
    (f.at == section.len()).then_some(out)
}

/// Splits a framed input; anything that does not frame is a bare archive (`mode` from the first byte).
pub fn unframe(data: &[u8]) -> Framed<'_> {
    let bare = || match data.split_first() {
        Some((&mode, archive)) => Framed { mode, originals: None, archive_hash: None, archive },
        None => Framed { mode: 0, originals: None, archive_hash: None, archive: &[] },
    };
    let mut f = Fields { bytes: data, at: 0 };
    let framed = (|| {
        let mode = *f.take(1)?.first()?;
        let len = f.u32()? as usize;
        let section = f.take(len)?;
        let originals_hash = f.u64()?;
        let archive_hash = f.u64()?;
        let originals = if hash_matches(originals_hash, section) { parse_originals(section) } else { None };
        Some(Framed { mode, originals, archive_hash: Some(archive_hash), archive: &data[f.at..] })
    })();
    framed.unwrap_or_else(bare)
}

/// The framing of a seed: `originals` beside `archive`.
pub fn frame(mode: u8, originals: &[Original], archive: &[u8]) -> Vec<u8> {
    let mut section = Vec::new();
    section.extend_from_slice(&(originals.len() as u32).to_le_bytes());
    for o in originals {
        section.extend_from_slice(&(o.path.len() as u16).to_le_bytes());
        section.extend_from_slice(&o.path);
        section.extend_from_slice(&(o.bytes.len() as u32).to_le_bytes());
        section.extend_from_slice(&o.bytes);
    }
    let mut out = vec![mode];
    out.extend_from_slice(&(section.len() as u32).to_le_bytes());
    out.extend_from_slice(&section);
    out.extend_from_slice(&frame_hash(&section).to_le_bytes());
    out.extend_from_slice(&frame_hash(archive).to_le_bytes());
    out.extend_from_slice(archive);
    out
}

const HEADER_LEN: usize = 64;
const FOOTER_LEN: usize = 64;
/// Header and footer carry the xxh3 of their first 56 bytes in their last 8.
const SEALED: usize = 56;

fn seal(record: &mut [u8]) {
    let sum = xxh3_64(&record[..SEALED]);
    record[SEALED..SEALED + 8].copy_from_slice(&sum.to_le_bytes());
}

fn footer_u64(image: &[u8], field: usize) -> u64 {
    let at = image.len() - FOOTER_LEN + 8 + 8 * field;
    u64::from_le_bytes(image[at..at + 8].try_into().expect("8 bytes"))
}

/// Recomputes every checksum of `image` (FORMAT.md §2) and sets the footer's `file_len` to the real length.
/// Sections whose offsets are out of order or out of bounds are left as they are (the parser refuses those).
pub fn reseal(image: &mut [u8]) {
    let len = image.len();
    if len < HEADER_LEN + FOOTER_LEN {
        return;
    }
    seal(&mut image[..HEADER_LEN]);
    let footer_at = len - FOOTER_LEN;
    // Footer fields: total_len, tables_offset, tree_offset, index_offset, file_len.
    image[footer_at + 40..footer_at + 48].copy_from_slice(&(len as u64).to_le_bytes());
    let bounds = [footer_u64(image, 1), footer_u64(image, 2), footer_u64(image, 3), footer_at as u64];
    for w in bounds.windows(2) {
        let (from, to) = (w[0], w[1]);
        if from < HEADER_LEN as u64 || from > to || to > footer_at as u64 || to - from < 8 {
            continue;
        }
        let (from, to) = (from as usize, to as usize);
        let sum = xxh3_64(&image[from..to - 8]);
        image[to - 8..to].copy_from_slice(&sum.to_le_bytes());
    }
    seal(&mut image[footer_at..]);
}

/// An image written to a file (in `/dev/shm` when it exists) for the APIs that open archives by path; removed
/// on drop. Unique per process and call, so parallel fuzzers and test threads never share one.
pub struct ImageFile {
    path: PathBuf,
}

impl ImageFile {
    pub fn write(image: &[u8]) -> std::io::Result<ImageFile> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("aceapex-fuzz-{}-{n}.acx", std::process::id()));
        std::fs::write(&path, image)?;
        Ok(ImageFile { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ImageFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The image the target works on: the archive part, resealed when the mode asks, and whether it is still
/// exactly the seed's archive.
pub fn prepare(framed: &Framed<'_>) -> (Vec<u8>, bool) {
    let mut image = framed.archive.to_vec();
    if framed.mode & RESEAL != 0 {
        reseal(&mut image);
    }
    let intact = framed.archive_hash.is_some_and(|stored| hash_matches(stored, &image));
    (image, intact)
}

/// The seed of the framing hashes: the fuzzer can learn it only by watching a comparison, which
/// [`hash_matches`] does not show it.
const FRAME_KEY: u64 = 0x6163_6561_7065_7821;

/// The framing hash of `bytes`: xxh3 under [`FRAME_KEY`].
fn frame_hash(bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, FRAME_KEY)
}

/// Whether `stored` is the framing hash of `bytes`, in a way the fuzzer cannot forge. libFuzzer watches integer
/// comparisons (`-use_cmp`) and copies the operand it sees into the input where the other operand's bytes are:
/// comparing `stored == xxh3(bytes)` directly let it rewrite `stored` to the plain xxh3 of a mutated image, and
/// the target then took a mutated archive for the intact seed (a false finding of the first campaign, kept as
/// `regress-forged-intact-hash`). The hash is keyed, and both sides are hashed once more before the comparison,
/// so neither the key nor a value to copy ever shows.
fn hash_matches(stored: u64, bytes: &[u8]) -> bool {
    let blind = |h: u64| xxh3_64(&h.to_le_bytes());
    blind(stored) == blind(frame_hash(bytes))
}
