//! Writes the outputs of the test fixture (a hand-made two-program run) into
//! a directory, to look at the report without measuring anything:
//! `cargo run -p hark-outputs --example render_fixture -- /tmp/fixture-run`.

#[path = "../tests/common/mod.rs"]
mod common;

fn main() {
    let dir = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("hark-fixture-run"));
    let run = common::two_programs();
    if let Err(e) = hark_outputs::write_all(&run, &dir, |_| true) {
        eprintln!("render_fixture: {e}");
        std::process::exit(1);
    }
    print!("{}", hark_outputs::summary::render(&run));
    println!("{}", dir.display());
}
