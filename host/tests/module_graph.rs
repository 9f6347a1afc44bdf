//! Gantry's crates depend on each other one way, along the data path
//! (Kubernetes helpers, then the sandbox, the operator, the authors'
//! tools, the `gantry` command), and so do the modules inside each crate:
//! no two modules of a crate reach each other. Inside the controller, no
//! step of the reconcile path depends on the step that calls it, and only
//! the reconcile records what the children's writes did in the ledger.
//! Read from the manifests and the sources, so an edge that reaches back
//! fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The crates of Gantry, by directory, in the order they may depend on
/// each other: each only on those before it.
const CRATES: &[(&str, &str)] = &[
    ("gantry-kube", "kube-support"),
    ("gantry-toolchain", "toolchain"),
    ("gantry-sandbox", "sandbox"),
    ("gantry-operator", "operator"),
    ("gantry-dev-tools", "dev-tools"),
    ("gantry", "host"),
];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The normal (not dev, not build) dependencies of the package whose
/// manifest is `dir/Cargo.toml`, by name.
fn dependencies(dir: &str) -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(workspace().join(dir).join("Cargo.toml")).unwrap();
    let mut in_dependencies = false;
    let mut names = BTreeSet::new();
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies
            && let Some((name, _)) = line.split_once('=')
            && !line.starts_with('#')
        {
            names.insert(name.trim().trim_end_matches(".workspace").to_string());
        }
    }
    names
}

#[test]
fn crates_depend_on_those_before_them_only() {
    let gantry: BTreeSet<&str> = CRATES.iter().map(|(name, _)| *name).collect();
    for (index, (name, dir)) in CRATES.iter().enumerate() {
        let before: BTreeSet<&str> = CRATES[..index].iter().map(|(n, _)| *n).collect();
        for dependency in dependencies(dir) {
            if gantry.contains(dependency.as_str()) {
                assert!(
                    before.contains(dependency.as_str()),
                    "{name} depends on {dependency}, which comes after it"
                );
            }
        }
    }
    // What a cluster runs carries no dev fixtures.
    for (name, dir) in &CRATES[..4] {
        let dependencies = dependencies(dir);
        for fixture in [
            "gantry-apiserver",
            "plotters",
            "memcached",
            "gantry-dev-tools",
        ] {
            assert!(
                !dependencies.contains(fixture),
                "{name} depends on {fixture}"
            );
        }
    }
    assert!(
        dependencies("toolchain")
            .iter()
            .all(|d| !d.starts_with("wasmtime") && d != "kube"),
        "gantry-toolchain is a build dependency: no wasmtime, no kube"
    );
}

/// The names a use of `crate::` starts with at `text[at..]`: one, or
/// each first segment of a `crate::{a, b::c}` group.
fn named_after(text: &str, at: usize) -> Vec<String> {
    let rest = &text[at..];
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    if let Some(group) = rest.strip_prefix('{') {
        let mut names = Vec::new();
        let mut depth = 0;
        let mut item_start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    item_start = true;
                    continue;
                }
                _ => {}
            }
            if item_start && !c.is_whitespace() {
                names.push(ident(&group[i..]));
                item_start = false;
            }
        }
        names
    } else {
        vec![ident(rest)]
    }
}

/// The top-level modules of the crate in `dir`, each with the top-level
/// modules it names (`crate::<module>`, or `super::<module>` from a
/// top-level file).
fn edges(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = workspace().join(dir).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in sources(&src) {
        let relative = file.strip_prefix(&src).unwrap();
        let module = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let top_file = relative.components().count() == 1
            || relative.file_name().is_some_and(|n| n == "mod.rs")
                && relative.components().count() == 2;
        let text = std::fs::read_to_string(&file).unwrap();
        let uses = graph.entry(module.clone()).or_default();
        let mut prefixes = vec!["crate::"];
        if top_file {
            prefixes.push("super::");
        }
        for prefix in prefixes {
            for (i, _) in text.match_indices(prefix) {
                if prefix == "super::" && text[..i].ends_with("super::") {
                    continue;
                }
                for name in named_after(&text, i + prefix.len()) {
                    if !name.is_empty() && name != module && name != "self" {
                        uses.insert(name);
                    }
                }
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for uses in graph.values_mut() {
        uses.retain(|name| modules.contains(name));
    }
    graph
}

fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(module) = todo.pop() {
        for next in graph.get(&module).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next.clone()) {
                todo.push(next.clone());
            }
        }
    }
    false
}

#[test]
fn the_modules_of_every_crate_depend_on_each_other_one_way() {
    for (name, dir) in CRATES {
        let graph = edges(dir);
        for a in graph.keys() {
            for b in graph.keys() {
                assert!(
                    a >= b || !(reaches(&graph, a, b) && reaches(&graph, b, a)),
                    "in {name}, {a} and {b} depend on each other"
                );
            }
        }
    }
    // The path through the sandbox: the contract knows nothing of the
    // runtime that calls it.
    let sandbox = edges("sandbox");
    assert!(sandbox["runtime"].contains("contract"));
    assert!(!reaches(&sandbox, "contract", "runtime"));
    let operator = edges("operator");
    assert!(operator["controller"].contains("rbac"));
    assert!(operator["controller"].contains("delivery"));
    assert!(!reaches(&operator, "delivery", "controller"));
    let tools = edges("dev-tools");
    assert!(tools["dev"].contains("publish"));
    assert!(tools["bench"].contains("dev"));
}

#[test]
fn the_module_graph_sees_grouped_imports() {
    let text = "use crate::{error, limits::Limits, nested::{a, b}};";
    let at = text.find("crate::").unwrap() + "crate::".len();
    assert_eq!(named_after(text, at), ["error", "limits", "nested"]);
}

/// The modules of `controller/` each of them names, as `super::<module>`
/// (`super::super::<module>` one level down) or `crate::controller::<module>`.
fn controller_edges() -> BTreeMap<String, BTreeSet<String>> {
    let dir = workspace().join("operator/src/controller");
    let modules: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "mod.rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in sources(&dir) {
        let relative = file.strip_prefix(&dir).unwrap();
        let parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        let module = parts[0].trim_end_matches(".rs").to_string();
        if !modules.contains(&module) {
            continue;
        }
        // In `x.rs` and `x/mod.rs`, `super::` is the controller; deeper, `super::super::`.
        let nested = parts.len() > 1 && parts[parts.len() - 1] != "mod.rs";
        let sibling = if nested { "super::super::" } else { "super::" };
        let text = std::fs::read_to_string(&file).unwrap();
        let uses = graph.entry(module.clone()).or_default();
        for prefix in [sibling, "crate::controller::"] {
            for (i, _) in text.match_indices(prefix) {
                if prefix == "super::" && text[..i].ends_with("super::") {
                    continue;
                }
                let name: String = text[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != module && modules.contains(&name) {
                    uses.insert(name);
                }
            }
        }
    }
    graph
}

#[test]
fn the_reconcile_path_never_reaches_back() {
    let graph = controller_edges();
    // Who calls whom along CR event → request → plugin → guardrails →
    // apply → status: the callee may not depend on its caller.
    let calls = [
        ("manager", "mappers"),
        ("manager", "reconcile"),
        ("reconcile", "settle"),
        ("reconcile", "status"),
        ("settle", "request"),
        ("settle", "guardrails"),
        ("settle", "children"),
    ];
    for (caller, callee) in calls {
        assert!(
            graph[caller].contains(callee),
            "{caller} no longer uses {callee}; update this test"
        );
        assert!(
            !reaches(&graph, callee, caller),
            "{callee} depends on {caller}, which calls it"
        );
    }
}

#[test]
fn applying_children_leaves_the_ledger_to_the_reconcile() {
    let src = workspace().join("operator/src/controller");
    for file in sources(&src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let relative = file.strip_prefix(&src).unwrap();
        if relative.starts_with("children") {
            assert!(
                !text.contains("ledgers."),
                "{} changes a ledger; children report what they wrote instead",
                relative.display()
            );
        }
        if text.contains(".record_children(") {
            assert!(
                relative == Path::new("reconcile.rs") || relative == Path::new("ledger.rs"),
                "{} records children in a ledger; only the reconcile does",
                relative.display()
            );
        }
    }
}
