//! The tree section (FORMAT.md §2.5): directories, regular files, symlinks, and lookups over them.

/// Index of an entry in the tree; 0 is the root directory.
pub type EntryId = u32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    /// A regular file: its bytes are `[offset, offset + size)` of the logical stream.
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
    pub fn path_of(&self, mut id: EntryId) -> Vec<u8> {
        let mut parts = Vec::new();
        while id != 0 {
            let e = &self.entries[id as usize];
            parts.push(e.name.as_slice());
            id = e.parent;
        }
        parts.reverse();
        parts.join(&b'/')
    }
}
