//! The logical stream as one byte slice without holding it in anonymous memory, and file-backed scratch space.
//!
//! A single input file is mapped directly. Several pieces are copied into an unlinked temporary file next to the
//! output and that file is mapped, so a 10 GiB input costs page cache, not heap. Scratch buffers proportional to
//! the input (the per-byte depth map) use the same kind of unlinked file.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use xxhash_rust::xxh3::xxh3_64;

use crate::error::{Error, Result};
use crate::pack::input::{KeptBases, Piece};

/// The concatenated bytes of all regular files, in entry order.
pub struct LogicalStream {
    map: Option<memmap2::Mmap>,
}

impl LogicalStream {
    /// Builds the stream from `pieces`; temporary files go into `scratch_dir`.
    pub fn build(pieces: &[Piece], total_len: u64, scratch_dir: &Path) -> Result<LogicalStream> {
        if total_len == 0 {
            return Ok(LogicalStream { map: None });
        }
        let nonempty: Vec<&Piece> = pieces.iter().filter(|p| !p.is_empty()).collect();
        let file = match nonempty.as_slice() {
            [Piece::Disk { path, size }] => {
                let f = File::open(path).map_err(|e| Error::io(path, e))?;
                check_size(path, &f, *size)?;
                f
            }
            _ => concatenate(&nonempty, scratch_dir)?,
        };
        // SAFETY: mapped read-only; inputs modified while packing are the user's race (at worst SIGBUS or bytes
        // that differ from the recorded sizes, which `check_size` catches in the common case of a size change).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(scratch_dir, e))?;
        if map.len() as u64 != total_len {
            return Err(Error::Input {
                path: scratch_dir.to_path_buf(),
                detail: format!("inputs changed while packing: expected {total_len} bytes, mapped {}", map.len()),
            });
        }
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(LogicalStream { map: Some(map) })
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

fn check_size(path: &Path, f: &File, size: u64) -> Result<()> {
    let now = f.metadata().map_err(|e| Error::io(path, e))?.len();
    if now != size {
        return Err(Error::Input {
            path: path.to_path_buf(),
            detail: format!("changed size while packing: {size} -> {now}"),
        });
    }
    Ok(())
}

/// Copies all pieces into one unlinked temporary file.
fn concatenate(pieces: &[&Piece], scratch_dir: &Path) -> Result<File> {
    let (file, tmp_path) = scratch_file(scratch_dir)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &file);
    for piece in pieces {
        match piece {
            Piece::Disk { path, size } => {
                let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
                check_size(path, &f, *size)?;
                let copied = std::io::copy(&mut f, &mut out).map_err(|e| Error::io(path, e))?;
                if copied != *size {
                    return Err(Error::Input {
                        path: path.clone(),
                        detail: format!("changed size while packing: {size} -> {copied}"),
                    });
                }
            }
            Piece::Generated(bytes) => out.write_all(bytes).map_err(|e| Error::io(&tmp_path, e))?,
            Piece::Zeros(len) => {
                std::io::copy(&mut std::io::repeat(0).take(*len), &mut out).map_err(|e| Error::io(&tmp_path, e))?;
            }
            Piece::Genome { path, size, bases, structure_offset, structure_len, structure_hash, kept } => {
                let structure = Structure { offset: *structure_offset, len: *structure_len, hash: *structure_hash };
                match kept {
                    Some(kept) => write_kept_region(path, *bases, structure, kept, &mut out)?,
                    None => write_genome_region(path, *size, *bases, structure, &mut out)?,
                }
            }
        }
    }
    out.flush().map_err(|e| Error::io(&tmp_path, e))?;
    drop(out);
    Ok(file)
}

/// Where a genome-mode file's structure lies in the stream, and what it must hash to.
struct Structure {
    offset: u64,
    len: u64,
    hash: u64,
}

/// Most genome pieces (about 2 MiB of bases each) modelled at once while the stream is built.
const MAX_PIECES_AHEAD: usize = 16;

/// Writes a genome-mode file's region (FORMAT.md §2.6): the head, pointing at the structure found while
/// gathering, then the file's bases (split again from the file). The structure itself is a piece of its own,
/// after every file. A file that changed since it was examined is refused.
fn write_genome_region(path: &Path, size: u64, bases: u64, structure: Structure, out: &mut impl Write) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    check_size(path, &file, size)?;
    // SAFETY: mapped read-only for the duration of this call; an input modified while packing is the user's race
    // (at worst SIGBUS), and a changed split is caught below.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let changed = || Error::Input { path: path.to_path_buf(), detail: "changed while packing".into() };
    if map.len() as u64 != size {
        return Err(changed());
    }
    let head = crate::genome::region::head(structure.offset, structure.len as usize);
    out.write_all(&head).map_err(|e| Error::io(path, e))?;
    let mut written = 0u64;
    let mut io_error = None;
    let pieces = crate::genome::pieces::piece_bytes();
    // Pieces are modelled in parallel, a few per core at a time (their bases wait in memory for their turn).
    let batch = (2 * rayon::current_num_threads()).min(MAX_PIECES_AHEAD);
    let encoded = crate::genome::pieces::encode_file_batched(&map, pieces, batch, |bases| {
        if io_error.is_none() {
            written += bases.len() as u64;
            io_error = out.write_all(bases).err();
        }
    });
    if let Some(e) = io_error {
        return Err(Error::io(path, e));
    }
    let same =
        encoded.is_some_and(|e| e.structure.len() as u64 == structure.len && xxh3_64(&e.structure) == structure.hash);
    if !same || written != bases {
        return Err(changed());
    }
    Ok(())
}

/// Writes a genome-mode file's region from the bases kept by its first look (which produced its structure from the
/// same bytes, so nothing can have changed in between): the head, then the bases.
fn write_kept_region(
    path: &Path,
    bases: u64,
    structure: Structure,
    kept: &KeptBases,
    out: &mut impl Write,
) -> Result<()> {
    let total: u64 = kept.0.iter().map(|b| b.len() as u64).sum();
    if total != bases {
        // The pieces and the count come from the same first look: a mismatch is a packer bug.
        return Err(Error::Input { path: path.to_path_buf(), detail: format!("kept {total} bases of {bases}") });
    }
    let head = crate::genome::region::head(structure.offset, structure.len as usize);
    out.write_all(&head).map_err(|e| Error::io(path, e))?;
    for piece in kept.0.iter() {
        out.write_all(piece).map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

/// Creates a new, already unlinked, read-write file in `dir`. The path is returned only for error messages.
pub fn scratch_file(dir: &Path) -> Result<(File, PathBuf)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".aceapex-pack-{}-{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path) {
            Ok(f) => {
                std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                return Ok((f, path));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    Err(Error::Input { path: dir.to_path_buf(), detail: "could not create a scratch file".into() })
}

/// A zero-filled, writable, file-backed byte buffer of `len` bytes (e.g. one depth byte per stream byte).
pub struct ScratchBytes {
    map: Option<memmap2::MmapMut>,
}

impl ScratchBytes {
    pub fn new(len: u64, dir: &Path) -> Result<ScratchBytes> {
        if len == 0 {
            return Ok(ScratchBytes { map: None });
        }
        let (file, path) = scratch_file(dir)?;
        file.set_len(len).map_err(|e| Error::io(&path, e))?;
        // SAFETY: the file is private to this process (created exclusively and already unlinked).
        let map = unsafe { memmap2::MmapMut::map_mut(&file) }.map_err(|e| Error::io(&path, e))?;
        Ok(ScratchBytes { map: Some(map) })
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.map.as_deref_mut().unwrap_or(&mut [])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_file_and_concatenation() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"hello ").unwrap();
        let one = [Piece::Disk { path: a.clone(), size: 6 }];
        assert_eq!(LogicalStream::build(&one, 6, dir.path()).unwrap().bytes(), b"hello ");
        let two = [Piece::Disk { path: a, size: 6 }, Piece::Generated(b"world".to_vec())];
        assert_eq!(LogicalStream::build(&two, 11, dir.path()).unwrap().bytes(), b"hello world");
        assert_eq!(LogicalStream::build(&[], 0, dir.path()).unwrap().bytes(), b"");
        // No scratch files are left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut s = ScratchBytes::new(10, dir.path()).unwrap();
        s.bytes_mut()[9] = 7;
        assert_eq!(s.bytes_mut()[..], [0, 0, 0, 0, 0, 0, 0, 0, 0, 7]);
    }

    #[test]
    fn detects_size_change() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"hello").unwrap();
        let err = LogicalStream::build(&[Piece::Disk { path: a, size: 3 }], 3, dir.path()).err().unwrap();
        assert!(err.to_string().contains("changed size"), "{err}");
    }
}
