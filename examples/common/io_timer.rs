//! A precise timer for the examples' holds.

#[cfg(target_os = "linux")]
use std::os::fd::OwnedFd;
use std::time::Duration;

#[cfg(target_os = "linux")]
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
#[cfg(target_os = "linux")]
use tokio::io::unix::AsyncFd;

/// A timer that wakes its task through tokio's I/O driver (a Linux timerfd), so a hold ends
/// the way a handler's wait for a database reply does: the process idles, then an I/O event
/// wakes the worker that polls the task. It keeps microsecond precision where tokio's timer
/// rounds up to its millisecond tick.
#[cfg(target_os = "linux")]
pub struct IoTimer(AsyncFd<OwnedFd>);

#[cfg(target_os = "linux")]
impl IoTimer {
    /// A timer registered with the current runtime's I/O driver.
    pub fn new() -> std::io::Result<Self> {
        let flags = TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC;
        let fd = timerfd_create(TimerfdClockId::Monotonic, flags)?;
        // SAFETY: an `OwnedFd` is an open descriptor that it alone closes, and its `as_raw_fd`
        // always returns that one descriptor: the contract `register` asks for.
        let registered = unsafe { AsyncFd::register(fd) };
        Ok(Self(registered.map_err(std::io::Error::from)?))
    }

    /// Waits `duration`, idle, to the microsecond.
    pub async fn sleep(&self, duration: Duration) -> std::io::Result<()> {
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let spec = Itimerspec {
            it_interval: zero,
            it_value: Timespec::try_from(duration).map_err(std::io::Error::other)?,
        };
        timerfd_settime(self.0.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
        loop {
            let mut ready = self.0.readable().await?;
            // The timer's expiry count; reading it re-arms readiness for the next sleep.
            match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut [0u8; 8])?)) {
                Ok(read) => return read.map(drop),
                Err(_would_block) => continue,
            }
        }
    }
}

/// Elsewhere, tokio's timer (rounded up to its millisecond tick).
#[cfg(not(target_os = "linux"))]
pub struct IoTimer;

#[cfg(not(target_os = "linux"))]
impl IoTimer {
    /// A timer; it cannot fail here.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self)
    }

    /// Waits at least `duration`.
    pub async fn sleep(&self, duration: Duration) -> std::io::Result<()> {
        tokio::time::sleep(duration).await;
        Ok(())
    }
}
