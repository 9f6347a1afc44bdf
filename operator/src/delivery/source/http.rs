//! Downloading a component over HTTP(S), size-capped while streaming.

use super::fetch::{FetchError, FetchSettings};
use super::spec::is_loopback_host;

/// Most redirects followed.
const MAX_REDIRECTS: usize = 5;

fn client(insecure: bool, settings: &FetchSettings) -> Result<reqwest::Client, FetchError> {
    // Redirects may not downgrade to plain HTTP unless the source allows it.
    let redirects = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        let url = attempt.url();
        let plain_ok = insecure || url.host_str().is_some_and(is_loopback_host);
        match url.scheme() {
            "https" => attempt.follow(),
            "http" if plain_ok => attempt.follow(),
            _ => {
                let to = url.to_string();
                attempt.error(format!("refusing a redirect to {to}: not https"))
            }
        }
    });
    reqwest::Client::builder()
        .user_agent(concat!("gantry/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(settings.connect_timeout)
        .read_timeout(settings.read_timeout)
        .redirect(redirects)
        .build()
        .map_err(|e| FetchError::Transport(format!("building the HTTP client: {e}")))
}

// Called as `map_err(transport)`, which hands the error over by value.
#[allow(clippy::needless_pass_by_value)]
fn transport(e: reqwest::Error) -> FetchError {
    // The full chain: reqwest's top-level message alone says little.
    let mut message = e.to_string();
    let redirect = e.is_redirect();
    let mut source = std::error::Error::source(&e);
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    if redirect {
        FetchError::Redirect(message)
    } else {
        FetchError::Transport(message)
    }
}

/// GET `url`; the body, at most `settings.max_bytes` long.
pub(crate) async fn download(
    url: &str,
    insecure: bool,
    settings: &FetchSettings,
) -> Result<Vec<u8>, FetchError> {
    let client = client(insecure, settings)?;
    let mut response = client
        .get(url)
        .header(
            reqwest::header::ACCEPT,
            "application/wasm, application/octet-stream;q=0.9, */*;q=0.1",
        )
        .send()
        .await
        .map_err(transport)?;
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Status {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }
    let limit = settings.max_bytes;
    let announced = response.content_length();
    if announced.is_some_and(|len| len > limit as u64) {
        return Err(FetchError::TooLarge { limit });
    }
    let mut body = Vec::with_capacity(announced.and_then(|l| usize::try_from(l).ok()).unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if body.len() + chunk.len() > limit {
            return Err(FetchError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
