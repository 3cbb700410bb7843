//! One run of one task through `run_task`, with a stand-in for keel (a shell script):
//! the config file reaches keel's config folder, and the workspace path names neither
//! the task nor the run.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use keel_evals::run::{RunSettings, run_task};
use keel_evals::task::Task;

/// Passes only when keel got the config file and a workspace path without the task's
/// name; then it leaves the file that verify.sh looks for and reports a finished turn.
const FAKE_KEEL: &str = r#"#!/bin/bash
while [ $# -gt 0 ]; do [ "$1" = -C ] && ws=$2; shift; done
grep -q 'always_call = true' "$KEEL_CONFIG_DIR/config.toml" || { echo "no config" >&2; exit 3; }
case "$ws" in *secret-task*) echo "task name in $ws" >&2; exit 4;; esac
[ "$(basename "$ws")" = project ] || exit 5
touch "$ws/done"
echo '{"type":"keel/done","data":{"reason":"completed","final_text":"ok","tool_calls":0}}'
"#;

#[test]
fn a_run_gets_the_config_file_and_a_neutral_workspace_path() {
    let dir = tempfile::tempdir().unwrap();
    let task_dir = dir.path().join("secret-task");
    std::fs::create_dir_all(task_dir.join("files")).unwrap();
    std::fs::write(task_dir.join("task.toml"), "prompt = \"do it\"\ncategory = \"test\"\n").unwrap();
    std::fs::write(task_dir.join("verify.sh"), "test -f done || { echo 'keel did not run'; exit 1; }\n")
        .unwrap();
    let keel = dir.path().join("keel");
    std::fs::write(&keel, FAKE_KEEL).unwrap();
    std::fs::set_permissions(&keel, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.path().join("eval-config.toml");
    std::fs::write(&config, "always_call = true\n").unwrap();

    let settings = RunSettings {
        keel,
        keel_args: vec![],
        max_steps: 5,
        timeout: Duration::from_secs(30),
        out_dir: dir.path().join("out"),
        scratch: dir.path().join("scratch"),
        keep: true,
        config: Some(config),
    };
    let task = Task::load(&task_dir).unwrap();
    let record = run_task(&task, 1, &settings).unwrap();
    let stderr = std::fs::read_to_string(dir.path().join("out/secret-task.1.stderr")).unwrap();
    assert!(record.passed, "{record:?}\nkeel's stderr: {stderr}");
    assert_eq!(record.reason, "completed");
}
