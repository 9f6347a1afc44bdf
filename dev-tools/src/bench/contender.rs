//! An operator under test in `gantry bench converge`: Gantry (`gantry run`)
//! or a peer on controller-runtime, each a child process of its own and
//! measured from outside the same way: API writes and reconciles from its
//! `/metrics`, CPU time and peak RSS from `/proc`.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// Which operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// Gantry, with the fanout plugin.
    Gantry,
    /// The controller-runtime peer of `benches/peers/controller-runtime`.
    ControllerRuntime,
}

impl Implementation {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gantry => "gantry",
            Self::ControllerRuntime => "controller-runtime",
        }
    }
}

/// How to start one.
pub struct Launch<'a> {
    /// The cluster.
    pub kubeconfig: &'a Path,
    /// Reconciles at once.
    pub concurrency: usize,
    /// Its stderr goes here.
    pub log: &'a Path,
}

/// A running operator under test.
pub struct Contender {
    /// Which one.
    pub implementation: Implementation,
    child: Child,
    metrics_url: String,
    /// Metric of its API writes.
    writes: (&'static str, &'static str),
    /// Metric of those writes that wrote Events.
    event_writes: &'static str,
    /// Metric of its reconciles of fanouts.
    reconciles: (&'static str, &'static str),
}

/// Counters read from a contender's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// API writes so far, Events included.
    pub writes: u64,
    /// Of those, writes of Events.
    pub event_writes: u64,
    /// Reconciles of fanouts so far.
    pub reconciles: u64,
}

impl Contender {
    /// `gantry run` (the `gantry` binary at `gantry`) with the bindings of
    /// `bindings_namespace`; returns once it serves its metrics.
    pub fn gantry(
        gantry: &Path,
        launch: &Launch<'_>,
        bindings_namespace: &str,
    ) -> anyhow::Result<Self> {
        let mut child = Command::new(gantry)
            .args(["--log-format", "text", "run", "--kubeconfig"])
            .arg(launch.kubeconfig)
            .args(["--namespace", bindings_namespace])
            .args(["--concurrency", &launch.concurrency.to_string()])
            .args([
                "--metrics-addr",
                "127.0.0.1:0",
                "--health-addr",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(launch.log)?)
            .spawn()
            .with_context(|| format!("starting {} run", gantry.display()))?;
        let stdout = child.stdout.take().expect("stdout piped");
        let address = wait_for_line(stdout, None, |line| {
            line.strip_prefix("gantry: metrics at ").map(str::to_string)
        })
        .context("gantry run printed no metrics address")?;
        Ok(Self {
            implementation: Implementation::Gantry,
            child,
            metrics_url: address,
            writes: ("gantry_api_writes_total", ""),
            event_writes: "gantry_api_event_writes_total",
            reconciles: ("gantry_reconciles_total", "binding=\"fanout\""),
        })
    }

    /// The peer (binary `peer`) reconciling fanouts served as `kind` (in
    /// `bench.gantry.dev/v1`) in `namespace` with `children` ConfigMaps
    /// each and a resync of `resync`; returns once it says it is ready.
    pub fn controller_runtime(
        peer: &Path,
        launch: &Launch<'_>,
        namespace: &str,
        kind: &str,
        children: u32,
        resync: Duration,
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let mut child = Command::new(peer)
            .arg("--kubeconfig")
            .arg(launch.kubeconfig)
            .args(["--reconcilers", "fanout", "--fanout-kind", kind])
            .args(["--namespace", namespace])
            .args(["--concurrency", &launch.concurrency.to_string()])
            .args(["--children-per-parent", &children.to_string()])
            .args(["--resync-secs", &resync.as_secs().max(1).to_string()])
            .args(["--metrics-bind-address", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", peer.display()))?;
        let stderr = child.stderr.take().expect("stderr piped");
        let log = std::fs::File::create(launch.log)?;
        wait_for_line(stderr, Some(log), |line| {
            (line.trim() == "ready").then_some(())
        })
        .context("the peer never said ready")?;
        Ok(Self {
            implementation: Implementation::ControllerRuntime,
            child,
            metrics_url: format!("http://127.0.0.1:{port}/metrics"),
            writes: ("gantry_peer_api_writes_total", ""),
            event_writes: "gantry_peer_api_event_writes_total",
            reconciles: (
                "controller_runtime_reconcile_total",
                "controller=\"fanout\"",
            ),
        })
    }

    /// Its metrics now, as Prometheus text.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        let response = reqwest::get(&self.metrics_url)
            .await
            .with_context(|| format!("scraping {}", self.metrics_url))?;
        Ok(response.error_for_status()?.text().await?)
    }

    /// Its API writes and fanout reconciles so far.
    pub async fn counters(&self) -> anyhow::Result<Counters> {
        let text = self.metrics().await?;
        // Counters are whole numbers, exported as floats.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(Counters {
            writes: sum(&text, self.writes.0, self.writes.1) as u64,
            event_writes: sum(&text, self.event_writes, "") as u64,
            reconciles: sum(&text, self.reconciles.0, self.reconciles.1) as u64,
        })
    }

    /// CPU time (user and system) it has used, in seconds.
    pub fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds(self.child.id())
    }

    /// Its peak resident set size so far, in bytes.
    pub fn peak_rss(&self) -> Option<u64> {
        peak_rss(self.child.id())
    }

    /// Start its peak RSS afresh from its RSS now; whether it could.
    pub fn reset_peak_rss(&self) -> bool {
        reset_peak_rss(self.child.id())
    }

    /// Its resident set size now, in bytes.
    pub fn rss(&self) -> Option<u64> {
        rss(self.child.id())
    }

    /// SIGTERM, and wait for it to exit (killed after `grace`).
    pub fn stop(mut self, grace: Duration) -> anyhow::Result<()> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + grace;
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                self.child.kill()?;
                bail!(
                    "{} did not stop within {grace:?} of SIGTERM",
                    self.implementation.name()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Contender {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Read `stream` until `found` returns something for a line; the lines
/// read, and every later one, are copied to `log` (or dropped) by a thread
/// that drains the stream so that the child never blocks on it.
fn wait_for_line<T>(
    stream: impl std::io::Read + Send + 'static,
    mut log: Option<std::fs::File>,
    found: impl Fn(&str) -> Option<T>,
) -> anyhow::Result<T> {
    let mut lines = BufReader::new(stream).lines();
    let result = loop {
        let Some(line) = lines.next() else {
            bail!("the process exited");
        };
        let line = line?;
        if let Some(log) = &mut log {
            writeln!(log, "{line}")?;
        }
        if let Some(value) = found(&line) {
            break value;
        }
    };
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Some(log) = &mut log {
                let _ = writeln!(log, "{line}");
            }
        }
    });
    Ok(result)
}

/// A port free on 127.0.0.1 now (for a child that takes a port, not 0).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The sum of the samples of `metric` whose labels include `labels` (a
/// `key="value"` fragment, or empty for all). The text format is read by
/// hand: a sum over matching lines is all the bench needs.
pub fn sum(text: &str, metric: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let name = series.split('{').next()?;
            (name == metric && series.contains(labels))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// CPU time of process `pid` in seconds, from `/proc/PID/stat` (utime and
/// stime, in `USER_HZ`: 100 per second on every Linux architecture).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces: state is the
    // first, utime the 12th and stime the 13th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    #[allow(clippy::cast_precision_loss)] // ticks of a bench run are far below 2^52
    Some(ticks as f64 / 100.0)
}

/// Peak resident set size of process `pid`, from `/proc/PID/status`:
/// `VmHWM`.
pub(super) fn peak_rss(pid: u32) -> Option<u64> {
    status_bytes(pid, "VmHWM:")
}

/// Resident set size of process `pid` now, from `/proc/PID/status`: `VmRSS`.
fn rss(pid: u32) -> Option<u64> {
    status_bytes(pid, "VmRSS:")
}

/// Start the peak RSS of process `pid` afresh from its RSS now (Linux
/// 4.0 and later: `5` into `/proc/PID/clear_refs`); whether it could.
fn reset_peak_rss(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// The size in the line `field` of `/proc/PID/status` (in kB there).
fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The peer binary, built (or found in its cache) by its `build.sh`.
pub fn build_peer(source_root: &Path) -> anyhow::Result<PathBuf> {
    let script = source_root.join("benches/peers/controller-runtime/build.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed", script.display());
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::float_cmp)] // small whole numbers are exact
    fn metrics_are_summed_over_matching_series() {
        let text = "# HELP x\n\
            controller_runtime_reconcile_total{controller=\"fanout\",result=\"success\"} 7\n\
            controller_runtime_reconcile_total{controller=\"fanout\",result=\"error\"} 2\n\
            controller_runtime_reconcile_total{controller=\"memcached\",result=\"success\"} 40\n\
            gantry_api_writes_total 12\n";
        assert_eq!(
            sum(
                text,
                "controller_runtime_reconcile_total",
                "controller=\"fanout\""
            ),
            9.0
        );
        assert_eq!(sum(text, "gantry_api_writes_total", ""), 12.0);
        assert_eq!(sum(text, "gantry_api_writes", ""), 0.0, "names match whole");
    }

    #[test]
    fn cpu_time_of_this_process_is_read() {
        let before = cpu_seconds(std::process::id()).unwrap();
        // Spin until the kernel has counted at least two ticks more.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut spins = 0u64;
        while cpu_seconds(std::process::id()).unwrap() < before + 0.02 {
            spins = spins.wrapping_add(std::hint::black_box(1));
            assert!(Instant::now() < deadline, "CPU time did not grow");
        }
        assert!(spins > 0);
    }
}
