//! `aceapex`: pack, unpack, cat, ls, info and verify `.acx` archives. See [`aceapex::cli`] for the commands and
//! the exit-status contract (0 ok, 1 runtime or corrupt data, 2 usage, 101 internal error).

fn main() {
    std::process::exit(aceapex::cli::main());
}
