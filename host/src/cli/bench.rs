//! `gantry bench dispatch`, `gantry bench load`, `gantry bench converge` and
//! `gantry bench density`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::exit;
use gantry_dev_tools::bench::{chart, churn, converge, density, dispatch, load};
use gantry_sandbox::runtime::{Limits, Runtime};

#[derive(Debug, Subcommand)]
pub(super) enum BenchCommand {
    /// Cost of one reconcile call: native, sandboxed wasm, HTTP webhook.
    Dispatch(DispatchArgs),
    /// Time to load a plugin: compiled from its bytes, and precompiled.
    Load(LoadArgs),
    /// N parents with K children each, from creation to converged.
    Converge(ConvergeArgs),
    /// N operators, each its own CRD, in one cluster: memory and CPU.
    Density(DensityArgs),
}

#[derive(Debug, Args)]
pub(super) struct DispatchArgs {
    /// Parent sizes (bytes, or with k/m suffixes).
    #[arg(long, value_delimiter = ',', default_value = "1k,20k,500k")]
    sizes: Vec<String>,
    /// Measured calls per implementation and size (a tenth of them for
    /// the JavaScript and Python plugins).
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Unmeasured calls first.
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    /// Also the JavaScript, Python, C and Go builds of memcached (builds
    /// them; needs node/npm, Python, clang and Go).
    #[arg(long)]
    polyglot: bool,
    /// Write latency charts (SVG) into this directory.
    #[arg(long)]
    chart_dir: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(super) struct LoadArgs {
    /// Timed precompiled loads per plugin.
    #[arg(long, default_value_t = 50)]
    loads: usize,
    /// Timed compiling loads per plugin.
    #[arg(long, default_value_t = 3)]
    compiles: usize,
    /// Also the JavaScript, Python, C and Go builds of memcached (builds
    /// them; needs node/npm, Python, clang and Go).
    #[arg(long)]
    polyglot: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Operators `bench converge` compares Gantry with.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum Peer {
    /// The Go operator on controller-runtime in benches/peers.
    ControllerRuntime,
}

#[derive(Debug, Args)]
pub(super) struct ConvergeArgs {
    /// Parents to create.
    #[arg(long, default_value_t = 1000)]
    parents: usize,
    /// ConfigMaps per parent.
    #[arg(long, default_value_t = 3)]
    children_per_parent: u32,
    /// Reconciles at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Resync period of the bench binding, seconds.
    #[arg(long, default_value_t = 30)]
    resync_secs: u64,
    /// Give up on a phase after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout_secs: u64,
    /// Percentage of plugin calls that trap (fault injection).
    #[arg(long, default_value_t = 0)]
    trap_percent: u8,
    /// Seconds of churn after the spec change: `--churn-percent` of the
    /// parents change every second and each change is timed to its
    /// children written (0: no churn phase).
    #[arg(long, default_value_t = 0)]
    churn_secs: u64,
    /// Parents changed each second of churn, percent.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=100))]
    churn_percent: u8,
    /// Measure the converge phase only (a scale run).
    #[arg(long, conflicts_with = "churn_secs")]
    converge_only: bool,
    /// Keep the operators' logs in this directory (`gantry.log`,
    /// `controller-runtime.log`); set `RUST_LOG` for more of Gantry's.
    #[arg(long)]
    logs: Option<PathBuf>,
    /// Run against this cluster instead of starting `gantry apiserver`.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Run this peer after Gantry, on the same plan and cluster (its
    /// binary is built on first use).
    #[arg(long, value_enum)]
    peer: Option<Peer>,
    /// Write the convergence chart (SVG) here.
    #[arg(long)]
    chart: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(super) struct DensityArgs {
    /// Operators, each with a CRD of its own.
    #[arg(long, default_value_t = 10)]
    operators: usize,
    /// Parents of each operator.
    #[arg(long, default_value_t = 100)]
    parents_per_operator: usize,
    /// ConfigMaps per parent.
    #[arg(long, default_value_t = 3)]
    children_per_parent: u32,
    /// Reconciles at once per operator (Gantry's `--concurrency` is this
    /// times the operators).
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Resync period of every operator, seconds.
    #[arg(long, default_value_t = 30)]
    resync_secs: u64,
    /// Length of each steady window, seconds.
    #[arg(long, default_value_t = 30)]
    steady_secs: u64,
    /// Operators added one at a time after the steady window, for the
    /// memory one more adds.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    extra_operators: u16,
    /// Give up on a phase after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout_secs: u64,
    /// Run against this cluster instead of starting `gantry apiserver`.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Run this peer after Gantry, one process per operator, on the same
    /// plan and cluster (its binary is built on first use).
    #[arg(long, value_enum)]
    peer: Option<Peer>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(command: BenchCommand) -> ExitCode {
    let result = match command {
        BenchCommand::Dispatch(args) => run_dispatch(&args),
        BenchCommand::Load(args) => run_load(&args),
        BenchCommand::Converge(args) => run_converge(&args),
        BenchCommand::Density(args) => run_density(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => super::fail(exit::OTHER, &e),
    }
}

fn run_dispatch(args: &DispatchArgs) -> anyhow::Result<()> {
    let sizes = args
        .sizes
        .iter()
        .map(|s| dispatch::parse_size(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let runtime = Runtime::with_defaults()?;
    let load = |name: &str| -> anyhow::Result<_> {
        let bytes = gantry_toolchain::example_plugin(name)?;
        Ok(runtime.load_reconciler(name, &bytes)?)
    };
    let plugin = load("memcached")?;
    let others = if args.polyglot {
        polyglot_memcached()?
            .iter()
            .map(|(name, bytes)| runtime.load_reconciler(name, bytes))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let plan = dispatch::DispatchPlan {
        sizes,
        calls: args.calls,
        warmup: args.warmup,
        limits: Limits::default(),
    };
    let results = dispatch::run(&plan, &plugin, &others)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", dispatch::render(&results));
    }
    if let Some(dir) = &args.chart_dir {
        for file in chart::dispatch(&results, dir)? {
            eprintln!("wrote {}", file.display());
        }
    }
    Ok(())
}

/// The JavaScript, Python, C and Go builds of memcached, built now: (name,
/// component bytes).
fn polyglot_memcached() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    [
        "memcached-js",
        "memcached-py",
        "memcached-c",
        "memcached-go",
    ]
    .into_iter()
    .map(|name| {
        let dir = gantry_dev_tools::examples::source_dir(name);
        let path = gantry_toolchain::build_any(&dir, &gantry_toolchain::BuildOptions::default())?;
        Ok((name.to_string(), std::fs::read(&path)?))
    })
    .collect()
}

fn run_load(args: &LoadArgs) -> anyhow::Result<()> {
    let mut plugins = ["memcached", "fanout"]
        .into_iter()
        .map(|name| Ok((name.to_string(), gantry_toolchain::example_plugin(name)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if args.polyglot {
        plugins.extend(polyglot_memcached()?);
    }
    let cache = tempfile::tempdir()?;
    let plan = load::LoadPlan {
        loads: args.loads,
        compiles: args.compiles,
    };
    let rows = load::run(&plan, &plugins, cache.path())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", gantry_dev_tools::bench::render_plain(&rows));
    }
    Ok(())
}

fn run_converge(args: &ConvergeArgs) -> anyhow::Result<()> {
    let plan = converge::ConvergePlan {
        parents: args.parents,
        children_per_parent: args.children_per_parent,
        concurrency: args.concurrency,
        resync: Duration::from_secs(args.resync_secs),
        phase_timeout: Duration::from_secs(args.timeout_secs),
        trap_percent: args.trap_percent,
        kubeconfig: args.kubeconfig.clone(),
        gantry: std::env::current_exe()?,
        plugin: gantry_toolchain::example_plugin("fanout")?,
        peer: peer_binary(args.peer)?,
        churn: (args.churn_secs > 0).then(|| churn::ChurnPlan {
            percent: args.churn_percent,
            duration: Duration::from_secs(args.churn_secs),
        }),
        converge_only: args.converge_only,
        logs: args.logs.clone(),
    };
    let runtime = super::tokio_runtime()?;
    let report = runtime.block_on(converge::run(&plan, |line| eprintln!("bench: {line}")))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", converge::render(&report));
    }
    if let Some(path) = &args.chart {
        chart::convergence(&report, path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// The binary of `peer`, built now unless cached.
fn peer_binary(peer: Option<Peer>) -> anyhow::Result<Option<PathBuf>> {
    match peer {
        Some(Peer::ControllerRuntime) => Ok(Some(gantry_dev_tools::bench::contender::build_peer(
            &gantry_toolchain::source_workspace_root(),
        )?)),
        None => Ok(None),
    }
}

fn run_density(args: &DensityArgs) -> anyhow::Result<()> {
    let plan = density::DensityPlan {
        operators: args.operators,
        parents_per_operator: args.parents_per_operator,
        children_per_parent: args.children_per_parent,
        concurrency: args.concurrency,
        resync: Duration::from_secs(args.resync_secs),
        steady: Duration::from_secs(args.steady_secs),
        extra_operators: usize::from(args.extra_operators),
        phase_timeout: Duration::from_secs(args.timeout_secs),
        kubeconfig: args.kubeconfig.clone(),
        gantry: std::env::current_exe()?,
        plugin: gantry_toolchain::example_plugin("fanout")?,
        peer: peer_binary(args.peer)?,
    };
    let runtime = super::tokio_runtime()?;
    let report = runtime.block_on(density::run(&plan, |line| eprintln!("bench: {line}")))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", density::render(&report));
    }
    Ok(())
}
