//! Admission policy: no privileged pods.
//!
//! Denies Pods, and workloads with a pod template (ReplicationController,
//! Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob), whose pod
//! spec
//!
//! - has a container, init container or ephemeral container with
//!   `securityContext.privileged: true`,
//! - mounts a `hostPath` volume, or
//! - sets `hostNetwork`, `hostPID` or `hostIPC`.
//!
//! The denial names every offence. A pod spec that cannot be read (a field
//! of the wrong type) is denied too. Other kinds, and requests without an
//! object (DELETE), are allowed.
//!
//! Settings (optional): `{"allowHostPathPrefixes": ["/var/log"]}` allows
//! hostPath volumes whose path lies under one of the prefixes, compared by
//! whole path components (`/var/log` covers `/var/log/pods` but not
//! `/var/logs`; a path with a `..` component is never covered).

use gantry_sdk::k8s_openapi::api::core::v1::{PodSpec, SecurityContext};
use gantry_sdk::{AdmissionRequest, Policy, Value, Verdict};
use serde::Deserialize;

/// The policy's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Settings {
    /// Absolute host paths under which hostPath volumes are allowed.
    #[serde(default)]
    pub allow_host_path_prefixes: Vec<String>,
}

impl Settings {
    /// Parse and check settings; `null` reads as `{}`.
    pub fn parse(settings: &Value) -> Result<Self, String> {
        let settings: Settings = match settings {
            Value::Null => Settings::default(),
            Value::Object(_) => serde_json::from_value(settings.clone())
                .map_err(|e| format!("invalid settings: {e}"))?,
            other => return Err(format!("invalid settings: expected an object, got {other}")),
        };
        for prefix in &settings.allow_host_path_prefixes {
            if path_components(prefix).is_none() {
                return Err(format!(
                    "invalid settings: allowHostPathPrefixes entry {prefix:?} must be an absolute path without `..`"
                ));
            }
        }
        Ok(settings)
    }

    /// Whether a hostPath volume at `path` is allowed.
    pub fn allows_host_path(&self, path: &str) -> bool {
        let Some(path) = path_components(path) else {
            return false;
        };
        self.allow_host_path_prefixes
            .iter()
            .filter_map(|prefix| path_components(prefix))
            .any(|prefix| path.starts_with(&prefix))
    }
}

/// The components of an absolute path, ignoring empty and `.` components;
/// `None` for a relative path or one with a `..` component.
fn path_components(path: &str) -> Option<Vec<&str>> {
    if !path.starts_with('/') {
        return None;
    }
    let mut components = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => return None,
            other => components.push(other),
        }
    }
    Some(components)
}

/// Everything in `spec` this policy forbids, in a readable form.
pub fn offences(spec: &PodSpec, settings: &Settings) -> Vec<String> {
    let mut found = Vec::new();
    for (flag, name) in [
        (spec.host_network, "hostNetwork"),
        (spec.host_pid, "hostPID"),
        (spec.host_ipc, "hostIPC"),
    ] {
        if flag == Some(true) {
            found.push(format!("{name} is enabled"));
        }
    }
    let privileged = |context: &Option<SecurityContext>| {
        context.as_ref().and_then(|c| c.privileged) == Some(true)
    };
    for container in &spec.containers {
        if privileged(&container.security_context) {
            found.push(format!("container {:?} is privileged", container.name));
        }
    }
    for container in spec.init_containers.iter().flatten() {
        if privileged(&container.security_context) {
            found.push(format!("init container {:?} is privileged", container.name));
        }
    }
    for container in spec.ephemeral_containers.iter().flatten() {
        if privileged(&container.security_context) {
            found.push(format!(
                "ephemeral container {:?} is privileged",
                container.name
            ));
        }
    }
    for volume in spec.volumes.iter().flatten() {
        if let Some(host_path) = &volume.host_path
            && !settings.allows_host_path(&host_path.path)
        {
            found.push(format!(
                "volume {:?} uses hostPath {:?}",
                volume.name, host_path.path
            ));
        }
    }
    found
}

/// The policy.
pub struct DisallowPrivileged;

impl Policy for DisallowPrivileged {
    fn validate(request: AdmissionRequest) -> Verdict {
        let settings = match Settings::parse(&request.settings) {
            Ok(settings) => settings,
            Err(e) => return Verdict::deny(e),
        };
        let Some(object) = request.object() else {
            return Verdict::allow();
        };
        let Some((group, kind)) = request.group_kind() else {
            return Verdict::allow();
        };
        let Some(path) = gantry_sdk::pod_spec_path(&group, &kind) else {
            return Verdict::allow();
        };
        let pointer = format!("/{}", path.join("/"));
        let spec = match object.pointer(&pointer) {
            None | Some(Value::Null) => return Verdict::allow(),
            Some(spec) => spec,
        };
        let spec: PodSpec = match serde_json::from_value(spec.clone()) {
            Ok(spec) => spec,
            Err(e) => {
                return Verdict::deny(format!(
                    "{kind}: cannot read the pod spec at {pointer}: {e}"
                ));
            }
        };
        let found = offences(&spec, &settings);
        if found.is_empty() {
            Verdict::allow()
        } else {
            Verdict::deny(format!(
                "{kind} is not allowed to run privileged: {}",
                found.join("; ")
            ))
        }
    }

    fn validate_settings(settings: &Value) -> Result<(), String> {
        Settings::parse(settings).map(drop)
    }
}

gantry_sdk::export_policy!(DisallowPrivileged);

#[cfg(test)]
// Test helpers take `json!` literals by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
mod tests {
    use gantry_sdk::json;

    use super::*;

    fn admit(object: Value, settings: Value) -> Verdict {
        DisallowPrivileged::validate(AdmissionRequest {
            request: json!({"operation": "CREATE", "object": object}),
            settings,
        })
    }

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    fn clean_spec() -> Value {
        json!({
            "containers": [{"name": "app", "image": "nginx",
                            "securityContext": {"privileged": false, "runAsNonRoot": true}}],
            "volumes": [{"name": "scratch", "emptyDir": {}}]
        })
    }

    fn privileged_spec() -> Value {
        json!({"containers": [{"name": "app", "securityContext": {"privileged": true}}]})
    }

    fn message(verdict: &Verdict) -> &str {
        assert!(!verdict.allowed, "expected a denial: {verdict:?}");
        verdict.message.as_deref().unwrap()
    }

    #[test]
    fn allows_a_clean_pod() {
        let verdict = admit(pod(clean_spec()), Value::Null);
        assert_eq!(verdict, Verdict::allow());
    }

    #[test]
    fn denies_a_privileged_container() {
        let verdict = admit(pod(privileged_spec()), Value::Null);
        assert_eq!(
            message(&verdict),
            r#"Pod is not allowed to run privileged: container "app" is privileged"#
        );
    }

    #[test]
    fn names_every_offence() {
        let spec = json!({
            "hostNetwork": true, "hostPID": true, "hostIPC": true,
            "containers": [
                {"name": "ok"},
                {"name": "root", "securityContext": {"privileged": true}}
            ],
            "initContainers": [{"name": "setup", "securityContext": {"privileged": true}}],
            "ephemeralContainers": [{"name": "debug", "securityContext": {"privileged": true}}],
            "volumes": [
                {"name": "etc", "hostPath": {"path": "/etc"}},
                {"name": "cache", "emptyDir": {}},
                {"name": "sock", "hostPath": {"path": "/run/docker.sock", "type": "Socket"}}
            ]
        });
        let verdict = admit(pod(spec), Value::Null);
        assert_eq!(
            message(&verdict),
            "Pod is not allowed to run privileged: hostNetwork is enabled; hostPID is enabled; \
             hostIPC is enabled; container \"root\" is privileged; init container \"setup\" is \
             privileged; ephemeral container \"debug\" is privileged; volume \"etc\" uses \
             hostPath \"/etc\"; volume \"sock\" uses hostPath \"/run/docker.sock\""
        );
    }

    #[test]
    fn false_and_null_flags_are_fine() {
        let spec = json!({
            "hostNetwork": false, "hostPID": null,
            "containers": [{"name": "a", "securityContext": null},
                           {"name": "b", "securityContext": {"privileged": null}}]
        });
        assert!(admit(pod(spec), Value::Null).allowed);
    }

    #[test]
    fn checks_every_workload_kind_at_its_pod_template() {
        let template = |spec: Value| json!({"metadata": {"labels": {"app": "x"}}, "spec": spec});
        for (api_version, kind) in [
            ("apps/v1", "Deployment"),
            ("apps/v1", "StatefulSet"),
            ("apps/v1", "DaemonSet"),
            ("apps/v1", "ReplicaSet"),
            ("batch/v1", "Job"),
            ("v1", "ReplicationController"),
        ] {
            let object = |spec| {
                json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"},
                       "spec": {"replicas": 1, "template": template(spec)}})
            };
            assert!(admit(object(clean_spec()), Value::Null).allowed, "{kind}");
            let verdict = admit(object(privileged_spec()), Value::Null);
            assert_eq!(
                message(&verdict),
                format!("{kind} is not allowed to run privileged: container \"app\" is privileged")
            );
        }
        let cron_job = |spec| {
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
                   "spec": {"schedule": "* * * * *",
                            "jobTemplate": {"spec": {"template": template(spec)}}}})
        };
        assert!(admit(cron_job(clean_spec()), Value::Null).allowed);
        assert!(message(&admit(cron_job(privileged_spec()), Value::Null)).contains("\"app\""));
    }

    #[test]
    fn host_path_prefixes_exempt_whole_components_only() {
        let settings = json!({"allowHostPathPrefixes": ["/var/log", "/data/"]});
        let with_path = |path: &str| {
            pod(json!({"containers": [{"name": "a"}],
                       "volumes": [{"name": "v", "hostPath": {"path": path}}]}))
        };
        for allowed in [
            "/var/log",
            "/var/log/",
            "/var/log/pods/x",
            "/data/db",
            "//var//log/./a",
        ] {
            assert!(
                admit(with_path(allowed), settings.clone()).allowed,
                "{allowed}"
            );
        }
        for denied in [
            "/var/logs",
            "/var",
            "/",
            "/etc",
            "var/log",
            "/var/log/../../etc",
            "/data/../etc",
            "",
        ] {
            let verdict = admit(with_path(denied), settings.clone());
            assert_eq!(
                message(&verdict),
                format!(
                    "Pod is not allowed to run privileged: volume \"v\" uses hostPath {denied:?}"
                )
            );
        }
        // Without settings every hostPath is denied.
        assert!(!admit(with_path("/var/log"), Value::Null).allowed);
    }

    #[test]
    fn other_kinds_and_missing_objects_are_allowed() {
        // Pod-like content in a kind that is not a workload, or in a
        // look-alike from another API group.
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "c"}, "spec": privileged_spec()});
        assert!(admit(config_map, Value::Null).allowed);
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Pod",
                            "metadata": {"name": "c"}, "spec": privileged_spec()});
        assert!(admit(custom, Value::Null).allowed);
        // DELETE: no object.
        let delete = AdmissionRequest {
            request: json!({"operation": "DELETE", "oldObject": pod(privileged_spec())}),
            settings: Value::Null,
        };
        assert!(DisallowPrivileged::validate(delete).allowed);
        let null_object = AdmissionRequest {
            request: json!({"operation": "CREATE", "object": null}),
            settings: Value::Null,
        };
        assert!(DisallowPrivileged::validate(null_object).allowed);
        // Objects that are not objects at all.
        assert!(admit(json!("Pod"), Value::Null).allowed);
        assert!(admit(json!([pod(privileged_spec())]), Value::Null).allowed);
        // A Pod without a spec has nothing privileged in it.
        assert!(admit(json!({"apiVersion": "v1", "kind": "Pod"}), Value::Null).allowed);
        assert!(admit(pod(Value::Null), Value::Null).allowed);
    }

    #[test]
    fn kind_falls_back_to_the_request() {
        let request = AdmissionRequest {
            request: json!({
                "operation": "CREATE",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "object": {"metadata": {"name": "p"}, "spec": privileged_spec()}
            }),
            settings: Value::Null,
        };
        assert!(!DisallowPrivileged::validate(request).allowed);
    }

    #[test]
    fn unreadable_pod_specs_are_denied() {
        for spec in [
            json!("privileged"),
            json!({"containers": "app"}),
            json!({"containers": [{"name": "a", "securityContext": {"privileged": "true"}}]}),
            json!({"hostNetwork": 1, "containers": []}),
            json!({"containers": [], "volumes": [{"name": "v", "hostPath": {"path": 7}}]}),
        ] {
            let verdict = admit(pod(spec.clone()), Value::Null);
            assert!(
                message(&verdict).starts_with("Pod: cannot read the pod spec at /spec: "),
                "{spec}: {verdict:?}"
            );
        }
    }

    #[test]
    fn settings_are_checked() {
        for good in [
            Value::Null,
            json!({}),
            json!({"allowHostPathPrefixes": []}),
            json!({"allowHostPathPrefixes": ["/var/log", "/"]}),
        ] {
            assert_eq!(
                DisallowPrivileged::validate_settings(&good),
                Ok(()),
                "{good}"
            );
        }
        for bad in [
            json!({"allowHostPathPrefixes": ["var/log"]}),
            json!({"allowHostPathPrefixes": [""]}),
            json!({"allowHostPathPrefixes": ["/var/../etc"]}),
            json!({"allowHostPathPrefixes": "/var/log"}),
            json!({"allowHostPathPrefixes": [1]}),
            json!({"allowHostPathPrefix": ["/var/log"]}),
            json!(["/var/log"]),
            json!([["/var/log"]]),
            json!("/var/log"),
        ] {
            let err = DisallowPrivileged::validate_settings(&bad).unwrap_err();
            assert!(err.starts_with("invalid settings: "), "{bad}: {err}");
        }
    }

    #[test]
    fn bad_settings_deny_requests() {
        let verdict = admit(pod(clean_spec()), json!({"allowHostPathPrefixes": ["rel"]}));
        assert!(message(&verdict).starts_with("invalid settings: "));
    }
}
