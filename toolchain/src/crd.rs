//! The CRDs a plugin project ships: derived from its types (a Rust
//! project's `crd` binary, see `gantry_sdk::print_crd`; a Go project's
//! kubebuilder markers, through controller-gen), else written out in its
//! `crd.yaml`.

use std::path::Path;

use anyhow::Context as _;
use serde_json::Value;

use super::Language;

/// The CustomResourceDefinitions of the plugin project at `dir`; empty
/// when it ships none. Anything else among them is an error.
pub fn of_project(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let derived = match super::detect(dir) {
        Ok(Language::Rust) => super::rust::print_crd(dir)?,
        Ok(Language::Go) => super::go::crd::print_crd(dir)?,
        _ => None,
    };
    let objects = match derived {
        Some(printed) => {
            let text = String::from_utf8(printed).context("the CRD generator printed non-UTF-8")?;
            crate::manifest::parse_objects(&text)
                .context("reading what the CRD generator printed")?
        }
        None if dir.join("crd.yaml").is_file() => {
            crate::manifest::read_objects(&dir.join("crd.yaml"))?
        }
        None => Vec::new(),
    };
    for object in &objects {
        if object["kind"] != "CustomResourceDefinition" {
            anyhow::bail!(
                "{}: expected CustomResourceDefinitions, found a {}",
                dir.display(),
                object["kind"]
            );
        }
    }
    Ok(objects)
}
