//! The receiver's spec-signing key (docs/protocol.md 2.9): 32 secret bytes kept as 64 hex
//! digits in a file readable by its owner only, created with fresh random bytes on first use.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The secret in `path`, or a new one written there if the file does not exist.
pub fn load_or_create(path: &Path) -> Result<[u8; 32], String> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(text.trim()).map_err(|e| format!("spec key {}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path),
        Err(e) => Err(format!("cannot read spec key {}: {e}", path.display())),
    }
}

fn parse(text: &str) -> Result<[u8; 32], String> {
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("expected 64 hex digits (an Ed25519 secret key)".into());
    }
    let mut key = [0u8; 32];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("checked hex");
    }
    Ok(key)
}

fn create(path: &Path) -> Result<[u8; 32], String> {
    // 32 secret bytes, then 8 that only name the temporary file.
    let mut fresh = [0u8; 40];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut fresh))
        .map_err(|e| format!("cannot read /dev/urandom for a new spec key: {e}"))?;
    let key: [u8; 32] = fresh[..32].try_into().expect("32 bytes");
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // Written whole under a private name, then linked into place: a daemon racing for the same
    // path never reads a half-written file, and the loser of the race takes the winner's key.
    // Unique per attempt, not just per process (never derived from the secret).
    let tmp = path.with_extension(format!("tmp.{}", crate::hex(&fresh[32..])));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        writeln!(f, "{}", crate::hex(&key))?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load_or_create(path),
        Err(e) => Err(format!("cannot create spec key {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_created_once_then_read_back_and_bad_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("concast-speckey-{}", std::process::id()));
        let path = dir.join("sub/r.key");
        let first = load_or_create(&path).unwrap();
        assert_eq!(load_or_create(&path).unwrap(), first);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(&path, "abc\n").unwrap();
        assert!(load_or_create(&path).unwrap_err().contains("64 hex digits"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn daemons_racing_for_one_path_all_get_the_same_key() {
        let dir = std::env::temp_dir().join(format!("concast-speckey-race-{}", std::process::id()));
        let path = dir.join("r.key");
        let keys: Vec<[u8; 32]> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8).map(|_| s.spawn(|| load_or_create(&path).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.iter().all(|k| *k == keys[0]), "one key for everyone");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
