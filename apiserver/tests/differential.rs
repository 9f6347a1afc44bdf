//! The differential suite at test size: the kubectl scenarios, recorded
//! with every kubectl found against the embedded server, replayed on a
//! fresh embedded server and a fresh real kube-apiserver, compared. The
//! report goes to stdout and `$CARGO_TARGET_TMPDIR/differential-report.md`
//! (`cargo run -p gantry-test-support --bin differential` writes the
//! committed `apiserver/differential-report.md`). Every group of exchanges
//! that differs must be listed in NOTES.md, so a new difference fails here.

use std::path::Path;

use gantry_test_support::differential::{self, report::NOTES_SECTION};
use gantry_test_support::{Backend, kubectls};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report() {
    // The real server is the judge: without it there is nothing to compare.
    if Backend::Real.skip() {
        return;
    }
    let kubectls = kubectls();
    let dir = tempfile::tempdir().unwrap();
    let report = differential::run(&kubectls, dir.path(), &[]).await.unwrap();
    let markdown = report.markdown();
    println!("{markdown}");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("differential-report.md");
    std::fs::write(&out, &markdown).unwrap();

    assert_eq!(
        report.recordings.len(),
        kubectls.len(),
        "one recording per kubectl"
    );
    assert!(
        report.compared > 100,
        "only {} exchanges compared",
        report.compared
    );
    assert!(
        report.identical > 0,
        "nothing identical: the replay is broken"
    );
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("exchanges compared")
    );
    let notes =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("NOTES.md")).unwrap();
    let unlisted = report.unlisted(&notes);
    assert!(
        unlisted.is_empty(),
        "differences from kube-apiserver not listed under {NOTES_SECTION:?} in apiserver/NOTES.md \
         (fix them, or list them with why they stay):\n{}\n\nreport: {}",
        unlisted
            .iter()
            .map(|k| format!("  `{k}`"))
            .collect::<Vec<_>>()
            .join("\n"),
        out.display()
    );
}
