//! The terminal of `watch`: the alternate screen in raw mode, redrawn in place, and the keys
//! read on a thread of their own.
//!
//! Raw mode is what lets `q` quit without Enter; it also turns Ctrl-C into a key, which is read
//! as "quit". [`Screen`] puts the terminal back as it was when dropped, on every way out.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, queue, style, terminal};
use tokio::sync::mpsc;

/// How often the key thread looks whether it should stop.
const KEY_POLL: Duration = Duration::from_millis(100);

/// What a key (or the terminal) asks of `watch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Leave: `q`, Esc, Ctrl-C or Ctrl-D.
    Quit,
    /// The terminal changed size: draw again.
    Redraw,
}

/// The terminal in raw mode on its alternate screen, with the key thread running.
pub struct Screen {
    stop: Arc<AtomicBool>,
    keys: Option<JoinHandle<()>>,
}

impl Screen {
    /// Take the terminal over; the inputs arrive on the receiver.
    pub fn enter() -> io::Result<(Screen, mpsc::UnboundedReceiver<Input>)> {
        terminal::enable_raw_mode()?;
        let mut screen = Screen {
            stop: Arc::new(AtomicBool::new(false)),
            keys: None,
        };
        let mut out = io::stdout();
        queue!(out, terminal::EnterAlternateScreen, cursor::Hide)?;
        out.flush()?;
        let (send, inputs) = mpsc::unbounded_channel();
        let stop = screen.stop.clone();
        screen.keys = Some(std::thread::spawn(move || read_keys(&stop, &send)));
        Ok((screen, inputs))
    }

    /// Show `lines` from the top, each cut to the width; the last rows say how many did not fit.
    pub fn draw(&mut self, lines: &[String]) -> io::Result<()> {
        let (columns, rows) = terminal::size().unwrap_or((80, 24));
        let (columns, rows) = (usize::from(columns.max(1)), usize::from(rows.max(1)));
        let mut out = io::stdout().lock();
        queue!(out, cursor::MoveTo(0, 0))?;
        let fits = if lines.len() > rows {
            rows - 1
        } else {
            lines.len()
        };
        for (i, line) in lines.iter().take(fits).enumerate() {
            if i > 0 {
                queue!(out, cursor::MoveToNextLine(1))?;
            }
            let cut: String = line.chars().take(columns).collect();
            queue!(
                out,
                style::Print(cut),
                terminal::Clear(terminal::ClearType::UntilNewLine)
            )?;
        }
        if fits < lines.len() {
            let more = format!(
                "… {} more lines: a longer terminal shows them",
                lines.len() - fits
            );
            let cut: String = more.chars().take(columns).collect();
            queue!(out, cursor::MoveToNextLine(1), style::Print(cut))?;
        }
        queue!(out, terminal::Clear(terminal::ClearType::FromCursorDown))?;
        out.flush()
    }
}

impl Drop for Screen {
    /// Stop the key thread, then give the terminal back: main screen, cursor, cooked mode.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(keys) = self.keys.take() {
            let _ = keys.join();
        }
        let mut out = io::stdout();
        let _ = queue!(out, cursor::Show, terminal::LeaveAlternateScreen);
        let _ = out.flush();
        let _ = terminal::disable_raw_mode();
    }
}

/// Read keys until `stop` is set or the receiver is gone; a failing terminal counts as quit.
fn read_keys(stop: &AtomicBool, send: &mpsc::UnboundedSender<Input>) {
    while !stop.load(Ordering::Relaxed) {
        let input = match event::poll(KEY_POLL) {
            Ok(false) => continue,
            Ok(true) => match event::read() {
                Ok(Event::Key(key)) => key_input(key),
                Ok(Event::Resize(..)) => Some(Input::Redraw),
                Ok(_) => None,
                Err(_) => Some(Input::Quit),
            },
            Err(_) => Some(Input::Quit),
        };
        if let Some(input) = input {
            if send.send(input).is_err() || input == Input::Quit {
                return;
            }
        }
    }
}

/// What `key` asks for, if anything.
fn key_input(key: KeyEvent) -> Option<Input> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let control = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Char('q' | 'Q') | KeyCode::Esc => Some(Input::Quit),
        KeyCode::Char('c' | 'd') if control => Some(Input::Quit),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_escape_and_control_c_quit_other_keys_do_not() {
        let key = |code, modifiers| key_input(KeyEvent::new(code, modifiers));
        assert_eq!(
            key(KeyCode::Char('q'), KeyModifiers::NONE),
            Some(Input::Quit)
        );
        assert_eq!(key(KeyCode::Esc, KeyModifiers::NONE), Some(Input::Quit));
        assert_eq!(
            key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Input::Quit)
        );
        assert_eq!(key(KeyCode::Char('c'), KeyModifiers::NONE), None);
        assert_eq!(key(KeyCode::Enter, KeyModifiers::NONE), None);
    }
}
