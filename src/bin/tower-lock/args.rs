//! The command line of `tower-lock`: where the locks are, and what to do with them.
//!
//! Clap parses it, so a mistake in it ends the process with clap's message and exit code 2
//! before anything connects.

use std::time::Duration;

use clap::{Parser, Subcommand};

/// The URL used when neither `--redis` nor the environment names one.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// See who holds the locks of a tower-lock namespace and who waits for them, live, and end a
/// stuck hold.
#[derive(Debug, Parser)]
#[command(name = "tower-lock", version, max_term_width = 100)]
pub struct Cli {
    /// The Redis server: redis://[user:password@]host:port[/db], or rediss://… for TLS (add
    /// #insecure to accept a self-signed certificate). With --cluster, a node of the cluster;
    /// with --sentinel, a Sentinel. Give it again for more seeds or Sentinels. Read from
    /// TOWER_LOCK_REDIS_URL, then REDIS_URL, when not given [default: redis://127.0.0.1:6379]
    #[arg(
        long = "redis",
        value_name = "URL",
        env = "TOWER_LOCK_REDIS_URL",
        global = true
    )]
    pub redis: Vec<String>,

    /// The namespace the services' managers were built with
    #[arg(long, value_name = "N", default_value = "tower-lock", global = true)]
    pub namespace: String,

    /// The URLs are nodes of a Redis Cluster
    #[arg(long, global = true, conflicts_with = "sentinel")]
    pub cluster: bool,

    /// The URLs are Sentinels, and MASTER is the name of the service they watch
    #[arg(long, value_name = "MASTER", global = true)]
    pub sentinel: Option<String>,

    /// How long one Redis command may take before the command fails, in seconds
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = parse_timeout, global = true)]
    pub timeout: Duration,

    /// What to do
    #[command(subcommand)]
    pub command: Command,
}

/// One command of `tower-lock`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The locks whose names start with PREFIX that are held or waited for, one a line
    List {
        /// Only the locks whose names start with this (all of the namespace when not given)
        #[arg(default_value = "")]
        prefix: String,
        /// List at most this many locks
        #[arg(long, value_name = "N", default_value = "100", value_parser = parse_limit)]
        limit: usize,
        /// Print one JSON document instead of a table (durations in milliseconds)
        #[arg(long)]
        json: bool,
    },
    /// One lock: every holder, and every waiter in queue order
    Show {
        /// The lock name, as the services name it (`accounts/42`)
        key: String,
        /// Print one JSON document instead of text (durations in milliseconds)
        #[arg(long)]
        json: bool,
    },
    /// A live table of the locks under PREFIX, redrawn every second; q or Ctrl-C quits
    Watch {
        /// Only the locks whose names start with this (all of the namespace when not given)
        #[arg(default_value = "")]
        prefix: String,
        /// Show at most this many locks
        #[arg(long, value_name = "N", default_value = "100", value_parser = parse_limit)]
        limit: usize,
    },
    /// End every hold of a lock now, whoever holds it; the next waiter gets it
    Release {
        /// The lock name, as the services name it (`accounts/42`)
        key: String,
        /// Required: the holders lose the lock while they may still be working under it
        #[arg(long)]
        force: bool,
        /// Do not ask for confirmation
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// A command timeout in seconds: positive and finite; beyond a `Duration`, the longest one.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(format!("{text:?}: the timeout must be more than 0 seconds"));
    }
    Ok(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

/// A list limit: at least 1, so that a limit never silently shows nothing.
fn parse_limit(text: &str) -> Result<usize, String> {
    let limit: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    if limit == 0 {
        return Err("the limit must be at least 1".to_owned());
    }
    Ok(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_must_be_positive_and_saturate() {
        assert_eq!(parse_timeout("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("NaN").is_err());
        assert!(parse_timeout("soon").is_err());
        assert_eq!(parse_timeout("1e300"), Ok(Duration::MAX));
        assert_eq!(parse_timeout("inf"), Ok(Duration::MAX));
    }

    #[test]
    fn limits_are_at_least_one() {
        assert_eq!(parse_limit("7"), Ok(7));
        assert!(parse_limit("0").is_err());
        assert!(parse_limit("-3").is_err());
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
