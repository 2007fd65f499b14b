//! What both web stacks do for a request, whatever the stack: acquire its locks (within the wait
//! and the waiter limit it may spend; a gRPC deadline caps the wait), hold them until the response
//! or its body ends, and answer with a rejection (HTTP or gRPC) when it cannot.
//!
//! The tower layer and the actix-web middleware are thin adapters over this module: they read the
//! request, call the handler, and convert the responses. Nothing here imports either adapter.

mod acquire;
mod body;
mod call;
mod grpc;
mod guards;
mod metrics;
mod options;
mod policy;
mod reject;
mod unlocked;

pub(crate) use body::BodyGuards;
pub use body::LeaseLostError;
pub(crate) use call::LockedCall;
pub(crate) use grpc::is_grpc;
#[cfg(feature = "actix")]
pub(crate) use guards::Extensions;
pub use guards::HeldLocks;
pub(crate) use guards::{owner, publish, RequestGuards};
pub use options::{OnLeaseLost, RequestOptions, DEFAULT_RETRY_AFTER, DEFAULT_WAIT_TIMEOUT};
pub(crate) use policy::Policy;
pub use reject::{RejectReason, Rejection};
pub use unlocked::UnlockedCounter;
