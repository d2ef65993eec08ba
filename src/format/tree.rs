//! The tree section (FORMAT.md §2.5): directories, regular files, symlinks, and lookups over them.
//!
//! [`Tree::from_entries`] is the single validation point: the packer builds a tree through it and the reader
//! parses one into it, so both sides agree on what a legal tree is (root first, parents before children, legal
//! unique names). Lookups then rely on those invariants and never index out of bounds.

use xxhash_rust::xxh3::xxh3_64;

use super::cursor::{checked_body, put_varint, zigzag_decode, zigzag_encode, Cursor};
use crate::error::DecodeError;

/// Index of an entry in the tree; 0 is the root directory.
pub type EntryId = u32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    /// A regular file of `size` bytes. Transform 0: its bytes are `[offset, offset + size)` of the logical
    /// stream. Transform 1 (genome mode): a region at `offset` holds a head pointing at its structure, then its
    /// bases (FORMAT.md §2.6).
    File {
        offset: u64,
        size: u64,
        transform: u32,
    },
    Symlink {
        target: Vec<u8>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub parent: EntryId,
    /// Raw name bytes (any bytes but '/' and NUL); empty for the root.
    pub name: Vec<u8>,
    pub kind: EntryKind,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    pub mtime_sec: i64,
    pub mtime_nsec: u32,
    /// Bit 0: generated sidecar (a FASTA `.fai`).
    pub flags: u32,
}

/// The whole tree with its lookup indexes.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub entries: Vec<Entry>,
    /// `children[dir]`: the entry ids of a directory's children, sorted by name.
    pub children: Vec<Vec<EntryId>>,
}

impl Tree {
    pub fn entry(&self, id: EntryId) -> Option<&Entry> {
        self.entries.get(id as usize)
    }

    /// The child of `dir` named `name`.
    pub fn lookup(&self, dir: EntryId, name: &[u8]) -> Option<EntryId> {
        let kids = self.children.get(dir as usize)?;
        kids.binary_search_by(|&k| self.entries[k as usize].name.as_slice().cmp(name)).ok().map(|i| kids[i])
    }

    /// Resolves a '/'-separated path relative to the root (leading '/' allowed; symlinks are not followed).
    pub fn resolve_path(&self, path: &[u8]) -> Option<EntryId> {
        let mut cur = 0;
        for comp in path.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".") {
            cur = self.lookup(cur, comp)?;
        }
        Some(cur)
    }

    /// The entry's path from the root, '/'-separated, without a leading '/'.
    /// An unknown id gives an empty path. Parents precede children (validated), so the walk ends.
    pub fn path_of(&self, mut id: EntryId) -> Vec<u8> {
        let mut parts = Vec::new();
        while id != 0 {
            let Some(e) = self.entries.get(id as usize) else { break };
            parts.push(e.name.as_slice());
            id = e.parent;
        }
        parts.reverse();
        parts.join(&b'/')
    }
}

/// Longest entry name (FORMAT.md §2.5).
pub const MAX_NAME_LEN: usize = 255;
/// Longest symlink target.
pub const MAX_SYMLINK_LEN: usize = 4095;
/// Permission bits an entry may carry.
pub const MODE_MASK: u32 = 0o7777;
/// Entry flag bit 0: generated sidecar. Other bits are reserved.
pub const FLAG_SIDECAR: u32 = 1;
/// Transform 0: the file's bytes are stored as they are.
pub const TRANSFORM_STORED: u32 = 0;
/// Transform 1: genome mode, a FASTA file stored as structure plus bases ([`crate::genome::region`]).
pub const TRANSFORM_GENOME: u32 = 1;
/// File transforms this reader knows.
pub const KNOWN_TRANSFORMS: &[u32] = &[TRANSFORM_STORED, TRANSFORM_GENOME];
/// The smallest serialised entry (a directory with a 1-byte name and single-byte varints), used to bound
/// `entry_count` by the section length before allocating.
const MIN_ENTRY_BYTES: usize = 7;

const KIND_DIR: u8 = 0;
const KIND_FILE: u8 = 1;
const KIND_SYMLINK: u8 = 2;

fn invalid_entry(id: usize, detail: impl std::fmt::Display) -> DecodeError {
    DecodeError::Invalid { what: "tree entry", detail: format!("entry {id}: {detail}") }
}

impl Entry {
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, EntryKind::Dir)
    }

    /// Checks the fields that do not depend on other entries (name, mode, time, flags, kind payload).
    fn validate_fields(&self, id: usize) -> Result<(), DecodeError> {
        if id == 0 {
            if !self.is_dir() || self.parent != 0 || !self.name.is_empty() {
                return Err(invalid_entry(0, "the root must be a directory with parent 0 and an empty name"));
            }
        } else {
            validate_name(&self.name).map_err(|d| invalid_entry(id, d))?;
        }
        if self.mode & !MODE_MASK != 0 {
            return Err(invalid_entry(id, format_args!("mode {:#o} has bits outside 0o7777", self.mode)));
        }
        if self.mtime_nsec >= 1_000_000_000 {
            return Err(invalid_entry(id, format_args!("mtime_nsec {} ≥ 10^9", self.mtime_nsec)));
        }
        if self.flags & !FLAG_SIDECAR != 0 {
            return Err(invalid_entry(id, format_args!("flags {:#x} has reserved bits", self.flags)));
        }
        match &self.kind {
            EntryKind::Dir => {}
            EntryKind::File { offset, size, transform } => {
                if !KNOWN_TRANSFORMS.contains(transform) {
                    return Err(invalid_entry(id, format_args!("unknown transform {transform}")));
                }
                if offset.checked_add(*size).is_none_or(|end| end > super::MAX_TOTAL_LEN) {
                    return Err(invalid_entry(id, format_args!("file range {offset}+{size} overflows")));
                }
            }
            EntryKind::Symlink { target } => {
                if target.is_empty() || target.len() > MAX_SYMLINK_LEN {
                    return Err(invalid_entry(id, format_args!("symlink target of {} bytes", target.len())));
                }
            }
        }
        Ok(())
    }
}

/// A legal entry name: 1…255 bytes, no '/' or NUL, not "." or "..".
fn validate_name(name: &[u8]) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("name of {} bytes (must be 1..=255)", name.len()));
    }
    if name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".." {
        return Err(format!("illegal name {:?}", String::from_utf8_lossy(name)));
    }
    Ok(())
}

impl Tree {
    /// Validates `entries` (FORMAT.md §2.5: entry 0 is the root directory, every parent is an earlier
    /// directory, names are legal and unique within their directory) and builds the sorted `children` index.
    pub fn from_entries(entries: Vec<Entry>) -> Result<Tree, DecodeError> {
        if entries.is_empty() {
            return Err(invalid_entry(0, "the tree has no root"));
        }
        if entries.len() > EntryId::MAX as usize {
            return Err(DecodeError::Limit {
                what: "entry_count",
                value: entries.len() as u64,
                limit: EntryId::MAX as u64,
            });
        }
        let mut children: Vec<Vec<EntryId>> = vec![Vec::new(); entries.len()];
        for (id, entry) in entries.iter().enumerate() {
            entry.validate_fields(id)?;
            if id == 0 {
                continue;
            }
            let parent = entry.parent as usize;
            if parent >= id || !entries[parent].is_dir() {
                return Err(invalid_entry(id, format_args!("parent {parent} is not an earlier directory")));
            }
            children[parent].push(id as EntryId);
        }
        for (dir, kids) in children.iter_mut().enumerate() {
            kids.sort_unstable_by(|&a, &b| entries[a as usize].name.cmp(&entries[b as usize].name));
            if let Some(w) = kids.windows(2).find(|w| entries[w[0] as usize].name == entries[w[1] as usize].name) {
                let name = String::from_utf8_lossy(&entries[w[1] as usize].name).into_owned();
                return Err(invalid_entry(w[1] as usize, format_args!("duplicate name {name:?} in directory {dir}")));
            }
        }
        Ok(Tree { entries, children })
    }

    /// Checks that every regular file's range lies inside a stream of `total_len` bytes.
    pub fn check_ranges(&self, total_len: u64) -> Result<(), DecodeError> {
        for (id, entry) in self.entries.iter().enumerate() {
            if let EntryKind::File { offset, size, transform } = entry.kind {
                // A genome region's length follows from its structure, which its head points at and which is
                // checked when the file is opened (genome::region); here its start must leave room for the head.
                let stored = if transform == TRANSFORM_GENOME { crate::genome::region::HEAD_LEN } else { size };
                if offset.checked_add(stored).is_none_or(|end| end > total_len) {
                    return Err(invalid_entry(
                        id,
                        format_args!("file range {offset}+{size} exceeds the stream length {total_len}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Appends the tree section (entry count, entries, trailing xxh3) to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        put_varint(out, self.entries.len() as u64);
        for entry in &self.entries {
            write_entry(entry, out);
        }
        let sum = xxh3_64(&out[start..]);
        out.extend_from_slice(&sum.to_le_bytes());
    }

    /// Parses and validates a whole tree section (including its trailing xxh3); file ranges must lie inside
    /// `total_len`.
    pub fn read(section: &[u8], total_len: u64) -> Result<Tree, DecodeError> {
        let body = checked_body(section)?;
        let mut c = Cursor::new(body);
        let count = c.varint()?;
        // Every entry takes at least MIN_ENTRY_BYTES, so a count beyond that is a lie; this bounds the Vec.
        let limit = (body.len() / MIN_ENTRY_BYTES) as u64 + 1;
        if count == 0 || count > limit {
            return Err(DecodeError::Limit { what: "entry_count", value: count, limit });
        }
        let mut entries = Vec::with_capacity(count as usize);
        for id in 0..count as usize {
            entries.push(read_entry(&mut c, id)?);
        }
        if c.remaining() != 0 {
            return Err(DecodeError::Invalid {
                what: "tree section",
                detail: format!("{} bytes left after the last entry", c.remaining()),
            });
        }
        let tree = Tree::from_entries(entries)?;
        tree.check_ranges(total_len)?;
        Ok(tree)
    }
}

fn write_entry(entry: &Entry, out: &mut Vec<u8>) {
    let kind = match entry.kind {
        EntryKind::Dir => KIND_DIR,
        EntryKind::File { .. } => KIND_FILE,
        EntryKind::Symlink { .. } => KIND_SYMLINK,
    };
    out.push(kind);
    put_varint(out, entry.parent.into());
    put_varint(out, entry.name.len() as u64);
    out.extend_from_slice(&entry.name);
    put_varint(out, entry.mode.into());
    put_varint(out, zigzag_encode(entry.mtime_sec));
    put_varint(out, entry.mtime_nsec.into());
    put_varint(out, entry.flags.into());
    match &entry.kind {
        EntryKind::Dir => {}
        EntryKind::File { offset, size, transform } => {
            put_varint(out, *offset);
            put_varint(out, *size);
            put_varint(out, (*transform).into());
        }
        EntryKind::Symlink { target } => {
            put_varint(out, target.len() as u64);
            out.extend_from_slice(target);
        }
    }
}

/// Reads one entry; values are range-limited here so they fit their Rust types, the rest is checked by
/// [`Tree::from_entries`].
fn read_entry(c: &mut Cursor<'_>, id: usize) -> Result<Entry, DecodeError> {
    let kind = c.u8()?;
    let parent = c.varint_max("parent", EntryId::MAX as u64)? as EntryId;
    let name_len = c.varint_max("name_len", MAX_NAME_LEN as u64)? as usize;
    let name = c.take(name_len)?.to_vec();
    let mode = c.varint_max("mode", MODE_MASK as u64)? as u32;
    let mtime_sec = zigzag_decode(c.varint()?);
    let mtime_nsec = c.varint_max("mtime_nsec", 999_999_999)? as u32;
    let flags = c.varint_max("flags", FLAG_SIDECAR as u64)? as u32;
    let kind = match kind {
        KIND_DIR => EntryKind::Dir,
        KIND_FILE => {
            let offset = c.varint_max("file offset", super::MAX_TOTAL_LEN)?;
            let size = c.varint_max("file size", super::MAX_TOTAL_LEN)?;
            let transform = c.varint_max("transform", u32::MAX as u64)? as u32;
            EntryKind::File { offset, size, transform }
        }
        KIND_SYMLINK => {
            let len = c.varint_max("symlink target_len", MAX_SYMLINK_LEN as u64)? as usize;
            EntryKind::Symlink { target: c.take(len)?.to_vec() }
        }
        other => return Err(invalid_entry(id, format_args!("unknown kind {other}"))),
    };
    Ok(Entry { parent, name, kind, mode, mtime_sec, mtime_nsec, flags })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(parent: EntryId, name: &str) -> Entry {
        Entry {
            parent,
            name: name.as_bytes().to_vec(),
            kind: EntryKind::Dir,
            mode: 0o755,
            mtime_sec: -5,
            mtime_nsec: 7,
            flags: 0,
        }
    }

    fn file(parent: EntryId, name: &str, offset: u64, size: u64) -> Entry {
        Entry { kind: EntryKind::File { offset, size, transform: 0 }, mode: 0o644, ..dir(parent, name) }
    }

    pub(crate) fn sample_tree() -> Tree {
        let link = Entry { kind: EntryKind::Symlink { target: b"../b.txt".to_vec() }, ..dir(1, "link") };
        let fai = Entry { flags: FLAG_SIDECAR, ..file(0, "b.txt.fai", 30, 5) };
        Tree::from_entries(vec![
            dir(0, ""),
            dir(0, "sub"),
            file(1, "z.bin", 0, 10),
            file(0, "b.txt", 10, 20),
            link,
            fai,
            file(1, "a.bin", 35, 0),
        ])
        .unwrap()
    }

    #[test]
    fn children_are_sorted_and_lookups_work() {
        let t = sample_tree();
        let names: Vec<&[u8]> = t.children[1].iter().map(|&k| t.entries[k as usize].name.as_slice()).collect();
        assert_eq!(names, [&b"a.bin"[..], b"link", b"z.bin"]);
        assert_eq!(t.resolve_path(b"/sub/z.bin"), Some(2));
        assert_eq!(t.resolve_path(b"b.txt.fai"), Some(5));
        assert_eq!(t.resolve_path(b"sub/nope"), None);
        assert_eq!(t.path_of(4), b"sub/link");
    }

    #[test]
    fn tree_section_round_trips() {
        let t = sample_tree();
        let mut bytes = Vec::new();
        t.write(&mut bytes);
        let back = Tree::read(&bytes, 35).unwrap();
        assert_eq!(back.entries, t.entries);
        assert_eq!(back.children, t.children);
        // A stream shorter than the last file's end is refused.
        assert!(Tree::read(&bytes, 34).is_err());
    }

    #[test]
    fn tree_section_rejects_corruption_without_panicking() {
        let mut bytes = Vec::new();
        sample_tree().write(&mut bytes);
        for cut in 0..bytes.len() {
            assert!(Tree::read(&bytes[..cut], 35).is_err(), "truncation to {cut} accepted");
        }
        for pos in 0..bytes.len() {
            let mut b = bytes.clone();
            b[pos] ^= 0x41;
            assert!(Tree::read(&b, 35).is_err(), "flip at {pos} accepted");
        }
    }

    /// Re-seals a tampered body so that validation (not the checksum) must catch it.
    fn sealed(body: &[u8]) -> Vec<u8> {
        let mut v = body.to_vec();
        v.extend_from_slice(&xxh3_64(body).to_le_bytes());
        v
    }

    #[test]
    fn lying_entry_count_is_bounded() {
        let mut body = Vec::new();
        put_varint(&mut body, u64::MAX >> 2);
        assert!(matches!(Tree::read(&sealed(&body), 0), Err(DecodeError::Limit { .. })));
        let mut body = Vec::new();
        put_varint(&mut body, 0);
        assert!(Tree::read(&sealed(&body), 0).is_err());
    }

    #[test]
    fn from_entries_rejects_bad_trees() {
        let root = dir(0, "");
        let cases: Vec<Vec<Entry>> = vec![
            vec![],
            vec![file(0, "", 0, 0)],
            vec![dir(0, "root-with-name")],
            vec![root.clone(), dir(1, "self-parent")],
            vec![root.clone(), file(0, "f", 0, 1), dir(1, "under-file")],
            vec![root.clone(), dir(0, "x"), file(0, "x", 0, 1)],
            vec![root.clone(), dir(0, "a/b")],
            vec![root.clone(), dir(0, "..")],
            vec![root.clone(), dir(0, ".")],
            vec![root.clone(), dir(0, "nul\0")],
            vec![root.clone(), dir(0, &"n".repeat(256))],
            vec![root.clone(), Entry { mode: 0o10000, ..dir(0, "m") }],
            vec![root.clone(), Entry { mtime_nsec: 1_000_000_000, ..dir(0, "t") }],
            vec![root.clone(), Entry { flags: 2, ..dir(0, "f") }],
            vec![root.clone(), Entry { kind: EntryKind::Symlink { target: vec![] }, ..dir(0, "l") }],
            vec![root.clone(), Entry { kind: EntryKind::File { offset: 0, size: 1, transform: 9 }, ..dir(0, "x") }],
            vec![root.clone(), file(0, "huge", u64::MAX, 2)],
        ];
        for (i, entries) in cases.into_iter().enumerate() {
            assert!(Tree::from_entries(entries).is_err(), "case {i} accepted");
        }
        // Same name in different directories is fine.
        assert!(Tree::from_entries(vec![root, dir(0, "d"), file(0, "x", 0, 1), file(1, "x", 1, 1)]).is_ok());
    }
}
