//! The lock manager `tower-lock` reads through, built from the command line as a service would
//! build its own: one server, a cluster or Sentinels, in the same namespace.
//!
//! The URLs come from `--redis`, else `TOWER_LOCK_REDIS_URL`, else `REDIS_URL`, else the local
//! default. A URL is only ever shown with its password masked.

use std::time::Duration;

use tower_lock::{LockError, LockManager};

use crate::args::{Cli, DEFAULT_URL};
use crate::failure::Failure;

/// Where the locks are, as the command line names it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URLs to connect to: a server, cluster nodes, or Sentinels.
    pub urls: Vec<String>,
    /// The namespace of the managers whose locks are shown.
    pub namespace: String,
    /// How the URLs are read.
    pub kind: Kind,
    /// How long one command may take.
    pub timeout: Duration,
}

/// What the URLs of a [`Target`] are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// One Redis server.
    Server,
    /// Nodes of a Redis Cluster.
    Cluster,
    /// Sentinels watching the named service.
    Sentinel(String),
}

impl Target {
    /// The target the command line names; a usage error when several URLs are given for one
    /// server.
    pub fn from_cli(cli: &Cli) -> Result<Target, Failure> {
        let urls = if cli.redis.is_empty() {
            vec![std::env::var("REDIS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())]
        } else {
            cli.redis.clone()
        };
        let kind = match (&cli.sentinel, cli.cluster) {
            (Some(service), _) => Kind::Sentinel(service.clone()),
            (None, true) => Kind::Cluster,
            (None, false) => Kind::Server,
        };
        if kind == Kind::Server && urls.len() > 1 {
            return Err(Failure::usage(
                "--redis is given more than once: several URLs need --cluster or --sentinel",
            ));
        }
        Ok(Target {
            urls,
            namespace: cli.namespace.clone(),
            kind,
            timeout: cli.timeout,
        })
    }

    /// The URLs, passwords masked, for messages and screens.
    pub fn shown(&self) -> String {
        let urls: Vec<String> = self.urls.iter().map(|url| masked(url)).collect();
        let urls = urls.join(", ");
        match &self.kind {
            Kind::Server => urls,
            Kind::Cluster => format!("cluster {urls}"),
            Kind::Sentinel(service) => format!("sentinel {urls} service {service}"),
        }
    }

    /// A manager of the target's namespace, connected; the failure names the target.
    pub async fn connect(&self) -> Result<LockManager, Failure> {
        let builder = LockManager::builder()
            .namespace(&self.namespace)
            .command_timeout(self.timeout);
        let builder = match &self.kind {
            Kind::Server => builder.redis(&self.urls[0]),
            Kind::Cluster => builder.cluster(&self.urls),
            Kind::Sentinel(service) => builder.sentinel(&self.urls, service),
        };
        // the manager bounds each connection it opens by the command timeout, and opens more
        // than one: the command line promises an answer within one timeout
        let bound = self.timeout;
        match tokio::time::timeout(bound, builder.build()).await {
            Ok(Ok(manager)) => Ok(manager),
            Ok(Err(err)) => Err(self.failure(&err)),
            Err(_) => Err(Failure::runtime(format!(
                "cannot reach Redis at {}: no answer within {bound:?}",
                self.shown()
            ))),
        }
    }

    /// The failure of a command on this target, in one line: a usage failure when the
    /// manager refused what the command line gave it.
    pub fn failure(&self, err: &LockError) -> Failure {
        let message = match err {
            LockError::Unavailable { source, .. } => {
                format!(
                    "cannot reach Redis at {}: {}",
                    self.shown(),
                    one_line(source.as_ref())
                )
            }
            // what the command line gave: the URL, the namespace, the timeout
            LockError::Config(_) => return Failure::usage(one_line(err)),
            // the library names the key, which for `list` is a prefix: say what is missing
            LockError::Unsupported { what, .. } => format!("not supported here yet: {what}"),
            other => one_line(other),
        };
        Failure::runtime(message)
    }
}

/// `err` and its causes on one line, each once.
pub fn one_line(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        let next_text = next.to_string();
        if !text.contains(&next_text) {
            text = format!("{text}: {next_text}");
        }
        cause = next.source();
    }
    text.replace(['\n', '\r'], " ")
}

/// `url` with the password between `://user:` and the last `@` replaced by `***` (a password
/// written with `/`, `#` or `@` unescaped is masked whole too).
pub fn masked(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => userinfo.to_owned(),
    };
    format!("{scheme}://{user}@{host}")
}

#[cfg(test)]
mod tests {
    use super::masked;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            masked("redis://app:s3cr@t@10.0.0.1:6379/2"),
            "redis://app:***@10.0.0.1:6379/2"
        );
        assert_eq!(
            masked("rediss://:pw@host#insecure"),
            "rediss://:***@host#insecure"
        );
        assert_eq!(masked("redis://host:6379"), "redis://host:6379");
        assert_eq!(masked("redis://user@host"), "redis://user@host");
        assert_eq!(masked("redis://u:a/b#c@host"), "redis://u:***@host");
        assert_eq!(masked("not a url"), "not a url");
    }
}
