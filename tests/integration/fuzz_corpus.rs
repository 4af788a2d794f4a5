//! Replays the committed fuzz corpus and the saved crashes through the fuzz targets' own entry
//! points ([`voice_edge::fuzzing`]), so every `cargo test` re-checks them on stable: a fixed crash
//! cannot come back, and a change that breaks a target's invariants on a real browser offer or
//! client event fails here, not only in the nightly fuzz run (`scripts/fuzz.sh`).

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use voice_edge::fuzzing::{TARGETS, Target};

struct Input {
    run: Target,
    target: &'static str,
    file: PathBuf,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// `dir/<target>/*` for every target directory under `dir`, refusing directories no target reads
/// (a renamed target would otherwise silently stop being replayed).
fn inputs(dir: &Path) -> Vec<Input> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(&(target, run)) = TARGETS.iter().find(|(t, _)| *t == name) else {
            panic!("{} names no fuzz target", path.display());
        };
        let mut files: Vec<PathBuf> = fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        out.extend(files.into_iter().map(|file| Input { run, target, file }));
    }
    out
}

fn replay(inputs: Vec<Input>) -> Vec<String> {
    let mut failed = Vec::new();
    for Input { run, target, file } in inputs {
        let data = fs::read(&file).unwrap();
        if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
            failed.push(format!("{target}: {}", file.display()));
        }
    }
    failed
}

#[test]
fn every_target_has_a_seed_corpus_and_it_passes() {
    let corpus = inputs(&root().join("corpus"));
    for (target, _) in TARGETS {
        assert!(
            corpus.iter().any(|i| i.target == *target),
            "fuzz/corpus/{target}/ is empty"
        );
    }
    let failed = replay(corpus);
    assert!(
        failed.is_empty(),
        "corpus inputs failing:\n{}",
        failed.join("\n")
    );
}

#[test]
fn saved_crashes_stay_fixed() {
    let failed = replay(inputs(&root().join("regressions")));
    assert!(
        failed.is_empty(),
        "regressions failing again:\n{}",
        failed.join("\n")
    );
}
