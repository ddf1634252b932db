//! Finds libddp with pkg-config (the `pkg-config` program, no crate):
//! `ddp.pc` of an installed libddp, or `ddp-uninstalled.pc` of a build tree
//! (set PKG_CONFIG_PATH to the build directory). Passes the library
//! directory on as DEP_DDP_LIBDIR, so that crates using ddp-sys can give
//! their binaries a run path.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let out = Command::new("pkg-config")
        .args(["--libs-only-L", "ddp"])
        .output()
        .expect("ddp-sys: cannot run pkg-config (install pkg-config)");
    if !out.status.success() {
        panic!(
            "ddp-sys: pkg-config does not know ddp: {} (set PKG_CONFIG_PATH to the directory of ddp.pc)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:libdir={dir}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=ddp");
}
