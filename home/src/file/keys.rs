//! Key files (missing-chapters §5): hex, one line, mode 0600, read only when private and written
//! atomically.

use super::*;

pub(super) fn hex_bytes<const N: usize>(t: &str) -> Option<[u8; N]> {
    if t.len() != 2 * N || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut k = [0u8; N];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(k)
}

/// Read a hex key file of exactly `N` bytes. The text read is wiped before returning; the
/// returned array is the caller's to wipe (see [`read_seed`]). Every role reads its keys here,
/// so every role refuses a key file that group or others can read or write (missing-chapters
/// §5: key files 0600; security review F14 — only the sequencer checked before).
pub fn read_key<const N: usize>(path: &Path) -> Result<[u8; N], String> {
    if let Some(m) = mode(path) {
        if m & 0o077 != 0 {
            return Err(format!(
                "{} is mode {:o}: keys must be 0600 (chmod 600)",
                path.display(),
                m & 0o777
            ));
        }
    }
    let mut text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let k = hex_bytes::<N>(text.trim());
    text.zeroize();
    k.ok_or_else(|| {
        format!(
            "{}: expected {} hex digits ({} bytes)",
            path.display(),
            2 * N,
            N
        )
    })
}

/// Read a 32-byte hex key file into a [`Seed32`] (no other copy survives).
pub fn read_seed(path: &Path) -> Result<Seed32, String> {
    let mut k = read_key::<32>(path)?;
    Ok(Seed32::from_mut(&mut k))
}
#[cfg(unix)]
pub(super) fn mode(p: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).ok().map(|m| m.permissions().mode())
}

#[cfg(not(unix))]
pub(super) fn mode(_: &Path) -> Option<u32> {
    None
}

/// Write a secret file atomically and private (missing-chapters §5): created mode 0600 under a
/// fresh temporary name in the same folder (`create_new`: never an existing file or a link),
/// written, synced, renamed over `path`, and the folder synced. No moment exists at which the
/// secret is readable by others or `path` holds a partial file; a link planted at `path` is
/// replaced, never followed.
pub fn write_secret_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "a key file needs a name")
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let done = opts.open(&tmp).and_then(|mut f| {
        let r = f
            .write_all(bytes)
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    });
    done?;
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}
