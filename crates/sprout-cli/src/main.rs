//! The `sprout` binary: everything lives in the `sprout_cli` library.

fn main() {
    std::process::exit(sprout_cli::main_with(std::env::args_os().collect()));
}
