//! `gantry bench load`: how long a plugin takes to load, compiled from its
//! bytes and precompiled (read from the on-disk compile cache, as when the
//! operator restarts or a binding goes back to a digest it ran before). A
//! load ends with the plugin ready to call: compiled code in memory, its
//! imports linked and its exports checked. The component's digest is
//! computed once, before the timed loads, as the operator computes it once
//! where the bytes arrive (their pin is checked against it).

use std::path::Path;

use super::{Measurement, measure};
use gantry_sandbox::runtime::{ComponentBytes, Runtime, RuntimeSettings};

/// How many loads to time.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Timed precompiled loads per plugin.
    pub loads: usize,
    /// Timed compiling loads per plugin (each takes a compiler's time).
    pub compiles: usize,
}

/// Per plugin, a compiling load then a precompiled one; `plugins` are
/// (name, component bytes) and `cache_dir` holds the compiled code between
/// loads. Fails if a precompiled load compiled after all.
pub fn run(
    plan: &LoadPlan,
    plugins: &[(String, Vec<u8>)],
    cache_dir: &Path,
) -> anyhow::Result<Vec<Measurement>> {
    // Without a disk cache, a load of a digest not in memory compiles.
    let compiling = Runtime::with_defaults()?;
    let precompiled = Runtime::new(RuntimeSettings {
        cache_dir: Some(cache_dir.to_path_buf()),
        ..RuntimeSettings::default()
    })?;
    let mut rows = Vec::new();
    for (name, bytes) in plugins {
        let component = ComponentBytes::new(bytes.clone());
        // A load that does not find the plugin in `runtime`'s memory.
        let reload = |runtime: &Runtime| -> anyhow::Result<()> {
            runtime.forget_compiled(component.digest());
            runtime.load_reconciler_from(name, &component)?;
            Ok(())
        };
        rows.push(measure(
            &format!("{name}: compile and load"),
            0,
            plan.compiles,
            || reload(&compiling),
        )?);
        // The first load compiles and writes the disk cache.
        precompiled.load_reconciler_from(name, &component)?;
        let compiles = precompiled.compiles();
        rows.push(measure(
            &format!("{name}: precompiled load"),
            1,
            plan.loads,
            || reload(&precompiled),
        )?);
        anyhow::ensure!(
            precompiled.compiles() == compiles,
            "a precompiled load of {name} compiled it again"
        );
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precompiled_loads_read_the_disk_cache() {
        let bytes = gantry_toolchain::example_plugin("memcached").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let plan = LoadPlan {
            loads: 3,
            compiles: 1,
        };
        let rows = run(&plan, &[("memcached".into(), bytes)], dir.path()).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["memcached: compile and load", "memcached: precompiled load"]
        );
        assert_eq!((rows[0].calls, rows[1].calls), (1, 3));
        // One entry: its compiled file and the file's stamp.
        let entries: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        let mut files: Vec<_> = std::fs::read_dir(&entries[0])
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        assert_eq!(files, ["component.cwasm", "stamp"]);
    }

    #[test]
    fn a_forgotten_component_loads_from_disk() {
        let bytes = gantry_toolchain::example_plugin("memcached").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let runtime = Runtime::new(RuntimeSettings {
            cache_dir: Some(dir.path().to_path_buf()),
            ..RuntimeSettings::default()
        })
        .unwrap();
        runtime.load_reconciler("m", &bytes).unwrap();
        runtime.load_reconciler("m", &bytes).unwrap();
        assert_eq!((runtime.compiles(), runtime.disk_cache_hits()), (1, 0));
        runtime.forget_compiled(&gantry_sandbox::runtime::digest(&bytes));
        runtime.load_reconciler("m", &bytes).unwrap();
        assert_eq!((runtime.compiles(), runtime.disk_cache_hits()), (1, 1));
    }
}
