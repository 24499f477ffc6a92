//! `docs/probe.md` lists the settings in a table generated from the crate's
//! one table ([`hark_settings::docs_table`]): this test fails when the two
//! differ, and with `HARK_BLESS=1` rewrites the document's table instead.

use std::path::Path;

const BEGIN: &str = "<!-- The settings table: generated from crates/settings/src/table.rs; \
                     `HARK_BLESS=1 cargo test -p hark-settings` rewrites it. -->\n";
const END: &str = "<!-- End of the settings table. -->\n";

#[test]
fn the_docs_table_is_generated_from_the_table_of_settings() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/probe.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (Some(begin), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!(
            "{} has no settings table between the lines\n{BEGIN}and\n{END}",
            path.display()
        );
    };
    let start = begin + BEGIN.len();
    let want = hark_settings::docs_table();
    if doc[start..end] == want {
        return;
    }
    if std::env::var_os("HARK_BLESS").is_some() {
        let new = format!("{}{want}{}", &doc[..start], &doc[end..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    panic!(
        "the settings table of {} is stale: run `HARK_BLESS=1 cargo test -p hark-settings` \
         to rewrite it from crates/settings/src/table.rs",
        path.display()
    );
}
