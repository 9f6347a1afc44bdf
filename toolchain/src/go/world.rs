//! Which WIT world a Go core module implements, from what the SDK's
//! packages put into it: their `//go:wasmexport`s and `//go:wasmimport`s.

use anyhow::{Context, bail};

/// The export that makes a Go module a policy (the SDK's policy package).
const POLICY_EXPORT: &str = "gantry:plugin/admission@0.1.0#validate";
/// The export that makes a Go module a reconciler (the SDK's root package).
const RECONCILE_EXPORT: &str = "gantry:plugin/reconcile@0.1.0#reconcile";
/// The export that makes a Go module a converter (the SDK's converter package).
const CONVERT_EXPORT: &str = "gantry:plugin/conversion@0.1.0#convert";
/// The capability imports (the SDK's http and metrics packages), which
/// only a reconciler may have.
const CAPABILITY_IMPORTS: &[&str] = &["gantry:plugin/http@0.1.0", "gantry:plugin/metrics@0.1.0"];

/// The world a core module built with the SDK implements, from its
/// exports and imports: `policy`, `converter`, or for a reconciler
/// `reconciler-capable` when it imports `http` or `metrics` (the SDK's
/// packages of those names) and `reconciler` when not. Only reconcilers
/// get capabilities; other mixtures are refused with what to change.
pub fn world_of(module: &[u8]) -> anyhow::Result<&'static str> {
    let (mut reconciler, mut policy, mut converter) = (false, false, false);
    let mut capabilities = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        match payload.context("reading the module")? {
            wasmparser::Payload::ExportSection(exports) => {
                for export in exports {
                    match export.context("reading the module's exports")?.name {
                        RECONCILE_EXPORT => reconciler = true,
                        POLICY_EXPORT => policy = true,
                        CONVERT_EXPORT => converter = true,
                        _ => {}
                    }
                }
            }
            wasmparser::Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    let module = import.context("reading the module's imports")?.module;
                    if CAPABILITY_IMPORTS.contains(&module) && !capabilities.contains(&module) {
                        capabilities.push(module);
                    }
                }
            }
            _ => {}
        }
    }
    let world = match (reconciler, policy, converter) {
        (true, false, false) if capabilities.is_empty() => return Ok("reconciler"),
        (true, false, false) => return Ok("reconciler-capable"),
        (false, true, false) => "policy",
        (false, false, true) => "converter",
        (false, false, false) => bail!(
            "the module exports none of `{RECONCILE_EXPORT}`, `{POLICY_EXPORT}` and `{CONVERT_EXPORT}`: does the main package import gantry.dev/go-sdk (or its policy or converter package)?"
        ),
        _ => {
            let named: Vec<&str> = [
                (reconciler, "reconciler (gantry.dev/go-sdk)"),
                (policy, "policy (gantry.dev/go-sdk/policy)"),
                (converter, "converter (gantry.dev/go-sdk/converter)"),
            ]
            .into_iter()
            .filter_map(|(has, name)| has.then_some(name))
            .collect();
            bail!(
                "the module exports the worlds of a {}: a plugin imports one of these packages, not several",
                named.join(" and a ")
            )
        }
    };
    if !capabilities.is_empty() {
        bail!(
            "the module is a {world} but imports {}: only reconcilers may use gantry.dev/go-sdk/http and gantry.dev/go-sdk/metrics",
            capabilities.join(" and ")
        );
    }
    Ok(world)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module importing functions from `imports` (module names) and
    /// exporting functions named `exports`.
    fn module(imports: &[&str], exports: &[&str]) -> Vec<u8> {
        use wasm_encoder::{
            CodeSection, EntityType, ExportKind, ExportSection, Function, FunctionSection,
            ImportSection, Instruction, Module, TypeSection,
        };
        let mut types = TypeSection::new();
        types.ty().function([], []);
        let mut import_section = ImportSection::new();
        for name in imports {
            import_section.import(name, "f", EntityType::Function(0));
        }
        let mut functions = FunctionSection::new();
        let mut export_section = ExportSection::new();
        let mut code = CodeSection::new();
        for (i, name) in exports.iter().enumerate() {
            functions.function(0);
            let index = u32::try_from(imports.len() + i).unwrap();
            export_section.export(name, ExportKind::Func, index);
            let mut body = Function::new([]);
            body.instruction(&Instruction::End);
            code.function(&body);
        }
        let mut module = Module::new();
        module
            .section(&types)
            .section(&import_section)
            .section(&functions)
            .section(&export_section)
            .section(&code);
        module.finish()
    }

    const HOST: &str = "gantry:plugin/host@0.1.0";
    const HTTP: &str = "gantry:plugin/http@0.1.0";
    const METRICS: &str = "gantry:plugin/metrics@0.1.0";

    #[test]
    fn the_world_follows_the_exports_and_a_reconciler_capabilities() {
        let world = |imports: &[&str], exports: &[&str]| world_of(&module(imports, exports));
        assert_eq!(world(&[HOST], &[RECONCILE_EXPORT]).unwrap(), "reconciler");
        assert_eq!(
            world(&[HOST, METRICS], &[RECONCILE_EXPORT]).unwrap(),
            "reconciler-capable"
        );
        assert_eq!(
            world(&[HTTP, METRICS], &[RECONCILE_EXPORT]).unwrap(),
            "reconciler-capable"
        );
        assert_eq!(world(&[HOST], &[POLICY_EXPORT]).unwrap(), "policy");
        assert_eq!(world(&[], &[CONVERT_EXPORT]).unwrap(), "converter");
    }

    #[test]
    fn mixtures_are_refused_with_what_to_change() {
        let refusal = |imports: &[&str], exports: &[&str]| {
            world_of(&module(imports, exports)).unwrap_err().to_string()
        };
        assert_eq!(
            refusal(&[], &[RECONCILE_EXPORT, CONVERT_EXPORT]),
            "the module exports the worlds of a reconciler (gantry.dev/go-sdk) and a converter (gantry.dev/go-sdk/converter): a plugin imports one of these packages, not several"
        );
        assert!(
            refusal(&[], &[POLICY_EXPORT, RECONCILE_EXPORT])
                .contains("policy (gantry.dev/go-sdk/policy)")
        );
        assert_eq!(
            refusal(&[HOST, HTTP], &[CONVERT_EXPORT]),
            "the module is a converter but imports gantry:plugin/http@0.1.0: only reconcilers may use gantry.dev/go-sdk/http and gantry.dev/go-sdk/metrics"
        );
        assert!(
            refusal(&[METRICS], &[POLICY_EXPORT])
                .contains("is a policy but imports gantry:plugin/metrics@0.1.0")
        );
        assert!(refusal(&[HTTP], &["_start"]).starts_with("the module exports none of"));
    }
}
