//! `--update`: a case file with its `expect` section written anew from
//! the plugin's answer. The rest of the file (`given`, comments, layout)
//! stays as written; comments inside the old `expect` go with it.

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

use super::case::ANSWER_KEYS;

/// `text`, a case file, with the top-level `expect` section replaced by
/// `expect` (appended when there is none).
pub fn rewrite(text: &str, expect: &Map<String, Value>) -> anyhow::Result<String> {
    let block = render(expect)?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let start = lines.iter().position(|line| is_key(line, "expect"));
    let mut out = String::with_capacity(text.len() + block.len());
    if let Some(start) = start {
        let mut end = (start + 1..lines.len())
            .find(|&i| starts_top_level(lines[i]))
            .unwrap_or(lines.len());
        // Comments and blank lines just before the next key belong to it.
        while end > start + 1 && is_blank_or_comment(lines[end - 1]) {
            end -= 1;
        }
        out.extend(lines[..start].iter().copied());
        out.push_str(&block);
        out.extend(lines[end..].iter().copied());
    } else {
        out.push_str(text);
        if !text.is_empty() && !text.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&block);
    }
    let written: Value = serde_yaml::from_str(&out).context("the rewritten case is not YAML")?;
    if written.get("expect") != Some(&Value::Object(expect.clone())) {
        bail!(
            "the case's layout hides its `expect` section (an anchor, or a flow mapping around it?): write `expect:` as a top-level block"
        );
    }
    Ok(out)
}

/// `expect:` and its sections as YAML, in the order a case reads: the
/// answer's sections, or `error`.
pub fn render(expect: &Map<String, Value>) -> anyhow::Result<String> {
    let mut sections = serde_yaml::Mapping::new();
    let order = ANSWER_KEYS.iter().copied().chain(["error"]);
    let known: Vec<&str> = order.clone().collect();
    for key in order.chain(
        expect
            .keys()
            .map(String::as_str)
            .filter(|key| !known.contains(key)),
    ) {
        if let Some(value) = expect.get(key) {
            sections.insert(key.into(), serde_yaml::to_value(value)?);
        }
    }
    let mut root = serde_yaml::Mapping::new();
    root.insert("expect".into(), serde_yaml::Value::Mapping(sections));
    Ok(serde_yaml::to_string(&root)?)
}

/// Whether `line` is the top-level key `key`.
fn is_key(line: &str, key: &str) -> bool {
    line.strip_prefix(key)
        .is_some_and(|rest| rest.trim_start().starts_with(':'))
}

/// Whether `line` starts something at the top level: a key or a document
/// marker, not an indented line, a comment or a blank.
fn starts_top_level(line: &str) -> bool {
    line.chars()
        .next()
        .is_some_and(|c| !c.is_whitespace() && c != '#')
        && !line.starts_with("- ")
}

fn is_blank_or_comment(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.is_empty() || trimmed.starts_with('#')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect() -> Map<String, Value> {
        json!({"status": {"message": "Hi"}, "children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}],
               "conditions": [{"type": "Greeted", "status": "True"}]})
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn replaces_the_expect_block_and_keeps_the_rest() {
        let text = "# A greeting.\ndescription: greets\ngiven:\n  # the sample\n  parent: {kind: G}\n\nexpect:\n  # old\n  status: {message: Hello}\n\n# about notes\nnotes: x\n";
        let out = rewrite(text, &expect()).unwrap();
        assert_eq!(
            out,
            "# A greeting.\ndescription: greets\ngiven:\n  # the sample\n  parent: {kind: G}\n\nexpect:\n  children:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: a\n  status:\n    message: Hi\n  conditions:\n  - status: 'True'\n    type: Greeted\n\n# about notes\nnotes: x\n"
        );
        // Again: the same text.
        assert_eq!(rewrite(&out, &expect()).unwrap(), out);
    }

    #[test]
    fn appends_an_expect_block_to_a_case_without_one() {
        let out = rewrite("given:\n  parent: {kind: G}", &expect()).unwrap();
        assert!(
            out.starts_with("given:\n  parent: {kind: G}\nexpect:\n  children:\n"),
            "{out}"
        );
        let flow = rewrite(
            "given: {parent: {kind: G}}\nexpect: {finalized: true}\n",
            &expect(),
        )
        .unwrap();
        assert!(
            flow.starts_with("given: {parent: {kind: G}}\nexpect:\n  children:"),
            "{flow}"
        );
    }
}
