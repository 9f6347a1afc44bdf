//! The differential suite: record what clients and servers say to each
//! other, replay it against the embedded server and a real kube-apiserver
//! from the same starting state, and report where their answers differ.
//!
//! Start with [`run`]: it records the [`scenarios`] (and takes any other
//! recordings, e.g. the end-to-end tests' made with `GANTRY_TEST_RECORD`),
//! replays each ([`replay`]) and returns the [`Report`]. The pieces:
//! [`proxy`] records through an [`upstream`], [`exchange`] is the
//! recording format, [`normalize`] blanks what must differ, [`compare`]
//! finds differences, [`pattern`] names the group an exchange belongs to.
//! The real server is the judge: differences are fixed in the embedded
//! server or listed in `apiserver/NOTES.md`, which [`Report::unlisted`]
//! checks.

pub mod compare;
pub mod exchange;
pub mod normalize;
pub mod pattern;
pub mod proxy;
pub mod replay;
pub mod report;
pub mod scenarios;
pub mod upstream;

use std::path::{Path, PathBuf};

pub use report::Report;

/// Record the kubectl scenarios with each of `kubectls` into `dir`, then
/// replay those recordings and the `extra` ones on both backends.
pub async fn run(kubectls: &[PathBuf], dir: &Path, extra: &[PathBuf]) -> anyhow::Result<Report> {
    let mut recordings = Vec::new();
    for kubectl in kubectls {
        recordings.push(scenarios::record(kubectl, dir).await?);
    }
    recordings.extend(extra.iter().cloned());
    let mut report = Report::default();
    for recording in &recordings {
        eprintln!("replaying {}", recording.display());
        replay::replay(recording, &mut report).await?;
    }
    Ok(report)
}

/// The `.jsonl` recordings in `dir`, sorted.
pub fn recordings_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    found.sort();
    Ok(found)
}
