//! With feature `llama`: embeds llama.cpp's shared libraries into the crate.
//!
//! `llama-cpp-sys-2` (feature `dynamic-backends`) builds llama.cpp as shared libraries
//! with its CPU kernels compiled once per CPU generation (x86-64 baseline, SSE4.2, AVX,
//! AVX2, AVX-512 variants, AMX; armv8.0 to armv9.2 on aarch64), each a module scored
//! against the CPU at run time. keel's engine process writes them to its cache and loads
//! the best one the CPU runs, so one keel binary runs on any x86-64 or aarch64 Linux
//! machine with the kernels that suit it. Here they become `include_bytes!` statics, with
//! a build id (a hash of them all) naming the cache folder.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_BACKENDS_DIR");
    if std::env::var_os("CARGO_FEATURE_LLAMA").is_none() {
        return;
    }
    let out = PathBuf::from(env("OUT_DIR"));
    let backends = PathBuf::from(env("DEP_LLAMA_BACKENDS_DIR"));
    let Some(sys_out) = backends.parent() else { fail("DEP_LLAMA_BACKENDS_DIR has no parent") };
    let lib = sys_out.join("lib");
    // Loaded in this order: each one's dependencies come before it.
    let core = ["libggml-base.so.0", "libggml.so.0", "libllama.so.0"];
    let mut files: Vec<(String, PathBuf, bool)> = Vec::new();
    for name in core {
        let path = lib.join(name);
        if !path.exists() {
            fail(&format!(
                "{} is missing: is llama-cpp-sys-2 built with `dynamic-backends`?",
                path.display()
            ));
        }
        files.push((name.to_owned(), path, false));
    }
    let mut variants: Vec<PathBuf> = std::fs::read_dir(&backends)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", backends.display())))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libggml-cpu-") && n.ends_with(".so"))
        })
        .collect();
    variants.sort();
    if variants.is_empty() {
        fail(&format!("no CPU kernel modules (libggml-cpu-*.so) in {}", backends.display()));
    }
    for path in variants {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        files.push((name, path, true));
    }
    let mut code = String::new();
    let mut build = Sha256::default();
    code.push_str("/// The embedded libraries: file name, bytes, SHA-256, whether a CPU kernel module.\n");
    code.push_str("pub(crate) static FILES: &[EmbeddedFile] = &[\n");
    for (name, path, variant) in &files {
        let bytes =
            std::fs::read(path).unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())));
        let digest = hex(&Sha256::digest(&bytes));
        build.update(name.as_bytes());
        build.update(&bytes);
        let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        println!("cargo:rerun-if-changed={}", resolved.display());
        code.push_str(&format!(
            "    EmbeddedFile {{ name: {name:?}, bytes: include_bytes!({resolved:?}), sha256: {digest:?}, variant: {variant} }},\n",
            resolved = resolved.display().to_string(),
        ));
    }
    code.push_str("];\n");
    let id = hex(&build.finalize());
    code.push_str(&format!(
        "/// A hash of every embedded file.\npub(crate) const BUILD_ID: &str = {:?};\n",
        &id[..16]
    ));
    let target = out.join("engine_libs.rs");
    let mut file =
        std::fs::File::create(&target).unwrap_or_else(|e| fail(&format!("{}: {e}", target.display())));
    file.write_all(code.as_bytes()).unwrap_or_else(|e| fail(&format!("{}: {e}", target.display())));
    remove_dangling_links(&out);
}

/// llama-cpp-sys-2 hard-links its libraries' `.so` symlinks into the target folder,
/// where they dangle; when its build script runs again (another feature set, a changed
/// `GGML_*` variable) it fails on them ("File exists"). keel loads the libraries from
/// its own copies, so the dangling links go.
fn remove_dangling_links(out: &Path) {
    let Some(profile) = out.ancestors().nth(3) else { return };
    for dir in [profile.to_path_buf(), profile.join("deps"), profile.join("examples")] {
        for name in ["libggml-base.so", "libggml.so", "libllama.so", "libllama-common.so"] {
            let path = dir.join(name);
            let dangling =
                std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) && !path.exists();
            if dangling {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| fail(&format!("{name} is not set")))
}

fn fail(message: &str) -> ! {
    eprintln!("keel-local build: {message}");
    std::process::exit(1)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
