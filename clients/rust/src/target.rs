//! Where a stream connects: a referee's `host:port` over TCP, or its Unix domain socket
//! (`unix:/absolute/path` or `unix:///absolute/path`, PROTOCOL.md §11.4), which is how a bot
//! hosted in a ladder's sandbox reaches its referee.

use std::fmt;
use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tower::service_fn;

/// The channel settings (timeouts, keepalive, TLS) and, for a `unix:` address, the socket.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) endpoint: Endpoint,
    unix: Option<PathBuf>,
}

/// The socket path of a `unix:` address: `Some(Ok(path))`, `Some(Err(why))` for a `unix:`
/// address without an absolute path, `None` for any other address.
pub(crate) fn unix_path(address: &str) -> Option<Result<PathBuf, String>> {
    let path = address
        .strip_prefix("unix://")
        .or_else(|| address.strip_prefix("unix:"))?;
    Some(if path.starts_with('/') {
        Ok(PathBuf::from(path))
    } else {
        Err(format!(
            "{address:?}: a unix: address needs an absolute path (unix:/path or unix:///path)"
        ))
    })
}

impl Target {
    /// TCP to the endpoint's URI.
    pub(crate) fn tcp(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            unix: None,
        }
    }

    /// The socket at `path`, with the endpoint's settings (its URI gives only the authority).
    pub(crate) fn unix(endpoint: Endpoint, path: PathBuf) -> Self {
        Self {
            endpoint,
            unix: Some(path),
        }
    }

    /// A new channel (one connection), as `Endpoint::connect`.
    pub(crate) async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        let Some(path) = &self.unix else {
            return self.endpoint.connect().await;
        };
        let path = path.clone();
        self.endpoint
            .connect_with_connector(service_fn(move |_: Uri| {
                let path = path.clone();
                async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
            }))
            .await
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.unix {
            Some(path) => write!(f, "unix:{}", path.display()),
            None => write!(f, "{}", self.endpoint.uri()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_addresses_name_an_absolute_socket_path() {
        for address in [
            "unix:/run/scout/referee.sock",
            "unix:///run/scout/referee.sock",
        ] {
            assert_eq!(
                unix_path(address),
                Some(Ok(PathBuf::from("/run/scout/referee.sock")))
            );
        }
        assert!(matches!(unix_path("unix:relative.sock"), Some(Err(_))));
        assert_eq!(unix_path("127.0.0.1:50051"), None);
        assert_eq!(unix_path("http://127.0.0.1:50051"), None);
    }
}
