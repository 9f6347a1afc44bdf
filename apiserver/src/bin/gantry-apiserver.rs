//! Stand-alone `gantry-apiserver` (used by crash tests; `gantry apiserver` is the CLI).

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: gantry_apiserver::ApiServerArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    gantry_apiserver::run(Cli::parse().args).await
}
