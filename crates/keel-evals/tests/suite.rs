//! The suite's own tasks are sound: each fails untouched and passes after its reference
//! solution (needs bash, python3 and git, no model).

use keel_evals::task::Task;

#[test]
fn every_task_fails_untouched_and_passes_when_solved() {
    let tasks = Task::load_all(&keel_evals::default_tasks_dir()).unwrap();
    assert!(tasks.len() >= 20, "the suite has {} tasks", tasks.len());
    let grown = tasks.iter().filter(|t| t.set == "grown").count();
    assert!(grown >= 12, "the grown set has {grown} tasks");
    let scratch = tempfile::tempdir().unwrap();
    let problems: Vec<String> = tasks
        .iter()
        .filter_map(|task| {
            keel_evals::check_task(task, &scratch.path().join(&task.name))
                .unwrap()
                .map(|problem| format!("{}: {problem}", task.name))
        })
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}
