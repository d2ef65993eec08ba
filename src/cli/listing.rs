//! `aceapex ls`: one line per entry; with `-l`, the mode string, size, modification time (UTC) and
//! `-> target` for symlinks, like `ls -l`.
//!
//! Names are written as their raw bytes: the archive keeps non-UTF-8 names exactly, and a script that pipes the
//! listing should get them back unchanged.

use crate::format::tree::{Entry, EntryId, EntryKind, Tree};

/// `ls -l`'s ten-character mode string: type letter, then rwx triples with setuid/setgid/sticky folded in.
pub fn mode_string(kind: &EntryKind, mode: u32) -> String {
    let type_char = match kind {
        EntryKind::Dir => 'd',
        EntryKind::File { .. } => '-',
        EntryKind::Symlink { .. } => 'l',
    };
    let mut s = String::with_capacity(10);
    s.push(type_char);
    // (read bit, write bit, execute bit, special bit, special letter) for user, group, other.
    let triples = [(0o400, 0o200, 0o100, 0o4000, 's'), (0o40, 0o20, 0o10, 0o2000, 's'), (0o4, 0o2, 0o1, 0o1000, 't')];
    for (r, w, x, special, letter) in triples {
        s.push(if mode & r != 0 { 'r' } else { '-' });
        s.push(if mode & w != 0 { 'w' } else { '-' });
        s.push(match (mode & x != 0, mode & special != 0) {
            (true, true) => letter,
            (false, true) => letter.to_ascii_uppercase(),
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// Days since 1970-01-01 to a (year, month, day) civil date (proleptic Gregorian; H. Hinnant's algorithm).
/// Valid for every `i64` day count that `mtime_sec / 86400` can produce.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DD HH:MM:SS` in UTC for a time in seconds since the epoch.
pub fn format_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", of_day / 3600, of_day / 60 % 60, of_day % 60)
}

/// The size column: file size, symlink target length (as `ls` does), 0 for directories.
pub fn entry_size(entry: &Entry) -> u64 {
    match &entry.kind {
        EntryKind::Dir => 0,
        EntryKind::File { size, .. } => *size,
        EntryKind::Symlink { target } => target.len() as u64,
    }
}

/// Entry ids in depth-first order with each directory's children sorted by name, root excluded — the order
/// `ls` prints and `unpack` visits.
pub fn depth_first(tree: &Tree) -> Vec<EntryId> {
    let mut order = Vec::with_capacity(tree.entries.len());
    // An explicit stack, not recursion: a hostile archive may nest directories thousands deep.
    let mut stack: Vec<EntryId> = Vec::new();
    push_children_reversed(tree, 0, &mut stack);
    while let Some(id) = stack.pop() {
        // A tree from the parser has no cycles (every parent precedes its child); the bound is a second guard so
        // that no `Tree` value can make this loop run forever.
        if order.len() >= tree.entries.len() {
            break;
        }
        order.push(id);
        // Entry ids are unique and every child's parent is an earlier entry, so this visits each entry once.
        if id != 0 && matches!(tree.entry(id).map(|e| &e.kind), Some(EntryKind::Dir)) {
            push_children_reversed(tree, id, &mut stack);
        }
    }
    order
}

fn push_children_reversed(tree: &Tree, dir: EntryId, stack: &mut Vec<EntryId>) {
    if let Some(kids) = tree.children.get(dir as usize) {
        stack.extend(kids.iter().rev().filter(|&&k| k != dir));
    }
}

/// One listing line (without the newline) for entry `id`, as raw bytes.
pub fn listing_line(tree: &Tree, id: EntryId, long: bool) -> Vec<u8> {
    let Some(entry) = tree.entry(id) else { return Vec::new() };
    let mut line = Vec::new();
    if long {
        let head = format!(
            "{} {:>12} {} ",
            mode_string(&entry.kind, entry.mode),
            entry_size(entry),
            format_utc(entry.mtime_sec)
        );
        line.extend_from_slice(head.as_bytes());
    }
    line.extend_from_slice(&tree.path_of(id));
    if matches!(entry.kind, EntryKind::Dir) {
        line.push(b'/');
    }
    if long {
        if let EntryKind::Symlink { target } = &entry.kind {
            line.extend_from_slice(b" -> ");
            line.extend_from_slice(target);
        }
        if entry.flags & 1 != 0 {
            line.extend_from_slice(b"  [generated]");
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_strings_match_ls() {
        let file = EntryKind::File { offset: 0, size: 0, transform: 0 };
        assert_eq!(mode_string(&file, 0o644), "-rw-r--r--");
        assert_eq!(mode_string(&file, 0o755), "-rwxr-xr-x");
        assert_eq!(mode_string(&file, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(&file, 0o2644), "-rw-r-Sr--");
        assert_eq!(mode_string(&EntryKind::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(&EntryKind::Dir, 0o1776), "drwxrwxrwT");
        assert_eq!(mode_string(&EntryKind::Symlink { target: b"x".to_vec() }, 0o777), "lrwxrwxrwx");
        assert_eq!(mode_string(&file, 0), "----------");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(format_utc(-1), "1969-12-31 23:59:59");
        // Extremes must not panic.
        let _ = format_utc(i64::MAX);
        let _ = format_utc(i64::MIN);
    }

    fn entry(parent: EntryId, name: &str, kind: EntryKind) -> Entry {
        Entry { parent, name: name.as_bytes().to_vec(), kind, mode: 0o644, mtime_sec: 0, mtime_nsec: 0, flags: 0 }
    }

    #[test]
    fn depth_first_sorted_order() {
        let file = || EntryKind::File { offset: 0, size: 0, transform: 0 };
        let tree = Tree {
            entries: vec![
                entry(0, "", EntryKind::Dir),
                entry(0, "b", EntryKind::Dir),
                entry(0, "a", file()),
                entry(1, "z", file()),
                entry(1, "c", EntryKind::Symlink { target: b"../a".to_vec() }),
            ],
            children: vec![vec![2, 1], vec![4, 3], vec![], vec![], vec![]],
        };
        assert_eq!(depth_first(&tree), vec![2, 1, 4, 3]);
        assert_eq!(listing_line(&tree, 1, false), b"b/");
        let long = String::from_utf8(listing_line(&tree, 4, true)).unwrap();
        assert!(long.starts_with("lrw-r--r--            4 1970-01-01 00:00:00 b/c -> ../a"), "{long}");
    }
}
