//! Where scripts come from: the ones shipped in `fixtures/scripts/` (compiled in, so every role
//! and container has them) and files named with `--script FILE` (loaded at startup, named by
//! their file stem, and refused then if they do not parse).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, LazyLock, RwLock};

use rust_embed::RustEmbed;

use super::format::{self, Script};
use crate::model::ModelKind;

#[derive(RustEmbed)]
#[folder = "fixtures/scripts/"]
struct Shipped;

static LOADED: LazyLock<RwLock<BTreeMap<String, Arc<Script>>>> =
    LazyLock::new(|| RwLock::new(BTreeMap::new()));

/// The shipped scripts, each parsed once per process: signaling checks a call's script and the
/// transceiver plays it, and neither should parse the file again per call.
static SHIPPED: LazyLock<BTreeMap<String, Result<Arc<Script>, String>>> = LazyLock::new(|| {
    Shipped::iter()
        .filter_map(|file| {
            let name = file.strip_suffix(".json")?.to_owned();
            let data = Shipped::get(&file)?.data;
            let parsed = format::parse(&String::from_utf8_lossy(&data))
                .map(Arc::new)
                .map_err(|e| format!("fixtures/scripts/{name}.json: {e}"));
            Some((name, parsed))
        })
        .collect()
});

/// The script called `name`: a `--script` file first, then a shipped one.
pub fn find(name: &str) -> Result<Arc<Script>, String> {
    if let Some(s) = LOADED.read().ok().and_then(|l| l.get(name).cloned()) {
        return Ok(s);
    }
    SHIPPED.get(name).cloned().unwrap_or_else(|| {
        Err(format!(
            "no script named '{name}' (known: {})",
            names().join(", ")
        ))
    })
}

/// Every script name, sorted.
pub fn names() -> Vec<String> {
    let mut names: Vec<String> = SHIPPED.keys().cloned().collect();
    if let Ok(l) = LOADED.read() {
        names.extend(l.keys().cloned());
    }
    names.sort();
    names.dedup();
    names
}

/// Loads a `--script FILE`; the name is the file stem. Errors name the file and the problem.
pub fn load_file(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| format!("{shown}: the file name must be valid UTF-8"))?;
    let name = match ModelKind::parse(&format!("script:{stem}")) {
        Ok(Some(ModelKind::Script(name))) => name,
        Err(e) => return Err(format!("{shown}: {}", e.why)),
        Ok(_) => unreachable!("a script: name parses as a script"),
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let script = format::parse(&text).map_err(|e| format!("{shown}: {e}"))?;
    if let Ok(mut l) = LOADED.write() {
        l.insert(name.clone(), Arc::new(script));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_script_parses() {
        let names = names();
        assert!(names.contains(&"weather".to_owned()), "{names:?}");
        for name in names {
            find(&name).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    #[test]
    fn files_load_under_their_stem_and_bad_ones_are_refused() {
        let dir = std::env::temp_dir().join(format!("ve-scripts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("my-test.json");
        std::fs::write(&good, r#"{"turns": [{"steps": [{"say": "hi"}]}]}"#).unwrap();
        assert_eq!(load_file(&good).unwrap(), "my-test");
        assert_eq!(find("my-test").unwrap().turns.len(), 1);
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"turns": 3}"#).unwrap();
        assert!(load_file(&bad).unwrap_err().contains("bad.json"));
        let odd = dir.join("a b.json");
        std::fs::write(&odd, r#"{"turns": [{}]}"#).unwrap();
        assert!(load_file(&odd).is_err());
        assert!(find("nope").unwrap_err().contains("no script named 'nope'"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
