//! The TLS crypto provider every rustls client of the process uses.

/// Install ring as rustls' process-wide provider, once; every rustls
/// client (plugin downloads, OCI pulls, OTLP export, outbound plugin HTTP)
/// needs one chosen when more than one is compiled in.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err: a provider is already installed (by us or the embedder); fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
