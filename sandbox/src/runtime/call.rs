//! One sandboxed call: a concurrency slot, a fresh store, and a deadline
//! that holds whatever the guest does.
//!
//! The deadline is enforced twice. Epoch interruption stops wasm code that
//! runs past it. A timer stops a guest that waits in a host call (a WASI
//! clock subscription, say): calls are async, so such a guest is a pending
//! future, and the timer drops it. Either way the store, and with it the
//! instance, is dropped before the slot is given back, so the number of
//! live instances never exceeds the number of slots.

use std::future::Future;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::{Instance, InstancePre};
use wasmtime::{Store, Trap};

use super::Runtime;
use super::error::CallError;
use super::limits::Limits;
use super::store::{CallState, new_store};
use crate::capability::Grants;

/// A concurrency slot: held for as long as a call's instance exists.
pub(crate) type Slot = OwnedSemaphorePermit;

/// Turn a failed call into the error that says why: deadline, memory, or a
/// trap with whatever the plugin printed to stderr.
fn call_failure(store: &Store<CallState>, limits: &Limits, error: &wasmtime::Error) -> CallError {
    store.data().flush_output();
    if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return CallError::Timeout {
            deadline: limits.deadline,
        };
    }
    if store.data().memory_exceeded() {
        return CallError::OutOfMemory {
            limit: limits.memory_bytes,
        };
    }
    let stderr = store.data().stderr_text();
    // The wasm backtrace is for the log; what users read (a condition, an
    // Event) starts with the panic message.
    tracing::debug!(backtrace = %format!("{error:?}"), "plugin trapped");
    CallError::Trap {
        message: trap_message(&error.root_cause().to_string(), &stderr),
    }
}

/// Most of a plugin's stderr kept in a trap's message.
const STDERR_IN_MESSAGE: usize = 1024;

/// What a trap says first: the panic message the plugin wrote to stderr
/// (Rust's `panicked at FILE:LINE:COL:` is followed by it), with the trap
/// itself after; without a panic message, the trap and the start of stderr.
pub(crate) fn trap_message(trap: &str, stderr: &str) -> String {
    let panic = stderr.split_once("panicked at ").and_then(|(_, rest)| {
        let (location, message) = rest.split_once('\n')?;
        let message: Vec<&str> = message
            .lines()
            .take_while(|line| !line.starts_with("note: "))
            .collect();
        let message = message.join("\n");
        let location = location.trim_end_matches(':');
        (!message.trim().is_empty()).then(|| format!("{} (at {location})", message.trim()))
    });
    match panic {
        Some(panic) => format!("{panic}; {trap}"),
        None if stderr.trim().is_empty() => trap.to_string(),
        None => {
            let cut: String = stderr.trim().chars().take(STDERR_IN_MESSAGE).collect();
            format!("{trap}; plugin stderr: {cut}")
        }
    }
}

/// Drive `make()`'s future to its end from synchronous code: on this
/// thread when it may block (a plain thread, a blocking-pool thread, a
/// multi-threaded runtime's worker via `block_in_place`), else (inside a
/// current-thread runtime) on a scoped thread of its own.
pub(crate) fn block_on<F: Future>(make: impl FnOnce() -> F + Send) -> F::Output
where
    F::Output: Send,
{
    match Handle::try_current() {
        Err(_) => wasmtime_wasi::runtime::in_tokio(make()),
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| wasmtime_wasi::runtime::in_tokio(make()))
        }
        Ok(_) => std::thread::scope(|scope| {
            scope
                .spawn(|| wasmtime_wasi::runtime::in_tokio(make()))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }),
    }
}

/// Run one call from synchronous code (see [`block_on`]): instantiate `pre`
/// in a fresh store, get the export with `load`, run `call`, all within
/// `limits.deadline`; then drop the instance, then `slot`. A failure says
/// why (deadline, memory, trap); a shadow run in which the plugin tried a
/// request other than GET fails with [`CallError::ShadowRefused`] whatever
/// it answered.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<G, R: Send>(
    runtime: &Runtime,
    slot: Slot,
    name: &str,
    pre: &InstancePre<CallState>,
    limits: &Limits,
    grants: Grants,
    load: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<G> + Send,
    call: impl AsyncFnOnce(&G, &mut Store<CallState>) -> wasmtime::Result<R> + Send,
) -> Result<R, CallError> {
    let result = block_on(|| async {
        let mut store = new_store(runtime.engine(), name, limits, grants);
        let outcome = tokio::time::timeout(limits.deadline, async {
            let instance = pre.instantiate_async(&mut store).await?;
            let guest = load(&mut store, &instance)?;
            call(&guest, &mut store).await
        })
        .await;
        let result = match outcome {
            Ok(_) if store.data().http.shadow_refused => {
                store.data().flush_output();
                Err(CallError::ShadowRefused)
            }
            Ok(Ok(result)) => {
                store.data().flush_output();
                Ok(result)
            }
            Ok(Err(e)) => Err(call_failure(&store, limits, &e)),
            Err(_elapsed) => {
                // The guest was waiting in a host call; its future is gone.
                store.data().flush_output();
                Err(CallError::Timeout {
                    deadline: limits.deadline,
                })
            }
        };
        drop(store);
        result
    });
    drop(slot);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panic_message_comes_first() {
        let stderr = "thread '<unnamed>' panicked at src/lib.rs:61:13:\nfanout traps on purpose (100% of calls)\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        let message = trap_message("wasm trap: wasm `unreachable` instruction executed", stderr);
        assert_eq!(
            message,
            "fanout traps on purpose (100% of calls) (at src/lib.rs:61:13); wasm trap: wasm `unreachable` instruction executed"
        );
        assert_eq!(
            trap_message("wasm trap: stack overflow", ""),
            "wasm trap: stack overflow"
        );
        let other = trap_message("wasm trap: out of bounds", "some log line\n");
        assert_eq!(
            other,
            "wasm trap: out of bounds; plugin stderr: some log line"
        );
    }
}
