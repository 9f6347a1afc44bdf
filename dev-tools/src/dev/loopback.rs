//! Small HTTP servers `gantry dev` runs beside the operator on 127.0.0.1
//! (example components, the stand-in backup service).
//!
//! Each runs on a thread of its own with its own tokio runtime, so that it
//! outlives any one runtime (each test has its own), for the rest of the
//! process.

use std::net::SocketAddr;

/// Serve `router` on a free loopback port for the rest of the process;
/// `name` names its thread and its log line if it stops.
pub(crate) fn serve_forever(
    name: &'static str,
    router: axum::Router,
) -> Result<SocketAddr, String> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let serve = async {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let _ = sender.send(listener.local_addr());
                axum::serve(listener, router).await
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let result = match runtime {
                Ok(runtime) => runtime.block_on(serve),
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                tracing::error!(error = %e, server = name, "a gantry dev server stopped");
            }
        })
        .map_err(|e| e.to_string())?;
    receiver
        .recv()
        .map_err(|_| format!("{name} did not start"))?
        .map_err(|e| e.to_string())
}
