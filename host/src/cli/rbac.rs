//! `gantry rbac`: the least-privilege RBAC of the given or installed
//! bindings.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, GroupVersionKind, ListParams};
use kube::{Api, Client};

use super::{exit, fail, tokio_runtime};
use gantry_operator::controller::spec::{self, BINDING_KEY, BINDING_LABEL, BindingSpec, KindRef};
use gantry_operator::conversion::ConverterSpec;
use gantry_operator::conversion::spec::{CONVERTER_KEY, CONVERTER_LABEL};
use gantry_operator::document::Document;
use gantry_operator::policy::spec::POLICY_LABEL;
use gantry_operator::rbac::{Kind, Need};
use gantry_operator::watch_scope::WatchScope;

#[derive(Debug, Args)]
pub(super) struct RbacArgs {
    /// A binding (or policy) document; repeatable. With --kubeconfig, the
    /// bindings installed in --namespace are added.
    #[arg(long)]
    binding: Vec<PathBuf>,
    /// Read the installed bindings and resolve kinds through this
    /// cluster's discovery (without it, plurals are guessed and every kind
    /// is taken as namespaced, with a status subresource).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The operator's namespace (bindings, Leases).
    #[arg(long, default_value = "gantry-system")]
    namespace: String,
    /// As `gantry run --watch-namespaces`: Roles in these namespaces
    /// instead of a ClusterRole for namespaced kinds.
    #[arg(long, value_parser = WatchScope::parse, default_value = "")]
    watch_namespaces: WatchScope,
    /// The operator serves admission policies (also implied by a policy
    /// document or an installed policy).
    #[arg(long)]
    policies: bool,
    /// Name of the roles and their bindings.
    #[arg(long, default_value = "gantry")]
    name: String,
    /// The operator's service account, `namespace/name` (default:
    /// `<--namespace>/gantry`).
    #[arg(long)]
    service_account: Option<String>,
    /// Print the bindings' rules as Helm values for the chart
    /// (`rbac.rules`) instead of RBAC objects.
    #[arg(long)]
    helm_values: bool,
}

/// `gantry rbac`.
pub(super) fn run(args: &RbacArgs) -> ExitCode {
    match tokio_runtime().and_then(|rt| rt.block_on(render(args))) {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(exit::OTHER, &e),
    }
}

async fn render(args: &RbacArgs) -> anyhow::Result<String> {
    let client = match &args.kubeconfig {
        Some(path) => Some(super::operator::cluster_client(Some(path)).await?),
        None => None,
    };
    let (mut bindings, mut policies, mut converters) = (Vec::new(), args.policies, Vec::new());
    for path in &args.binding {
        match Document::read(path)? {
            Document::Binding { spec, .. } => bindings.push(*spec),
            Document::Policy { .. } => policies = true,
            Document::Converter { spec, .. } => converters.push(*spec),
        }
    }
    if let Some(client) = &client {
        let (installed, installed_policies, installed_converters) =
            installed(client, &args.namespace).await?;
        bindings.extend(installed);
        policies |= installed_policies;
        converters.extend(installed_converters);
    }
    if bindings.is_empty() && !policies && converters.is_empty() {
        anyhow::bail!(
            "no bindings: pass --binding binding.yaml, or --kubeconfig to read those installed in {}",
            args.namespace
        );
    }
    let mut binding_needs = Vec::new();
    for spec in &bindings {
        binding_needs.extend(needs_of(client.as_ref(), spec, &args.watch_namespaces).await?);
    }
    for spec in &converters {
        binding_needs.extend(gantry_operator::rbac::needs::of_converter(&spec.crd));
    }
    if args.helm_values {
        return Ok(serde_yaml::to_string(
            &gantry_operator::rbac::roles::helm_values(&binding_needs),
        )?);
    }
    let mut needs = gantry_operator::rbac::needs::of_operator(
        &args.namespace,
        &args.watch_namespaces,
        policies,
    );
    needs.extend(binding_needs);
    let (sa_namespace, sa_name) = match &args.service_account {
        Some(sa) => sa
            .split_once('/')
            .map(|(ns, name)| (ns.to_string(), name.to_string()))
            .context("--service-account is namespace/name")?,
        None => (args.namespace.clone(), "gantry".to_string()),
    };
    let names: Vec<&str> = bindings.iter().map(|b| b.name.as_str()).collect();
    let mut out = format!(
        "# Least privilege for gantry in {} serving bindings: {}{}; watching {}{}.\n",
        args.namespace,
        if names.is_empty() {
            "(none)".to_string()
        } else {
            names.join(", ")
        },
        if policies {
            ", and admission policies"
        } else {
            ""
        },
        args.watch_namespaces.describe(),
        if client.is_none() {
            " (offline: plurals guessed; --kubeconfig resolves them)"
        } else {
            ""
        },
    );
    for object in gantry_operator::rbac::roles::objects(&needs, &args.name, &sa_namespace, &sa_name)
    {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&object)?);
    }
    Ok(out)
}

/// The bindings installed in `namespace`, and whether any policy is.
/// The bindings installed in `namespace`, whether there are policies, and
/// the converters.
async fn installed(
    client: &Client,
    namespace: &str,
) -> anyhow::Result<(Vec<BindingSpec>, bool, Vec<ConverterSpec>)> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let bindings = api
        .list(&ListParams::default().labels(BINDING_LABEL))
        .await
        .with_context(|| format!("listing the bindings in {namespace}"))?;
    let mut specs = Vec::new();
    for cm in bindings.items {
        let name = cm.metadata.name.clone().unwrap_or_default();
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(BINDING_KEY))
            .with_context(|| format!("ConfigMap {name} has no {BINDING_KEY}"))?;
        specs.push(spec::parse_spec(text).with_context(|| format!("ConfigMap {name}"))?);
    }
    let policies = api
        .list(&ListParams::default().labels(POLICY_LABEL).limit(1))
        .await?;
    let mut converters = Vec::new();
    for cm in api
        .list(&ListParams::default().labels(CONVERTER_LABEL))
        .await?
        .items
    {
        let name = cm.metadata.name.clone().unwrap_or_default();
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(CONVERTER_KEY))
            .with_context(|| format!("ConfigMap {name} has no {CONVERTER_KEY}"))?;
        converters.push(
            gantry_operator::conversion::spec::parse_spec(text)
                .with_context(|| format!("ConfigMap {name}"))?,
        );
    }
    Ok((specs, !policies.items.is_empty(), converters))
}

/// The needs of `spec`, its kinds resolved through `client`'s discovery,
/// or guessed without one.
async fn needs_of(
    client: Option<&Client>,
    spec: &BindingSpec,
    scope: &WatchScope,
) -> anyhow::Result<Vec<Need>> {
    let parent = kind(client, &spec.parent).await?;
    let mut children = Vec::new();
    for child in &spec.children {
        children.push(kind(client, child).await?);
    }
    let mut related = Vec::new();
    for r in &spec.related {
        related.push((kind(client, &r.kind_ref()).await?, r.namespace.clone()));
    }
    Ok(gantry_operator::rbac::needs::of_binding(
        &parent, &children, &related, scope,
    ))
}

async fn kind(client: Option<&Client>, kind: &KindRef) -> anyhow::Result<Kind> {
    if let Some(client) = client {
        gantry_operator::controller::watches::resolve(client, kind)
            .await
            .map(|info| Kind::from(&info))
            .map_err(|refusal| anyhow::anyhow!(refusal.message))
    } else {
        let (group, version) = kind
            .api_version
            .split_once('/')
            .unwrap_or(("", &kind.api_version));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &kind.kind));
        Ok(Kind {
            group: resource.group,
            plural: resource.plural,
            namespaced: true,
            has_status: true,
        })
    }
}
