//! The command-line tools of the deploy tests: `helm` and `crane` built by
//! `scripts/go-tool`, the image built by `scripts/image`, and a way to run
//! them that fails the test with their stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The chart's directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join("deploy/helm/gantry")
}

/// Run `command`; its stdout. Panics with its stderr when it fails.
pub fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// [`run`] off the async runtime: the embedded API server answers on the
/// test's runtime while the command waits for it.
pub async fn run_blocking(mut command: Command) -> String {
    tokio::task::spawn_blocking(move || run(&mut command))
        .await
        .expect("command task")
}

/// Run `command`, expecting it to fail; its stderr.
pub fn run_failing(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
    assert!(!output.status.success(), "{command:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A tool built by `scripts/go-tool` (`helm`, `crane`), built on first use
/// and cached by version.
pub fn go_tool(name: &str) -> PathBuf {
    let out = run(Command::new(repo_root().join("scripts/go-tool")).arg(name));
    PathBuf::from(out.trim())
}

/// `helm` with its state (repositories, cache) in a fresh directory, so
/// tests never read or write the user's.
pub struct Helm {
    bin: PathBuf,
    home: tempfile::TempDir,
}

impl Helm {
    /// Build or find helm.
    pub fn new() -> Helm {
        Helm {
            bin: go_tool("helm"),
            home: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A `helm` command with `args`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.bin);
        let home = self.home.path();
        command
            .args(args)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env_remove("KUBECONFIG");
        command
    }

    /// `helm template gantry CHART --namespace gantry-system ARGS...`.
    pub fn template(&self, args: &[&str]) -> String {
        let chart = chart_dir();
        let mut all = vec![
            "template",
            "gantry",
            chart.to_str().unwrap(),
            "--namespace",
            "gantry-system",
        ];
        all.extend_from_slice(args);
        run(&mut self.command(&all))
    }
}

impl Default for Helm {
    fn default() -> Self {
        Helm::new()
    }
}

/// `gantry` as this test build made it (the package's `gantry-test-build`,
/// beside the test executable): what the deploy tests put into the image.
pub fn test_build_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/<profile>/deps/<test> → target/<profile>/gantry-test-build
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable is in target/<profile>/deps")
        .join("gantry-test-build");
    assert!(
        binary.is_file(),
        "{} is missing: run the tests with cargo test, which builds it",
        binary.display()
    );
    binary
}

/// Build the image with `scripts/image build --binary` from
/// [`test_build_binary`] and push it to `reference`; the `REPO@sha256:...`
/// the command printed last.
pub fn build_image(reference: &str) -> String {
    image_command(
        &[
            "--binary",
            test_build_binary().to_str().expect("UTF-8 path"),
        ],
        reference,
    )
}

/// The static image for `platforms` (`linux/amd64`, `linux/arm64`), built
/// from source with the `image-ci` profile and pushed to `reference`, an
/// index of one image per platform when there are several.
pub fn build_image_for(reference: &str, platforms: &[&str]) -> String {
    image_command(
        &["--profile", "image-ci", "--platform", &platforms.join(",")],
        reference,
    )
}

fn image_command(how: &[&str], reference: &str) -> String {
    let out = run(Command::new(repo_root().join("scripts/image"))
        .arg("build")
        .args(how)
        .args(["--push", reference]));
    out.lines()
        .last()
        .expect("scripts/image printed nothing")
        .to_string()
}
