//! Link settings for the `keel` binary that make it start faster and take less memory.
//!
//! 1. **Packed relative relocations** (`DT_RELR`) where the C library supports them.
//!    keel is a position-independent executable: every pointer in its read-only data is
//!    fixed up at start. Listed one by one (`.rela.dyn`, 24 bytes each) the fix-ups were
//!    1.3 MB that the loader reads in full on every start; packed they take 17 KB. glibc
//!    reads the packed form from 2.36 on and says so with the `GLIBC_ABI_DT_RELR` version;
//!    the linker then makes the binary require it. So the flag is passed only when the
//!    glibc being linked against defines that version. lld and GNU ld 2.38+ know the flag.
//! 2. **Hot code first** (`hot-code.txt`, see [`HOT_CODE`]): the functions a print-mode
//!    task runs, placed together at the start of the text. The kernel maps 64 KB around
//!    every code page a process touches, so the same 5 MB of code spread over the 22 MB
//!    text cost 12 MB of resident memory; packed, a few MB. Only lld reads the list, so the
//!    flag is passed when a probe link with the same compiler and flags accepts it; names
//!    the binary no longer has are skipped by the linker (a stale list costs memory, never
//!    a build).

use std::path::PathBuf;
use std::process::Command;

/// The ordering list, beside this file. Regenerate with `keel-bench hot-code`.
const HOT_CODE: &str = "hot-code.txt";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={HOT_CODE}");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    if glibc_reads_packed_relocations() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let list = manifest_dir.join(HOT_CODE);
    if list.is_file() {
        let args = [
            format!("-Wl,--symbol-ordering-file={}", list.display()),
            "-Wl,--no-warn-symbol-ordering".to_owned(),
        ];
        if linker_accepts(&args) {
            for arg in args {
                println!("cargo:rustc-link-arg-bins={arg}");
            }
        }
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

/// Links an empty program with the compiler, linker and flags this build uses, plus
/// `link_args`; true when that succeeds. (Which linker rustc runs depends on its version,
/// the target's defaults, `RUSTFLAGS` and Cargo's `linker` setting; asking is simpler
/// and truer than reasoning about all four.)
fn linker_accepts(link_args: &[String]) -> bool {
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else { return false };
    let source = out_dir.join("link_probe.rs");
    if std::fs::write(&source, "fn main() {}\n").is_err() {
        return false;
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut command = Command::new(rustc);
    command.arg(&source).arg("-o").arg(out_dir.join("link_probe"));
    if let Ok(target) = std::env::var("TARGET") {
        command.args(["--target", &target]);
    }
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        let mut setting = std::ffi::OsString::from("linker=");
        setting.push(linker);
        command.arg("-C").arg(setting);
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    command.args(flags.split('\x1f').filter(|flag| !flag.is_empty()));
    for arg in link_args {
        command.arg("-C").arg(format!("link-arg={arg}"));
    }
    command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    command.status().is_ok_and(|status| status.success())
}
