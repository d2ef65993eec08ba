//! Host checks of the kernels (kernels/words.cuh, literals.cuh, tokens.cuh, chase.cuh), with no GPU. The literal path
//! of a thread per rANS lane: `WordReader1` and `WordReader1Back` (lane 0's word stream from its front, lane 1's from
//! its back, FORMAT.md §3.4), the staged rings `WordRing1` / `WordRing1Back`, `LiteralSink1` (where literals land) and
//! the context-coded literal chain (`k1_context_step`, `k1_context_literals`) are copied out of the kernel source as
//! they are, compiled with the host C++ compiler beside the harnesses in tests/kernel_host/, and run against reference
//! models on random inputs, and the chain on two-lane streams the crate's own encoder made. These are branch-free or
//! batched rewrites whose bugs would otherwise first show as wrong blocks on the H200. Without a C++ compiler the test
//! says it skipped; with `CI` set that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use aceapex::codec::context::{next_context, CtxModel, MAX_LIT_ORDER};
use aceapex::codec::rans::{encode_lanes, lane_split};
use aceapex::format::testkit::Rng;

/// The kernel source as NVRTC gets it (kernels/decode.cu with its parts in place).
fn kernel_source() -> &'static str {
    aceapex::engine::gpu::kernel_source()
}

/// The text of the kernel source from `start` through the first `close` after `last`.
fn cut_through(src: &str, start: &str, last: &str, close: &str) -> String {
    let a = src.find(start).unwrap_or_else(|| panic!("the kernels have no `{start}`"));
    let s = src[a..].find(last).unwrap_or_else(|| panic!("the kernels have no `{last}` after `{start}`")) + a;
    let e = src[s..].find(close).unwrap_or_else(|| panic!("`{last}` does not end")) + s + close.len();
    src[a..e].to_string()
}

/// From `start` through the end of the struct `last` (its closing `};`).
fn cut(src: &str, start: &str, last: &str) -> String {
    cut_through(src, start, last, "\n};\n")
}

/// From `start` through the end of the function `last` (its closing `}` at column 0).
fn cut_fn(src: &str, start: &str, last: &str) -> String {
    cut_through(src, start, last, "\n}\n")
}

/// The line that starts with `start` (a one-line function).
fn cut_line(src: &str, start: &str) -> String {
    cut_through(src, start, start, "\n")
}

/// Replaces each inline-PTX statement that starts with `start` (through its `);`) with `host`, the host code it
/// stands for.
fn host_asm(mut text: String, start: &str, host: &str) -> String {
    while let Some(a) = text.find(start) {
        let e = text[a..].find(");").expect("asm statement ends") + a + 2;
        text.replace_range(a..e, host);
    }
    text
}

/// The word reader's predicated loads (`asm(...);` in `ld_if`) as host loads.
fn host_loads(text: String) -> String {
    host_asm(text, "asm(", "if (load && a < end) v = *a;")
}

fn compiler() -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    Command::new(&cxx).arg("--version").output().ok().filter(|o| o.status.success()).map(|_| cxx)
}

/// Compiles harness `name`.cpp with `inc` as its name.inc and runs it (with `input` written to a file, its path
/// the harness's argument, when given): it prints "ok" or what failed.
fn run_harness(name: &str, inc: &str) {
    run_harness_on(name, inc, None)
}

fn run_harness_on(name: &str, inc: &str, input: Option<&[u8]>) {
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
        .args(["-std=c++17", "-O2", "-Wall", "-Werror", "-Wno-unused-function", "-Wno-unknown-pragmas"])
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
    let mut cmd = Command::new(&bin);
    if let Some(input) = input {
        let path = dir.path().join("input.bin");
        std::fs::write(&path, input).expect("write the harness input");
        cmd.arg(path);
    }
    let run = cmd.output().expect("run the harness");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success() && stdout.trim() == "ok", "{name}: {stdout}{}", String::from_utf8_lossy(&run.stderr));
}

#[test]
fn word_reader_takes_every_word_at_every_alignment() {
    let src = kernel_source();
    run_harness("word_reader", &host_loads(cut(src, "struct WordReader1 {", "struct WordReader1 {")));
}

/// `WordReader1Back`, its predicated loads (`asm(...);` in `ld_if`) as the harness's checked host loads.
fn back_reader_text(src: &str) -> String {
    host_asm(
        cut(src, "struct WordReader1Back {", "struct WordReader1Back {"),
        "asm(",
        "if (load && a >= begin && a < end) v = host_load(a);",
    )
}

#[test]
fn back_word_reader_takes_every_word_from_the_back_at_every_alignment() {
    let src = kernel_source();
    run_harness("word_reader_back", &back_reader_text(src));
}

/// The staged word streams (`lds16`, `sts32` and `WordRingT`, both directions), their shared accesses on the
/// harness's buffer.
fn ring_text(src: &str) -> String {
    let text = cut_through(
        src,
        "// Shared-memory loads and stores at shared window",
        "typedef WordRingT<true> WordRing1Back;",
        "\n",
    );
    let text = host_asm(text, "asm volatile(\"ld.shared.u16", "memcpy(&v, host_shared(a, 2), 2);");
    host_asm(text, "asm volatile(\"st.shared.u32", "memcpy(host_shared(a, 4), &v, 4);")
}

#[test]
fn word_rings_stage_every_word_in_either_direction_and_stay_in_their_ring() {
    let src = kernel_source();
    run_harness("word_ring", &ring_text(src));
}

#[test]
fn literal_sink_places_every_literal_and_nothing_past_its_unit() {
    let src = kernel_source();
    run_harness("literal_sink", &cut(src, "enum K1Place {", "struct LiteralSink1 {"));
}

#[test]
fn staged_token_parse_matches_the_group_loop() {
    let src = kernel_source();
    let codes = cut_fn(src, "// Extra bits used by a log code", "__device__ __forceinline__ u64 read_bits");
    let parse =
        cut_fn(src, "// A slice's extra-bits stream read in order", "__device__ __forceinline__ bool k1_token_values");
    let group = cut_fn(src, "// Phase B of a slice's parse on a group of W lanes", "bool group_token_values");
    run_harness("token_values", &format!("{codes}\n{parse}\n{group}"));
}

/// `Rng::range` as a u32 in `[0, n)` (`n ≥ 1`).
fn below(rng: &mut Rng, n: u32) -> u32 {
    rng.range(0, u64::from(n) - 1) as u32
}

/// One slice's literals for the chain harness: a random context model (skewed counts, some bases of frequency 0
/// in some contexts), bases drawn from it, coded by the crate's encoder in one rANS lane or two (FORMAT.md §3.4: the
/// split as a slice with a random number of codes before its literals would have it, the context restarting at
/// it), and a random token layout to place them.
fn chain_case(rng: &mut Rng, out: &mut Vec<u8>) {
    let order = 1 + below(rng, MAX_LIT_ORDER.min(6) as u32) as u8;
    let nctx = 1usize << (2 * order);
    let counts: Vec<[u64; 4]> = (0..nctx)
        .map(|_| {
            let mut c = [0u64; 4];
            for v in &mut c {
                *v = match below(rng, 8) {
                    0 => 0,
                    1 => 1,
                    2 => 100_000,
                    _ => below(rng, 1000) as u64,
                };
            }
            c
        })
        .collect();
    let model = CtxModel::from_counts(order, &counts);
    let mask = model.mask();
    let nlit = below(rng, 4097) as usize;
    let lanes = 1 + below(rng, 2) as usize;
    let split = lane_split(below(rng, nlit as u32 + 1) as usize, nlit, lanes);
    let (mut codes, mut contexts) = (Vec::with_capacity(nlit), Vec::with_capacity(nlit));
    let mut ctx = 0u32;
    for l in 0..nlit {
        if l == split {
            ctx = 0; // lane 1's first literal
        }
        // A base the context can code (frequency > 0), uniformly: rare ones come up as often as common ones.
        let ok: Vec<u32> = (0..4).filter(|&s| model.freq_cum(ctx, s).0 > 0).collect();
        let s = ok[below(rng, ok.len() as u32) as usize];
        codes.push(s as u8);
        contexts.push(ctx);
        ctx = next_context(ctx, s, mask);
    }
    let starts: &[usize] = if lanes == 2 { &[0, split] } else { &[0] };
    let enc = encode_lanes(&codes, &[], Some((&model, &contexts)), starts);
    // Tokens: literal runs (empty, short or long) between matches of 2 .. 40 bytes.
    let (mut tp, mut li) = (Vec::new(), Vec::new());
    let (mut pos, mut lit) = (0u32, 0u32);
    loop {
        let run = match below(rng, 4) {
            0 => 0,
            1 => below(rng, 8),
            _ => below(rng, 300),
        }
        .min(nlit as u32 - lit);
        tp.push(pos);
        li.push(lit);
        pos += run;
        lit += run;
        if lit == nlit as u32 {
            break;
        }
        pos += 2 + below(rng, 39);
    }
    let mut put = |v: u32| out.extend_from_slice(&v.to_le_bytes());
    put(mask);
    put(nlit as u32);
    put(lanes as u32);
    put(split as u32);
    put(enc.states[0]);
    put(enc.states.get(1).copied().unwrap_or(1 << 16));
    put(enc.words.len() as u32);
    put(below(rng, 4));
    put(tp.len() as u32);
    tp.iter().for_each(|&v| put(v));
    li.iter().for_each(|&v| put(v));
    for c in model.cumulative() {
        put(c[0] as u32 | (c[1] as u32) << 16);
        put(c[2] as u32);
    }
    enc.words.iter().for_each(|&w| put(w as u32));
    codes.iter().for_each(|&s| put(s as u32));
    put(pos);
}

/// 300 chain cases (see [`chain_case`]), the same in every run.
fn chain_input() -> Vec<u8> {
    let mut rng = Rng(24);
    let cases = 300u32;
    let mut input = cases.to_le_bytes().to_vec();
    for _ in 0..cases {
        chain_case(&mut rng, &mut input);
    }
    input
}

/// The kernel text the chain harnesses need: the reader, the sink, one step, and `extra` (the loops they run).
fn chain_text(src: &str, extra: &[(&str, &str)]) -> String {
    let mut parts = vec![
        host_loads(cut(src, "struct WordReader1 {", "struct WordReader1 {")),
        back_reader_text(src),
        ring_text(src),
        cut(src, "enum K1Place {", "struct LiteralSink1 {"),
        cut_line(src, "#define K1_CTX_ORDER"),
        cut_line(src, "#define K1_CTX_ROWS"),
        cut_fn(src, "#ifndef K1_CTX_COPIES_LOG", "u32 k1_ctx_copies_log("),
        cut(src, "// Where a lane finds its copy", "struct K1Rows {"),
        cut_fn(src, "// The 16-byte word i of the shared copies", "uint4 k1_ctx_piece("),
        // The shared-memory load, from the harness's stand-in for shared memory.
        host_asm(cut_fn(src, "// An 8-byte load from shared", "uint2 lds64("), "asm(", "memcpy(&v, host_smem + a, 8);"),
        cut_fn(src, "// One context-coded literal (FORMAT.md", "u32 k1_context_step("),
        cut_line(src, "__device__ __forceinline__ u32 acgt4("),
    ];
    parts.extend(extra.iter().map(|&(start, last)| cut_fn(src, start, last)));
    parts.join("\n")
}

#[test]
fn context_chain_decodes_what_the_encoder_coded() {
    let src = kernel_source();
    let text = chain_text(src, &[("// Context-coded literals [first, end) of a slice", "void k1_context_literals(")]);
    run_harness_on("context_chain", &text, Some(&chain_input()));
}

#[test]
fn resident_chase_resolves_every_byte_a_sequential_decode_does() {
    let src = kernel_source();
    let text = [
        cut_fn(src, "#define RC_FLAG", "u32 complement(u32 b)"),
        cut_fn(src, "__device__ __forceinline__ u32 last_le(", "u32 last_le("),
        cut(src, "// The resident chase's maps (see chase_resident)", "struct Maps"),
        // The resident chase's loads (`ld_now_*`, `ld_issued_*`: `asm volatile("ld...` into `v`).
        host_asm(cut_fn(src, "#ifndef TOKEN_BUCKET_LOG", "void chase_matches("), "asm volatile(\"ld.", "v = *p;"),
    ]
    .join("\n");
    run_harness("resident_chase", &text);
}
