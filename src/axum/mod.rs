//! axum integration (feature `axum`): key extractors that follow the router, extractors for the
//! request's locks, and rejections as axum responses.
//!
//! - [`params()`] locks the resource that the path parameters you name identify in the route axum
//!   matched: `params(["id"])` on `PUT /accounts/{id}/deposit/{amount}` locks `accounts/42` for
//!   every amount, the same name as `key::pattern("/accounts/{id}")`. Name only the parameters
//!   that identify the resource: naming `amount` too would let two deposits of different amounts
//!   to one account run at once.
//! - [`route()`] (deprecated) locks the matched route with all its parameters, which is that
//!   mistake.
//! - [`LockInfo`](crate::LockInfo) and [`LockOwner`](crate::LockOwner) are axum extractors (plain
//!   or in an `Option`): a handler names them as arguments instead of reading the extensions.
//! - [`Rejection`](crate::Rejection) is an `IntoResponse` (its default response).
//!
//! A request without a matched route, or whose route lacks a named parameter, is rejected with 400
//! and the reason, unless the extractor is made `.optional()`. Put the layer on with
//! `route_layer`, not `layer`: it then runs only for requests that matched a route, where
//! `MatchedPath` is set, so a 404 stays a 404 and never waits for a lock. axum's
//! `Router::route_layer` still wraps each matched path's whole method router, so a 405 (a POST to
//! a PUT-only route) goes through the layer and may wait; the method router's own `route_layer`
//! (`put(handler).route_layer(layer)`) wraps only the handler, so a 405 is answered at once.
//! [`KeyExtractor::only_methods`](crate::key::KeyExtractor::only_methods) does the same for a whole
//! router.
//!
//! ```
//! use axum::extract::Path;
//! use axum::routing::put;
//! use axum::Router;
//! use tower_lock::{key, LockInfo, LockLayer, LockManager};
//!
//! async fn deposit(Path((id, amount)): Path<(String, u64)>, lock: LockInfo) -> String {
//!     format!("{amount} to {id} under {} (token {})", lock.key(), lock.fencing_token())
//! }
//!
//! let manager = LockManager::memory();
//! let accounts = Router::new()
//!     .route("/accounts/{id}/deposit/{amount}", put(deposit))
//!     .route_layer(LockLayer::new(manager, tower_lock::axum::params(["id"])));
//! let app: Router = Router::new().nest("/api", accounts);
//!
//! // A job that changes account a/b outside a request locks what the layer locks for
//! // PUT /api/accounts/a%2Fb/deposit/5:
//! let name = key::pattern("/api/accounts/{id}").name_with(&[("id", "a/b")]).unwrap();
//! assert_eq!(name, "api/accounts/a%2Fb");
//! ```

mod extract;
mod params;
mod route;

pub use extract::NotLocked;
pub use params::{params, try_params, Params};
#[allow(deprecated)]
pub use route::{route, Route};
