//! `keel-bench hot-code [FILE]`: writes the list of functions the `keel` binary runs on
//! the scripted task, as callgrind lists them, for the linker to place together
//! (crates/keel-cli/build.rs passes it to lld as `--symbol-ordering-file`).
//!
//! The functions come from `valgrind --tool=callgrind` on one run of the task, with the
//! children keel starts (its `__exec` launcher) followed; tools' own programs (bash,
//! python3, cat) are not. Names are kept mangled, as the linker knows them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use keel_testkit::MockServer;

use crate::task::{keel_binary, task_command};
use crate::trajectory;

/// Where the list lives, relative to the workspace root.
const DEFAULT_OUT: &str = "crates/keel-cli/hot-code.txt";

/// Programs the task's tools run, which callgrind need not follow.
const NOT_KEEL: &str = "*/bash,*/sh,*/dash,*/python3*,*/python,*/pyenv*,*/cat,*/ls,*/env,*/unshare,*/git";

/// Runs the task under callgrind and writes the list to `out` (or [`DEFAULT_OUT`]).
pub fn hot_code(out: Option<&str>) {
    let keel = keel_binary();
    let out = PathBuf::from(out.unwrap_or(DEFAULT_OUT));
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    trajectory::workspace(&ws);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start());
    server.set_handler(|request| trajectory::response(trajectory::step_of(&request.body)));
    let profiles = dir.path().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    let mut valgrind = Command::new("valgrind");
    valgrind
        .arg("--tool=callgrind")
        .arg("--demangle=no")
        .arg("--trace-children=yes")
        .arg(format!("--trace-children-skip={NOT_KEEL}"))
        .arg(format!("--callgrind-out-file={}/callgrind.%p", profiles.display()))
        .arg(format!("--log-file={}/valgrind.%p.log", dir.path().display()))
        .arg(&keel);
    let mut command = task_command(valgrind, dir.path(), &ws, &server.base_url());
    // The stats written at exit read the vDSO through rustix, which valgrind does not
    // map where the auxiliary vector says (a crash under valgrind only).
    command.env_remove("KEEL_STATS_FILE");
    let status = command.status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => {
            for entry in std::fs::read_dir(dir.path()).unwrap().flatten() {
                if entry.path().extension().is_some_and(|e| e == "log") {
                    eprintln!("{}", std::fs::read_to_string(entry.path()).unwrap_or_default());
                }
            }
            panic!("keel under valgrind exited with {status}")
        }
        Err(err) => panic!("could not run valgrind (is it installed?): {err}"),
    }
    assert!(ws.join("NOTES.md").exists(), "the task did not finish under valgrind");
    let object = keel.file_name().unwrap().to_string_lossy().into_owned();
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    for profile in profiles_in_start_order(&profiles) {
        let text = std::fs::read_to_string(&profile).unwrap();
        for name in functions_run(&text, &object) {
            if seen.insert(name.clone()) {
                names.push(name);
            }
        }
    }
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let mut text = format!(
        "# The functions `keel` ran on keel-bench's scripted task, as callgrind lists them\n\
         # ({} names; {rustc}). Written by `keel-bench hot-code`; read by\n\
         # crates/keel-cli/build.rs (lld --symbol-ordering-file). See docs/performance.md.\n",
        names.len()
    );
    for name in &names {
        text.push_str(name);
        text.push('\n');
    }
    let before = std::fs::read_to_string(&out).unwrap_or_default();
    let listed: HashSet<&str> = before.lines().filter(|l| !l.starts_with('#')).collect();
    let kept = names.iter().filter(|name| listed.contains(name.as_str())).count();
    std::fs::write(&out, text).unwrap();
    println!(
        "{} functions written to {} ({kept} of them were in the list it replaces)",
        names.len(),
        out.display()
    );
}

/// The profiles callgrind wrote (`callgrind.<pid>`), oldest process first.
fn profiles_in_start_order(dir: &Path) -> Vec<PathBuf> {
    let mut profiles: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let pid = path.extension()?.to_str()?.parse().ok()?;
            Some((pid, path))
        })
        .collect();
    profiles.sort();
    profiles.into_iter().map(|(_, path)| path).collect()
}

/// The functions of the object whose file name is `object` that a callgrind profile
/// (written with `--demangle=no`) records, in the order they appear, each once.
///
/// Names in the format are compressed: `fn=(12) name` defines number 12, and a later
/// `fn=(12)` refers to it; the same goes for objects (`ob=`, `cob=`) and callees
/// (`cfn=`). Callgrind marks recursion depths and contexts with `'N` suffixes, which are
/// not part of the symbol. Entries that are not symbols (`0x…` addresses of code without
/// one, `(below main)`) are left out.
pub fn functions_run(profile: &str, object: &str) -> Vec<String> {
    let mut objects: std::collections::HashMap<String, String> = Default::default();
    let mut functions: std::collections::HashMap<String, String> = Default::default();
    let mut in_object = false;
    let mut seen = HashSet::new();
    let mut names = Vec::new();
    for line in profile.lines() {
        let Some((key, rest)) = line.split_once('=') else { continue };
        let table = match key {
            "ob" | "cob" => &mut objects,
            "fn" | "cfn" => &mut functions,
            _ => continue,
        };
        let value = resolve(table, rest);
        match key {
            "ob" => {
                in_object = Path::new(&value).file_name().is_some_and(|name| name == object);
            }
            "fn" if in_object => {
                let symbol = value.split('\'').next().unwrap_or_default().to_owned();
                if is_symbol(&symbol) && seen.insert(symbol.clone()) {
                    names.push(symbol);
                }
            }
            _ => {}
        }
    }
    names
}

/// The name a compressed reference stands for, defining it when the line does.
fn resolve(table: &mut std::collections::HashMap<String, String>, rest: &str) -> String {
    let Some(after) = rest.strip_prefix('(') else { return rest.to_owned() };
    let Some((id, name)) = after.split_once(')') else { return rest.to_owned() };
    let name = name.trim_start();
    if name.is_empty() {
        table.get(id).cloned().unwrap_or_default()
    } else {
        table.insert(id.to_owned(), name.to_owned());
        name.to_owned()
    }
}

/// True for a linker symbol name (not `0x…`, not `(below main)`).
fn is_symbol(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with("0x")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_of_the_named_object_in_first_seen_order_with_references_resolved() {
        let profile = "\
version: 1
ob=(1) /usr/lib/libc.so.6
fn=(1) memcpy
0x10 3
ob=(2) /work/target/release/keel
fn=(2) _ZN4keel4main17h0123456789abcdefE
0x20 5
cob=(1)
cfn=(1)
calls=1 0x10
0x21 3
fn=(3) _ZN4keel3run17hfedcba9876543210E.llvm.42'2
0x30 1
fn=(4) 0x0000000001f0a130
0x40 1
fn=(5) (below main)
ob=(1)
fn=(1)
0x11 1
ob=(2)
fn=(2)
0x22 1
fn=(3)
0x31 1
";
        assert_eq!(
            functions_run(profile, "keel"),
            vec![
                "_ZN4keel4main17h0123456789abcdefE".to_owned(),
                "_ZN4keel3run17hfedcba9876543210E.llvm.42".to_owned(),
            ]
        );
        assert_eq!(functions_run(profile, "libc.so.6"), vec!["memcpy".to_owned()]);
    }
}
