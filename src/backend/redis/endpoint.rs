//! Where a Redis server is, as the user named it (a URL, or a `redis::Client` built by hand), and
//! the checks it must pass before the manager connects: a valid URL, and TLS only with feature
//! `tls` (which also installs the TLS crypto provider).

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::error::LockError;

/// One Redis server of a manager, not yet checked.
#[derive(Debug, Clone)]
pub(crate) enum Endpoint {
    /// `redis://…` or `rediss://…`, parsed at build.
    Url(String),
    /// The connection info of a `redis::Client` (credentials and TLS certificates included).
    Info(Box<ConnectionInfo>),
}

impl Endpoint {
    /// The connection info every connection to this server is opened with. Fails with
    /// [`LockError::Config`] for an invalid URL, or for TLS without feature `tls`.
    pub(crate) fn resolve(&self) -> Result<ConnectionInfo, LockError> {
        let info = match self {
            Endpoint::Url(url) => {
                (url.as_str().into_connection_info()).map_err(|err| url_error(url, &err))?
            }
            Endpoint::Info(info) => ConnectionInfo::clone(info),
        };
        if matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
            tls_ready()?;
        }
        Ok(info)
    }
}

/// The form of a Redis URL, for the errors that show a URL which does not parse.
const EXPECTED_FORM: &str =
    "redis://[user:password@]host:port[/db] (rediss:// for TLS, redis+unix:///path for a socket)";

/// Why `url` is not usable: the URL with its password masked, what is wrong, and the form expected.
fn url_error(url: &str, err: &redis::RedisError) -> LockError {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    if matches!(scheme, "rediss" | "valkeys") && cfg!(not(feature = "tls")) {
        return tls_disabled();
    }
    let why = match err.detail() {
        Some(detail) => detail.to_owned(),
        // redis-rs says "what - Kind": the kind adds nothing for a user
        None => (err.to_string().split(" - ").next()).map_or_else(String::new, str::to_owned),
    };
    LockError::Config(format!(
        "invalid Redis URL {:?}: {why}; expected {EXPECTED_FORM}",
        masked(url)
    ))
}

/// `url` with the password of its user part (`user:password@`) replaced by `***`.
pub(crate) fn masked(url: &str) -> String {
    let start = url.find("://").map_or(0, |at| at + 3);
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    // the last `@` of the authority: a password may hold an unescaped `@`
    let Some(at) = rest[..authority_end].rfind('@').or_else(|| rest.rfind('@')) else {
        return url.to_owned();
    };
    let user_part = &rest[..at];
    let user = user_part
        .split_once(':')
        .map_or(user_part, |(user, _)| user);
    let hidden = if user_part.contains(':') {
        format!("{user}:***")
    } else {
        user.to_owned()
    };
    format!("{}{hidden}{}", &url[..start], &rest[at..])
}

fn tls_disabled() -> LockError {
    LockError::Config(
        "TLS to Redis (rediss://) needs tower-lock's feature `tls`: enable it in Cargo.toml"
            .to_owned(),
    )
}

/// TLS can be used: the feature is on and rustls has a crypto provider.
#[cfg(feature = "tls")]
fn tls_ready() -> Result<(), LockError> {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    // redis-rs asks rustls for the process's default provider. A provider the application
    // installed first stays (install_default then fails, which is fine).
    INSTALLED.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    Ok(())
}

/// TLS can be used: not without feature `tls`, even when another crate turned on TLS in redis-rs
/// (nothing would install a crypto provider).
#[cfg(not(feature = "tls"))]
fn tls_ready() -> Result<(), LockError> {
    Err(tls_disabled())
}

#[cfg(test)]
mod tests {
    use super::Endpoint;
    use crate::error::LockError;

    #[test]
    fn tls_urls_need_feature_tls() {
        let outcome = Endpoint::Url("rediss://u:secret@127.0.0.1:6380/#insecure".into()).resolve();
        if cfg!(feature = "tls") {
            assert!(outcome.is_ok(), "{outcome:?}");
        } else {
            let err = outcome.expect_err("no TLS without the feature");
            assert!(
                matches!(&err, LockError::Config(m) if m.contains("feature `tls`")),
                "{err:?}"
            );
        }
    }

    #[test]
    fn masking_hides_the_password_only() {
        let cases = [
            ("redis://u:secret@h:6379/0", "redis://u:***@h:6379/0"),
            ("redis://:secret@h:6379", "redis://:***@h:6379"),
            ("redis://u@h:6379", "redis://u@h:6379"),
            ("redis://h:6379", "redis://h:6379"),
            ("redis://u:se@cret@h:6379/0", "redis://u:***@h:6379/0"),
            ("u:secret@h:6379", "u:***@h:6379"),
        ];
        for (url, shown) in cases {
            assert_eq!(super::masked(url), shown, "{url}");
        }
    }

    #[test]
    fn a_bad_url_is_a_config_error_that_hides_the_password() {
        let err = (Endpoint::Url("redis://u:secret@127.0.0.1:6379/x".into()).resolve())
            .expect_err("the db is not a number");
        assert!(matches!(&err, LockError::Config(_)), "{err:?}");
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}
