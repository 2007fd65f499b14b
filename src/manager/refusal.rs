//! Why a lock cannot be had with the options asked for: a lock takes one family of modes at a
//! time, and a read hold never becomes a write hold.

use crate::options::Mode;

/// Why a request that holds a read asking to write is refused.
pub(super) const NO_UPGRADE: &str =
    "a write request of an owner that holds a read: a read hold does not \
     become a write hold (two readers doing so would wait for each other for ever)";

/// Why a request of `mode` was refused on a lock held or waited for in the mode `held`.
pub(super) fn mixed_modes(mode: Mode, held: Mode) -> String {
    if let (Mode::Semaphore(n), Mode::Semaphore(_)) = (mode, held) {
        return format!(
            "a semaphore({n}) request on a semaphore of another size: every request of one lock \
             names the same number of permits"
        );
    }
    format!(
        "{} request on a lock held or waited for in {} mode: one lock takes one family of \
         modes (exclusive and fair, read/write, semaphore)",
        with_article(mode.name()),
        family_name(held)
    )
}

/// `word` after "a" or "an", as it sounds: "an exclusive", "a fair".
fn with_article(word: &str) -> String {
    // a vowel letter that sounds as one ("a user" and "a one" do not)
    let vowel = word.starts_with(['a', 'e', 'i', 'o', 'u'])
        && !["use", "uni", "one"].iter().any(|p| word.starts_with(p));
    let article = if vowel { "an" } else { "a" };
    format!("{article} {word}")
}

/// The name of the family of `mode`, as errors give it.
fn family_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Exclusive | Mode::Fair => "exclusive and fair",
        Mode::Read | Mode::Write => "read/write",
        other => other.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::{mixed_modes, with_article};
    use crate::options::Mode;

    #[test]
    fn refusals_take_the_article_their_mode_sounds_with() {
        let exclusive = mixed_modes(Mode::Exclusive, Mode::Semaphore(2));
        assert!(
            exclusive.starts_with("an exclusive request "),
            "{exclusive}"
        );
        let read = mixed_modes(Mode::Read, Mode::Semaphore(2));
        assert!(read.starts_with("a read request "), "{read}");
        let semaphore = mixed_modes(Mode::Semaphore(2), Mode::Exclusive);
        assert!(semaphore.starts_with("a semaphore request "), "{semaphore}");
        assert_eq!(with_article("fair"), "a fair");
        assert_eq!(with_article("user"), "a user");
        assert_eq!(with_article("owner"), "an owner");
    }
}
