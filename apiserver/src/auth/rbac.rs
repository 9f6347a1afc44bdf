//! RBAC, evaluated as kube-apiserver's authorizer does: the rules of every
//! `ClusterRoleBinding` and of the RoleBindings in the request's namespace
//! whose subjects name the user, read from the store at each request.

use std::ops::ControlFlow;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use serde::de::DeserializeOwned;

use super::tokens::service_account_username;
use crate::admission::UserInfo;
use crate::storage::Store;

/// The API group of RBAC objects.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// What a request asks to do, as kube's authorizer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attributes {
    /// A request on a resource; empty strings where kube's are empty.
    Resource {
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
        /// `deletecollection`.
        verb: String,
        /// Namespace ("" for cluster-scoped requests).
        namespace: String,
        /// API group ("" for core).
        group: String,
        /// Resource plural.
        resource: String,
        /// Subresource.
        subresource: String,
        /// Object name ("" for collections).
        name: String,
    },
    /// A request on any other path (discovery, `/version`, `/healthz`).
    NonResource {
        /// The method, lowercase (`get`, `post`, …).
        verb: String,
        /// The path.
        path: String,
    },
}

/// The answer of the authorizer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may go on.
    pub allowed: bool,
    /// Why, as kube words it (empty when denied without errors).
    pub reason: String,
}

/// The rules that apply to a user in a namespace, as kube's rule resolver
/// lists them for a `SelfSubjectRulesReview`.
#[derive(Debug, Default)]
pub struct Rules {
    /// The rules, in the order found.
    pub rules: Vec<PolicyRule>,
    /// Bindings whose role could not be read.
    pub errors: Vec<String>,
}

/// Whether RBAC lets `user` do `attributes`.
pub fn authorize(store: &Store, user: &UserInfo, attributes: &Attributes) -> Decision {
    let namespace = match attributes {
        Attributes::Resource { namespace, .. } => namespace.as_str(),
        Attributes::NonResource { .. } => "",
    };
    let mut errors = Vec::new();
    let mut decision = Decision::default();
    visit(store, user, namespace, &mut errors, |source, rule| {
        if allows(rule, attributes) {
            decision = Decision {
                allowed: true,
                reason: format!("RBAC: allowed by {source}"),
            };
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    if !decision.allowed && !errors.is_empty() {
        decision.reason = format!("RBAC: {}", aggregate(&errors));
    }
    decision
}

/// Every rule that applies to `user` in `namespace` ("": cluster-wide only).
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> Rules {
    let mut out = Rules::default();
    let mut rules = Vec::new();
    visit(store, user, namespace, &mut out.errors, |_, rule| {
        rules.push(rule.clone());
        ControlFlow::Continue(())
    });
    out.rules = rules;
    out
}

/// kube's aggregate error text: one error as it is, several in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Calls `visitor` with each rule bound to `user` (and a description of the
/// binding that grants it) until it breaks: `ClusterRoleBindings` first, then
/// the RoleBindings of `namespace`.
fn visit(
    store: &Store,
    user: &UserInfo,
    namespace: &str,
    errors: &mut Vec<String>,
    mut visitor: impl FnMut(&str, &PolicyRule) -> ControlFlow<()>,
) {
    for binding in objects::<ClusterRoleBinding>(store, "clusterrolebindings", "") {
        let binding_name = binding.metadata.name.clone().unwrap_or_default();
        for subject in binding.subjects.iter().flatten() {
            if !applies_to(subject, user, "") {
                continue;
            }
            let Some(rules) = role_rules(store, "ClusterRole", &binding.role_ref.name, "", errors)
            else {
                break;
            };
            let source = format!(
                "ClusterRoleBinding {binding_name:?} of {} {:?} to {}",
                binding.role_ref.kind,
                binding.role_ref.name,
                describe(subject, "")
            );
            for rule in &rules {
                if visitor(&source, rule).is_break() {
                    return;
                }
            }
            // One subject naming the user is enough for a binding.
            break;
        }
    }
    if namespace.is_empty() {
        return;
    }
    for binding in objects::<RoleBinding>(store, "rolebindings", namespace) {
        let binding_name = binding.metadata.name.clone().unwrap_or_default();
        for subject in binding.subjects.iter().flatten() {
            if !applies_to(subject, user, namespace) {
                continue;
            }
            let role = &binding.role_ref;
            let Some(rules) = role_rules(store, &role.kind, &role.name, namespace, errors) else {
                break;
            };
            let source = format!(
                "RoleBinding {:?} of {} {:?} to {}",
                format!("{binding_name}/{namespace}"),
                role.kind,
                role.name,
                describe(subject, namespace)
            );
            for rule in &rules {
                if visitor(&source, rule).is_break() {
                    return;
                }
            }
            break;
        }
    }
}

/// The rules of the role a binding names (a ClusterRole, or a Role in
/// `namespace`); None, with the error noted, when it does not exist.
fn role_rules(
    store: &Store,
    kind: &str,
    name: &str,
    namespace: &str,
    errors: &mut Vec<String>,
) -> Option<Vec<PolicyRule>> {
    let rules = match kind {
        "ClusterRole" => object::<ClusterRole>(store, "clusterroles", "", name).map(|r| r.rules),
        "Role" => object::<Role>(store, "roles", namespace, name).map(|r| r.rules),
        _ => None,
    };
    if rules.is_none() {
        let resource = if kind == "Role" {
            "role"
        } else {
            "clusterrole"
        };
        errors.push(format!("{resource}.{GROUP} {name:?} not found"));
    }
    rules.map(Option::unwrap_or_default)
}

/// kube's description of a subject in an RBAC reason.
fn describe(subject: &Subject, binding_namespace: &str) -> String {
    if subject.kind == "ServiceAccount" {
        let namespace = subject
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_namespace);
        format!(
            "ServiceAccount {:?}",
            format!("{}/{namespace}", subject.name)
        )
    } else {
        format!("{} {:?}", subject.kind, subject.name)
    }
}

/// Whether `subject` names `user` (a service account subject without a
/// namespace is in the binding's).
fn applies_to(subject: &Subject, user: &UserInfo, binding_namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => subject.name == user.username,
        "Group" => user.groups.contains(&subject.name),
        "ServiceAccount" => {
            let namespace = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            user.username == service_account_username(namespace, &subject.name)
        }
        _ => false,
    }
}

/// `resource/subresource`, or the resource alone, as rules and refusals
/// name it.
pub fn combined_resource(resource: &str, subresource: &str) -> String {
    if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    }
}

/// Whether `rule` allows `attributes` (kube's `RuleAllows`).
pub fn allows(rule: &PolicyRule, attributes: &Attributes) -> bool {
    match attributes {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let combined = combined_resource(resource, subresource);
            verb_matches(rule, verb)
                && rule
                    .api_groups
                    .iter()
                    .flatten()
                    .any(|g| g == "*" || g == group)
                && resource_matches(rule, &combined, subresource)
                && rule
                    .resource_names
                    .as_ref()
                    .is_none_or(|names| names.is_empty() || names.contains(name))
        }
        Attributes::NonResource { verb, path } => {
            verb_matches(rule, verb)
                && rule.non_resource_urls.iter().flatten().any(|url| {
                    url == "*"
                        || url == path
                        || url
                            .strip_suffix('*')
                            .is_some_and(|prefix| path.starts_with(prefix))
                })
        }
    }
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

/// `*`, the resource itself (`pods/log` for a subresource), or `*/log`.
fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().flatten().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    })
}

fn key(plural: &str, namespace: &str, name: &str) -> String {
    format!("{GROUP}/{plural}/{namespace}/{name}")
}

fn object<T: DeserializeOwned>(
    store: &Store,
    plural: &str,
    namespace: &str,
    name: &str,
) -> Option<T> {
    let value = store.get(&key(plural, namespace, name))?;
    serde_json::from_value((*value).clone()).ok()
}

/// The objects of an RBAC resource in `namespace` ("" for cluster-scoped),
/// in name order; objects that do not decode are skipped (the server
/// validated them on write).
fn objects<T: DeserializeOwned>(store: &Store, plural: &str, namespace: &str) -> Vec<T> {
    let prefix = if namespace.is_empty() {
        format!("{GROUP}/{plural}/")
    } else {
        format!("{GROUP}/{plural}/{namespace}/")
    };
    store
        .list(&prefix, None)
        .0
        .into_iter()
        .filter_map(|(_, v)| serde_json::from_value((*v).clone()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let owned = |s: &[&str]| Some(s.iter().map(ToString::to_string).collect());
        PolicyRule {
            verbs: verbs.iter().map(ToString::to_string).collect(),
            api_groups: owned(groups),
            resources: owned(resources),
            resource_names: owned(names),
            non_resource_urls: None,
        }
    }

    fn request(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            namespace: "default".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
        }
    }

    #[test]
    fn rules_match_as_kube_matches_them() {
        let pods = rule(&["get", "list"], &[""], &["pods"], &[]);
        assert!(allows(&pods, &request("get", "", "pods", "", "p")));
        assert!(!allows(&pods, &request("delete", "", "pods", "", "p")));
        assert!(!allows(&pods, &request("get", "apps", "pods", "", "p")));
        // A subresource needs its own rule, `*`, or `*/sub`.
        assert!(!allows(&pods, &request("get", "", "pods", "log", "p")));
        let logs = rule(&["get"], &[""], &["*/log"], &[]);
        assert!(allows(&logs, &request("get", "", "pods", "log", "p")));
        assert!(!allows(&logs, &request("get", "", "pods", "", "p")));
        let all = rule(&["*"], &["*"], &["*"], &[]);
        assert!(allows(
            &all,
            &request("deletecollection", "x.io", "ys", "status", "")
        ));
        // resourceNames limit a rule to named objects: lists and creates do
        // not match it.
        let one = rule(&["get", "list"], &[""], &["configmaps"], &["cfg"]);
        assert!(allows(&one, &request("get", "", "configmaps", "", "cfg")));
        assert!(!allows(
            &one,
            &request("get", "", "configmaps", "", "other")
        ));
        assert!(!allows(&one, &request("list", "", "configmaps", "", "")));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_star_prefix() {
        let discovery = PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: Some(vec!["/api".into(), "/apis/*".into()]),
            ..PolicyRule::default()
        };
        let get = |path: &str| Attributes::NonResource {
            verb: "get".into(),
            path: path.into(),
        };
        assert!(allows(&discovery, &get("/api")));
        assert!(!allows(&discovery, &get("/api/v1")));
        assert!(allows(&discovery, &get("/apis/apps/v1")));
        assert!(!allows(&discovery, &get("/metrics")));
        // A resource rule never allows a path.
        assert!(!allows(&rule(&["*"], &["*"], &["*"], &[]), &get("/api")));
    }

    #[test]
    fn subjects_name_users_groups_and_service_accounts() {
        let sa = UserInfo {
            username: "system:serviceaccount:ci:builder".into(),
            uid: None,
            groups: vec!["system:serviceaccounts".into()],
        };
        let subject = |kind: &str, name: &str, ns: Option<&str>| Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.map(Into::into),
            api_group: None,
        };
        assert!(applies_to(
            &subject("ServiceAccount", "builder", None),
            &sa,
            "ci"
        ));
        assert!(!applies_to(
            &subject("ServiceAccount", "builder", None),
            &sa,
            "other"
        ));
        assert!(applies_to(
            &subject("ServiceAccount", "builder", Some("ci")),
            &sa,
            ""
        ));
        assert!(applies_to(
            &subject("Group", "system:serviceaccounts", None),
            &sa,
            ""
        ));
        assert!(!applies_to(&subject("User", "builder", None), &sa, ""));
    }
}
