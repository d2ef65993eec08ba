//! `samtools faidx` on the mounted FASTA: regions equal samtools on the original, served through the packed
//! `.fai` sidecar, and nothing is written anywhere.

use std::process::Command;

use crate::support::{genome_records, which, Fixture, Mounted, Rng};

/// Random 1-based inclusive regions over all records, many crossing line ends, some whole records.
fn regions(n: usize) -> Vec<String> {
    let records = genome_records();
    let mut rng = Rng::new(4242);
    (0..n)
        .map(|i| {
            let rec = &records[rng.below(records.len() as u64) as usize];
            let len = rec.len as u64;
            if i % 50 == 0 {
                return rec.name.clone();
            }
            let start = 1 + rng.below(len);
            let span = match rng.below(3) {
                0 => rng.below(rec.width as u64 * 3),
                1 => rng.below(20_000),
                _ => rng.below(200),
            };
            let end = (start + span).min(len);
            format!("{}:{start}-{end}", rec.name)
        })
        .collect()
}

fn faidx(fasta: &std::path::Path, regions: &[String], cwd: &std::path::Path) -> Vec<u8> {
    let out = Command::new("samtools").arg("faidx").arg(fasta).args(regions).current_dir(cwd).output().unwrap();
    assert!(out.status.success(), "samtools faidx {}: {}", fasta.display(), String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn samtools_faidx_regions_match_original() {
    if !crate::support::fuse_available("samtools_faidx_regions_match_original") {
        return;
    }
    if which("samtools").is_none() {
        eprintln!("SKIP samtools_faidx_regions_match_original: samtools is not installed");
        assert!(std::env::var_os("CI").is_none(), "samtools missing and CI is set");
        return;
    }
    let fx = Fixture::new();
    let reference_dir = fx.dir.path().join("reference");
    std::fs::create_dir(&reference_dir).unwrap();
    let reference = reference_dir.join("g.fa");
    std::fs::copy(fx.src.join("genome/g.fa"), &reference).unwrap();
    let workdir = fx.dir.path().join("work");
    std::fs::create_dir(&workdir).unwrap();

    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let mounted = fx.mounted_src().join("genome/g.fa");
    let listing_before: Vec<_> =
        std::fs::read_dir(fx.mounted_src().join("genome")).unwrap().map(|e| e.unwrap().file_name()).collect();

    let all = regions(240);
    for batch in all.chunks(60) {
        let want = faidx(&reference, batch, &workdir);
        let got = faidx(&mounted, batch, &workdir);
        assert!(got == want, "regions {batch:?} differ");
    }

    // Nothing was written: no index next to the original, none in the working directory, none added to the
    // mount.
    assert!(!fx.src.join("genome/g.fa.fai").exists(), "an index appeared next to the original");
    assert_eq!(std::fs::read_dir(&workdir).unwrap().count(), 0, "samtools wrote into its working directory");
    let listing_after: Vec<_> =
        std::fs::read_dir(fx.mounted_src().join("genome")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(listing_before, listing_after);
}
