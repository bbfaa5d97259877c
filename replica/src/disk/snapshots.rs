//! The replica's snapshot area (07 §7.5): the REP_Snapshots replay takes, written to disk, and
//! their audit against the certified state roots.
//!
//! Replay writes a snapshot at its participant's snapshot heights ([`crate::replay::SnapPolicy`]);
//! the node fills in `header_hash(h)` once the header is known and writes the file here:
//! `snap-<height>.pbsnap`, through a temporary file that is synced and renamed (then the
//! directory synced), so a crash leaves the old file or the new one, never a torn one. The
//! newest [`KEEP`] are kept.
//!
//! A snapshot is trusted through the certificate, not through its source (07 §7.5 "Loading"):
//! [`audit`] checks every section hash, rebuilds the engine and recomputes the state commitment
//! (`vyrn_engine::load::restore`), then compares it with the certified `R(h)` from the cert
//! journal. A file that fails any check is reported, never loaded.
//!
//! The node hands each file to its journal's writer thread (07 §7.2's storage core), so the
//! fsync never stalls order RX. Beside each file, `snap-<height>.tally`: the replay digest at
//! that moment (48 bytes, not certified: an operator's check that replicas replayed the same
//! answers), so a replica restarted from the file goes on with the same digest. A restart
//! loads the newest file the audit vouches for ([`SnapshotDir::read`], 07 §7.6).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use vyrn_engine::EngineConfig;
use vyrn_wire::header::Hash;

/// Snapshots kept in the area (the newest; older ones are deleted as a new one lands).
pub const KEEP: usize = 2;

/// The directory snapshots are written to.
#[derive(Debug, Clone)]
pub struct SnapshotDir {
    dir: PathBuf,
}

/// A snapshot file's name for height `h` (sorts by height).
pub fn file_name(h: u64) -> String {
    format!("snap-{h:020}.pbsnap")
}

/// The tally kept beside the snapshot of height `h` (the replay digest then, not certified).
pub fn tally_name(h: u64) -> String {
    format!("snap-{h:020}.tally")
}

fn height_of(name: &str) -> Option<u64> {
    name.strip_prefix("snap-")?
        .strip_suffix(".pbsnap")?
        .parse()
        .ok()
}

impl SnapshotDir {
    /// The area at `dir` (created if missing).
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(SnapshotDir {
            dir: dir.to_path_buf(),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Write the snapshot of height `h` with its `tally` (each synced, then renamed into
    /// place: the tally first, so a snapshot on disk always has its own), and delete all but
    /// the newest [`KEEP`]. Returns its path.
    pub fn write(&self, h: u64, file: &[u8], tally: &[u8]) -> std::io::Result<PathBuf> {
        if !tally.is_empty() {
            self.put(&tally_name(h), tally)?;
        }
        let path = self.put(&file_name(h), file)?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        for (old_h, old) in self.list()?.into_iter().skip(KEEP) {
            let _ = std::fs::remove_file(old);
            let _ = std::fs::remove_file(self.dir.join(tally_name(old_h)));
        }
        Ok(path)
    }

    fn put(&self, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// The snapshot of height `h` and its tally, read back (07 §7.6: the one catch-up loads;
    /// [`audit`] vouched for it). None for the tally when none was kept.
    pub fn read(&self, h: u64) -> std::io::Result<(Vec<u8>, Option<Vec<u8>>)> {
        let file = std::fs::read(self.dir.join(file_name(h)))?;
        let tally = match std::fs::read(self.dir.join(tally_name(h))) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok((file, tally))
    }

    /// The snapshots here, newest first.
    pub fn list(&self) -> std::io::Result<Vec<(u64, PathBuf)>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            if let Some(h) = e.file_name().to_str().and_then(height_of) {
                v.push((h, e.path()));
            }
        }
        v.sort_by_key(|e| std::cmp::Reverse(e.0));
        Ok(v)
    }
}

/// What [`audit`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SnapAudit {
    /// Heights whose snapshot verifies and whose state root is the certified `R(h)`, newest
    /// first: loadable.
    pub ok: Vec<u64>,
    /// Heights whose snapshot verifies but whose `R(h)` no certificate covers (yet).
    pub uncertified: Vec<u64>,
    /// Files refused, and why (a bad section, a commitment that does not recompute, a root
    /// that is not the certified one, a name that is not its height).
    pub bad: Vec<(PathBuf, String)>,
}

impl SnapAudit {
    /// What an operator reads: how many load, the newest, and each refused file with why.
    pub fn line(&self) -> String {
        format!(
            "{} verify against their root certificates{}, {} not yet certified, {} refused{}",
            self.ok.len(),
            self.ok
                .first()
                .map_or(String::new(), |h| format!(" (newest at height {h})")),
            self.uncertified.len(),
            self.bad.len(),
            self.bad
                .iter()
                .map(|(p, why)| format!("; {}: {why}", p.display()))
                .collect::<String>()
        )
    }
}

/// Check every snapshot in `dir` for `cfg` against the certified roots `certified` (height →
/// `R(h)`, from root certificates that verify).
pub fn audit(
    dir: &Path,
    cfg: &EngineConfig,
    certified: &BTreeMap<u64, Hash>,
) -> std::io::Result<SnapAudit> {
    let mut a = SnapAudit::default();
    if !dir.exists() {
        return Ok(a);
    }
    for (h, path) in SnapshotDir::open(dir)?.list()? {
        // One unreadable file is refused; the others are still checked.
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                a.bad.push((path, format!("unreadable: {e}")));
                continue;
            }
        };
        match vyrn_engine::load::restore(cfg.clone(), &bytes) {
            Err(e) => a.bad.push((path, format!("{e}"))),
            Ok((_, hdr)) if hdr.meta.height != h => a.bad.push((
                path,
                format!("holds height {}, not its name's", hdr.meta.height),
            )),
            Ok((_, hdr)) => match certified.get(&h) {
                Some(r) if *r == hdr.state_root => a.ok.push(h),
                Some(_) => a
                    .bad
                    .push((path, format!("state root is not the certified R({h})"))),
                None => a.uncertified.push(h),
            },
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> EngineConfig {
        EngineConfig::test_home(2, 2)
    }

    fn snap(h: u64) -> (Vec<u8>, Hash) {
        let e = vyrn_engine::ReplayEngine::new(engine());
        let meta = vyrn_engine::snapshot::SnapMeta {
            epoch: 1,
            height: h,
            header_hash: [0; 32],
        };
        let file = e.snapshot(&meta, &Default::default());
        (file, e.state_root())
    }

    /// Written atomically, the newest KEEP kept, listed newest first; the audit loads those
    /// whose root is certified, reports the uncertified, and refuses a flipped byte, a root
    /// that is not the certified one, and a file named for another height.
    #[test]
    fn the_area_keeps_the_newest_and_the_audit_trusts_only_certified_roots() {
        let tmp = std::env::temp_dir().join(format!("vyrn-snaps-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let d = SnapshotDir::open(&tmp).unwrap();
        let mut roots = BTreeMap::new();
        for h in [7u64, 39, 71] {
            let (f, r) = snap(h);
            d.write(h, &f, &h.to_le_bytes()).unwrap();
            roots.insert(h, r);
        }
        let l: Vec<u64> = d.list().unwrap().iter().map(|x| x.0).collect();
        assert_eq!(l, vec![71, 39], "the newest {KEEP}, newest first");
        // Each kept with its own tally; the dropped one's tally goes with it.
        assert_eq!(d.read(39).unwrap().1, Some(39u64.to_le_bytes().to_vec()));
        assert!(!d.dir.join(tally_name(7)).exists());
        let a = audit(&tmp, &engine(), &roots).unwrap();
        assert_eq!(a.ok, vec![71, 39]);
        assert!(a.bad.is_empty() && a.uncertified.is_empty(), "{a:?}");
        // Not certified yet.
        roots.remove(&39);
        assert_eq!(
            audit(&tmp, &engine(), &roots).unwrap().uncertified,
            vec![39]
        );
        // A root that is not the certified one.
        roots.insert(39, [9; 32]);
        let a = audit(&tmp, &engine(), &roots).unwrap();
        assert_eq!((a.ok.clone(), a.bad.len()), (vec![71], 1), "{a:?}");
        // A flipped byte in a section.
        let p = d.dir.join(file_name(71));
        let mut b = std::fs::read(&p).unwrap();
        let n = b.len();
        b[n - 1] ^= 1;
        std::fs::write(&p, &b).unwrap();
        // A file named for another height.
        let (f, r) = snap(103);
        std::fs::write(d.dir.join(file_name(135)), &f).unwrap();
        roots.insert(135, r);
        let a = audit(&tmp, &engine(), &roots).unwrap();
        assert!(a.ok.is_empty(), "{a:?}");
        assert_eq!(a.bad.len(), 3, "{a:?}");
        // An unreadable entry (here a directory under a snapshot's name) is refused on its own;
        // the rest are still checked.
        std::fs::create_dir(d.dir.join(file_name(200))).unwrap();
        let b = audit(&tmp, &engine(), &roots).unwrap();
        assert_eq!(b.bad.len(), a.bad.len() + 1, "{b:?}");
        assert!(b.bad[0].1.starts_with("unreadable"), "{b:?}");
        assert!(b.line().contains("4 refused"), "{}", b.line());
        std::fs::remove_dir(d.dir.join(file_name(200))).unwrap();
        // No temporary file is left behind.
        assert!(std::fs::read_dir(&tmp).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")));
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
