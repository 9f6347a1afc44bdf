//! The differential suite as a command: record the kubectl scenarios with
//! every kubectl found, replay them and any recordings given (files, or
//! directories of `.jsonl` files, e.g. made by the end-to-end tests with
//! `GANTRY_TEST_RECORD=DIR`) on the embedded server and on a real
//! kube-apiserver, print the report and write it to
//! `apiserver/differential-report.md`.
//!
//! ```text
//! differential [--no-scenarios] [--kubectl PATH]... [--report PATH] [RECORDING|DIR]...
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use gantry_test_support::differential;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut kubectls = Vec::new();
    let mut scenarios = true;
    let mut report_path = root.join("apiserver/differential-report.md");
    let mut extra = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--no-scenarios" => scenarios = false,
            "--kubectl" => kubectls.push(PathBuf::from(args.next().context("--kubectl PATH")?)),
            "--report" => report_path = PathBuf::from(args.next().context("--report PATH")?),
            "-h" | "--help" => {
                println!(
                    "differential [--no-scenarios] [--kubectl PATH]... [--report PATH] [RECORDING|DIR]..."
                );
                return Ok(());
            }
            flag if flag.starts_with('-') => bail!("unknown flag {flag}"),
            path => {
                let path = PathBuf::from(path);
                if path.is_dir() {
                    extra.extend(differential::recordings_in(&path)?);
                } else {
                    extra.push(path);
                }
            }
        }
    }
    if scenarios && kubectls.is_empty() {
        kubectls = gantry_test_support::kubectls();
    }
    if !scenarios {
        kubectls.clear();
    }
    let dir = tempfile::tempdir()?;
    let report = differential::run(&kubectls, dir.path(), &extra).await?;
    let markdown = report.markdown();
    println!("{markdown}");
    std::fs::write(&report_path, &markdown)
        .with_context(|| format!("writing {}", report_path.display()))?;
    eprintln!("report written to {}", report_path.display());
    let notes = std::fs::read_to_string(root.join("apiserver/NOTES.md"))?;
    let unlisted = report.unlisted(&notes);
    if !unlisted.is_empty() {
        eprintln!("differences not listed in apiserver/NOTES.md:");
        for key in &unlisted {
            eprintln!("  `{key}`");
        }
        std::process::exit(1);
    }
    Ok(())
}
