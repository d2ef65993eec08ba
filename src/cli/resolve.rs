//! Resolving a path inside an archive for `aceapex cat`, following the archive's own symlinks.
//!
//! `Tree::resolve_path` deliberately does not follow symlinks (the filesystem layer must show them as links). A
//! user who runs `aceapex cat x.acx genome/reference.fa` where that is a link to `speciesA.fa` wants the file, so
//! this walks the path component by component, following relative links within the archive (at most
//! [`MAX_SYMLINK_HOPS`], as the kernel does with ELOOP). A `..` at the root stays at the root. An absolute link
//! target points outside the archive and is refused.

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::format::tree::{EntryId, EntryKind, Tree};

/// The kernel's limit for symlinks followed in one lookup.
pub const MAX_SYMLINK_HOPS: u32 = 40;

/// Resolves `path` (relative to the archive root; a leading `/` is allowed) to an entry, following symlinks in
/// every component including the last.
pub fn resolve_following(tree: &Tree, path: &[u8]) -> Result<EntryId> {
    let shown = || String::from_utf8_lossy(path).into_owned();
    let mut pending: VecDeque<Vec<u8>> = components(path).collect();
    // The directories from the root (exclusive) to where the walk is; `..` pops.
    let mut dirs: Vec<EntryId> = Vec::new();
    let mut hops = 0u32;
    let mut current: EntryId = 0;
    while let Some(name) = pending.pop_front() {
        if name == b".." {
            dirs.pop();
            current = dirs.last().copied().unwrap_or(0);
            continue;
        }
        let parent = current;
        if !matches!(tree.entry(parent).map(|e| &e.kind), Some(EntryKind::Dir)) {
            return Err(Error::NotDirectory(shown()));
        }
        let child = tree.lookup(parent, &name).ok_or_else(|| Error::NotFound(shown()))?;
        match &tree.entry(child).ok_or_else(|| Error::NotFound(shown()))?.kind {
            EntryKind::Symlink { target } => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(Error::InvalidArgument(format!("{}: too many levels of symbolic links", shown())));
                }
                if target.first() == Some(&b'/') {
                    return Err(Error::InvalidArgument(format!(
                        "{}: symlink to {:?} points outside the archive",
                        shown(),
                        String::from_utf8_lossy(target)
                    )));
                }
                // The link's target replaces the link, relative to the directory holding it.
                for comp in components(target).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(comp);
                }
            }
            EntryKind::Dir => {
                dirs.push(child);
                current = child;
            }
            EntryKind::File { .. } => {
                if !pending.is_empty() {
                    return Err(Error::NotDirectory(shown()));
                }
                current = child;
            }
        }
    }
    Ok(current)
}

/// Non-empty components other than `.`.
fn components(path: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".").map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tree::Entry;

    fn entry(parent: EntryId, name: &str, kind: EntryKind) -> Entry {
        Entry { parent, name: name.as_bytes().to_vec(), kind, mode: 0o644, mtime_sec: 0, mtime_nsec: 0, flags: 0 }
    }

    fn link(parent: EntryId, name: &str, target: &str) -> Entry {
        entry(parent, name, EntryKind::Symlink { target: target.as_bytes().to_vec() })
    }

    fn sample() -> Tree {
        let file = EntryKind::File { offset: 0, size: 1, transform: 0 };
        let entries = vec![
            entry(0, "", EntryKind::Dir),
            entry(0, "d", EntryKind::Dir),
            entry(1, "f", file),
            link(1, "rel", "f"),
            link(0, "up", "d/../d/rel"),
            link(0, "abs", "/etc/passwd"),
            link(0, "loop", "loop"),
            link(0, "dl", "d"),
            link(0, "dangling", "nothing"),
        ];
        Tree::from_entries(entries).expect("a valid test tree")
    }

    #[test]
    fn follows_links_inside_the_archive() {
        let t = sample();
        assert_eq!(resolve_following(&t, b"d/f").unwrap(), 2);
        assert_eq!(resolve_following(&t, b"/d/./f").unwrap(), 2);
        assert_eq!(resolve_following(&t, b"d/rel").unwrap(), 2);
        assert_eq!(resolve_following(&t, b"up").unwrap(), 2);
        assert_eq!(resolve_following(&t, b"dl/f").unwrap(), 2);
        assert_eq!(resolve_following(&t, b"../../d/f").unwrap(), 2);
        assert_eq!(resolve_following(&t, b"").unwrap(), 0);
        assert_eq!(resolve_following(&t, b"d").unwrap(), 1);
    }

    #[test]
    fn refuses_what_cannot_be_resolved() {
        let t = sample();
        assert!(matches!(resolve_following(&t, b"abs"), Err(Error::InvalidArgument(_))));
        assert!(matches!(resolve_following(&t, b"loop"), Err(Error::InvalidArgument(_))));
        assert!(matches!(resolve_following(&t, b"dangling"), Err(Error::NotFound(_))));
        assert!(matches!(resolve_following(&t, b"d/f/x"), Err(Error::NotDirectory(_))));
        assert!(matches!(resolve_following(&t, b"nope"), Err(Error::NotFound(_))));
    }
}
