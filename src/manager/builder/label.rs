//! The label a manager gives its process in lock states: what an operator reads to find the
//! replica that holds a lock.

use std::sync::Arc;

use super::LockManagerBuilder;
use crate::state::clean_label;

impl LockManagerBuilder {
    /// Name this process in the lock states other processes read ([`LockManager::inspect`]).
    ///
    /// The default is the host name and the process id (`web-7f9c:4121`). A deployment that
    /// names its replicas otherwise (a pod name, a region) sets it here. Tabs, line breaks and
    /// `|` become spaces, and it is cut at 200 bytes: it travels with every acquisition.
    ///
    /// [`LockManager::inspect`]: crate::LockManager::inspect
    pub fn label(mut self, label: impl AsRef<str>) -> Self {
        self.label = Some(clean_label(label.as_ref()));
        self
    }
}

/// This process's default label: its host name and process id.
pub(crate) fn default_label() -> Arc<str> {
    clean_label(&format!("{}:{}", host_name(), std::process::id()))
}

/// The host name, as the kernel or the environment tells it; `localhost` when neither does.
fn host_name() -> String {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let from_env = || std::env::var("HOSTNAME").or_else(|_| std::env::var("COMPUTERNAME"));
    from_kernel
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| from_env().ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_keeps_no_separator_and_stays_short() {
        assert_eq!(&*clean_label("a\tb|c\nd"), "a b c d");
        let long = "é".repeat(150);
        assert!(clean_label(&long).len() <= crate::state::MAX_LABEL);
        let label = default_label();
        assert!(
            label.ends_with(&format!(":{}", std::process::id())),
            "{label}"
        );
    }
}
