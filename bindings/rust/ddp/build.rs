//! Gives this crate's own tests and examples a run path to libddp.so.
fn main() {
    if let Ok(dir) = std::env::var("DEP_DDP_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
