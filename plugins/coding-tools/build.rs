//! Link the component with 8 MiB of initial linear memory (instead of
//! ~1 MiB): reading and numbering a file of up to 2-3 MB then needs no
//! `memory.grow`, which the host pays for with `mprotect` on every call
//! (and again when the instance's memory is reset). Untouched pages cost
//! nothing: the host maps them lazily.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_FAMILY").as_deref() == Ok("wasm") {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory={}", 8 << 20);
    }
}
