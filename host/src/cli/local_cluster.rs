//! What a cluster would make of a local `plugin run`: the parent admitted
//! as the API server admits a create of it (the CRD's defaults, then its
//! OpenAPI v3 and CEL validation), and the plugin's answer checked by the
//! binding's guardrails as the operator checks it. Both are done by the
//! embedded API server's and the operator's own code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use gantry_apiserver::registry::Registry;
use serde_json::Value;

use gantry_operator::controller::ReconcileError;
use gantry_operator::controller::guardrails::{self, Rules};
use gantry_operator::controller::spec::{BindingSpec, KindRef};

/// The kinds a local run knows: every built-in kind, and the CRDs given.
pub(super) struct LocalCluster {
    registry: Registry,
    crds: Vec<String>,
    operator_namespace: String,
}

/// What admitting the parent did.
#[derive(Debug, PartialEq)]
pub(super) enum Admitted {
    /// Pruned, defaulted and validated against its CRD; the unknown fields
    /// dropped, as the API server's warnings name them.
    ByCrd {
        /// The CRD's name.
        crd: String,
        /// `unknown field "spec.x"`, one per field dropped.
        warnings: Vec<String>,
    },
    /// No CRD given serves the parent's kind: taken as it is.
    Unchecked,
}

impl LocalCluster {
    /// The built-in kinds and `crds`, each checked as the API server checks
    /// a CRD on create; `operator_namespace` is where no child may go.
    pub(super) fn new(crds: &[Value], operator_namespace: &str) -> anyhow::Result<Self> {
        let registry = Registry::with_builtins();
        let mut names = Vec::new();
        for crd in crds {
            let mut crd = crd.clone();
            let name = crd
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            gantry_apiserver::crd::admit(&mut crd, None)
                .with_context(|| format!("CustomResourceDefinition {name:?} is invalid"))?;
            gantry_apiserver::crd::sync(&registry, Some(&crd), None);
            names.push(name);
        }
        Ok(Self {
            registry,
            crds: names,
            operator_namespace: operator_namespace.to_string(),
        })
    }

    /// Admit `parent` as a create of it would be: its CRD's defaults land
    /// in it, and an invalid parent is an error naming the field (the API
    /// server's message).
    pub(super) fn admit_parent(&self, parent: &mut Value) -> anyhow::Result<Admitted> {
        let (api_version, kind) = type_of(parent);
        let Some(info) = self
            .registry
            .by_kind(&api_version, &kind)
            .filter(|info| info.is_custom())
        else {
            return Ok(Admitted::Unchecked);
        };
        let crd = info
            .crd
            .as_ref()
            .map_or_else(String::new, |c| c.crd_name.clone());
        let warnings = gantry_apiserver::objects::admission::admit_detached(&info, parent)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("the API server would refuse it (CRD {crd})"))?;
        Ok(Admitted::ByCrd { crd, warnings })
    }

    /// Whether any CRD was given.
    pub(super) fn has_crds(&self) -> bool {
        !self.crds.is_empty()
    }

    /// Check `children`, the answer for `parent`, against `binding`'s
    /// guardrails. `Err` holds the reason and message the operator would
    /// give the parent's `Synced=False`. `unknown` gets each child kind
    /// neither built in nor among the CRDs (taken as namespaced).
    pub(super) fn check_answer(
        &self,
        binding: &BindingSpec,
        parent: &Value,
        children: Vec<Value>,
        unknown: &mut Vec<KindRef>,
    ) -> Result<(), (String, String)> {
        let mut scopes = HashMap::new();
        for kind in &binding.children {
            let namespaced =
                if let Some(info) = self.registry.by_kind(&kind.api_version, &kind.kind) {
                    info.namespaced
                } else {
                    unknown.push(kind.clone());
                    true
                };
            scopes.insert(kind.clone(), namespaced);
        }
        let (api_version, kind) = type_of(parent);
        // A parent whose kind is not known here is taken as namespaced,
        // as most custom kinds are; kubectl puts it in `default`.
        let namespaced = self
            .registry
            .by_kind(&api_version, &kind)
            .is_none_or(|info| info.namespaced);
        let namespace = parent
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .or(namespaced.then_some("default"));
        guardrails::check_children(
            children,
            &Rules {
                parent_kind: &binding.parent,
                parent_namespace: namespace,
                operator_namespace: &self.operator_namespace,
                scopes: &scopes,
            },
        )
        .map(drop)
        .map_err(|errors| {
            let error = ReconcileError::Guardrails(errors);
            (error.reason(), error.to_string())
        })
    }
}

/// Whether `parent` is of the kind `binding` reconciles (in any version):
/// an error saying what it is otherwise.
pub(super) fn check_parent_kind(binding: &BindingSpec, parent: &Value) -> anyhow::Result<()> {
    let (api_version, kind) = type_of(parent);
    let given = KindRef { api_version, kind };
    if given.same_kind(&binding.parent) {
        Ok(())
    } else {
        anyhow::bail!(
            "the parent is a {given}, but binding {} reconciles {}",
            binding.name,
            binding.parent
        )
    }
}

/// The checks of one `plugin run`: the kinds it knows and the binding
/// whose guardrails judge the answer.
pub(super) struct RunChecks {
    cluster: LocalCluster,
    binding: Option<(PathBuf, BindingSpec)>,
}

impl RunChecks {
    /// The checks for `plugin` (a component, or a project directory whose
    /// `binding.yaml` and CRDs are used unless `binding` or `crds` name
    /// others); `namespace` is the operator's.
    pub(super) fn new(
        plugin: &Path,
        binding: Option<&Path>,
        crds: &[PathBuf],
        namespace: &str,
    ) -> anyhow::Result<Self> {
        let project = plugin.is_dir().then_some(plugin);
        let binding_path = binding.map(Path::to_path_buf).or_else(|| {
            project
                .map(|dir| dir.join("binding.yaml"))
                .filter(|p| p.is_file())
        });
        let binding = match binding_path {
            Some(path) => {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let spec = gantry_operator::controller::spec::parse_spec(&text)
                    .with_context(|| format!("{} is not a valid binding", path.display()))?;
                Some((path, spec))
            }
            None => None,
        };
        let crds = if crds.is_empty() {
            match project {
                Some(dir) => gantry_toolchain::crd::of_project(dir)
                    .with_context(|| format!("reading the CRDs of {}", dir.display()))?,
                None => Vec::new(),
            }
        } else {
            let mut read = Vec::new();
            for path in crds {
                read.extend(gantry_toolchain::manifest::read_objects(path)?);
            }
            read
        };
        Ok(Self {
            cluster: LocalCluster::new(&crds, namespace)?,
            binding,
        })
    }

    /// The binding the run is checked against, if any.
    pub(super) fn binding(&self) -> Option<&BindingSpec> {
        self.binding.as_ref().map(|(_, spec)| spec)
    }

    /// Admit the parent of `request` as the API server would on create,
    /// saying on stderr what was dropped; an error when it is invalid or
    /// not of the binding's parent kind.
    pub(super) fn admit(&self, parent: &mut Value) -> anyhow::Result<()> {
        if let Some((path, binding)) = &self.binding {
            check_parent_kind(binding, parent).with_context(|| path.display().to_string())?;
        }
        match self.cluster.admit_parent(parent)? {
            Admitted::ByCrd { warnings, .. } => {
                for warning in warnings {
                    eprintln!("Warning: {warning}");
                }
            }
            Admitted::Unchecked if self.cluster.has_crds() => {
                let (api_version, kind) = type_of(parent);
                eprintln!(
                    "warning: none of the CRDs given serves {api_version} {kind}: the parent is used as it is"
                );
            }
            Admitted::Unchecked => {}
        }
        Ok(())
    }

    /// Check the plugin's `children` for `parent` against the binding's
    /// guardrails (none without a binding): `Err` is the operator's reason
    /// and message.
    pub(super) fn check(
        &self,
        parent: &Value,
        children: Vec<Value>,
    ) -> Result<(), (String, String)> {
        let Some((_, binding)) = &self.binding else {
            return Ok(());
        };
        let mut unknown = Vec::new();
        let checked = self
            .cluster
            .check_answer(binding, parent, children, &mut unknown);
        for kind in unknown {
            eprintln!(
                "warning: {kind} is neither built in nor among the CRDs given (--crd): taken as namespaced"
            );
        }
        if !binding.guardrail_policies.is_empty() {
            eprintln!(
                "note: the binding's guardrail policies ({}) are not evaluated here",
                binding.guardrail_policies.join(", ")
            );
        }
        checked
    }
}

fn type_of(object: &Value) -> (String, String) {
    let field = |name: &str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (field("apiVersion"), field("kind"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "caches.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Cache", "plural": "caches"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object",
                            "x-kubernetes-validations": [{"rule": "self.size <= 5", "message": "at most 5"}],
                            "properties": {"size": {"type": "integer", "minimum": 1, "default": 2}}}}}}}]}
        })
    }

    fn parent(spec: &Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Cache",
               "metadata": {"name": "c"}, "spec": spec})
    }

    #[test]
    fn the_parent_gets_its_defaults_namespace_and_pruning() {
        let cluster = LocalCluster::new(&[crd()], "gantry-system").unwrap();
        let mut p = parent(&json!({"typo": 1}));
        let admitted = cluster.admit_parent(&mut p).unwrap();
        assert_eq!(
            admitted,
            Admitted::ByCrd {
                crd: "caches.example.com".into(),
                warnings: vec!["unknown field \"spec.typo\"".into()]
            }
        );
        assert_eq!(p["spec"], json!({"size": 2}));
        assert_eq!(p["metadata"]["namespace"], "default");
    }

    #[test]
    fn an_invalid_parent_is_refused_naming_the_field() {
        let cluster = LocalCluster::new(&[crd()], "gantry-system").unwrap();
        let error = cluster
            .admit_parent(&mut parent(&json!({"size": 0})))
            .unwrap_err();
        assert!(
            format!("{error:#}").contains("spec.size: Invalid value: 0"),
            "{error:#}"
        );
        let error = cluster
            .admit_parent(&mut parent(&json!({"size": 7})))
            .unwrap_err();
        assert!(
            format!("{error:#}").contains("spec: Invalid value: \"object\": at most 5"),
            "{error:#}"
        );
    }

    #[test]
    fn a_project_directory_gives_its_binding_and_crds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("crd.yaml"),
            serde_yaml::to_string(&crd()).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("binding.yaml"),
            "name: caches\nparent: {apiVersion: example.com/v1, kind: Cache}\nchildren: [{apiVersion: v1, kind: ConfigMap}]\n",
        )
        .unwrap();
        let checks = RunChecks::new(dir.path(), None, &[], "gantry-system").unwrap();
        assert_eq!(checks.binding().map(|b| b.name.as_str()), Some("caches"));
        let mut p = parent(&json!({}));
        checks.admit(&mut p).unwrap();
        assert_eq!(
            p["spec"]["size"], 2,
            "the project's CRD defaults the parent"
        );
        let mut other = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        let error = checks.admit(&mut other).unwrap_err();
        assert!(
            format!("{error:#}").contains(
                "the parent is a v1/Secret, but binding caches reconciles example.com/v1/Cache"
            ),
            "{error:#}"
        );
        let outside = json!({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "x", "namespace": "kube-system"}});
        let (reason, message) = checks.check(&p, vec![outside]).unwrap_err();
        assert_eq!(reason, "GuardrailViolation");
        assert_eq!(
            message,
            "plugin output rejected by guardrails: child 0 (v1/ConfigMap \"x\"): namespace \"kube-system\" is not the parent's namespace \"default\""
        );
    }

    #[test]
    fn kinds_without_a_crd_pass_unchecked_and_bad_crds_are_refused() {
        let cluster = LocalCluster::new(&[], "gantry-system").unwrap();
        assert_eq!(
            cluster
                .admit_parent(&mut parent(&json!({"size": 0})))
                .unwrap(),
            Admitted::Unchecked
        );
        let mut bad = crd();
        bad["spec"]["scope"] = "Everywhere".into();
        let error = LocalCluster::new(&[bad], "gantry-system")
            .err()
            .expect("an invalid CRD is refused");
        assert!(format!("{error:#}").contains("spec.scope"), "{error:#}");
    }
}
