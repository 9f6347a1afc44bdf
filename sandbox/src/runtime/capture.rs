//! A plugin's stdout and stderr: the first bytes are kept for the host's
//! logs, the rest is dropped, and the guest never sees an error for it.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// Largest write the guest is offered at once; writes of any total length
/// succeed.
const WRITE_PERMIT: usize = 64 << 10;

/// An output stream that keeps the first `capacity` bytes written to it and
/// drops the rest. Clones share the buffer.
#[derive(Debug, Clone)]
pub(super) struct Capture {
    capacity: usize,
    state: Arc<Mutex<Captured>>,
}

#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: usize,
}

impl Capture {
    /// A capture that keeps up to `capacity` bytes.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            state: Arc::default(),
        }
    }

    /// The bytes kept.
    pub(super) fn contents(&self) -> Vec<u8> {
        self.state.lock().unwrap().kept.clone()
    }

    /// How many bytes were dropped past the capacity.
    pub(super) fn dropped(&self) -> usize {
        self.state.lock().unwrap().dropped
    }

    fn take(&self, data: &[u8]) {
        let mut state = self.state.lock().unwrap();
        let room = self.capacity.saturating_sub(state.kept.len());
        let keep = data.len().min(room);
        state.kept.extend_from_slice(&data[..keep]);
        state.dropped += data.len() - keep;
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.take(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.take(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_and_counts_the_rest() {
        let capture = Capture::new(4);
        let mut stream = capture.p2_stream();
        stream.write(Bytes::from_static(b"abc")).unwrap();
        stream.write(Bytes::from_static(b"defg")).unwrap();
        assert_eq!(stream.check_write().unwrap(), WRITE_PERMIT);
        assert_eq!(capture.contents(), b"abcd");
        assert_eq!(capture.dropped(), 3);
    }
}
