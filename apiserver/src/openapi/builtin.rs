//! kube-apiserver 1.36's OpenAPI documents for the built-in group-versions,
//! captured by `scripts/kube-openapi` and decompressed on first use.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::Document;

const V3: &[u8] = include_bytes!("v3.bin.zst");
const V2_JSON: &[u8] = include_bytes!("v2.json.zst");
const V2_PB: &[u8] = include_bytes!("v2.pb.zst");

struct V3Docs {
    docs: BTreeMap<String, Document>,
    /// Schemas a custom resource's document refers to (`ObjectMeta`, `ListMeta`,
    /// `Scale`, and what they refer to), by name.
    shared: Map<String, Value>,
}

fn decompress(data: &[u8]) -> Vec<u8> {
    zstd::decode_all(data).expect("captured OpenAPI documents decompress")
}

fn v3() -> &'static V3Docs {
    static DOCS: OnceLock<V3Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        let docs = split(&decompress(V3));
        let schemas_of = |gv: &str| -> Value {
            let doc: Value = serde_json::from_slice(&docs[gv].bytes).expect("v3 is JSON");
            doc["components"]["schemas"].clone()
        };
        let mut shared = Map::new();
        for (gv, roots) in [
            (
                "api/v1",
                &[
                    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                    "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
                ][..],
            ),
            (
                "apis/autoscaling/v1",
                &["io.k8s.api.autoscaling.v1.Scale"][..],
            ),
        ] {
            let schemas = schemas_of(gv);
            for root in roots {
                collect(&schemas, root, &mut shared);
            }
        }
        V3Docs { docs, shared }
    })
}

/// Splits `scripts/kube-openapi`'s `v3.bin`: per document a line `PATH LENGTH`,
/// then the document.
fn split(mut data: &[u8]) -> BTreeMap<String, Document> {
    let mut docs = BTreeMap::new();
    while let Some(nl) = data.iter().position(|b| *b == b'\n') {
        let header = std::str::from_utf8(&data[..nl]).expect("header is UTF-8");
        let (path, len) = header.split_once(' ').expect("PATH LENGTH");
        let len: usize = len.parse().expect("length");
        let body = data[nl + 1..nl + 1 + len].to_vec();
        docs.insert(path.to_string(), Document::new(body));
        data = &data[nl + 1 + len..];
    }
    docs
}

/// Copies schema `name` and every schema it refers to from `schemas` into `out`.
fn collect(schemas: &Value, name: &str, out: &mut Map<String, Value>) {
    if out.contains_key(name) {
        return;
    }
    let schema = schemas[name].clone();
    out.insert(name.to_string(), schema.clone());
    let mut refs = Vec::new();
    super::refs(&schema, &mut refs);
    for r in refs {
        if let Some(n) = r.strip_prefix("#/components/schemas/") {
            collect(schemas, n, out);
        }
    }
}

/// kube's v3 document of a built-in group-version path (`api/v1`, `apis/G/V`).
pub fn v3_document(gv_path: &str) -> Option<&'static Document> {
    v3().docs.get(gv_path)
}

/// The schemas of `metav1` (and `autoscaling/v1` `Scale`) a custom resource
/// document carries.
pub fn shared_schemas() -> &'static Map<String, Value> {
    &v3().shared
}

/// kube's v2 document (built-in group-versions only), as JSON.
pub fn v2_json() -> &'static [u8] {
    static DOC: OnceLock<Vec<u8>> = OnceLock::new();
    DOC.get_or_init(|| decompress(V2_JSON))
}

/// kube's v2 document (built-in group-versions only), as gnostic protobuf.
pub fn v2_protobuf() -> &'static [u8] {
    static DOC: OnceLock<Vec<u8>> = OnceLock::new();
    DOC.get_or_init(|| decompress(V2_PB))
}
