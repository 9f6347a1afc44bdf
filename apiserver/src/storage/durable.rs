//! The redb backend: one table of JSON objects by key, and the last resourceVersion.

use std::collections::BTreeMap;
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;

use super::{Event, EventType};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const RV_KEY: &str = "resourceVersion";

/// Failures of the durable store.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// Creating the data directory failed.
    #[error("creating data dir: {0}")]
    Io(#[from] std::io::Error),
    /// redb failed.
    #[error("redb: {0}")]
    Redb(String),
    /// A stored object is not valid JSON.
    #[error("corrupt object {key}: {error}")]
    Corrupt {
        /// The key.
        key: String,
        /// The decode error.
        error: String,
    },
}

fn redb_err(e: impl std::fmt::Display) -> DurableError {
    DurableError::Redb(e.to_string())
}

/// An open redb database.
pub(super) struct Durable {
    db: Database,
}

/// The file in the data directory that holds every object.
pub const STORE_FILE: &str = "gantry.redb";

type Loaded = (Durable, BTreeMap<String, Value>, u64);

impl Durable {
    /// Opens (creating) `dir/`[`STORE_FILE`] and loads every object and the last RV.
    /// A new `dir` is created 0700 and the file is kept 0600: it holds Secrets.
    pub(super) fn open(dir: &Path) -> Result<Loaded, DurableError> {
        crate::private_file::create_dir(dir)?;
        let file = dir.join(STORE_FILE);
        crate::private_file::ensure(&file)?;
        let db = Database::create(file).map_err(redb_err)?;
        {
            let w = db.begin_write().map_err(redb_err)?;
            w.open_table(OBJECTS).map_err(redb_err)?;
            w.open_table(META).map_err(redb_err)?;
            w.commit().map_err(redb_err)?;
        }
        let mut objects = BTreeMap::new();
        let rv;
        {
            let r = db.begin_read().map_err(redb_err)?;
            let t = r.open_table(OBJECTS).map_err(redb_err)?;
            for item in t.iter().map_err(redb_err)? {
                let (k, v) = item.map_err(redb_err)?;
                let key = k.value().to_string();
                let obj: Value =
                    serde_json::from_slice(v.value()).map_err(|e| DurableError::Corrupt {
                        key: key.clone(),
                        error: e.to_string(),
                    })?;
                objects.insert(key, obj);
            }
            let m = r.open_table(META).map_err(redb_err)?;
            rv = m.get(RV_KEY).map_err(redb_err)?.map_or(0, |g| g.value());
        }
        Ok((Durable { db }, objects, rv))
    }

    /// Writes the events' effects and the new RV in one durable transaction.
    pub(super) fn write(&self, events: &[Event], rv: u64) -> Result<(), DurableError> {
        let w = self.db.begin_write().map_err(redb_err)?;
        {
            let mut t = w.open_table(OBJECTS).map_err(redb_err)?;
            for e in events {
                if e.kind == EventType::Deleted {
                    t.remove(e.key.as_str()).map_err(redb_err)?;
                } else {
                    let bytes = serde_json::to_vec(&*e.object).map_err(redb_err)?;
                    t.insert(e.key.as_str(), bytes.as_slice())
                        .map_err(redb_err)?;
                }
            }
            let mut m = w.open_table(META).map_err(redb_err)?;
            m.insert(RV_KEY, rv).map_err(redb_err)?;
        }
        w.commit().map_err(redb_err)?;
        Ok(())
    }
}
