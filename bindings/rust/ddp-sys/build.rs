//! Finds libddp with pkg-config (the `pkg-config` program, no crate):
//! `ddp.pc` of an installed libddp, or `ddp-uninstalled.pc` of a build tree
//! (set PKG_CONFIG_PATH to the build directory). A relative entry of
//! PKG_CONFIG_PATH (`PKG_CONFIG_PATH=build cargo build`) is taken from the
//! directory cargo was started in, as the shell's $PWD says: a build script
//! itself runs in the package's directory. Passes the library
//! directory on as DEP_DDP_LIBDIR, so that crates using ddp-sys can give
//! their binaries a run path.
use std::path::Path;
use std::process::Command;

/// PKG_CONFIG_PATH with each relative entry made absolute against $PWD.
fn absolute_search_path() -> Option<String> {
    let value = std::env::var("PKG_CONFIG_PATH").ok()?;
    let cwd = std::env::var("PWD").ok().filter(|d| Path::new(d).is_absolute())?;
    if std::env::split_paths(&value).all(|p| p.is_absolute()) {
        return None;
    }
    println!("cargo:rerun-if-env-changed=PWD");
    let entries = std::env::split_paths(&value).map(|p| if p.is_absolute() { p } else { Path::new(&cwd).join(p) });
    std::env::join_paths(entries).ok().and_then(|s| s.into_string().ok())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let mut pkg_config = Command::new("pkg-config");
    if let Some(path) = absolute_search_path() {
        pkg_config.env("PKG_CONFIG_PATH", path);
    }
    let out = pkg_config
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
