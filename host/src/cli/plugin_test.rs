//! `gantry plugin test`: run a project's declarative cases (`tests/*.yaml`)
//! through the sandbox, compare each answer with what its case expects,
//! and with `--update` write the answers into the cases.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;

use super::component::component;
use super::local_cluster::RunChecks;
use super::{exit, fail};
use gantry_dev_tools::plugin_test::{Case, answer, compare, project, read_cases, update};
use gantry_sandbox::runtime::{CallError, Limits, ReconcilerPlugin};

#[derive(Debug, Args)]
pub(super) struct TestArgs {
    /// The plugin project: built (unless --plugin), its binding.yaml's
    /// limits and config used, its cases read from DIR/tests.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Test this component (.wasm, or oci://…) instead of DIR's build.
    #[arg(long)]
    plugin: Option<PathBuf>,
    /// The directory of the cases (default: DIR/tests).
    #[arg(long)]
    cases: Option<PathBuf>,
    /// Rewrite each case's `expect` from the plugin's answer, after an
    /// intended change (only the fields each case names, and whole items
    /// it did not list).
    #[arg(long)]
    update: bool,
    #[command(flatten)]
    cache: super::CompileCacheArgs,
}

/// What became of one case.
enum Verdict {
    Passed,
    Updated,
    /// The answer differs: the differences, and a diff of the expectation
    /// against the answer in its shape.
    Failed(Vec<String>, String),
    /// No answer to compare: a trap, a limit, a broken contract, or a case
    /// that could not be written.
    Broken(String),
}

/// `gantry plugin test`.
pub(super) fn test(args: &TestArgs) -> ExitCode {
    let (limits, config) = match binding(&args.path) {
        Ok(found) => found,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let cases_dir = args
        .cases
        .clone()
        .unwrap_or_else(|| args.path.join("tests"));
    if !cases_dir.is_dir() {
        return fail(
            exit::USAGE,
            &format!(
                "no cases: {} is not a directory. A case is a YAML file there with `given` (a parent, observed and related objects, config) and `expect` (children, status, conditions, events); `gantry plugin new` writes two to start from",
                cases_dir.display()
            ),
        );
    }
    let cases = match read_cases(&cases_dir, &config) {
        Ok(cases) if cases.is_empty() => {
            return fail(
                exit::USAGE,
                &format!("no cases: {} has no .yaml files", cases_dir.display()),
            );
        }
        Ok(cases) => cases,
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error:#}");
            }
            return fail(
                exit::OTHER,
                &format!("{} malformed case(s): nothing was run", errors.len()),
            );
        }
    };
    // The checks of `plugin run`: each case's parent is admitted with its
    // CRD's defaults and validation, and each answer judged by the
    // binding's guardrails, as on the cluster.
    let checks = match RunChecks::new(&args.path, None, &[], "gantry-system") {
        Ok(checks) => checks,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let plugin = match load(args) {
        Ok(plugin) => plugin,
        Err(code) => return code,
    };
    let (mut passed, mut failed, mut updated) = (0, 0, 0);
    for case in &cases {
        let started = Instant::now();
        let verdict = run_case(&plugin, &checks, case, &limits, args.update);
        let took = started.elapsed().as_millis();
        match verdict {
            Verdict::Passed => {
                passed += 1;
                println!("ok      {} ({took} ms)", case.name);
            }
            Verdict::Updated => {
                updated += 1;
                println!("updated {} ({})", case.name, case.path.display());
            }
            Verdict::Failed(mismatches, diff) => {
                failed += 1;
                println!("FAIL    {} ({})", case.name, case.path.display());
                if let Some(description) = &case.description {
                    println!("        {description}");
                }
                for mismatch in mismatches {
                    println!("        {mismatch}");
                }
                for line in diff.lines() {
                    println!("        {line}");
                }
            }
            Verdict::Broken(why) => {
                failed += 1;
                println!("FAIL    {} ({}): {why}", case.name, case.path.display());
            }
        }
    }
    let updated = if args.update {
        format!(", {updated} updated")
    } else {
        String::new()
    };
    println!("plugin test: {passed} passed, {failed} failed{updated}");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::CASE_FAILED)
    }
}

/// The limits and config of the project's binding.yaml (the defaults and
/// no config without one).
fn binding(dir: &Path) -> anyhow::Result<(Limits, Value)> {
    let path = dir.join("binding.yaml");
    if !path.is_file() {
        return Ok((Limits::default(), Value::Null));
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let spec = gantry_operator::controller::spec::parse_spec(&text)
        .with_context(|| format!("{} is not a valid binding", path.display()))?;
    Ok((spec.limits.call_limits(), spec.config))
}

/// Build or read the component and load it; Err is the exit code.
fn load(args: &TestArgs) -> Result<std::sync::Arc<ReconcilerPlugin>, ExitCode> {
    let source = args.plugin.as_deref().unwrap_or(args.path.as_path());
    let (name, bytes) = component(source).map_err(|e| fail(exit::OTHER, &e))?;
    let runtime = args.cache.runtime().map_err(|e| fail(exit::OTHER, &e))?;
    runtime
        .load_reconciler(&name, &bytes)
        .map_err(|e| fail(exit::LOAD, &e))
}

/// Call the plugin on `case` and judge (or, with `update`, rewrite) it.
fn run_case(
    plugin: &ReconcilerPlugin,
    checks: &RunChecks,
    case: &Case,
    limits: &Limits,
    update: bool,
) -> Verdict {
    let answer = match call(plugin, checks, case, limits) {
        Ok(answer) => answer,
        Err(why) => return Verdict::Broken(why),
    };
    let expect = case.expect.clone().unwrap_or(Value::Null);
    let mismatches = if expect.is_null() {
        vec!["the case has no `expect` section (--update writes the answer there)".to_string()]
    } else {
        compare(&expect, &answer)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    if mismatches.is_empty() {
        return Verdict::Passed;
    }
    let projected = project(case.expect.as_ref(), &answer);
    if update {
        return match write(case, &projected) {
            Ok(()) => Verdict::Updated,
            Err(e) => Verdict::Broken(format!("{e:#}")),
        };
    }
    Verdict::Failed(mismatches, diff(case.expect.as_ref(), &projected))
}

/// The answer to `case`, as a case expects it: a config that
/// `validate-config` refuses reads as the error `InvalidConfig`, a parent
/// its CRD refuses as the error `Invalid` (the API server's), and children
/// the binding's guardrails refuse as the operator's error. Err: no answer
/// (a trap, a limit, a broken contract).
fn call(
    plugin: &ReconcilerPlugin,
    checks: &RunChecks,
    case: &Case,
    limits: &Limits,
) -> Result<Value, String> {
    let refused = |e: gantry_sdk::PluginError| gantry_sdk::PluginError {
        reason: "InvalidConfig".into(),
        retryable: false,
        ..e
    };
    match plugin.validate_config_blocking(&case.request.config, limits) {
        Ok(()) => {}
        Err(CallError::Plugin(e)) => return Ok(answer::of_error(&refused(e))),
        Err(e) => return Err(format!("validate-config: {e}")),
    }
    let mut request = case.request.clone();
    if let Err(e) = checks.admit(&mut request.parent) {
        // The plugin is never called: the API server refuses such a
        // parent with reason Invalid (422).
        return Ok(answer::of_error(&gantry_sdk::PluginError {
            reason: "Invalid".into(),
            message: format!("{e:#}"),
            retryable: false,
        }));
    }
    match plugin.reconcile_blocking(&request, limits) {
        Ok(response) => match checks.check(&request.parent, response.children.clone()) {
            Ok(()) => Ok(answer::of_response(&response)),
            Err((reason, message)) => Ok(answer::of_error(&gantry_sdk::PluginError {
                reason,
                message,
                retryable: true,
            })),
        },
        Err(CallError::Plugin(e)) => Ok(answer::of_error(&e)),
        Err(e) => Err(e.to_string()),
    }
}

/// Write `expect` into the case file.
fn write(case: &Case, expect: &serde_json::Map<String, Value>) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&case.path)
        .with_context(|| format!("reading {}", case.path.display()))?;
    let rewritten = update::rewrite(&text, expect)
        .with_context(|| format!("updating {}", case.path.display()))?;
    std::fs::write(&case.path, rewritten)
        .with_context(|| format!("writing {}", case.path.display()))
}

/// A unified diff of the expectation as written against the answer in its
/// shape (what `--update` would write).
fn diff(expect: Option<&Value>, projected: &serde_json::Map<String, Value>) -> String {
    let render = |map: &serde_json::Map<String, Value>| {
        update::render(map).unwrap_or_else(|e| format!("(cannot render: {e})\n"))
    };
    let before = render(
        expect
            .and_then(Value::as_object)
            .unwrap_or(&serde_json::Map::new()),
    );
    let after = render(projected);
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header("expected", "answer")
        .to_string()
}
