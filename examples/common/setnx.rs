//! The lock a handler would take by hand, as the benchmarks' baseline: `SET lock token NX PX
//! 30000` with a random token, then a script that deletes the lock if it still holds the token.

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

/// The compare-and-delete release (load it once: making a `Script` hashes its source).
pub fn release_script() -> Script {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
}

/// Take `lock` and release it at once; panics if it was busy (the benchmarks keep it free).
pub async fn cycle(
    conn: &mut MultiplexedConnection,
    release: &Script,
    lock: &str,
) -> RedisResult<()> {
    let token = uuid::Uuid::new_v4().to_string();
    let set: Option<String> = redis::cmd("SET")
        .arg(lock)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(conn)
        .await?;
    let deleted: i64 = release.key(lock).arg(&token).invoke_async(conn).await?;
    assert!(
        set.is_some() && deleted == 1,
        "the hand-rolled lock was busy"
    );
    Ok(())
}
