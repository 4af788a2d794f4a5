//! The crate's floors, checked: each top-level module may name only modules on lower floors
//! (`crate::…` paths in its code; its tests may start whatever they test against, a whole
//! server included). One crate cannot make the compiler refuse an
//! upward import as separate crates would, so this test does: an import that runs upward, or
//! two modules that import each other, fails `cargo test --lib` (and `just check`) and names
//! the file and the path. A module that moves floor is one line below.

use std::collections::BTreeSet;
use std::path::Path;

/// From the ground up. A module may import any module on a floor below its own.
const FLOORS: &[&[&str]] = &[
    // Leaves: no import of the crate's other modules.
    &[
        "flags",
        "unix_time",
        "wakeup",
        "saturation",
        "udp_batch",
        "cache",
        "media_address",
        "model",
        "background",
        "heap_probe",
    ],
    // MCP requests, which run on a background runtime.
    &["mcp"],
    // Codecs and shared plumbing.
    &["audio", "routing", "http_server"],
    // The protocols (sans-I/O), the relay, and the process-wide helpers they share.
    &["realtime", "relay", "ops", "https", "sdp_offer"],
    &["live"],
    &["upstream"],
    // A call apart from its transport, then its two transports.
    &["call"],
    &["websocket"],
    &["transceiver"],
    // What drives transceivers: their control API, the load generator, fuzz entry points.
    &["control", "loadgen", "fuzzing"],
    &["signaling"],
    &["membership"],
    // The roles and the all-in-one that wire everything.
    &["roles", "allinone"],
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&module))
}

/// The top-level module a file of `src/` belongs to (`None` for lib.rs, main.rs and this file).
fn module_of(path: &Path, src: &Path) -> Option<String> {
    let rel = path.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "layers")).then(|| name.to_string())
}

/// Every top-level module a file names with a `crate::` path, `use crate::{a, b}` included.
/// Comments are skipped: a doc link to a module above is a pointer for the reader, not a
/// dependency.
fn named_modules(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let text = code.as_str();
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        // `voice_edge::crate::` never occurs; `$crate::` is a macro's own path.
        if text[..i].ends_with('$') || text[..i].ends_with(|c: char| c.is_alphanumeric()) {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name = ident(part.trim());
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn imports_only_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for path in &files {
        let is_test = path.file_name().is_some_and(|n| n == "tests.rs")
            || path.components().any(|c| c.as_os_str() == "tests");
        let Some(module) = module_of(path, &src).filter(|_| !is_test) else {
            continue;
        };
        let Some(floor) = floor_of(&module) else {
            wrong.push(format!(
                "{}: module `{module}` is on no floor of src/layers.rs",
                path.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(path).expect("a source file");
        for named in named_modules(&text) {
            if named == module {
                continue;
            }
            match floor_of(&named) {
                Some(f) if f < floor => {}
                Some(_) => wrong.push(format!(
                    "{}: `{module}` imports `crate::{named}`, which is not below it",
                    path.strip_prefix(&src).unwrap_or(path).display()
                )),
                // A crate-root item (a macro, a re-export) rather than a module.
                None => {}
            }
        }
    }
    assert!(
        files.len() > 100,
        "only {} files found under src/",
        files.len()
    );
    assert!(
        wrong.is_empty(),
        "imports that run upward:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_finds_grouped_and_plain_paths() {
    let text = "use crate::{audio::codec, call};\nlet x = crate::realtime::X; $crate::no;\n\
                /// See [`crate::signaling`].";
    let names: Vec<String> = named_modules(text).into_iter().collect();
    assert_eq!(names, ["audio", "call", "realtime"]);
}
