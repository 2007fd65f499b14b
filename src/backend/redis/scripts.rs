//! The Lua scripts. Each state change is one script call: EVALSHA, reloaded on NOSCRIPT by
//! `redis::Script`. Each script is its body with the helpers of `common.lua` it uses: Redis runs a
//! script's top level on every call, re-creating each helper defined there, so a script carries
//! only the helpers it needs, each defined where its first user needs it. The pool loads them all
//! when it opens a connection, so that no hand-off or heartbeat pays a NOSCRIPT round trip.

use std::sync::LazyLock;

use redis::Script;

/// The helpers, one definition (with its comments) per paragraph: those of every lock, then those
/// of shared locks.
const HELPERS: &str = concat!(include_str!("common.lua"), "\n", include_str!("shared.lua"));

const ACQUIRE_BODY: &str = include_str!("acquire.lua");
const RELEASE_BODY: &str = include_str!("release.lua");
const RENEW_BODY: &str = include_str!("renew.lua");
const ABANDON_BODY: &str = include_str!("abandon.lua");
const FAIR_ACQUIRE_BODY: &str = include_str!("fair_acquire.lua");
const FAIR_ABANDON_BODY: &str = include_str!("fair_abandon.lua");
const HEARTBEAT_BODY: &str = include_str!("heartbeat.lua");
const SHARED_ACQUIRE_BODY: &str = include_str!("shared_acquire.lua");
const SHARED_RELEASE_BODY: &str = include_str!("shared_release.lua");
const SHARED_ABANDON_BODY: &str = include_str!("shared_abandon.lua");
const PLAIN_RELEASE_BODY: &str = include_str!("plain_release.lua");
const GRANT_ON_BODY: &str = include_str!("grant_on.lua");
const INSPECT_BODY: &str = include_str!("inspect.lua");
const FORCE_RELEASE_BODY: &str = include_str!("force_release.lua");
const TAKEOVER_BODY: &str = include_str!("takeover.lua");

/// Whether `text` uses the identifier `name` (not as part of a longer identifier).
fn uses(text: &str, name: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The name a helper paragraph defines (`local function name(` or `local NAME =`), if any.
fn defined_name(paragraph: &str) -> Option<&str> {
    paragraph.lines().find_map(|line| {
        let rest = line.strip_prefix("local function ").or_else(|| {
            line.strip_prefix("local ")
                .filter(|rest| rest.contains(" = "))
        })?;
        let end = rest.find(['(', ' '])?;
        Some(&rest[..end])
    })
}

/// `body` with the helpers it uses, directly or through other helpers, each defined just before
/// the first top-level statement of `body` that needs it, in their order in `common.lua` (a
/// helper only uses those defined before it). A script that returns early (a free lock, a
/// release nobody waits for) then never creates the helpers of its other paths.
pub(crate) fn assemble(body: &str) -> String {
    let helpers: Vec<(&str, &str)> = HELPERS
        .split("\n\n")
        .filter_map(|paragraph| Some((defined_name(paragraph)?, paragraph)))
        .collect();
    let mut defined = vec![false; helpers.len()];
    let mut source = String::new();
    for statement in top_level_statements(body) {
        let needed = needed_helpers(&helpers, statement);
        for (i, (_, text)) in helpers.iter().enumerate() {
            if needed[i] && !defined[i] {
                defined[i] = true;
                if !source.is_empty() && !source.ends_with("\n\n") {
                    source.push('\n');
                }
                source.push_str(text.trim_end());
                source.push_str("\n\n");
            }
        }
        source.push_str(statement);
    }
    source
}

/// Which of `helpers` `text` uses, directly or through other helpers.
fn needed_helpers(helpers: &[(&str, &str)], text: &str) -> Vec<bool> {
    let mut needed = vec![false; helpers.len()];
    // Later helpers only use earlier ones: one pass from the last to the first finds them all.
    for i in (0..helpers.len()).rev() {
        let (name, _) = helpers[i];
        needed[i] = uses(text, name)
            || helpers
                .iter()
                .zip(&needed)
                .skip(i + 1)
                .any(|((_, helper), &used)| used && uses(helper, name));
    }
    needed
}

/// `body` cut before each top-level statement (a line that starts in the first column, but not a
/// comment, nor `end`, `else` or `elseif` of a block), with the comment lines above a statement
/// kept with it. The pieces joined are `body`.
fn top_level_statements(body: &str) -> Vec<&str> {
    let continues = ["--", "end", "else", "elseif", "until", ")", "}"];
    let mut cuts = vec![0];
    let mut comment_start = None;
    let mut at = 0;
    for line in body.split_inclusive('\n') {
        let starts_statement = line.starts_with(|c: char| c.is_ascii_alphabetic())
            && !continues.iter().any(|word| line.starts_with(word));
        if line.starts_with("--") {
            comment_start.get_or_insert(at);
        } else if starts_statement {
            cuts.push(comment_start.unwrap_or(at));
            comment_start = None;
        } else if !line.trim().is_empty() {
            comment_start = None;
        }
        at += line.len();
    }
    cuts.push(body.len());
    cuts.dedup();
    cuts.windows(2).map(|w| &body[w[0]..w[1]]).collect()
}

/// The scripts of one backend, each a body and the helpers it uses.
pub(crate) struct Scripts {
    /// Take an exclusive lock or record the waiting manager.
    pub(crate) acquire: Script,
    /// Release one hold of an exclusive or fair lock; when it frees, grant it to the next fair
    /// waiter, or else tell one waiting manager.
    pub(crate) release: Script,
    /// Renew a batch of leases.
    pub(crate) renew: Script,
    /// Forget a waiting manager and pass an unused wake-up on.
    pub(crate) abandon: Script,
    /// Take a fair lock or join its queue.
    pub(crate) fair_acquire: Script,
    /// Leave a fair queue; pass on a grant that raced with leaving.
    pub(crate) fair_abandon: Script,
    /// Renew the heartbeats of a batch of queued waiters.
    pub(crate) heartbeat: Script,
    /// Take a hold of a shared lock (read, write, permit) or join its queue.
    pub(crate) shared_acquire: Script,
    /// Release one hold of a shared lock; grant the room it leaves to the next waiters.
    pub(crate) shared_release: Script,
    /// Leave a shared lock's queue; drop a grant that raced with leaving; grant what room there is.
    pub(crate) shared_abandon: Script,
    /// Release a plain lock by its value; when it frees, grant it as `release` does.
    pub(crate) plain_release: Script,
    /// Carry on a grant that stopped at its bound with waiters left.
    pub(crate) grant_on: Script,
    /// Read one lock's whole state, changing nothing.
    pub(crate) inspect: Script,
    /// End every hold of a lock and pass it on, moving its fencing counter past them all.
    pub(crate) force_release: Script,
    /// Probe the holders of many locks for death; end the holds dead for their grace.
    pub(crate) takeover: Script,
    /// Every source, for loading them up front.
    pub(crate) sources: Vec<String>,
    /// Whether a call declares every key of a lock its script touches (see
    /// [`super::ScriptCall::on_lock`]): on a cluster.
    pub(crate) declare_keys: bool,
}

impl Scripts {
    /// The scripts, each assembled and then passed through `adapt`; `declare_keys`: see
    /// [`Scripts::declare_keys`].
    fn new(adapt: fn(String) -> String, declare_keys: bool) -> Self {
        let bodies = [
            ACQUIRE_BODY,
            RELEASE_BODY,
            RENEW_BODY,
            ABANDON_BODY,
            FAIR_ACQUIRE_BODY,
            FAIR_ABANDON_BODY,
            HEARTBEAT_BODY,
            SHARED_ACQUIRE_BODY,
            SHARED_RELEASE_BODY,
            SHARED_ABANDON_BODY,
            PLAIN_RELEASE_BODY,
            GRANT_ON_BODY,
            INSPECT_BODY,
            FORCE_RELEASE_BODY,
            TAKEOVER_BODY,
        ];
        let sources: Vec<String> = bodies.map(|body| adapt(assemble(body))).into();
        let script = |i: usize| Script::new(&sources[i]);
        Scripts {
            acquire: script(0),
            release: script(1),
            renew: script(2),
            abandon: script(3),
            fair_acquire: script(4),
            fair_abandon: script(5),
            heartbeat: script(6),
            shared_acquire: script(7),
            shared_release: script(8),
            shared_abandon: script(9),
            plain_release: script(10),
            grant_on: script(11),
            inspect: script(12),
            force_release: script(13),
            takeover: script(14),
            sources,
            declare_keys,
        }
    }
}

impl std::fmt::Debug for Scripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripts").finish_non_exhaustive()
    }
}

/// The scripts of a standalone server (or a Sentinel-monitored master): messages go out with
/// `PUBLISH`.
pub(crate) static STANDALONE: LazyLock<Scripts> =
    LazyLock::new(|| Scripts::new(|source| source, false));

/// The scripts of a Redis Cluster: messages go out with `SPUBLISH` (sharded pub/sub), to a
/// channel in the slot of the lock, so that they stay on the shard that owns it instead of
/// being broadcast to every node; whether a manager listens is asked the same way. Calls declare
/// every key of a lock they touch.
#[cfg(feature = "cluster")]
pub(crate) static SHARDED: LazyLock<Scripts> = LazyLock::new(|| {
    Scripts::new(
        |source| (source.replace("'PUBLISH'", "'SPUBLISH'")).replace("'NUMSUB'", "'SHARDNUMSUB'"),
        true,
    )
});

#[cfg(test)]
mod tests {
    use super::*;

    /// The helpers a script was assembled with, in order.
    fn helpers_of(body: &str) -> Vec<String> {
        let helpers: Vec<&str> = HELPERS.split("\n\n").filter_map(defined_name).collect();
        assemble(body)
            .split("\n\n")
            .filter_map(defined_name)
            .filter(|name| helpers.contains(name))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_helper_paragraph_defines_one_name() {
        let names: Vec<&str> = HELPERS.split("\n\n").filter_map(defined_name).collect();
        for name in [
            "now_us",
            "int",
            "take",
            "grant_next",
            "MAX_LOOKED",
            "MAX_GRANTED",
            "listens",
            "drop_hold",
            "grant_shared",
            "purge",
        ] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        // Only the file's header paragraph defines nothing.
        assert_eq!(HELPERS.split("\n\n").count(), names.len() + 1);
    }

    #[test]
    fn a_script_carries_the_helpers_it_uses_and_theirs_only() {
        assert_eq!(
            helpers_of(RELEASE_BODY),
            [
                "now_us",
                "int",
                "TOKEN_BLOCK",
                "retire_block",
                "next_token",
                "granted_meta",
                "take",
                "manager_of",
                "listens",
                "heartbeat_key",
                "owner_of",
                "MAX_LOOKED",
                "grant_next",
                "notify_next"
            ],
            "the release, through grant_next, then notify_next where nobody was granted the lock"
        );
        assert!(helpers_of(ACQUIRE_BODY).contains(&"now_us".to_owned()));
        assert!(!helpers_of(ACQUIRE_BODY).contains(&"grant_next".to_owned()));
    }

    #[test]
    #[cfg(feature = "cluster")]
    fn a_cluster_publishes_on_the_shard_of_the_lock_only() {
        for source in &SHARDED.sources {
            assert!(!source.contains("'PUBLISH'"), "{source}");
            assert!(!source.contains("'NUMSUB'"), "{source}");
        }
        let released = &SHARDED.sources[1];
        assert!(released.contains("redis.call('SPUBLISH'"), "{released}");
        assert!(STANDALONE.sources[1].contains("redis.call('PUBLISH'"));
    }

    #[test]
    fn a_helper_is_defined_where_its_first_user_needs_it() {
        let release = assemble(RELEASE_BODY);
        let freed = release
            .find("redis.call('DEL', lock)")
            .expect("the release deletes");
        let first_helper = release.find("local function").expect("helpers");
        assert!(freed < first_helper, "{release}");
        // the pieces of a body are the body, each starting at a statement or its comments
        let statements = top_level_statements(RELEASE_BODY);
        assert_eq!(statements.concat(), RELEASE_BODY);
        assert!(statements[0].starts_with("-- Release one hold"));
        assert!(statements.iter().skip(1).all(|s| !s.starts_with("end")));
        assert!(
            statements
                .iter()
                .any(|s| s.starts_with("-- holds are whole numbers") && s.contains("if holds ~=")),
            "a comment goes with the statement below it: {statements:?}"
        );
    }

    #[test]
    fn a_plain_release_nobody_waits_for_defines_no_helper() {
        let release = assemble(PLAIN_RELEASE_BODY);
        let nobody_waits = release.find("return 0\nend").expect("the early return");
        let first_helper = release.find("local function").expect("helpers");
        assert!(nobody_waits < first_helper, "{release}");
        assert!(helpers_of(PLAIN_RELEASE_BODY).contains(&"grant_next".to_owned()));
    }

    #[test]
    fn identifiers_match_whole_words_only() {
        assert!(uses("local x = take(a)", "take"));
        assert!(!uses("local x = retake(a)", "take"));
        assert!(!uses("local take_all = 1", "take"));
        assert!(uses("for _ = 1, MAX_LOOKED do", "MAX_LOOKED"));
    }
}
