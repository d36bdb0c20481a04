//! What the BPF loader crates share at run time (README.md): the error type, bpffs, and the check
//! before reusing another object's pinned map.

use std::fmt;
use std::path::Path;

/// What went wrong, in words a user can act on.
#[derive(Debug)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Mounts bpffs at /sys/fs/bpf if nothing is mounted there (a container may not have it).
pub fn ensure_bpffs() -> Result<(), Error> {
    const BPF_FS_MAGIC: i64 = 0xcafe4a11;
    let dir = c"/sys/fs/bpf";
    // SAFETY: a zeroed statfs is a valid out-parameter; the path is a C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(dir.as_ptr(), &mut st) } == 0 && st.f_type as i64 == BPF_FS_MAGIC {
        return Ok(());
    }
    let _ = std::fs::create_dir_all("/sys/fs/bpf");
    // SAFETY: constant C strings; no data argument.
    let rc = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            dir.as_ptr(),
            c"bpf".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(Error(format!(
            "no BPF filesystem at /sys/fs/bpf and mounting one failed: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Makes `map` (not loaded yet) the map pinned at `path`, if that one has the same name, type,
/// key and value size and capacity: `reuse_fd` takes any map, and one of another shape would be
/// read with the wrong layout; and it renames this map after the kernel's, while a skeleton finds
/// its maps by name. `remedy` says what to do about a map of another build (which command reloads
/// its owner), for the error. Returns the pinned map's handle.
pub fn reuse_pinned(
    map: &mut libbpf_rs::OpenMapMut<'_>,
    path: &Path,
    remedy: &str,
) -> Result<libbpf_rs::MapHandle, Error> {
    use libbpf_rs::MapCore;
    use std::os::fd::AsFd;
    let m = libbpf_rs::MapHandle::from_pinned_path(path)
        .map_err(|e| Error(format!("opening {}: {e:#}", path.display())))?;
    if m.name() != map.name()
        || m.map_type() != map.map_type()
        || m.key_size() != map.key_size()
        || m.value_size() != map.value_size()
        || m.max_entries() != map.max_entries()
    {
        return Err(Error(format!(
            "{} is not the map this build makes (pinned by another build? {remedy})",
            path.display()
        )));
    }
    map.reuse_fd(m.as_fd())
        .map_err(|e| Error(format!("sharing {}: {e:#}", path.display())))?;
    Ok(m)
}
