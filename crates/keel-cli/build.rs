//! Links `keel` with packed relative relocations (`DT_RELR`) where the C library it links
//! against supports them.
//!
//! keel is a position-independent executable: every pointer in its read-only data is
//! fixed up at start. Listed one by one (`.rela.dyn`, 24 bytes each) the fix-ups were
//! 1.3 MB that the loader reads in full on every start; packed they take 17 KB. glibc
//! reads the packed form from 2.36 on and says so with the `GLIBC_ABI_DT_RELR` version;
//! the linker then makes the binary require it. So the flag is passed only when the
//! glibc being linked against defines that version (an older one, or a cross build,
//! gets the ordinary table and runs as before). lld (Rust's default linker on
//! x86-64 Linux) and GNU ld 2.38+ know the flag.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    if glibc_reads_packed_relocations() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// True when the `libc.so.6` the C compiler links against defines `GLIBC_ABI_DT_RELR`.
fn glibc_reads_packed_relocations() -> bool {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let Ok(output) = Command::new(compiler).arg("-print-file-name=libc.so.6").output() else {
        return false;
    };
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if !output.status.success() || !path.is_absolute() {
        return false;
    }
    let Ok(bytes) = std::fs::read(&path) else { return false };
    let needle = b"GLIBC_ABI_DT_RELR";
    bytes.windows(needle.len()).any(|window| window == needle)
}
