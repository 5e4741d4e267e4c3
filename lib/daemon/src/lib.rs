//! What the two concast daemons (routerd, hostd) do alike: structured log lines, reading the
//! `--config` file the control plane writes, binding their Unix sockets, stopping on signals;
//! and the link state file's format, which the link emulator writes and routerd reads
//! ([`linkstate`]), kept here so that neither depends on the other.

pub mod linkmtu;
pub mod linkstate;
pub mod log;
pub mod sys;
pub mod wait;

use std::io;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The JSON object of `--config FILE`, or `Null` without one; errors name the flag and file.
pub fn read_config(path: Option<&Path>) -> Result<serde_json::Value, String> {
    let Some(p) = path else { return Ok(serde_json::Value::Null) };
    let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read --config {}: {e}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("--config {} is not JSON: {e}", p.display()))
}

/// A non-blocking listener at `path`, replacing a socket a dead daemon left there (only ever
/// our own path) and creating its directory.
pub fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// SIGTERM and SIGINT ask the daemon to stop cleanly ([`stopping`]); SIGPIPE is ignored so a
/// client that hangs up cannot kill it.
pub fn stop_on_signals() {
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Whether a stop signal arrived.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_file() {
        assert_eq!(read_config(None), Ok(serde_json::Value::Null));
        let e = read_config(Some(Path::new("/nonexistent/r1.json"))).unwrap_err();
        assert!(e.contains("cannot read --config /nonexistent/r1.json"), "{e}");
    }
}
