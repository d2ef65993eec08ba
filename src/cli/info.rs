//! `aceapex info`: the header's parameters, section sizes, per-stream sizes and the ratio of an opened archive.
//!
//! Everything is read from the validated [`ArchiveData`]; the per-stream split comes from each block's slice
//! directory and the four varints at the head of every slice payload (FORMAT.md §3). How many matches are
//! reverse complements (version 5) is not in those heads: a match's kind is in its OF code, and a continuation
//! takes the kind of the match before it, so they are counted from the tokens, by the entropy stage of every
//! block (on all cores; no match is copied).

use rayon::prelude::*;
use serde::Serialize;

use crate::codec::block::{decode_block_into, ParsedBlock, SliceDirectory, SliceHead};
use crate::format::tree::{EntryKind, FLAG_SIDECAR, TRANSFORM_GENOME};
use crate::format::{ArchiveData, FOOTER_LEN, HEADER_LEN, VERSION};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InfoReport {
    pub path: String,
    pub format_version: u16,
    pub block_size: u64,
    pub block_log: u8,
    pub blocks: u64,
    /// Slices of `slice_size` bytes, each coded on its own (FORMAT.md §3).
    pub slice_size: u64,
    pub slice_log: u8,
    pub slices: u64,
    pub groups: u64,
    pub group_log: u8,
    pub max_depth: u8,
    pub rans_lanes: u8,
    pub min_match: [u8; 8],
    /// Original bytes: the regular files as packed (genome-mode files at their original size; generated
    /// sidecars not counted), FORMAT.md §5.
    pub original_bytes: u64,
    /// Length of the logical stream (what the blocks decode to).
    pub stream_bytes: u64,
    pub archive_bytes: u64,
    /// original_bytes / archive_bytes (FORMAT.md §5).
    pub ratio: f64,
    pub entries: EntryCounts,
    pub sections: SectionSizes,
    pub streams: StreamSizes,
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct EntryCounts {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// Generated sidecars (flag bit 0), counted in `files` too.
    pub generated: u64,
    /// Files stored in genome mode (transform 1), counted in `files` too.
    pub genome: u64,
    /// Sum of the sizes of the files that are not generated.
    pub original_bytes: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct SectionSizes {
    pub header: u64,
    pub payloads: u64,
    pub tables: u64,
    pub tree: u64,
    pub index: u64,
    pub footer: u64,
}

/// Where the payload bytes go, summed over all blocks.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct StreamSizes {
    /// The slice directories at the front of each block payload.
    pub slice_directories: u64,
    /// The four varints at the head of each slice payload.
    pub block_headers: u64,
    /// Final rANS states (4 bytes per lane per slice).
    pub rans_states: u64,
    /// The rANS word stream (tokens' codes and literal bytes), both lanes.
    pub rans_words: u64,
    /// The extra-bits stream of lengths and distances.
    pub extra_bits: u64,
    pub matches: u64,
    /// Matches that are reverse complements (FORMAT.md §1, version 5), counted in `matches` too.
    pub rc_matches: u64,
    pub literals: u64,
    /// Blocks whose slice directory, a slice head or the tokens could not be read (`verify` says more).
    pub unreadable_blocks: u64,
}

/// Gathers the report; never fails on an archive that opened (bad payload heads are counted, not fatal).
pub fn gather(data: &ArchiveData) -> InfoReport {
    let footer = &data.footer;
    let header = &data.header;
    let blocks = data.block_count();
    let group_size = 1u64 << header.group_log;
    let archive_bytes = footer.file_len;
    let entries = count_entries(data);
    InfoReport {
        path: data.path.display().to_string(),
        format_version: VERSION,
        block_size: header.block_size(),
        block_log: header.block_log,
        blocks,
        slice_size: header.slice_size(),
        slice_log: header.slice_log,
        slices: data.global_slice_count(),
        groups: blocks.div_ceil(group_size),
        group_log: header.group_log,
        max_depth: header.max_depth,
        rans_lanes: header.rans_lanes,
        min_match: header.min_match,
        original_bytes: entries.original_bytes,
        stream_bytes: footer.total_len,
        archive_bytes,
        ratio: if archive_bytes == 0 { 0.0 } else { entries.original_bytes as f64 / archive_bytes as f64 },
        entries,
        sections: SectionSizes {
            header: HEADER_LEN as u64,
            payloads: footer.tables_offset.saturating_sub(HEADER_LEN as u64),
            tables: footer.tree_offset.saturating_sub(footer.tables_offset),
            tree: footer.index_offset.saturating_sub(footer.tree_offset),
            index: footer.file_len.saturating_sub(FOOTER_LEN as u64).saturating_sub(footer.index_offset),
            footer: FOOTER_LEN as u64,
        },
        streams: stream_sizes(data),
    }
}

fn count_entries(data: &ArchiveData) -> EntryCounts {
    let mut counts = EntryCounts::default();
    for entry in data.tree.entries.iter().skip(1) {
        match entry.kind {
            EntryKind::Dir => counts.dirs += 1,
            EntryKind::File { size, transform, .. } => {
                counts.files += 1;
                counts.genome += u64::from(transform == TRANSFORM_GENOME);
                if entry.flags & FLAG_SIDECAR == 0 {
                    counts.original_bytes += size;
                }
            }
            EntryKind::Symlink { .. } => counts.symlinks += 1,
        }
        if entry.flags & FLAG_SIDECAR != 0 {
            counts.generated += 1;
        }
    }
    counts
}

fn stream_sizes(data: &ArchiveData) -> StreamSizes {
    let lanes = usize::from(data.header.rans_lanes);
    let mut sizes = StreamSizes::default();
    for id in 0..data.block_count() {
        let Ok(payload) = data.payload(id) else {
            sizes.unreadable_blocks += 1;
            continue;
        };
        let Ok(dir) = SliceDirectory::parse(&payload, data.slice_count(id) as usize) else {
            sizes.unreadable_blocks += 1;
            continue;
        };
        let mut block = StreamSizes::default();
        let mut body = 0u64;
        let mut readable = true;
        let shape = data.block_shape(id);
        for (j, slice) in dir.slices().enumerate() {
            body += slice.len() as u64;
            match SliceHead::read(slice, lanes, shape.slice_span(j).1) {
                Ok(head) => {
                    block.block_headers += u64::from(head.header_len);
                    block.rans_states += 4 * lanes as u64;
                    block.rans_words += 2 * u64::from(head.nwords);
                    block.extra_bits += u64::from(head.extra_len);
                    block.matches += u64::from(head.nmatch);
                    block.literals += u64::from(head.nlit);
                }
                Err(_) => readable = false,
            }
        }
        if !readable {
            sizes.unreadable_blocks += 1;
            continue;
        }
        sizes.slice_directories += payload.len() as u64 - body;
        sizes.block_headers += block.block_headers;
        sizes.rans_states += block.rans_states;
        sizes.rans_words += block.rans_words;
        sizes.extra_bits += block.extra_bits;
        sizes.matches += block.matches;
        sizes.literals += block.literals;
    }
    let (rc_matches, bad_tokens) = count_rc_matches(data);
    sizes.rc_matches = rc_matches;
    // A block whose heads do not read does not decode either: the larger count is the union.
    sizes.unreadable_blocks = sizes.unreadable_blocks.max(bad_tokens);
    sizes
}

/// Reverse-complement matches over all blocks, and the blocks whose tokens do not decode (the entropy stage of
/// every block, on all cores, with one reused [`ParsedBlock`] per worker).
fn count_rc_matches(data: &ArchiveData) -> (u64, u64) {
    (0..data.block_count())
        .into_par_iter()
        .map_init(ParsedBlock::default, |parsed, id| {
            let shape = data.block_shape(id);
            let decoded = data.payload(id).ok().and_then(|payload| {
                decode_block_into(&payload, data.tables_for(id), shape, parsed).ok()?;
                Some(parsed.tokens.iter().filter(|t| t.rc).count() as u64)
            });
            match decoded {
                Some(rc) => (rc, 0),
                None => (0, 1),
            }
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// The report as `key: value` lines.
pub fn render_text(r: &InfoReport) -> String {
    let mut s = String::new();
    let mut kv = |k: &str, v: String| s.push_str(&format!("{k:<16} {v}\n"));
    kv("archive:", r.path.clone());
    kv("format version:", r.format_version.to_string());
    kv("block size:", format!("{} (2^{})", human(r.block_size), r.block_log));
    kv("blocks:", r.blocks.to_string());
    kv("slice size:", format!("{} (2^{}), {} slices", human(r.slice_size), r.slice_log, r.slices));
    kv("table groups:", format!("{} of 2^{} blocks", r.groups, r.group_log));
    kv("max depth:", r.max_depth.to_string());
    kv("rANS lanes:", format!("{} per slice", r.rans_lanes));
    kv("min match:", format!("{:?}", r.min_match));
    let e = &r.entries;
    kv(
        "entries:",
        format!(
            "{} files ({} generated, {} in genome mode), {} dirs, {} symlinks",
            e.files, e.generated, e.genome, e.dirs, e.symlinks
        ),
    );
    kv("original:", format!("{} bytes ({})", r.original_bytes, human(r.original_bytes)));
    kv("stream:", format!("{} bytes ({})", r.stream_bytes, human(r.stream_bytes)));
    kv("archive:", format!("{} bytes ({})", r.archive_bytes, human(r.archive_bytes)));
    kv("ratio:", format!("{:.4}", r.ratio));
    let c = &r.sections;
    kv(
        "sections:",
        format!(
            "header {}, payloads {}, tables {}, tree {}, index {}, footer {}",
            c.header, c.payloads, c.tables, c.tree, c.index, c.footer
        ),
    );
    let t = &r.streams;
    kv(
        "streams:",
        format!(
            "slice directories {}, slice heads {}, rANS states {}, rANS words {}, extra bits {}",
            t.slice_directories, t.block_headers, t.rans_states, t.rans_words, t.extra_bits
        ),
    );
    kv("tokens:", format!("{} matches ({} reverse-complement), {} literal bytes", t.matches, t.rc_matches, t.literals));
    if t.unreadable_blocks > 0 {
        kv("unreadable:", format!("{} block payloads (run verify)", t.unreadable_blocks));
    }
    s
}

/// `16 KiB`, `1.50 MiB`: binary units, for people.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{} {}", value as u64, UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(16384), "16 KiB");
        assert_eq!(human(1536 * 1024), "1.50 MiB");
        assert_eq!(human(1 << 40), "1 TiB");
        assert_eq!(human(u64::MAX), "16777216 TiB");
    }
}
