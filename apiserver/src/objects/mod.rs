//! What every write does to an object before it is stored: type checks, schema
//! admission (pruning, defaulting, validation), metadata rules, managedFields.

pub mod admission;
pub mod defaults;
pub mod events;
pub mod field_manager_name;
pub mod fieldmanager;
pub mod initial_status;
pub mod lifecycle;
pub mod meta;
pub mod qos;
pub mod quantity;
pub mod validation;
