//! The example plugins, as `gantry dev` installs them: each one's files
//! (`crd.yaml`, `binding.yaml`, `example.yaml`, `policy.yaml`,
//! `converter.yaml`) and its component.
//!
//! The examples of `gantry dev` ([`EXAMPLES`], [`POLICY_EXAMPLES`],
//! [`CONVERTER_EXAMPLES`]) are built and embedded in the binary by this
//! crate's build script, so that a `gantry` installed or copied anywhere
//! runs `gantry dev` with no source tree. The other examples (those the
//! benchmarks and tests use) are read from this source tree.

use std::borrow::Cow;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

include!("names.rs");

/// One embedded example.
struct Embedded {
    name: &'static str,
    /// Written in Go: too large for a ConfigMap, it is served by URL.
    go: bool,
    component: &'static [u8],
    /// Its YAML files, by file name.
    files: &'static [(&'static str, &'static str)],
}

// `EMBEDDED: &[Embedded]`, written by build.rs.
include!(concat!(env!("OUT_DIR"), "/embedded_examples.rs"));

fn embedded(name: &str) -> Option<&'static Embedded> {
    EMBEDDED.iter().find(|example| example.name == name)
}

/// Whether example `name` is embedded in this binary.
pub fn is_embedded(name: &str) -> bool {
    embedded(name).is_some()
}

/// The directory of example `name` in the source tree this binary was
/// built from (benchmarks and tests; `gantry dev` needs none).
pub fn source_dir(name: &str) -> PathBuf {
    gantry_toolchain::source_workspace_root()
        .join("plugins")
        .join(name)
}

/// The text of `file` of example `name`.
pub fn text(name: &str, file: &str) -> anyhow::Result<Cow<'static, str>> {
    if let Some(example) = embedded(name) {
        return example
            .files
            .iter()
            .find(|(path, _)| *path == file)
            .map(|(_, text)| Cow::Borrowed(*text))
            .with_context(|| format!("example {name} has no {file}"));
    }
    let path = source_dir(name).join(file);
    std::fs::read_to_string(&path)
        .map(Cow::Owned)
        .with_context(|| format!("reading {}", path.display()))
}

/// The objects of YAML `file` of example `name`.
pub fn objects(name: &str, file: &str) -> anyhow::Result<Vec<Value>> {
    gantry_toolchain::manifest::parse_objects(&text(name, file)?)
        .with_context(|| format!("reading {name}/{file}"))
}

/// Whether example `name` is written in Go (served by URL: its component
/// is too large for a ConfigMap).
pub fn is_go(name: &str) -> bool {
    embedded(name).map_or_else(
        || gantry_toolchain::go::is_go_plugin(&source_dir(name)),
        |example| example.go,
    )
}

/// The embedded component of example `name`.
pub fn component(name: &str) -> anyhow::Result<&'static [u8]> {
    embedded(name)
        .map(|example| example.component)
        .with_context(|| format!("example {name} is not embedded in this binary"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_of_gantry_dev_is_embedded_with_its_files() {
        for name in EXAMPLES
            .iter()
            .chain(POLICY_EXAMPLES)
            .chain(CONVERTER_EXAMPLES)
        {
            let component = component(name).unwrap();
            assert_eq!(&component[..4], b"\0asm", "{name}");
            let document = if POLICY_EXAMPLES.contains(name) {
                "policy.yaml"
            } else if CONVERTER_EXAMPLES.contains(name) {
                "converter.yaml"
            } else {
                "binding.yaml"
            };
            let embedded = text(name, document).unwrap();
            let on_disk = std::fs::read_to_string(source_dir(name).join(document)).unwrap();
            assert_eq!(embedded, on_disk, "{name}/{document}");
        }
        assert!(is_go("guestbook"));
        assert!(!is_go("memcached"));
    }

    #[test]
    fn other_examples_come_from_the_source_tree() {
        assert!(!is_embedded("fanout"));
        assert!(!objects("fanout", "crd.yaml").unwrap().is_empty());
        assert!(component("fanout").is_err());
        assert!(text("memcached", "no-such.yaml").is_err());
    }
}
