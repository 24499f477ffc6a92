//! The example plugin (crates/board/plugin-example) is built as a shared
//! library, loaded through the C ABI, registered and run; a plugin built for
//! another ABI version is refused with a clear error; a library that is not
//! a plugin is refused; a panicking plugin operation is contained and
//! counted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use hark_board::{Board, Entry, ErrorKind, KnowledgeSource};

/// Builds the example plugin (with `features`) in a target directory of its
/// own — the test's own is locked by the `cargo test` running us — and
/// copies the library to `name` so builds with other features keep it.
fn build_plugin(features: &[&str], name: &str) -> PathBuf {
    static BUILD: Mutex<()> = Mutex::new(());
    let _one_at_a_time = BUILD.lock().unwrap_or_else(|p| p.into_inner());
    // …/target/debug/deps/<this test> → …/target
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let dir = target.join("board-plugin-tests");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin-example/Cargo.toml");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&dir);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    let status = cmd.status().expect("cargo runs");
    assert!(status.success(), "building the example plugin failed");
    let built = dir.join("debug/libhark_board_plugin_example.so");
    let copy = dir.join(name);
    std::fs::copy(&built, &copy).unwrap();
    copy
}

fn good_plugin() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| build_plugin(&[], "example-good.so"))
}

#[test]
fn the_example_plugin_loads_and_runs() {
    let board = Board::new(2);
    // SAFETY: the example plugin, built from this repository.
    let plugin = unsafe { board.load_plugin(good_plugin()) }.unwrap();
    assert_eq!(plugin.name(), "example");
    let names: Vec<&str> = plugin
        .knowledge_sources()
        .iter()
        .map(|k| k.name())
        .collect();
    assert_eq!(names, ["example.sum", "example.explode"]);
    for ks in plugin.knowledge_sources() {
        let ks = ks.clone();
        board.register_all(move |_| ks.clone()).unwrap();
    }
    let numbers = board.intern("example.numbers");
    let sum = board.intern("example.sum");
    let sums: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let s = sums.clone();
    board
        .register_all(move |_| {
            let s = s.clone();
            KnowledgeSource::new("collect", &[sum], move |ctx, e| {
                let bytes: &Vec<u8> = e[0].get().unwrap();
                let v = u64::from_le_bytes(bytes[..8].try_into().unwrap());
                s.lock().unwrap().push((ctx.key().unwrap(), v));
            })
        })
        .unwrap();
    drop(plugin); // the registrations keep the library loaded
    let level = board.create_level("p");
    for key in 0..4u64 {
        let data: Vec<u8> = (1..=10u64)
            .flat_map(|n| (n * (key + 1)).to_le_bytes())
            .collect();
        board
            .submit_keyed(level, key, Entry::with_bytes(numbers, data, 80))
            .unwrap();
    }
    // Not bytes: the plugin sees an empty payload and sums nothing.
    board
        .submit_keyed(level, 9, Entry::new(numbers, 5u32))
        .unwrap();
    // Not whole u64s: the plugin reports an error.
    board
        .submit_keyed(level, 8, Entry::with_bytes(numbers, vec![1u8; 3], 3))
        .unwrap();
    board.drain();
    let mut got = sums.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, [(0, 55), (1, 110), (2, 165), (3, 220), (9, 0)]);
    let stats = board.stats();
    let row = stats
        .knowledge_sources
        .iter()
        .find(|k| k.name == "example.sum")
        .unwrap();
    assert_eq!(row.errors, 1);
    assert!(row.last_error.as_deref().unwrap().contains("whole number"));
    assert_eq!(stats.levels[0].entries_live, 0);
}

#[test]
fn a_panicking_plugin_operation_is_contained_and_counted() {
    let board = Board::new(1);
    // SAFETY: the example plugin, built from this repository.
    let plugin = unsafe { board.load_plugin(good_plugin()) }.unwrap();
    let level = board.create_level("p");
    for ks in plugin.knowledge_sources() {
        board.register(level, ks.clone()).unwrap();
    }
    let bomb = board.intern("example.bomb");
    for _ in 0..3 {
        board
            .submit(level, Entry::with_bytes(bomb, Vec::<u8>::new(), 0))
            .unwrap();
    }
    board.drain();
    let stats = board.stats();
    let row = stats
        .knowledge_sources
        .iter()
        .find(|k| k.name == "example.explode")
        .unwrap();
    assert_eq!(row.panics, 3);
    let message = row.last_error.as_deref().unwrap();
    assert!(message.contains("asked to explode"), "{message}");
    // The board still works.
    let numbers = board.intern("example.numbers");
    board
        .submit(
            level,
            Entry::with_bytes(numbers, 7u64.to_le_bytes().to_vec(), 8),
        )
        .unwrap();
    board.drain();
    let row = board.stats();
    let row = row
        .knowledge_sources
        .iter()
        .find(|k| k.name == "example.sum")
        .unwrap();
    assert_eq!(row.jobs_run, 1);
}

#[test]
fn a_plugin_built_for_another_abi_version_is_refused() {
    let wrong = build_plugin(&["wrong-abi-version"], "example-wrong-abi.so");
    let board = Board::new(1);
    // SAFETY: the example plugin, built from this repository.
    let err = unsafe { board.load_plugin(&wrong) }.err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::PluginAbi);
    let message = err.to_string();
    assert!(message.contains("version 99"), "{message}");
    assert!(message.contains("version 1"), "{message}");
    assert!(message.contains("rebuild"), "{message}");
}

#[test]
fn a_library_that_is_not_a_plugin_is_refused() {
    let board = Board::new(1);
    // SAFETY: libc's initialisers are already run in this process.
    let err = unsafe { board.load_plugin("libc.so.6") }
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::PluginLoad);
    assert!(err.to_string().contains("hark_board_plugin_v1"), "{err}");
    // SAFETY: nothing is loaded: the file does not exist.
    let err = unsafe { board.load_plugin("/nonexistent/libnothing.so") }
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::PluginLoad);
    assert!(
        err.to_string().contains("/nonexistent/libnothing.so"),
        "{err}"
    );
}
