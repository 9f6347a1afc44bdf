//! The `default/kubernetes` Service and its `Endpoints` and `EndpointSlice`, as
//! kube-apiserver keeps them: port `https` 443 to the server's own address
//! and port, the first address of the service range, re-made when deleted.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde_json::{Value, json};

use super::system_object::{created, resource};
use crate::registry::Registry;
use crate::storage::{View, Write};

/// The Service's name.
pub const NAME: &str = "kubernetes";

/// The Service's cluster IP: the first of the range the server allocates
/// from (10.96.0.0/12).
pub const CLUSTER_IP: &str = "10.96.0.1";

/// The address clients reach the server at: the listen address, loopback
/// when it listens on all addresses.
fn endpoint_ip(listen: SocketAddr) -> IpAddr {
    match listen.ip() {
        ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        ip => ip,
    }
}

fn service(listen: SocketAddr) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "namespace": "default",
            "labels": {"provider": "kubernetes", "component": "apiserver"}},
        "spec": {
            "ports": [{"name": "https", "protocol": "TCP", "port": 443,
                "targetPort": listen.port()}],
            "clusterIP": CLUSTER_IP,
            "ipFamilyPolicy": "SingleStack",
            "sessionAffinity": "None",
            "type": "ClusterIP",
        },
    })
}

fn endpoints(listen: SocketAddr) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": NAME, "namespace": "default",
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{
            "addresses": [{"ip": endpoint_ip(listen).to_string()}],
            "ports": [{"name": "https", "port": listen.port(), "protocol": "TCP"}],
        }],
    })
}

fn endpoint_slice(listen: SocketAddr) -> Value {
    let ip = endpoint_ip(listen);
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": "default",
            "labels": {"kubernetes.io/service-name": NAME}},
        "addressType": if ip.is_ipv6() { "IPv6" } else { "IPv4" },
        "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": listen.port(), "protocol": "TCP"}],
    })
}

/// Creates of whichever of the three is missing (nothing while `default`
/// is missing or being deleted).
pub fn plan(registry: &Registry, view: &View<'_>, listen: SocketAddr) -> Vec<Write> {
    let namespace = view.get(&crate::handlers::write::namespace_key("default"));
    if namespace.is_none_or(|ns| crate::objects::meta::is_deleting(ns)) {
        return vec![];
    }
    [
        (("", "v1", "services"), service(listen)),
        (("", "v1", "endpoints"), endpoints(listen)),
        (
            ("discovery.k8s.io", "v1", "endpointslices"),
            endpoint_slice(listen),
        ),
    ]
    .into_iter()
    .filter_map(|((group, version, plural), obj)| {
        let info = resource(registry, group, version, plural);
        if view.get(&info.key(Some("default"), NAME)).is_some() {
            return None;
        }
        let (key, obj) = created(&info, obj, super::APISERVER);
        Some(Write::Put(key, obj))
    })
    .collect()
}
