//! `/ready`: the readiness probe of an axum service, answered by `LockManager::ping`.

use axum::http::StatusCode;
use axum::routing::{get, MethodRouter};
use tower_lock::LockManager;

/// `GET /ready`: 200 while a lock can be taken, else 503 with the reason (a load balancer or
/// Kubernetes then sends the requests to the replicas that can serve them).
pub fn ready<S: Clone + Send + Sync + 'static>(manager: LockManager) -> MethodRouter<S> {
    get(move || {
        let manager = manager.clone();
        async move {
            match manager.ping().await {
                Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
                Err(err) => (StatusCode::SERVICE_UNAVAILABLE, format!("{err}\n")),
            }
        }
    })
}
