//! Which of llama.cpp's kernels run, and what keel remembers about them per machine.
//!
//! The engine carries llama.cpp's CPU kernels compiled for several CPU generations and
//! loads the best one this CPU can run (see `child::libs`); `LocalConfig::variant` forces
//! one (`x64` is the most conservative, and about ten times slower). [`Kernels`] says how
//! to choose; [`KernelMemory`] keeps, per CPU, engine build and model file, what happened:
//! an engine that crashed with the fast kernels runs the safe set from then on, and a
//! gated variant (one known to crash on some machines) runs only after a self-test
//! passed here.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How to choose the kernels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernels {
    /// The best variant this CPU runs, weights repacked; the safe set where the fast one
    /// crashed before on this machine with this model.
    #[default]
    Auto,
    /// The best variant, even where it crashed before (to try again).
    Fast,
    /// The best ungated variant with weight repacking off: llama.cpp's plain kernels for
    /// the CPU, without the repacked and AMX paths (about a fifth slower to generate).
    Safe,
}

impl Kernels {
    /// Its name in config and the environment.
    pub fn as_str(self) -> &'static str {
        match self {
            Kernels::Auto => "auto",
            Kernels::Fast => "fast",
            Kernels::Safe => "safe",
        }
    }
}

impl std::fmt::Display for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kernels {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Kernels::Auto),
            "fast" => Ok(Kernels::Fast),
            "safe" => Ok(Kernels::Safe),
            other => Err(format!("unknown kernel set `{other}`: use auto, fast or safe")),
        }
    }
}

/// What keel learned about one CPU, engine build and model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The key ([`memory_key`]).
    pub key: String,
    /// The model file, for people reading the file.
    pub model: String,
    /// The CPU, likewise.
    pub cpu: String,
    /// The fast kernels crashed: what and when (the safe set runs from then on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crashed: Option<String>,
    /// Gated variants whose self-test passed here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed: Vec<String>,
    /// Gated variants whose self-test failed here, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

/// The verdicts, in a small JSON file (by default `<keel cache>/engine/kernels.json`).
#[derive(Debug, Clone)]
pub struct KernelMemory {
    path: PathBuf,
}

/// The most verdicts kept (oldest dropped first).
const KEEP: usize = 64;

impl KernelMemory {
    /// The memory in `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        KernelMemory { path: path.into() }
    }

    /// The default file, beside the model cache.
    pub fn default_path() -> PathBuf {
        crate::models::keel_cache_dir().join("engine").join("kernels.json")
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every verdict (none when the file is missing or unreadable).
    pub fn all(&self) -> Vec<Verdict> {
        std::fs::read(&self.path)
            .ok()
            .filter(|bytes| bytes.len() <= 1 << 20)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// The verdict for `key`.
    pub fn get(&self, key: &str) -> Option<Verdict> {
        self.all().into_iter().find(|v| v.key == key)
    }

    /// Changes (or starts) the verdict for `key` and writes the file (a new file renamed
    /// over the old one: a crash never leaves half a file, and a link put in its place
    /// is replaced, never followed).
    pub fn update(&self, key: &str, change: impl FnOnce(&mut Verdict)) -> std::io::Result<()> {
        let mut all = self.all();
        let index = match all.iter().position(|v| v.key == key) {
            Some(index) => index,
            None => {
                all.push(Verdict { key: key.to_owned(), ..Verdict::default() });
                all.len() - 1
            }
        };
        change(&mut all[index]);
        let verdict = all.remove(index);
        all.push(verdict);
        let excess = all.len().saturating_sub(KEEP);
        all.drain(..excess);
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let text = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
        let temporary = dir.join(format!(".kernels.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&temporary);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .and_then(|mut file| std::io::Write::write_all(&mut file, &text));
        match written.and_then(|()| std::fs::rename(&temporary, &self.path)) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = std::fs::remove_file(&temporary);
                Err(e)
            }
        }
    }
}

/// The key of a CPU, an engine build and a model: a verdict about one holds for none of
/// the others.
pub fn memory_key(cpu: &CpuId, build: &str, model: &Path) -> String {
    let size = std::fs::metadata(model).map(|m| m.len()).unwrap_or(0);
    let mut hash = Sha256::new();
    for part in [cpu.signature.as_bytes(), build.as_bytes(), model.as_os_str().as_encoded_bytes()] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.update(size.to_le_bytes());
    hash.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// A CPU as the kernel memory tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuId {
    /// Its name (`AMD EPYC 9B14`, `Intel(R) Xeon(R) Platinum 8481C`).
    pub name: String,
    /// Vendor, model numbers and feature flags, joined.
    pub signature: String,
    /// The flags that decide which kernels run (`avx2`, `avx512f`, `amx_int8`, `sve`, …).
    pub flags: Vec<String>,
}

/// The CPU flags llama.cpp's kernel variants are told apart by.
const KERNEL_FLAGS: &[&str] = &[
    "sse4_2",
    "avx",
    "f16c",
    "fma",
    "bmi2",
    "avx2",
    "avx_vnni",
    "avx512f",
    "avx512vbmi",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "asimddp",
    "asimdhp",
    "sve",
    "sve2",
    "i8mm",
    "sme",
];

impl CpuId {
    /// This machine's CPU, from `/proc/cpuinfo` (the architecture alone where that is
    /// missing).
    pub fn this_machine() -> CpuId {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        CpuId::from_cpuinfo(&info)
    }

    /// Reads the first processor's block of a `/proc/cpuinfo` text.
    pub fn from_cpuinfo(info: &str) -> CpuId {
        const KEYS: &[&str] = &[
            "vendor_id",
            "cpu family",
            "model",
            "model name",
            "stepping",
            "flags",
            "CPU implementer",
            "CPU architecture",
            "CPU variant",
            "CPU part",
            "Features",
        ];
        let block = info.split("\n\n").next().unwrap_or("");
        let mut name = String::new();
        let mut signature = String::from(std::env::consts::ARCH);
        let mut flags = Vec::new();
        for line in block.lines() {
            let Some((key, value)) = line.split_once(':') else { continue };
            let (key, value) = (key.trim(), value.trim());
            if key == "model name" {
                name = value.to_owned();
            }
            if key == "flags" || key == "Features" {
                flags = KERNEL_FLAGS
                    .iter()
                    .filter(|flag| value.split_whitespace().any(|f| f == **flag))
                    .map(|flag| (*flag).to_owned())
                    .collect();
            }
            if KEYS.contains(&key) {
                signature.push('|');
                signature.push_str(key);
                signature.push('=');
                signature.push_str(value);
            }
        }
        if name.is_empty() {
            name = std::env::consts::ARCH.to_owned();
        }
        CpuId { name, signature, flags }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    const XEON: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\nstepping\t: 8\nflags\t\t: fpu avx2 avx512f amx_tile amx_int8\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n";

    #[test]
    fn a_cpu_is_read_from_its_first_block() {
        let cpu = CpuId::from_cpuinfo(XEON);
        assert_eq!(cpu.name, "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz");
        assert!(cpu.signature.contains("amx_int8"), "{}", cpu.signature);
        assert_eq!(cpu.flags, vec!["avx2", "avx512f", "amx_tile", "amx_int8"]);
        let other = CpuId::from_cpuinfo(&XEON.replace("amx_tile amx_int8", ""));
        assert_ne!(cpu.signature, other.signature, "a CPU without AMX is another CPU");
        assert_eq!(CpuId::from_cpuinfo("").name, std::env::consts::ARCH);
    }

    #[test]
    fn kernel_sets_parse_and_print() {
        for kernels in [Kernels::Auto, Kernels::Fast, Kernels::Safe] {
            assert_eq!(kernels.as_str().parse::<Kernels>().unwrap(), kernels);
        }
        assert_eq!(" SAFE ".parse::<Kernels>().unwrap(), Kernels::Safe);
        assert_eq!(
            "native".parse::<Kernels>().unwrap_err(),
            "unknown kernel set `native`: use auto, fast or safe"
        );
    }

    #[test]
    fn verdicts_are_kept_per_key_and_survive_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        let memory = KernelMemory::at(dir.path().join("engine/kernels.json"));
        assert_eq!(memory.get("a"), None);
        memory.update("a", |v| v.crashed = Some("SIGSEGV".into())).unwrap();
        memory.update("b", |v| v.passed.push("sapphirerapids".into())).unwrap();
        memory.update("a", |v| v.model = "m.gguf".into()).unwrap();
        let a = memory.get("a").unwrap();
        assert_eq!((a.crashed.as_deref(), a.model.as_str()), (Some("SIGSEGV"), "m.gguf"));
        assert_eq!(memory.get("b").unwrap().passed, vec!["sapphirerapids".to_owned()]);
        std::fs::write(memory.path(), "{not json").unwrap();
        assert_eq!(memory.all(), Vec::new());
        memory.update("c", |_| {}).unwrap();
        assert_eq!(memory.all().len(), 1);
    }

    #[test]
    fn a_link_in_the_files_place_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        let path = dir.path().join("kernels.json");
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        KernelMemory::at(&path).update("k", |_| {}).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
    }

    #[test]
    fn keys_differ_by_cpu_build_and_model() {
        let cpu = CpuId::from_cpuinfo(XEON);
        let other = CpuId::from_cpuinfo("model name\t: Other\n");
        let model = Path::new("/nonexistent/m.gguf");
        let key = memory_key(&cpu, "b1", model);
        assert_eq!(key.len(), 24);
        assert_eq!(key, memory_key(&cpu, "b1", model));
        assert_ne!(key, memory_key(&other, "b1", model));
        assert_ne!(key, memory_key(&cpu, "b2", model));
        assert_ne!(key, memory_key(&cpu, "b1", Path::new("/nonexistent/n.gguf")));
    }

    #[test]
    fn the_memory_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let memory = KernelMemory::at(dir.path().join("k.json"));
        for i in 0..KEEP + 3 {
            memory.update(&format!("k{i}"), |_| {}).unwrap();
        }
        let all = memory.all();
        assert_eq!(all.len(), KEEP);
        assert_eq!(all[0].key, "k3");
    }
}
