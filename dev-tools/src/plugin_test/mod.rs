//! `gantry plugin test`: declarative cases for a plugin, in any language.
//!
//! A case is one YAML file (a project's `tests/*.yaml`): what the plugin is
//! given (a parent, observed children, related objects, config) and what it
//! should answer (children, status, conditions, events, requeue,
//! `finalized`, or an error). Read top-down:
//!
//! - [`case`]: the file format, checked strictly, and the request a case
//!   makes;
//! - [`answer`]: the plugin's answer in the shape a case expects it;
//! - [`matching`]: partial matching of the expectation against the answer
//!   (only what the case names is compared), and the projection of the
//!   answer onto the expectation's shape;
//! - [`update`]: rewriting a case file's `expect` from an answer
//!   (`--update`), leaving the rest of the file as written.

pub mod answer;
pub(crate) mod case;
pub(crate) mod matching;
pub mod update;

pub use case::{Case, read_cases};
pub use matching::{Mismatch, compare, project};
