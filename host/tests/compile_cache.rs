//! The on-disk cache of compiled plugins runs only what it wrote: an entry
//! truncated, altered, replaced or unstamped is discarded and the plugin
//! compiled again, and the plugin then answers as its native build does.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use gantry::runtime::{ComponentBytes, Limits, Runtime, RuntimeSettings};
use gantry::toolchain::example_plugin;
use gantry_sdk::{Reconciler, Request, json};

fn runtime(dir: &Path) -> Runtime {
    Runtime::new(RuntimeSettings {
        cache_dir: Some(dir.to_path_buf()),
        ..RuntimeSettings::default()
    })
    .unwrap()
}

fn memcached() -> ComponentBytes {
    ComponentBytes::new(example_plugin("memcached").unwrap())
}

/// The one entry's compiled file and its stamp.
fn entry(dir: &Path) -> (PathBuf, PathBuf) {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    (entries[0].join("component.cwasm"), entries[0].join("stamp"))
}

/// Load memcached from `dir` in a fresh runtime (as after a restart) and
/// call it: (compiled, read from disk). The answer must be the native one.
fn load_and_call(dir: &Path, component: &ComponentBytes) -> (u64, u64) {
    let rt = runtime(dir);
    let plugin = rt.load_reconciler_from("memcached", component).unwrap();
    let request = Request::for_parent(json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": "default", "uid": "u1"},
        "spec": {"size": 2}
    }));
    let answer = plugin
        .reconcile_blocking(&request, &Limits::default())
        .unwrap();
    assert_eq!(answer, memcached::Memcached::reconcile(request).unwrap());
    (rt.compiles(), rt.disk_cache_hits())
}

/// Open a read-only (0400) file for writing, as its owner could after a
/// `chmod u+w` (root needs no chmod, and the tests may run as root).
fn open_for_writing(path: &Path) -> File {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    OpenOptions::new().write(true).open(path).unwrap()
}

#[test]
fn entries_are_private_and_reused_across_runtimes() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("compiled");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let component = memcached();
    assert_eq!(load_and_call(&dir, &component), (1, 0));
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    let (code, _) = entry(&dir);
    assert_eq!(
        std::fs::metadata(code.parent().unwrap()).unwrap().mode() & 0o777,
        0o700
    );
    assert_eq!(std::fs::metadata(&code).unwrap().mode() & 0o777, 0o400);
    assert_eq!(load_and_call(&dir, &component), (0, 1));
}

#[test]
fn a_truncated_entry_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    let component = memcached();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    let (code, _) = entry(dir.path());
    let len = std::fs::metadata(&code).unwrap().len();
    open_for_writing(&code).set_len(len / 2).unwrap();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    // The entry written again is whole, and used.
    assert_eq!(std::fs::metadata(&code).unwrap().len(), len);
    assert_eq!(load_and_call(dir.path(), &component), (0, 1));
}

#[test]
fn an_entry_with_flipped_bytes_is_compiled_again_even_with_its_old_mtime() {
    let dir = tempfile::tempdir().unwrap();
    let component = memcached();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    let (code, _) = entry(dir.path());
    let before = std::fs::metadata(&code).unwrap();
    let original = std::fs::read(&code).unwrap();
    // Flip bytes in the middle of the file (the code) and at its end (the
    // metadata wasmtime reads first), keep the size, and put the
    // modification time back: only the change time tells.
    let mut file = open_for_writing(&code);
    for offset in [original.len() / 2, original.len() - 64] {
        let flipped: Vec<u8> = original[offset..offset + 32].iter().map(|b| !b).collect();
        file.seek(SeekFrom::Start(offset as u64)).unwrap();
        file.write_all(&flipped).unwrap();
    }
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    std::fs::set_permissions(&code, std::fs::Permissions::from_mode(0o400)).unwrap();
    let after = std::fs::metadata(&code).unwrap();
    assert_eq!(
        (after.len(), after.ino(), after.modified().unwrap()),
        (before.len(), before.ino(), before.modified().unwrap())
    );
    assert_ne!(std::fs::read(&code).unwrap(), original);

    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    assert_eq!(std::fs::read(&code).unwrap().len(), original.len());
    assert_eq!(load_and_call(dir.path(), &component), (0, 1));
}

#[test]
fn an_entry_replaced_by_a_copy_or_without_its_stamp_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    let component = memcached();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    let (code, stamp) = entry(dir.path());
    // The same bytes, another file: not the one that was stamped.
    let copy = code.with_extension("copy");
    std::fs::copy(&code, &copy).unwrap();
    std::fs::rename(&copy, &code).unwrap();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    std::fs::remove_file(&stamp).unwrap();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    std::fs::write(&stamp, "not a stamp\n").unwrap();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    assert_eq!(load_and_call(dir.path(), &component), (0, 1));
}

/// Beyond the stamp: a truncated file whose stamp was forged to match (what
/// only the operator's own user could do) is refused by wasmtime's checks
/// when it is mapped, not run or crashed on.
#[test]
fn a_truncated_entry_with_a_forged_stamp_is_refused_not_crashed_on() {
    let dir = tempfile::tempdir().unwrap();
    let component = memcached();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    let (code, stamp) = entry(dir.path());
    let len = std::fs::metadata(&code).unwrap().len();
    open_for_writing(&code).set_len(len / 2).unwrap();
    std::fs::set_permissions(&code, std::fs::Permissions::from_mode(0o400)).unwrap();
    let meta = std::fs::metadata(&code).unwrap();
    std::fs::write(
        &stamp,
        format!(
            "gantry-compiled-stamp v1 dev={} ino={} size={} ctime={}.{:09}\n",
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.ctime(),
            meta.ctime_nsec()
        ),
    )
    .unwrap();
    assert_eq!(load_and_call(dir.path(), &component), (1, 0));
    assert_eq!(load_and_call(dir.path(), &component), (0, 1));
}
