// The examples `gantry dev` installs, by directory under `plugins/`. Read by
// the crate and, with `include!`, by the build script that embeds them.

/// The example plugins `gantry dev` installs: Rust crates, and Guestbook in Go.
pub const EXAMPLES: &[&str] = &["memcached", "database", "guestbook", BACKUP_JOB];

/// The example whose binding is pointed at a stand-in backup service.
pub const BACKUP_JOB: &str = "backup-job";

/// The example admission policies `gantry dev` installs (each has a
/// `policy.yaml`).
pub const POLICY_EXAMPLES: &[&str] = &["disallow-privileged"];

/// The example CRD converters `gantry dev` installs (each has a
/// `converter.yaml`, a `crd.yaml` and an `example.yaml`).
pub const CONVERTER_EXAMPLES: &[&str] = &["myresource-converter"];
