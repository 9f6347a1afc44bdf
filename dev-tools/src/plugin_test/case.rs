//! The case file: `given` (what the plugin gets) and `expect` (what it
//! should answer), checked strictly so that a typo is an error, not a
//! case that silently compares nothing.
//!
//! ```yaml
//! description: greets who the spec names     # optional
//! given:
//!   parent: {apiVersion: example.com/v1, kind: Greeting, metadata: {name: world}, spec: {who: World}}
//!   observed: []         # objects, or paths of YAML files (relative to the case)
//!   related: []          # the same
//!   config: {greeting: Hi}   # default: the binding's config
//!   finalizing: false
//! expect:
//!   children: [{apiVersion: v1, kind: ConfigMap, metadata: {name: world-greeting}}]
//!   status: {message: "Hi, World!"}
//!   conditions: [{type: Greeted, status: "True"}]
//!   events: []
//!   requeueAfterMs: null
//!   finalized: false
//!   # or, instead of an answer: error: {reason: InvalidInput}
//! ```

pub(crate) use gantry_toolchain::manifest::type_name;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use gantry_sdk::{Request, Trigger};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// One case, read and checked.
#[derive(Debug, Clone)]
pub struct Case {
    /// The file's name without its extension.
    pub name: String,
    /// The case file.
    pub path: PathBuf,
    /// What the case is about, if it says.
    pub description: Option<String>,
    /// The request the plugin gets.
    pub request: Request,
    /// The `expect` section as written (`None`: the file has none yet).
    pub expect: Option<Value>,
}

/// The sections of an answer a case may expect, in the order they are
/// written.
pub(crate) const ANSWER_KEYS: &[&str] = &[
    "children",
    "status",
    "conditions",
    "events",
    "requeueAfterMs",
    "finalized",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    #[serde(default)]
    description: Option<String>,
    given: Given,
    #[serde(default)]
    expect: Option<Expect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Given {
    parent: Value,
    #[serde(default)]
    observed: Vec<Value>,
    #[serde(default)]
    related: Vec<Value>,
    /// `Some(Null)` for an explicit `config: null`.
    #[serde(default, deserialize_with = "present")]
    config: Option<Value>,
    #[serde(default)]
    finalizing: bool,
}

/// What `expect` may hold; read only to check it (the section is compared
/// as written).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    #[serde(default)]
    children: Option<Vec<Map<String, Value>>>,
    #[serde(default)]
    status: Option<Value>,
    #[serde(default)]
    conditions: Option<Vec<Map<String, Value>>>,
    #[serde(default)]
    events: Option<Vec<ExpectedEvent>>,
    #[serde(default)]
    requeue_after_ms: Option<u64>,
    #[serde(default)]
    finalized: Option<bool>,
    #[serde(default)]
    error: Option<ExpectedError>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // read to refuse unknown fields and wrong types
struct ExpectedEvent {
    #[serde(rename = "type")]
    event_type: Option<String>,
    reason: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // read to refuse unknown fields and wrong types
struct ExpectedError {
    reason: Option<String>,
    message: Option<String>,
    retryable: Option<bool>,
}

/// A field that is present, even as `null`, is `Some`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Every case file (`*.yaml`, `*.yml`) in `dir`, by name. `config` is the
/// binding's config, for cases that give none. Every malformed file is
/// an error of its own, so that all of them are reported at once.
pub fn read_cases(dir: &Path, config: &Value) -> Result<Vec<Case>, Vec<anyhow::Error>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return Err(vec![anyhow::anyhow!("reading {}: {e}", dir.display())]),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.is_file()
                && path
                    .extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    paths.sort();
    let (mut cases, mut errors) = (Vec::new(), Vec::new());
    for path in paths {
        match read_case(&path, config) {
            Ok(case) => cases.push(case),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(errors)
    }
}

/// Read and check the case file at `path`.
pub(crate) fn read_case(path: &Path, config: &Value) -> anyhow::Result<Case> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_case(path, &text, config).with_context(|| format!("case {}", path.display()))
}

/// Check the case `text` (of the file at `path`, which paths in it are
/// relative to).
pub(crate) fn parse_case(path: &Path, text: &str, config: &Value) -> anyhow::Result<Case> {
    let file: CaseFile = serde_yaml::from_str(text)?;
    if let Some(expect) = &file.expect {
        check_expect(expect)?;
    }
    // Compared as written: read again as plain data.
    let raw: Value = serde_yaml::from_str(text)?;
    let expect = raw.get("expect").filter(|v| !v.is_null()).cloned();
    let base = path.parent().unwrap_or(Path::new("."));
    let parent = match objects(base, "given.parent", &file.given.parent)?.as_slice() {
        [one] => one.clone(),
        more => bail!("given.parent: expected one object, found {}", more.len()),
    };
    let mut request = Request::for_parent(parent);
    for (field, values, into) in [
        (
            "given.observed",
            &file.given.observed,
            &mut request.observed,
        ),
        ("given.related", &file.given.related, &mut request.related),
    ] {
        for (index, value) in values.iter().enumerate() {
            into.extend(objects(base, &format!("{field}[{index}]"), value)?);
        }
    }
    request.config = file.given.config.unwrap_or_else(|| config.clone());
    request.finalizing = file.given.finalizing;
    request.trigger = Trigger::ParentChanged;
    let name = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    Ok(Case {
        name,
        path: path.to_path_buf(),
        description: file.description,
        request,
        expect,
    })
}

/// The objects `value` stands for: itself (an object), or those of the
/// YAML file it names (relative to `base`).
fn objects(base: &Path, field: &str, value: &Value) -> anyhow::Result<Vec<Value>> {
    match value {
        Value::Object(_) => Ok(vec![value.clone()]),
        Value::String(file) => gantry_toolchain::manifest::read_objects(&base.join(file))
            .with_context(|| format!("{field}: the file it names")),
        other => bail!(
            "{field}: expected an object or the path of a YAML file, found {}",
            type_name(other)
        ),
    }
}

/// Refuse expectations that cannot mean what their author wants.
fn check_expect(expect: &Expect) -> anyhow::Result<()> {
    let answers = expect.children.is_some()
        || expect.status.is_some()
        || expect.conditions.is_some()
        || expect.events.is_some()
        || expect.requeue_after_ms.is_some()
        || expect.finalized.is_some();
    if expect.error.is_some() && answers {
        bail!(
            "expect: either an `error` or an answer ({}), not both: a call that fails answers nothing",
            ANSWER_KEYS.join(", ")
        );
    }
    for (index, child) in expect.children.iter().flatten().enumerate() {
        let named = |pointer: &str| {
            Value::Object(child.clone())
                .pointer(pointer)
                .is_some_and(Value::is_string)
        };
        if !(named("/apiVersion") && named("/kind") && named("/metadata/name")) {
            bail!(
                "expect.children[{index}]: a child needs apiVersion, kind and metadata.name (they say which child it is)"
            );
        }
    }
    for (index, condition) in expect.conditions.iter().flatten().enumerate() {
        if !condition.get("type").is_some_and(Value::is_string) {
            bail!("expect.conditions[{index}]: a condition needs its `type`");
        }
        if let Some(status) = condition.get("status")
            && !status.is_string()
        {
            bail!(
                "expect.conditions[{index}].status: expected a string, found {status} (quote it: \"True\", \"False\" or \"Unknown\")"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> anyhow::Result<Case> {
        parse_case(
            Path::new("/nowhere/case.yaml"),
            text,
            &json!({"greeting": "Hello"}),
        )
    }

    fn error(text: &str) -> String {
        format!("{:#}", parse(text).expect_err("a malformed case"))
    }

    const PARENT: &str =
        "given:\n  parent: {apiVersion: example.com/v1, kind: Greeting, metadata: {name: world}}\n";

    #[test]
    fn a_case_gets_the_bindings_config_unless_it_gives_its_own() {
        let case = parse(PARENT).unwrap();
        assert_eq!(case.name, "case");
        assert_eq!(case.request.config, json!({"greeting": "Hello"}));
        assert_eq!(case.expect, None);
        let case = parse(&format!("{PARENT}  config: null\n")).unwrap();
        assert_eq!(case.request.config, Value::Null);
        let case = parse(&format!("{PARENT}  config: {{greeting: Hi}}\n")).unwrap();
        assert_eq!(case.request.config, json!({"greeting": "Hi"}));
    }

    #[test]
    fn objects_come_inline_or_from_files_relative_to_the_case() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("children.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        )
        .unwrap();
        let text = format!(
            "{PARENT}  observed: [children.yaml, {{apiVersion: v1, kind: Secret, metadata: {{name: c}}}}]\n"
        );
        let case = parse_case(&dir.path().join("x.yaml"), &text, &Value::Null).unwrap();
        let names: Vec<_> = case
            .request
            .observed
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        let missing = format!(
            "{:#}",
            parse(&format!("{PARENT}  related: [gone.yaml]\n")).unwrap_err()
        );
        assert!(
            missing.contains("given.related[0]") && missing.contains("gone.yaml"),
            "{missing}"
        );
    }

    #[test]
    fn malformed_cases_say_what_is_wrong() {
        assert!(error("given: {}\n").contains("missing field `parent`"));
        assert!(error(&format!("{PARENT}expected: {{}}\n")).contains("unknown field `expected`"));
        assert!(error(&format!("{PARENT}  parnt: {{}}\n")).contains("unknown field `parnt`"));
        assert!(error("given: {parent: 3}\n").contains("given.parent: expected an object"));
        assert!(
            error(&format!("{PARENT}expect: {{childs: []}}\n")).contains("unknown field `childs`")
        );
        assert!(
            error(&format!(
                "{PARENT}expect: {{children: [{{kind: ConfigMap}}]}}\n"
            ))
            .contains("expect.children[0]: a child needs apiVersion, kind and metadata.name")
        );
        assert!(
            error(&format!(
                "{PARENT}expect: {{conditions: [{{status: 'True'}}]}}\n"
            ))
            .contains("needs its `type`")
        );
        assert!(
            error(&format!(
                "{PARENT}expect: {{conditions: [{{type: Ready, status: true}}]}}\n"
            ))
            .contains("quote it")
        );
        assert!(
            error(&format!(
                "{PARENT}expect: {{error: {{reason: X}}, children: []}}\n"
            ))
            .contains("either an `error` or an answer")
        );
        assert!(
            error(&format!("{PARENT}expect: {{error: {{code: 3}}}}\n"))
                .contains("unknown field `code`")
        );
        assert!(error(&format!("{PARENT}expect: {{finalized: yes}}\n")).contains("finalized"));
        assert!(error("given: [\n").contains("line"));
    }
}
