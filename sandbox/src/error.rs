//! Errors of loading and calling plugins.

use std::time::Duration;

use gantry_sdk::PluginError;
use thiserror::Error;

/// Why a plugin could not be loaded. The old version of a plugin keeps
/// serving when its replacement fails to load.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The bytes are not WebAssembly at all.
    #[error("plugin {name}: not a WebAssembly binary ({detail})")]
    NotWasm {
        /// Plugin name.
        name: String,
        /// What was found instead.
        detail: String,
    },
    /// The bytes are a core WebAssembly module, not a component.
    #[error(
        "plugin {name}: is a core WebAssembly module, not a component; build it for \
         wasm32-wasip2 (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule {
        /// Plugin name.
        name: String,
    },
    /// The component is malformed or fails to compile.
    #[error("plugin {name}: invalid component: {detail}")]
    Invalid {
        /// Plugin name.
        name: String,
        /// The validator's or compiler's message.
        detail: String,
    },
    /// The component does not export what the world requires.
    #[error("plugin {name}: does not implement world {world}: {detail}")]
    WrongWorld {
        /// Plugin name.
        name: String,
        /// The world the host expected, e.g. `gantry:plugin/reconciler@0.1.0`.
        world: &'static str,
        /// What is missing or mistyped, and what the component exports.
        detail: String,
    },
    /// The component imports something the sandbox does not provide.
    #[error("plugin {name}: needs imports the sandbox does not provide: {detail}")]
    Imports {
        /// Plugin name.
        name: String,
        /// The linker's message naming the import.
        detail: String,
    },
    /// The on-disk compilation cache failed (I/O).
    #[error("plugin {name}: compilation cache: {detail}")]
    Cache {
        /// Plugin name.
        name: String,
        /// The I/O error.
        detail: String,
    },
}

/// Why a plugin call produced no usable response.
#[derive(Debug, Error)]
pub enum CallError {
    /// The plugin ran past its deadline and was interrupted.
    #[error("plugin exceeded its deadline of {deadline:?}")]
    Timeout {
        /// The deadline in force.
        deadline: Duration,
    },
    /// The plugin tried to grow its memory past the limit.
    #[error("plugin exceeded its memory limit of {limit} bytes")]
    OutOfMemory {
        /// The limit in force, bytes.
        limit: usize,
    },
    /// The response is larger than allowed.
    #[error("plugin output of {size} bytes exceeds the limit of {limit} bytes")]
    OutputTooLarge {
        /// Size of the response, bytes.
        size: usize,
        /// The limit in force, bytes.
        limit: usize,
    },
    /// The response lists more children than allowed.
    #[error("plugin returned {count} children, more than the limit of {limit}")]
    TooManyChildren {
        /// Children returned.
        count: usize,
        /// The limit in force.
        limit: usize,
    },
    /// The plugin trapped (panic, unreachable, stack overflow, ...).
    #[error("plugin trapped: {message}")]
    Trap {
        /// The trap and what the plugin wrote to stderr before it.
        message: String,
    },
    /// The response breaks the contract (e.g. a child that is not an object).
    #[error("plugin broke the contract: {detail}")]
    ContractViolation {
        /// What is wrong, naming the offending item.
        detail: String,
    },
    /// The plugin ran fine and reported an error itself.
    #[error("plugin error ({}): {}", .0.reason, .0.message)]
    Plugin(PluginError),
    /// The host failed to run the call (instantiation, task join).
    #[error("host failed to call the plugin: {0}")]
    Host(String),
    /// A shadow run in which the plugin tried an HTTP request other than
    /// GET (not sent): its answer says nothing of the version.
    #[error("the plugin tried an HTTP request other than GET in a shadow run (not sent)")]
    ShadowRefused,
}

impl CallError {
    /// A short, stable name of the error's kind, for metrics and events.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Timeout { .. } => "timeout",
            Self::OutOfMemory { .. } => "out_of_memory",
            Self::OutputTooLarge { .. } => "output_too_large",
            Self::TooManyChildren { .. } => "too_many_children",
            Self::Trap { .. } => "trap",
            Self::ContractViolation { .. } => "contract_violation",
            Self::Plugin(_) => "plugin_error",
            Self::Host(_) => "host",
            Self::ShadowRefused => "shadow_refused",
        }
    }

    /// CamelCase reason for conditions and Events.
    pub fn reason(&self) -> String {
        match self {
            Self::Plugin(e) => e.reason.clone(),
            Self::Timeout { .. } => "PluginTimeout".into(),
            Self::OutOfMemory { .. } => "PluginOutOfMemory".into(),
            Self::OutputTooLarge { .. } => "PluginOutputTooLarge".into(),
            Self::TooManyChildren { .. } => "PluginTooManyChildren".into(),
            Self::Trap { .. } => "PluginTrapped".into(),
            Self::ContractViolation { .. } => "PluginContractViolation".into(),
            Self::Host(_) => "HostError".into(),
            Self::ShadowRefused => "ShadowRunRefusedRequest".into(),
        }
    }

    /// Whether the sandbox stopped the call (a deadline, memory or output
    /// limit, or a trap), as opposed to an error the plugin reported or a
    /// broken contract.
    pub fn is_limit_breach(&self) -> bool {
        matches!(
            self,
            Self::Timeout { .. }
                | Self::OutOfMemory { .. }
                | Self::OutputTooLarge { .. }
                | Self::TooManyChildren { .. }
                | Self::Trap { .. }
        )
    }
}
