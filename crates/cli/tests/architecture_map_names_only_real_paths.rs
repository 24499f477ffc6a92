//! ARCHITECTURE.md cites files and folders by path; a map that drifts from the
//! tree misleads the next reader, so every cited path must exist.

use std::path::Path;

#[test]
fn architecture_map_names_only_real_paths() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let map =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the root");
    let mut cited = 0;
    let mut missing = Vec::new();
    for (i, part) in map.split('`').enumerate() {
        // Odd parts are inside backticks; keep those that look like repo paths.
        let looks_like_path = part.contains('/')
            && !part.contains(' ')
            && ["crates/", "docs/", "include/", "scripts/", "tests/"]
                .iter()
                .any(|p| part.starts_with(p));
        if i % 2 == 1 && looks_like_path {
            cited += 1;
            if !root.join(part).exists() {
                missing.push(part.to_string());
            }
        }
    }
    assert!(
        cited >= 10,
        "expected ARCHITECTURE.md to cite paths, found {cited}"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md cites paths that do not exist: {missing:?}"
    );
}
