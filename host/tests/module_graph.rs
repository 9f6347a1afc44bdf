//! The host's top-level modules depend on each other one way: `delivery`
//! on `runtime` only, `policy` on `delivery` and `runtime`, `controller` on
//! `delivery` and `policy`, and `cli` is a leaf. Inside the controller, no
//! step of the reconcile path depends on the step that calls it, and only
//! the reconcile records what the children's writes did in the ledger.
//! Read from the sources, so a `use` that reaches back fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// The top-level modules each top-level module names as `crate::<module>`.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
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
        let text = std::fs::read_to_string(&file).unwrap();
        let uses = graph.entry(module.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != module {
                uses.insert(name);
            }
        }
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
fn modules_depend_on_each_other_one_way() {
    let graph = edges();
    let allowed = |module: &str, deps: &[&str]| {
        let uses = &graph[module];
        let extra: Vec<&String> = uses
            .iter()
            .filter(|u| !deps.contains(&u.as_str()))
            .collect();
        assert!(
            extra.is_empty(),
            "{module} uses {extra:?}; it may use only {deps:?}"
        );
    };
    allowed("delivery", &["recorder", "runtime", "tls"]);
    allowed("capability", &["contract", "tls"]);
    allowed("policy", &["delivery", "recorder", "runtime", "webhook"]);
    allowed(
        "conversion",
        &["delivery", "recorder", "runtime", "webhook"],
    );
    allowed("webhook", &[]);
    for module in [
        "controller",
        "policy",
        "conversion",
        "webhook",
        "delivery",
        "bench",
        "dev",
        "manifest",
    ] {
        assert!(
            !graph[module].contains("cli"),
            "{module} uses cli, which is a leaf"
        );
    }
    let core = [
        "controller",
        "policy",
        "conversion",
        "webhook",
        "delivery",
        "cli",
        "bench",
        "dev",
    ];
    for a in core {
        for b in core {
            assert!(
                a == b || !(reaches(&graph, a, b) && reaches(&graph, b, a)),
                "{a} and {b} depend on each other"
            );
        }
    }
}

/// The modules of `controller/` each of them names, as `super::<module>`
/// (`super::super::<module>` one level down) or `crate::controller::<module>`.
fn controller_edges() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/controller");
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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/controller");
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
