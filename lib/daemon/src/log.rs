//! Structured log lines (logfmt: `ts=... level=... event=... key=value ...`) on stderr.

use std::fmt::Display;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Level {
    Info,
    Warn,
    Error,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// Quotes a value when logfmt needs it to stay one token.
fn value(v: &str) -> String {
    if !v.is_empty() && !v.contains([' ', '"', '=']) {
        v.to_string()
    } else {
        format!("{v:?}")
    }
}

pub fn line(level: Level, event: &str, fields: &[(&str, &dyn Display)]) -> String {
    let ts = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut s = format!("ts={}.{:06} level={} event={}", ts.as_secs(), ts.subsec_micros(), level.name(), event);
    for (k, v) in fields {
        s.push(' ');
        s.push_str(k);
        s.push('=');
        s.push_str(&value(&v.to_string()));
    }
    s
}

pub fn emit(level: Level, event: &str, fields: &[(&str, &dyn Display)]) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", line(level, event, fields));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_spaces_are_quoted() {
        let l = line(Level::Info, "flow_active", &[("flow", &"(10.0.9.9, 7)"), ("n", &3)]);
        assert!(l.contains("level=info event=flow_active flow=\"(10.0.9.9, 7)\" n=3"), "{l}");
    }
}
