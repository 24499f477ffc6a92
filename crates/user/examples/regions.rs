//! A small program using the user API; the probe's tests run it preloaded.
//! `cargo run -p hark-user --example regions` runs it unmeasured.

fn main() {
    println!("active: {}", hark_user::is_active());
    for step in 0..3 {
        hark_user::mark("step", step);
        let _outer = hark_user::region("outer");
        hark_user::counter("cells", 100 * step);
    }
}
