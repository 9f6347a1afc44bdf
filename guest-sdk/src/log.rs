//! Logging through the host: lines land in the host's structured logs,
//! tagged with the plugin's name. Natively (tests, benches) they are dropped.

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Very detailed.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected.
    Warn,
    /// Something failed.
    Error,
}

/// Write one log line at `level`.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::guest::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// Log at trace level.
pub fn trace(message: &str) {
    log(LogLevel::Trace, message);
}

/// Log at debug level.
pub fn debug(message: &str) {
    log(LogLevel::Debug, message);
}

/// Log at info level.
pub fn info(message: &str) {
    log(LogLevel::Info, message);
}

/// Log at warn level.
pub fn warn(message: &str) {
    log(LogLevel::Warn, message);
}

/// Log at error level.
pub fn error(message: &str) {
    log(LogLevel::Error, message);
}
