//! axum integration (feature `axum`): a key extractor that follows the router, extractors for the
//! request's locks, and rejections as axum responses.
//!
//! - [`route()`] locks one name per matched route and its path parameters, read from axum's
//!   `MatchedPath` and path parameters, so the name follows the router, nesting included:
//!   `PUT /api/accounts/42` on a route `/accounts/{id}` nested under `/api` locks
//!   `/api/accounts/{id}?id=42`.
//! - [`LockInfo`](crate::LockInfo) and [`LockOwner`](crate::LockOwner) are axum extractors (plain
//!   or in an `Option`): a handler names them as arguments instead of reading the extensions.
//! - [`Rejection`](crate::Rejection) is an `IntoResponse` (its default response).
//!
//! Put the layer on with `route_layer`, not `layer`: it then runs only for requests that matched a
//! route, where `MatchedPath` is set, so a 404 never waits for a lock (nor becomes a 400 under
//! `required()`). axum's `Router::route_layer` still wraps each matched path's whole method
//! router, so a 405 (a POST to a PUT-only route) goes through the layer and may wait; the method
//! router's own `route_layer` (`put(handler).route_layer(layer)`) wraps only the handler, so a 405
//! is answered at once. [`KeyExtractor::only_methods`](crate::key::KeyExtractor::only_methods)
//! does the same for a whole router.
//!
//! ```
//! use axum::routing::put;
//! use axum::Router;
//! use tower_lock::{LockInfo, LockLayer, LockManager};
//!
//! async fn deposit(lock: LockInfo) -> String {
//!     format!("{} under token {}", lock.key(), lock.fencing_token())
//! }
//!
//! let manager = LockManager::memory();
//! let accounts = Router::new()
//!     .route("/accounts/{id}", put(deposit))
//!     .route_layer(LockLayer::new(manager, tower_lock::axum::route().required()));
//! let app: Router = Router::new().nest("/api", accounts);
//! ```

mod extract;
mod route;

pub use extract::NotLocked;
pub use route::{route, Route};
