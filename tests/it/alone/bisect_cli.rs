//! `throughline bisect` end to end (issue 27): a throwaway git repository of 16 commits whose
//! files set the simulator's speed; one commit makes it 8% slower, and one earlier commit's
//! server does not start. Each step checks a commit out, builds it (a copy of its speed file)
//! and measures its server against the good commit's in a relative run in blocks.

use std::path::Path;

use crate::common::*;

/// The index (0-based, after the good commit) of the commit that makes the server slower.
const CULPRIT: usize = 10;
/// A commit whose server fails to start (it is skipped, and the search steps round it).
const BROKEN: usize = 7;

/// Commits what `dir` holds; its id is pushed to `ids`.
fn commit_in(dir: &Path, subject: &str, ids: &mut Vec<String>) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", subject]);
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(dir)
        .output()
        .unwrap();
    ids.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
}

/// Makes the repository: the good commit, then 16 commits; returns their ids, good first.
fn repository(dir: &Path) -> Vec<String> {
    git(dir, &["init", "-q"]);
    let mut ids = Vec::new();
    let commit = |subject: &str, ids: &mut Vec<String>| commit_in(dir, subject, ids);
    std::fs::write(dir.join("slowdown.txt"), "1.00\n").unwrap();
    commit("the good commit", &mut ids);
    for i in 0..16 {
        std::fs::write(dir.join("n.txt"), format!("{i}\n")).unwrap();
        if i == CULPRIT {
            std::fs::write(dir.join("slowdown.txt"), "1.08\n").unwrap();
        }
        if i == BROKEN {
            std::fs::write(dir.join("broken"), "").unwrap();
        } else if dir.join("broken").exists() {
            std::fs::remove_file(dir.join("broken")).unwrap();
        }
        // A subject that would be a workflow command if printed raw.
        let subject = if i == CULPRIT {
            "::warning::halve the KV cache".to_string()
        } else {
            format!("change {i}")
        };
        commit(&subject, &mut ids);
    }
    ids
}

/// The server of a checkout: refuses to start where `broken` exists, else the simulator at
/// the speed its build copied.
fn server_command() -> String {
    format!(
        "if test -e broken; then echo 'cannot load the model' >&2; exit 1; fi; \
         exec {} serve-sim --port {{port}} --preset fixed --token-delay-ms 5 \
         --slowdown $(cat built.txt)",
        bin()
    )
}

/// One bisect that measures at a time: the gate decides on each step's blocks, and the
/// load of the others running beside widened their spread until a step was undecided
/// (`an_undecided_step_is_measured_again_with_more_blocks` failed under it).
fn measuring() -> crate::common::TimingGuard {
    timing_lock()
}

const BUILD: &str = "cp slowdown.txt built.txt";

fn profile(dir: &Path) -> std::path::PathBuf {
    profile_with_gate(dir, "")
}

/// [`profile`] with more lines in its `[gate]` section.
fn profile_with_gate(dir: &Path, gate: &str) -> std::path::PathBuf {
    write_profile(
        dir,
        "bisect",
        &["http://127.0.0.1:1".to_string()],
        &format!(
            "[workload]\ninput_tokens = 4\nmax_tokens = 12\nignore_eos = true\n[sweep]\n\
             concurrency = [2]\nrequests_per_level = 6\nwarmup_requests = 1\ntrials = 3\n\
             [gate]\nmin_trials = 3\n{gate}"
        ),
    )
}

fn bisect(repo: &Path, profile: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let server = server_command();
    let mut args = vec![
        "bisect",
        "-C",
        repo.to_str().unwrap(),
        "-p",
        profile.to_str().unwrap(),
        "--server-command",
        &server,
        "--build-command",
        BUILD,
        "--slots",
        "0",
        "-o",
        out.to_str().unwrap(),
        // This busy test machine's client is sometimes flagged; the 8% here is far beyond it.
        "--allow-client-bound",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn finds_the_slower_commit_among_16_and_steps_round_a_broken_one() {
    let _turn = measuring();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = repository(&repo);
    let profile = profile(tmp.path());
    let out = tmp.path().join("out");

    let o = bisect(
        &repo,
        &profile,
        &out,
        &["--good", &ids[0], "--bad", &ids[16]],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!stdout.lines().any(|l| l.starts_with("::")), "{stdout}");
    let culprit = &ids[1 + CULPRIT];
    assert!(
        stdout.contains(&format!("first slower commit: {culprit}")),
        "{}",
        text(&o)
    );
    let report = read_json(&out.join("bisect.json"));
    assert_eq!(report["answer"]["kind"], "found");
    assert_eq!(report["answer"]["commit"], culprit.as_str());
    assert_eq!(report["commits"], 16);
    let steps = report["steps"].as_array().unwrap();
    // The bad ref confirmed first, then halving; the broken commit skipped with its reason.
    let order: Vec<&str> = steps
        .iter()
        .map(|s| s["commit"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = [16, 1 + BROKEN, 7, 11, 9, 10]
        .iter()
        .map(|&i| ids[i].as_str())
        .collect();
    assert_eq!(order, expected, "{}", text(&o));
    assert!(steps.len() <= 6, "log2 16 + the bad ref + one retry");
    let broken = &steps[1];
    assert_eq!(broken["outcome"], "skip");
    assert!(
        broken["reason"].as_str().unwrap().contains("not measured"),
        "{broken}"
    );
    for s in steps.iter().filter(|s| s["outcome"] == "bad") {
        let r = s["levels"][0]["ratio"].as_f64().unwrap();
        assert!((0.88..0.96).contains(&r), "an 8% slower commit at {r}: {s}");
    }
    let md = std::fs::read_to_string(out.join("bisect.md")).unwrap();
    assert!(md.contains(&format!("`{culprit}`")), "{md}");
    assert!(!md.lines().any(|l| l.starts_with("::")), "{md}");
    // The checkouts are gone, and git knows no worktree of them.
    assert!(!out.join("worktrees").join(&ids[16][..10]).exists());

    // Run again: every step is read back from the log, nothing is measured.
    let again = bisect(
        &repo,
        &profile,
        &out,
        &["--good", &ids[0], "--bad", &ids[16]],
    );
    assert_eq!(code(&again), 0, "{}", text(&again));
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(said.contains("6 step(s) read back"), "{said}");
    assert!(
        !said.lines().any(|l| l.starts_with("block ")),
        "measured again: {said}"
    );
    assert!(said.contains(&format!("first slower commit: {culprit}")));
}

#[test]
fn one_step_for_git_bisect_run() {
    let _turn = measuring();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = repository(&repo);
    let profile = profile(tmp.path());
    let out = tmp.path().join("steps");
    let step = |at: usize| {
        git(&repo, &["checkout", "-q", "--detach", &ids[at]]);
        bisect(&repo, &profile, &out, &["--step", "--good", &ids[0]])
    };
    // The broken commit's server does not start: git bisect skips it (125).
    let o = step(1 + BROKEN);
    assert_eq!(code(&o), 125, "{}", text(&o));
    // The slower commit: bad (1), as `git bisect run` reads it.
    let o = step(1 + CULPRIT);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("BAD: regression"));
    // A --bad beside --step is refused by the parser.
    let o = bisect(
        &repo,
        &profile,
        &out,
        &["--step", "--good", &ids[0], "--bad", &ids[3]],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
}

/// A repository of the good commit and one commit per entry of `slowdowns` (the server's
/// speed from that commit on); returns the ids, good first.
fn small_repository(dir: &Path, slowdowns: &[&str]) -> Vec<String> {
    git(dir, &["init", "-q"]);
    let mut ids = Vec::new();
    std::fs::write(dir.join("slowdown.txt"), "1.00\n").unwrap();
    commit_in(dir, "the good commit", &mut ids);
    for (i, s) in slowdowns.iter().enumerate() {
        std::fs::write(dir.join("slowdown.txt"), format!("{s}\n")).unwrap();
        std::fs::write(dir.join("n.txt"), format!("{i}\n")).unwrap();
        commit_in(dir, &format!("change {i}"), &mut ids);
    }
    ids
}

/// bisect.json's steps as (commit, outcome, more_blocks).
fn steps_of(out: &Path) -> Vec<(String, String, bool)> {
    let report = read_json(&out.join("bisect.json"));
    (report["steps"].as_array().unwrap().iter())
        .map(|s| {
            (
                s["commit"].as_str().unwrap().to_string(),
                s["outcome"].as_str().unwrap().to_string(),
                s["more_blocks"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// Two blocks (one each way round) leave the start spread without a degree of freedom: the
/// gate cannot tell, whatever the servers do. Each such step is measured again with twice
/// the blocks before it counts as skipped, the bad ref's too; the log keeps which
/// measurement a step was, so a bisect stopped between the two continues with the second.
#[test]
fn an_undecided_step_is_measured_again_with_more_blocks() {
    let _turn = measuring();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    // 15% slower: 2 blocks never decide without a calibration (no degrees of freedom), and 4
    // must decide the bad ref; at 8% its bound reached 0.952 once (undecided, skipped).
    let ids = small_repository(&repo, &["1.00", "1.15"]);
    // A pass rules out drops past 8%, not 5%: the unchanged commit's 4 blocks read 0.991
    // [0.936, 1.050] once (undecided, skipped), with other tests' processes running beside
    // this one (in the idle class, in a layout of the suite since undone). The slower
    // commit reads about 0.87.
    let profile = profile_with_gate(tmp.path(), "tolerance = 0.08\n");
    let out = tmp.path().join("out");
    let flags = [
        "--good",
        &ids[0],
        "--bad",
        &ids[2],
        "--blocks",
        "2",
        "--max-blocks",
        "2",
    ];
    let o = bisect(&repo, &profile, &out, &flags);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let expected = |i: usize, outcome: &str, again: bool| (ids[i].clone(), outcome.into(), again);
    assert_eq!(
        steps_of(&out),
        vec![
            expected(2, "skip", false),
            expected(2, "bad", true),
            expected(1, "skip", false),
            expected(1, "good", true),
        ],
        "{}",
        text(&o)
    );
    let report = read_json(&out.join("bisect.json"));
    assert_eq!(report["answer"]["commit"], ids[2].as_str());
    let steps = report["steps"].as_array().unwrap();
    assert!(steps[0]["undecided"].as_bool().unwrap(), "{}", steps[0]);
    assert_eq!(steps[1]["blocks"], 4, "{}", steps[1]);

    // Stopped after the first measurement of commit 1: the next run takes its second (and
    // measures nothing else).
    let log = out.join("bisect-log.jsonl");
    let kept: Vec<String> = (std::fs::read_to_string(&log).unwrap().lines())
        .take(4)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, kept.concat()).unwrap();
    let again = bisect(&repo, &profile, &out, &flags);
    assert_eq!(code(&again), 0, "{}", text(&again));
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(said.contains("3 step(s) read back"), "{said}");
    assert!(
        said.contains(&format!("step 4: {}", &ids[1][..10])),
        "{said}"
    );
    assert!(!said.contains("step 5:"), "{said}");
    assert_eq!(steps_of(&out).len(), 4);
    assert!(steps_of(&out)[3].2, "the second measurement: {said}");
}

/// One block a step: the gate cannot tell the bad ref, which is measured again (two blocks)
/// before the search gives up on it; with `--baseline` too (issue 48): one block has nothing
/// to check the A/A rows with, and a calibration taken unchecked named the wrong commit 64%
/// of the time at a 3% start spread. The second measurement's two blocks check it by their
/// slot effect and may use it.
#[test]
fn a_baseline_calibration_is_not_taken_unchecked_by_one_block() {
    let _turn = measuring();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = small_repository(&repo, &["1.08"]);
    let profile = profile(tmp.path());
    let flags = [
        "--good",
        &ids[0],
        "--bad",
        &ids[1],
        "--blocks",
        "1",
        "--max-blocks",
        "1",
    ];
    let out = tmp.path().join("without");
    let o = bisect(&repo, &profile, &out, &flags);
    let bad = |outcome: &str, again: bool| (ids[1].clone(), outcome.to_string(), again);
    let steps = steps_of(&out);
    assert_eq!(steps.len(), 2, "{}", text(&o));
    assert_eq!(steps[0], bad("skip", false), "{}", text(&o));
    // Two blocks, one each way round, may or may not tell: the exit code says which.
    assert!(steps[1].2, "measured again with more blocks: {}", text(&o));
    assert_eq!(code(&o) == 0, steps[1].1 == "bad", "{}", text(&o));

    // A baseline: blessed from a plain run, then A/A rows for C=2 (one shared slot: no slot
    // effect, starts within half a percent), dated as its session.
    let sim = Sim::start(1, &["--preset", "fixed", "--token-delay-ms", "5"]);
    let plain = tmp.path().join("plain");
    let o = run_bench_cli(
        &profile,
        &plain,
        &["--no-progress", "--no-plots", "-e", &sim.urls[0]],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let baseline = tmp.path().join("b.toml");
    let o = bless(
        &without_client_flags(&plain.join("results.json")),
        &baseline,
        &[],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let mut toml_text = std::fs::read_to_string(&baseline).unwrap();
    let stored: toml::Table = toml::from_str(&toml_text).unwrap();
    let at = stored["sessions"][0]["measured_at"]
        .as_str()
        .unwrap()
        .to_string();
    let plain_text = toml_text.clone();
    let rows = |extra: &str| -> String {
        [0.004, -0.003, 0.002, -0.004, 0.001, -0.001]
            .iter()
            .map(|x| {
                format!(
                    "\n[[calibration]]\nmeasured_at = \"{at}\"\nconcurrency = 2\n\
                     slot_difference = {x}\nwithin_variance = 0.0001\n{extra}"
                )
            })
            .collect()
    };
    toml_text.push_str(&rows(""));
    std::fs::write(&baseline, toml_text).unwrap();

    let out = tmp.path().join("with");
    let mut with = flags.to_vec();
    with.extend(["--baseline", baseline.to_str().unwrap()]);
    let o = bisect(&repo, &profile, &out, &with);
    let steps = steps_of(&out);
    assert_eq!(steps.len(), 2, "{}", text(&o));
    assert_eq!(steps[0], bad("skip", false), "{}", text(&o));
    assert!(steps[1].2, "measured again with more blocks: {}", text(&o));
    assert_eq!(code(&o) == 0, steps[1].1 == "bad", "{}", text(&o));
    // Each step's log line names the rows it read (issue 48: the header names them all).
    let read_rows = |out: &Path| -> Vec<String> {
        let report = read_json(&out.join("bisect.json"));
        (report["steps"].as_array().unwrap().iter())
            .map(|s| s["calibration"].as_str().unwrap_or("").to_string())
            .collect()
    };
    for said in read_rows(&out) {
        assert!(said.starts_with("C=2: 6 rows, sha256:"), "{said}");
    }
    // Rows of another engine version than the good commit's server: none applied, and the
    // steps say so rather than the header's count.
    let other = tmp.path().join("other.toml");
    let other_rows = rows("engine_version = \"0.0.0-another\"\n");
    std::fs::write(&other, format!("{plain_text}{other_rows}")).unwrap();
    let out = tmp.path().join("other");
    let mut with = flags.to_vec();
    with.extend(["--baseline", other.to_str().unwrap()]);
    let o = bisect(&repo, &profile, &out, &with);
    let said = read_rows(&out);
    assert!(!said.is_empty(), "{}", text(&o));
    for said in said {
        assert!(
            said.starts_with("none of the baseline's 6 rows applied"),
            "{said}: {}",
            text(&o)
        );
    }
    // A baseline that cannot be read is named.
    let o = bisect(
        &repo,
        &profile,
        &tmp.path().join("x"),
        &["--good", &ids[0], "--baseline", "/nonexistent.toml"],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("--baseline"), "{}", text(&o));
}

/// `bisect` with a build command of the test's choosing (the others use [`BUILD`]).
fn bisect_built_by(
    repo: &Path,
    profile: &Path,
    out: &Path,
    build: &str,
    extra: &[&str],
) -> std::process::Command {
    let mut cmd = crate::common::command();
    cmd.args(["bisect", "-C"])
        .arg(repo)
        .arg("-p")
        .arg(profile)
        .args([
            "--server-command",
            &server_command(),
            "--build-command",
            build,
        ])
        .args(["--slots", "0", "--allow-client-bound", "-o"])
        .arg(out)
        .args(extra);
    cmd
}

/// The worktrees git knows of besides the repository's own.
fn worktrees(repo: &Path) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["worktree", "list", "--porcelain"])
        .current_dir(repo)
        .output()
        .unwrap();
    let own = repo.canonicalize().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .filter(|p| Path::new(p).canonicalize().ok().as_deref() != Some(own.as_path()))
        .map(str::to_string)
        .collect()
}

/// A repository whose commits after the good one do not build (`test ! -e broken` fails):
/// each step is a quick skip, nothing is measured.
fn unbuildable_repository(dir: &Path, commits: usize) -> Vec<String> {
    git(dir, &["init", "-q"]);
    let mut ids = Vec::new();
    std::fs::write(dir.join("slowdown.txt"), "1.00\n").unwrap();
    commit_in(dir, "the good commit", &mut ids);
    std::fs::write(dir.join("broken"), "").unwrap();
    for i in 0..commits {
        std::fs::write(dir.join("n.txt"), format!("{i}\n")).unwrap();
        commit_in(dir, &format!("change {i}"), &mut ids);
    }
    ids
}

const BUILDS_UNLESS_BROKEN: &str = "test ! -e broken && cp slowdown.txt built.txt";

/// Issue 35 item 6: a step line cut by a kill is dropped on resume; the step measured again
/// must not be appended onto the cut text, or the third run finds "not a bisect step".
#[test]
fn a_cut_log_line_is_cut_away_before_the_next_step_is_written() {
    let _turn = measuring();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = unbuildable_repository(&repo, 3);
    let profile = profile(tmp.path());
    let out = tmp.path().join("out");
    let flags = ["--good", &ids[0], "--bad", &ids[3]];
    let go = || {
        bisect_built_by(&repo, &profile, &out, BUILDS_UNLESS_BROKEN, &flags)
            .output()
            .unwrap()
    };
    let first = go();
    let log = out.join("bisect-log.jsonl");
    let whole = std::fs::read_to_string(&log).unwrap();
    assert_eq!(whole.lines().count(), 2, "{}\n{whole}", text(&first));
    // Killed while the step's line was being written: its end and newline never made it.
    std::fs::write(&log, &whole[..whole.len() - 20]).unwrap();
    let second = text(&go());
    assert!(second.contains("step 1:"), "measured again: {second}");
    let third = go();
    let said = text(&third);
    assert!(!said.contains("not a bisect step"), "{said}");
    assert!(said.contains("1 step(s) read back"), "{said}");
    assert_eq!(code(&third), code(&first), "{said}");
    assert!(
        second.contains("cut off"),
        "the cut line is noted: {second}"
    );
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(log_text.lines().count(), 2, "{log_text}");
    for line in log_text.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect(line);
    }
}

/// Issue 35 item 6: braces in `-o` are a path, not placeholders of the server command.
#[test]
fn braces_in_the_output_folder_are_taken_literally() {
    let _turn = measuring();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = small_repository(&repo, &["1.08"]);
    let profile = profile(tmp.path());
    let out = tmp.path().join("out_{x} {port}");
    let o = bisect(
        &repo,
        &profile,
        &out,
        &[
            "--good",
            &ids[0],
            "--bad",
            &ids[1],
            "--blocks",
            "2",
            "--max-blocks",
            "2",
        ],
    );
    let said = text(&o);
    assert!(!said.contains("placeholder"), "{said}");
    let report = read_json(&out.join("bisect.json"));
    let first = &report["steps"][0];
    assert!(first["blocks"].as_u64().unwrap() >= 1, "{first}\n{said}");
    assert!(worktrees(&repo).is_empty(), "{:?}", worktrees(&repo));
}

/// Issue 35 item 6: a good commit that does not build ends the bisect without leaving its
/// worktree registered.
#[test]
fn a_failed_good_build_leaves_no_worktree() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = small_repository(&repo, &["1.00"]);
    let profile = profile(tmp.path());
    let out = tmp.path().join("out");
    let o = bisect_built_by(
        &repo,
        &profile,
        &out,
        "echo no compiler >&2; exit 1",
        &["--good", &ids[0], "--bad", &ids[1]],
    )
    .output()
    .unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("could not be built"), "{}", text(&o));
    assert!(worktrees(&repo).is_empty(), "{:?}", worktrees(&repo));
    assert!(!out.join("worktrees").join(&ids[0][..10]).exists());
    // Its build log stays, for the reason.
    let log = out
        .join("worktrees")
        .join(format!("{}.build.log", &ids[0][..10]));
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .contains("no compiler"));
}

/// Processes whose working folder is under `dir` (a build's), as (pid, command line).
fn processes_under(dir: &Path) -> Vec<(i32, String)> {
    let dir = dir.canonicalize().unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else {
            continue;
        };
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        if cwd.starts_with(&dir) && !zombie {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// Kills, when dropped, what still runs in a folder (a failed test's builds and servers).
struct Reaper(std::path::PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        if self.0.exists() {
            for (pid, _) in processes_under(&self.0) {
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// Issue 35 items 4 and 6: SIGTERM (or SIGINT) during a slow `--build-command` stops the
/// build's whole process group, removes its worktree and exits 143 (130), the log kept so
/// that the same command continues.
#[test]
fn a_signal_during_the_build_stops_it_and_removes_its_worktree() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = small_repository(&repo, &["1.00"]);
    let profile = profile(tmp.path());
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let _reaper = Reaper(out.clone());
    for (signal, exit) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        // A build that forks a child of its own, as make or pip do.
        let child = bisect_built_by(
            &repo,
            &profile,
            &out,
            "sleep 60 & sleep 60; wait",
            &["--good", &ids[0], "--bad", &ids[1]],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
        let pid = child.id() as i32;
        crate::common::share_machine();
        let started = std::time::Instant::now();
        while processes_under(&out).len() < 2 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the build never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        crate::common::share_machine();
        let signalled = std::time::Instant::now();
        unsafe { libc::kill(pid, signal) };
        let o = wait_with_deadline(child, std::time::Duration::from_secs(20), "bisect");
        let took = signalled.elapsed();
        // The build's processes are gone (a moment for the kernel to reap them).
        let mut left = processes_under(&out);
        for _ in 0..40 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            left = processes_under(&out);
        }
        for (p, _) in &left {
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
        assert_eq!(code(&o), exit, "{}", text(&o));
        assert!(took < std::time::Duration::from_secs(8), "{took:?}");
        assert!(left.is_empty(), "the build still runs: {left:?}");
        assert!(worktrees(&repo).is_empty(), "{:?}", worktrees(&repo));
        let log = std::fs::read_to_string(out.join("bisect-log.jsonl")).unwrap();
        let header: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
        assert_eq!(header["good"], ids[0].as_str());
    }
}

/// A signal while a step's servers start (no requests running yet, so the run in blocks has
/// nothing to stop gracefully): the bisect still ends within its grace, 143, and the
/// servers' process groups end with it.
#[test]
fn a_signal_while_the_servers_start_ends_the_bisect_and_its_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = small_repository(&repo, &["1.00"]);
    let profile = profile(tmp.path());
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let _reaper = Reaper(out.clone());
    let slow = format!("sleep 60 && {}", server_command());
    let child = crate::common::command()
        .args(["bisect", "-C"])
        .arg(&repo)
        .arg("-p")
        .arg(&profile)
        .args(["--server-command", &slow, "--build-command", BUILD])
        .args(["--slots", "0", "--allow-client-bound", "-o"])
        .arg(&out)
        .args(["--good", &ids[0], "--bad", &ids[1]])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::common::share_machine();
    let started = std::time::Instant::now();
    while processes_under(&out).len() < 2 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the servers never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    crate::common::share_machine();
    let signalled = std::time::Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = wait_with_deadline(child, std::time::Duration::from_secs(40), "bisect");
    let took = signalled.elapsed();
    let mut left = processes_under(&out);
    for _ in 0..40 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        left = processes_under(&out);
    }
    for (p, _) in &left {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert_eq!(code(&o), 143, "{}", text(&o));
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    assert!(left.is_empty(), "a server still runs: {left:?}");
}
