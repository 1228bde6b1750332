//! Where `bisect` writes when no `-o` is given: its checkouts, builds, logs and report must
//! not land in the repository's work tree (issue 50 item 7), where `git status` lists them,
//! `git clean` deletes a half-done bisect's log and a build of the tree picks them up.

use crate::common::*;

/// The default folder is `throughline-bisect-NAME` beside the work tree (NAME its folder's
/// name), whether bisect runs at the top of the tree or in a folder of it; the tree stays
/// clean.
#[test]
fn bisects_default_folder_lies_beside_the_work_tree() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("proj");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::fs::write(repo.join("sub/file.txt"), "1\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "one"]);
    let profile = write_profile(dir.path(), "p", &["http://127.0.0.1:1".into()], QUICK_BODY);
    for cwd in [repo.clone(), repo.join("sub")] {
        // --good HEAD is the bad commit too: refused once the folder is set up.
        let o = command()
            .args(["bisect", "--good", "HEAD", "-p"])
            .arg(&profile)
            .args(["--server-command", "exit 1 {port}"])
            .current_dir(&cwd)
            .output()
            .unwrap();
        assert_eq!(code(&o), 2, "{}", text(&o));
        assert!(text(&o).contains("the same commit"), "{}", text(&o));
        assert!(
            !cwd.join("throughline-bisect").exists(),
            "{}",
            cwd.display()
        );
        assert!(
            dir.path().join("throughline-bisect-proj").is_dir(),
            "{}",
            text(&o)
        );
        let status = std::process::Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=all"])
            .current_dir(&repo)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&status.stdout),
            "",
            "the work tree changed"
        );
    }
}
