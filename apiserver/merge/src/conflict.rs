//! Apply conflicts and their kube-apiserver rendering.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause;

use crate::path::Path;

/// One field applied with a different value than another manager owns it with.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    /// The other manager's name (`managedFields[].manager`).
    pub manager: String,
    /// Its operation: `"Apply"` or `"Update"`.
    pub operation: String,
    /// Its `apiVersion` (shown for Update managers as `using apps/v1`).
    pub api_version: String,
    /// Its subresource (`""` for the main resource).
    pub subresource: String,
    /// The field, as a path.
    pub path: Path,
    /// The field in kube's human form, e.g. `.spec.containers[name="x"].image`.
    pub field: String,
}

impl Conflict {
    /// The manager as kube-apiserver prints it: `"name"`, plus
    /// ` with subresource "status"` and, for Update managers, ` using <apiVersion>`.
    pub fn manager_display(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            let _ = write!(s, " with subresource {:?}", self.subresource);
        }
        if self.operation == crate::managers::OPERATION_UPDATE {
            let _ = write!(s, " using {}", self.api_version);
        }
        s
    }

    fn identity(&self) -> (String, String, String, String) {
        (
            self.manager.clone(),
            self.operation.clone(),
            self.api_version.clone(),
            self.subresource.clone(),
        )
    }
}

/// The 409 Status message kube-apiserver gives for these conflicts, e.g.
/// `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas`.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if conflicts.len() == 1 {
        let c = &conflicts[0];
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager_display(),
            c.field
        );
    }
    // Grouped by manager, managers sorted by their identity, as kube does.
    let mut groups: Vec<(String, Vec<&Conflict>)> = Vec::new();
    let mut sorted: Vec<&Conflict> = conflicts.iter().collect();
    sorted.sort_by_key(|c| c.identity());
    for c in sorted {
        let disp = c.manager_display();
        match groups.last_mut() {
            Some((d, v)) if *d == disp => v.push(c),
            _ => groups.push((disp, vec![c])),
        }
    }
    let mut lines = Vec::new();
    for (disp, cs) in groups {
        lines.push(format!("conflicts with {disp}:"));
        for c in cs {
            lines.push(format!("- {}", c.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// The Status `details.causes` kube-apiserver gives: one per conflict, reason
/// `FieldManagerConflict`, message `conflict with <manager>`, field the human path.
pub fn conflict_causes(conflicts: &[Conflict]) -> Vec<StatusCause> {
    conflicts
        .iter()
        .map(|c| StatusCause {
            reason: Some("FieldManagerConflict".to_string()),
            message: Some(format!("conflict with {}", c.manager_display())),
            field: Some(c.field.clone()),
        })
        .collect()
}
