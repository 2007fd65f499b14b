//! `tower-lock`: see who holds the locks of a namespace and who waits for them, watch them live,
//! and end a stuck hold, from a shell.
//!
//! It builds a lock manager as the services do (same URL forms, same namespace) and reads
//! through `LockManager::inspect`, `list_limited` and `force_release`; it never takes a lock.
//! Exit codes: 0 done, 1 the command could not be carried out, 2 a wrong command line.

mod args;
mod commands;
mod connect;
mod describe;
mod detail;
mod failure;
mod json;
mod output;
mod screen;
mod table;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use tower_lock::key::LockKey;

use args::{Cli, Command};
use connect::Target;
use failure::Failure;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let outcome = match runtime {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(err) => Err(Failure::runtime(format!("cannot start: {err}"))),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            report(&failure);
            ExitCode::from(failure.code)
        }
    }
}

/// Print `failure` on standard error: a usage error as clap prints its own.
fn report(failure: &Failure) {
    if failure.code == Failure::USAGE {
        let error = Cli::command().error(clap::error::ErrorKind::InvalidValue, &failure.message);
        let _ = error.print();
    } else {
        output::note(&format!("tower-lock: error: {}", failure.message));
    }
}

/// Check the command line, connect, and carry the command out.
async fn run(cli: Cli) -> Result<(), Failure> {
    let target = Target::from_cli(&cli)?;
    check(&cli.command)?;
    let manager = target.connect().await?;
    let outcome = match &cli.command {
        Command::List {
            prefix,
            limit,
            json,
        } => commands::list(&manager, &target, prefix, *limit, *json).await,
        Command::Show { key, json } => commands::show(&manager, &target, key, *json).await,
        Command::Watch { prefix, limit } => {
            let watch = watch::Watch {
                manager: &manager,
                target: &target,
                prefix,
                limit: *limit,
            };
            watch.run().await
        }
        Command::Release { key, yes, .. } => commands::release(&manager, &target, key, *yes).await,
    };
    // the manager holds nothing: shutting down only closes its connections
    let bound = target.timeout.min(Duration::from_secs(5));
    let _ = tokio::time::timeout(bound, manager.shutdown()).await;
    outcome
}

/// The mistakes of a command line that clap cannot see, found before connecting.
fn check(command: &Command) -> Result<(), Failure> {
    match command {
        Command::Show { key, .. } => valid_key(key),
        Command::Release { key, force, yes } => {
            valid_key(key)?;
            if !force {
                return Err(Failure::usage(
                    "release ends every hold of the lock, while its holders may still be \
                     working under it: add --force to do it",
                ));
            }
            if !yes && !commands::can_confirm() {
                return Err(Failure::usage(
                    "release asks for confirmation on a terminal, and standard input is not \
                     one: add --yes to release without asking",
                ));
            }
            Ok(())
        }
        Command::List { .. } | Command::Watch { .. } => Ok(()),
    }
}

/// A usage error unless `key` is a lock name the services could have used.
fn valid_key(key: &str) -> Result<(), Failure> {
    LockKey::new(key)
        .map(drop)
        .map_err(|err| Failure::usage(format!("invalid lock name: {err}")))
}
