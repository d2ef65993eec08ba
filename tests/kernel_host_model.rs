//! Host checks of the K = 1 literal path's helpers in kernels/decode.cu, with no GPU: `WordReader1` (the rANS
//! word stream) and `LiteralSink1` (where literals land) are copied out of the kernel source as they are, compiled
//! with the host C++ compiler beside the harnesses in tests/kernel_host/, and run against plain reference
//! models on random inputs. Both are branch-free or batched rewrites whose bugs would otherwise first show as
//! wrong blocks on the H200. Without a C++ compiler the test says it skipped; with `CI` set that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

fn kernel_source() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/decode.cu")).expect("read decode.cu")
}

/// The text of decode.cu from `start` through the end of the struct `last` (its closing `};`).
fn cut(src: &str, start: &str, last: &str) -> String {
    let a = src.find(start).unwrap_or_else(|| panic!("decode.cu has no `{start}`"));
    let s = src[a..].find(last).unwrap_or_else(|| panic!("decode.cu has no `{last}` after `{start}`")) + a;
    let e = src[s..].find("\n};\n").unwrap_or_else(|| panic!("`{last}` does not end")) + s + 4;
    src[a..e].to_string()
}

/// Replaces each inline-PTX predicated load (`asm(...);` in `ld_if`) with the host load it stands for.
fn host_loads(mut text: String) -> String {
    while let Some(a) = text.find("asm(") {
        let e = text[a..].find(");").expect("asm statement ends") + a + 2;
        text.replace_range(a..e, "if (load && a < end) v = *a;");
    }
    text
}

fn compiler() -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    Command::new(&cxx).arg("--version").output().ok().filter(|o| o.status.success()).map(|_| cxx)
}

/// Compiles harness `name`.cpp with `inc` as its name.inc and runs it: it prints "ok" or what failed.
fn run_harness(name: &str, inc: &str) {
    let Some(cxx) = compiler() else {
        assert!(std::env::var_os("CI").is_none(), "{name}: no C++ compiler and CI is set");
        eprintln!("{name}: SKIPPED (no C++ compiler; set CXX)");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(format!("{name}.inc")), inc).expect("write the extract");
    let harness: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernel_host");
    let bin = dir.path().join(name);
    let out = Command::new(&cxx)
        .args(["-std=c++17", "-O2", "-Wall", "-Werror", "-Wno-unused-function"])
        .arg("-I")
        .arg(&harness)
        .arg("-I")
        .arg(dir.path())
        .arg(harness.join(format!("{name}.cpp")))
        .arg("-o")
        .arg(&bin)
        .output()
        .expect("run the C++ compiler");
    assert!(out.status.success(), "{name}: compile failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&bin).output().expect("run the harness");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success() && stdout.trim() == "ok", "{name}: {stdout}{}", String::from_utf8_lossy(&run.stderr));
}

#[test]
fn word_reader_takes_every_word_at_every_alignment() {
    let src = kernel_source();
    run_harness("word_reader", &host_loads(cut(&src, "struct WordReader1 {", "struct WordReader1 {")));
}

#[test]
fn literal_sink_places_every_literal_and_nothing_past_its_unit() {
    let src = kernel_source();
    run_harness("literal_sink", &cut(&src, "enum K1Place {", "struct LiteralSink1 {"));
}
