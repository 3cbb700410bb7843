use super::*;
use keel_agent::{Tool, ToolContext, ToolError, ToolErrorKind};
use keel_session::Effect;
use std::fs;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

struct Dirs {
    workspace: tempfile::TempDir,
    user: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        Dirs { workspace: tempfile::tempdir().unwrap(), user: tempfile::tempdir().unwrap() }
    }

    fn project(&self, rel: &str, text: &str) {
        write(&self.workspace.path().join(PROJECT_DIR).join(rel), text);
    }

    fn user(&self, rel: &str, text: &str) {
        write(&self.user.path().join(rel), text);
    }

    fn discover(&self) -> (Skills, Vec<String>) {
        Skills::discover(&Places {
            workspace: self.workspace.path(),
            allowed_roots: &[],
            user: Some((self.user.path(), "~/.config/keel/skills")),
        })
    }
}

#[test]
fn project_and_user_skills_are_found_and_the_project_wins() {
    let dirs = Dirs::new();
    dirs.project("pdf/SKILL.md", &skill_md("pdf", "Fill PDF forms. Use for PDFs.", "Use pdftk."));
    dirs.project("pdf/forms.md", "Form fields.");
    dirs.user("pdf/SKILL.md", &skill_md("pdf", "The user's own PDF skill.", "Other."));
    dirs.user(
        "release/SKILL.md",
        "---\nname: release\ndescription: >\n  Cut a release:\n  tag and publish.\nlicense: MIT\n---\nSteps.\n",
    );
    let (skills, notes) = dirs.discover();
    assert!(notes.is_empty(), "{notes:?}");
    let listed: Vec<(&str, &str, Origin)> =
        skills.iter().map(|s| (s.name.as_str(), s.description.as_str(), s.origin)).collect();
    assert_eq!(
        listed,
        [
            ("pdf", "Fill PDF forms. Use for PDFs.", Origin::Project),
            ("release", "Cut a release: tag and publish.", Origin::User)
        ]
    );
    assert_eq!(skills.get("pdf").unwrap().shown, ".keel/skills/pdf");
    assert_eq!(skills.get("release").unwrap().shown, "~/.config/keel/skills/release");
    let section = skills.prompt_section().unwrap();
    assert!(section.starts_with("# Skills\n"), "{section}");
    assert!(
        section
            .ends_with("\n- pdf: Fill PDF forms. Use for PDFs.\n- release: Cut a release: tag and publish."),
        "{section}"
    );
    assert!(!section.contains("pdftk"), "bodies stay out of the prompt");
    let none = Dirs::new().discover();
    assert_eq!((none.0.prompt_section(), none.1), (None, Vec::new()));
}

#[test]
fn bad_skills_are_reported_and_skipped() {
    let dirs = Dirs::new();
    dirs.project("no-description/SKILL.md", "---\nname: no-description\n---\nBody.\n");
    dirs.project("bad name/SKILL.md", &skill_md("bad name", "x", ""));
    dirs.project("open/SKILL.md", "---\nname: open\ndescription: never closed\n");
    dirs.project("huge/SKILL.md", &"x".repeat(MAX_SKILL_BYTES + 1));
    dirs.project("twin/SKILL.md", &skill_md("ok", "The second of a name.", ""));
    dirs.project("ok/SKILL.md", &skill_md("ok", "Fine.", ""));
    fs::create_dir_all(dirs.workspace.path().join(PROJECT_DIR).join("empty")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("SKILL.md"), &skill_md("escape", "SECRET-OUTSIDE", ""));
    std::os::unix::fs::symlink(outside.path(), dirs.workspace.path().join(PROJECT_DIR).join("escape"))
        .unwrap();
    let (skills, notes) = dirs.discover();
    assert_eq!(skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["ok"]);
    assert_eq!(skills.get("ok").unwrap().description, "Fine.");
    assert_eq!(
        notes,
        [
            "skill .keel/skills/bad name was not read: .keel/skills/bad name/SKILL.md: `bad name` is not a skill name (1 to 64 letters, digits, - and _)",
            "skill .keel/skills/empty was not read: .keel/skills/empty/SKILL.md: it does not exist",
            "skill .keel/skills/escape was not read: .keel/skills/escape/SKILL.md: it leads outside the project folder (add its folder to allowed_roots to use it)",
            "skill .keel/skills/huge was not read: .keel/skills/huge/SKILL.md: it is larger than 64 KB",
            "skill .keel/skills/no-description was not read: .keel/skills/no-description/SKILL.md: its front matter has no description (what the skill is for and when to use it)",
            "skill .keel/skills/open was not read: .keel/skills/open/SKILL.md: its front matter is not closed (a `---` line after it)",
            "skill .keel/skills/twin was not read: .keel/skills/ok has the same name",
        ]
    );
    // Allowed on purpose: read.
    let (skills, _) = Skills::discover(&Places {
        workspace: dirs.workspace.path(),
        allowed_roots: &[outside.path().to_path_buf()],
        user: None,
    });
    assert!(skills.get("escape").is_some());
}

#[test]
fn the_prompt_is_bounded() {
    let dirs = Dirs::new();
    for n in 0..(MAX_SKILLS + 5) {
        dirs.user(&format!("s{n:02}/SKILL.md"), &skill_md(&format!("s{n:02}"), "Short.", ""));
    }
    let (skills, notes) = dirs.discover();
    assert_eq!(skills.iter().count(), MAX_SKILLS);
    assert_eq!(notes.len(), 1);
    assert!(notes[0].ends_with("s50, s51, s52, s53, s54"), "{notes:?}");
    let long = Dirs::new();
    long.user("long/SKILL.md", &skill_md("long", &"word ".repeat(1000), ""));
    let (skills, _) = long.discover();
    assert_eq!(skills.get("long").unwrap().description.chars().count(), MAX_DESCRIPTION_CHARS);
    let wide = Dirs::new();
    for n in 0..20 {
        wide.user(&format!("w{n:02}/SKILL.md"), &skill_md(&format!("w{n:02}"), &"word ".repeat(200), ""));
    }
    let (skills, notes) = wide.discover();
    assert!(skills.prompt_section().unwrap().len() <= PROMPT_BUDGET + 400, "{notes:?}");
    assert!(skills.iter().count() < 20 && notes.len() == 1);
}

async fn call(tool: &SkillTool, args: serde_json::Value) -> Result<String, ToolError> {
    let args = serde_json::from_value(args).unwrap();
    tool.call(args, ToolContext::new(".")).await.map(|out| out.content)
}

#[tokio::test]
async fn the_tool_loads_a_skill_and_reads_its_files_inside_its_folder_only() {
    let dirs = Dirs::new();
    dirs.user("pdf/SKILL.md", &skill_md("pdf", "Fill PDF forms.", "# PDF\nRun scripts/fill.py."));
    dirs.user("pdf/scripts/fill.py", "print('filled')\n");
    dirs.user("pdf/reference.md", "Field names.\n");
    dirs.user("pdf/.cache/x", "hidden\n");
    let secret = dirs.user.path().join("secret.txt");
    fs::write(&secret, "SECRET").unwrap();
    std::os::unix::fs::symlink(&secret, dirs.user.path().join("pdf/link.txt")).unwrap();
    let dotfiles = tempfile::tempdir().unwrap();
    write(
        &dotfiles.path().join("SKILL.md"),
        &skill_md("linked", "A SKILL.md kept elsewhere.", "Linked body."),
    );
    fs::create_dir_all(dirs.user.path().join("linked")).unwrap();
    std::os::unix::fs::symlink(dotfiles.path().join("SKILL.md"), dirs.user.path().join("linked/SKILL.md"))
        .unwrap();
    let (skills, _) = dirs.discover();
    let tool = SkillTool::new(skills);
    assert!(tool.is_read_only());
    let linked = call(&tool, serde_json::json!({"name": "linked"})).await.unwrap();
    assert_eq!(linked, "Skill linked (~/.config/keel/skills/linked):\n\nLinked body.", "the user's own link");
    assert_eq!(tool.effect(&serde_json::json!({"name": "pdf"})), Effect::Reads { path: None });

    let loaded = call(&tool, serde_json::json!({"name": "pdf"})).await.unwrap();
    assert_eq!(
        loaded,
        "Skill pdf (~/.config/keel/skills/pdf):\n\n# PDF\nRun scripts/fill.py.\n\n\
Files in the skill's folder (read one with skill, name \"pdf\" and file set to its path):\n\
- link.txt\n- reference.md\n- scripts/fill.py"
    );
    let script = call(&tool, serde_json::json!({"name": "pdf", "file": "scripts/fill.py"})).await.unwrap();
    assert_eq!(script, "print('filled')\n");

    let outside = call(&tool, serde_json::json!({"name": "pdf", "file": "link.txt"})).await.unwrap_err();
    assert_eq!(outside.kind, ToolErrorKind::OutsideWorkspace);
    assert!(!outside.message.contains("SECRET"));
    for escape in ["../secret.txt", "/etc/passwd"] {
        let refused = call(&tool, serde_json::json!({"name": "pdf", "file": escape})).await.unwrap_err();
        assert_eq!(refused.kind, ToolErrorKind::InvalidPath, "{escape}");
    }
    // An empty file names no file: the skill itself (a small model's first call).
    for empty in ["", "  "] {
        assert_eq!(call(&tool, serde_json::json!({"name": "pdf", "file": empty})).await.unwrap(), loaded);
    }
    let missing = call(&tool, serde_json::json!({"name": "pdf", "file": "nope.md"})).await.unwrap_err();
    assert_eq!(missing.kind, ToolErrorKind::NotFound);
    let unknown = call(&tool, serde_json::json!({"name": "pfd"})).await.unwrap_err();
    assert_eq!(unknown.message, "there is no skill `pfd`; the skills are: linked, pdf");
}
