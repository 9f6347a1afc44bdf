#!/usr/bin/env python3
"""Generates src/schema/generated.rs from the k8s-openapi crate sources.

k8s-openapi keeps each type's list/map merge strategy only inside its generated
`DeepMerge` impl; this script reads those impls (plus the struct fields, the JSON field
names and the `Resource` constants) and writes a compact table the crate turns into
`Schema`s at run time. Facts k8s-openapi lacks are added from OVERRIDE_KEYS and
ATOMIC_STRUCTS below (kube's `+listMapKey` and `+structType=atomic` markers).

Usage: tools/gen_builtin_schemas.py <path to k8s-openapi-0.29.x/src/v1_33> > src/schema/generated.rs
"""
import os
import re
import sys

ROOT = sys.argv[1]

# list-map keys k8s-openapi drops (kube's x-kubernetes-list-map-keys).
OVERRIDE_KEYS = {
    ("api::core::v1::Container", "ports"): ["containerPort", "protocol"],
    ("api::core::v1::EphemeralContainer", "ports"): ["containerPort", "protocol"],
    ("api::core::v1::ServiceSpec", "ports"): ["port", "protocol"],
    ("api::core::v1::PodSpec", "topologySpreadConstraints"): ["topologyKey", "whenUnsatisfiable"],
}
# Key defaults (the OpenAPI `default` of a key field).
KEY_DEFAULTS = {"protocol": "TCP"}

# Types marked +structType=atomic (x-kubernetes-map-type: atomic) in kube.
ATOMIC_STRUCTS = {
    "apimachinery::pkg::apis::meta::v1::LabelSelector",
    "api::core::v1::LocalObjectReference",
    "api::core::v1::ConfigMapKeySelector",
    "api::core::v1::SecretKeySelector",
    "api::core::v1::ObjectFieldSelector",
    "api::core::v1::ResourceFieldSelector",
    "api::core::v1::NodeSelector",
    "api::core::v1::NodeSelectorTerm",
    "api::core::v1::TopologySelectorTerm",
    "api::core::v1::ObjectReference",
    "api::core::v1::TypedLocalObjectReference",
    "api::core::v1::SecretReference",
}

SCALARS = {
    "std::string::String", "i32", "i64", "f64", "bool", "crate::ByteString",
    "crate::apimachinery::pkg::api::resource::Quantity",
    "crate::apimachinery::pkg::util::intstr::IntOrString",
    "crate::apimachinery::pkg::apis::meta::v1::Time",
    "crate::apimachinery::pkg::apis::meta::v1::MicroTime",
}
UNTYPED_PREFIXES = (
    "crate::apimachinery::pkg::runtime::RawExtension",
    "crate::apimachinery::pkg::apis::meta::v1::FieldsV1",
    "crate::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON",
    "crate::serde_json::Value",
)


def unwrap(t, name):
    t = t.strip()
    if t.startswith(name + "<") and t.endswith(">"):
        return t[len(name) + 1:-1].strip()
    return None


def parse_file(path, rel):
    src = open(path).read()
    m = re.search(r"^pub struct (\w+) \{(.*?)^\}", src, re.S | re.M)
    if not m:
        return None
    name = m.group(1)
    tid = "::".join(rel[:-1] + [name])
    fields = []
    for line in m.group(2).splitlines():
        fm = re.match(r"\s*pub (\w+): (.*),\s*$", line)
        if fm:
            fields.append((fm.group(1), fm.group(2)))
    json_names = dict(
        (r, j) for j, r in re.findall(r'"([^"]+)" => Field::Key_(\w+),', src)
    )
    strategies = {}
    dm = re.search(r"impl crate::DeepMerge for " + name + r" \{(.*?)\n\}\n", src, re.S)
    if dm:
        body = dm.group(1)
        for f, keys in re.findall(
            r"list::map\(\s*&mut self\.(\w+),\s*other\.\w+,\s*&\[(.*?)\],", body, re.S
        ):
            found = re.findall(r"lhs\.(\w+) ==", keys)
            # Keys on nested fields (volumeClaimTemplates' metadata.name) are k8s-openapi
            # specials; kube marks those lists atomic.
            strategies[f] = ("map", found) if found else ("atomic", None)
        for f in re.findall(r"list::atomic\(&mut self\.(\w+)", body):
            strategies[f] = ("atomic", None)
        for f in re.findall(r"list::set\(&mut self\.(\w+)", body):
            strategies[f] = ("set", None)
        for f in re.findall(r"map::atomic\(&mut self\.(\w+)", body):
            strategies[f] = ("atomicmap", None)
        for f in re.findall(r"map::granular\(&mut self\.(\w+)", body):
            strategies[f] = ("granular", None)
    res = None
    km = re.search(r'const KIND: &\'static str = "([^"]+)";', src)
    gm = re.search(r'const GROUP: &\'static str = "([^"]*)";', src)
    vm = re.search(r'const VERSION: &\'static str = "([^"]+)";', src)
    if km and gm and vm and "impl crate::Resource for " + name in src:
        res = (gm.group(1), vm.group(1), km.group(1))
    return tid, fields, json_names, strategies, res


def main():
    types = {}
    for dirpath, _, files in os.walk(ROOT):
        for fn in files:
            if not fn.endswith(".rs") or fn in ("mod.rs", "list.rs"):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            parsed = parse_file(path, rel)
            if parsed:
                types[parsed[0]] = parsed

    def elem_expr(t):
        t = t.strip()
        inner = unwrap(t, "Option") or t
        inner = unwrap(inner, "std::boxed::Box") or inner
        return inner

    def expr(t, strat, owner, jfield, elem_json):
        t = elem_expr(t)
        v = unwrap(t, "std::vec::Vec")
        if v is not None:
            kind = strat[0] if strat else "atomic"
            if kind == "map":
                keys = OVERRIDE_KEYS.get((owner, jfield))
                if keys is None:
                    keys = [elem_json(v).get(k, k) for k in strat[1]]
                return "[m:" + ",".join(keys) + "]" + expr(v, None, None, None, elem_json)
            if kind == "set":
                return "[s]" + expr(v, None, None, None, elem_json)
            return "[a]" + expr(v, None, None, None, elem_json)
        mp = unwrap(t, "std::collections::BTreeMap")
        if mp is not None:
            val = mp.split(",", 1)[1].strip()
            kind = "{a}" if strat and strat[0] == "atomicmap" else "{g}"
            return kind + expr(val, None, None, None, elem_json)
        if t in SCALARS:
            return "s"
        if t.startswith(UNTYPED_PREFIXES) or "JSONSchemaProps" in t:
            return "u"
        if t.startswith("crate::"):
            tid = t[len("crate::"):]
            if tid in types:
                return "T:" + tid
            return "u"
        return "u"

    def json_of(tid):
        return types[tid][2] if tid in types else {}

    def elem_json_factory(t):
        t = elem_expr(t)
        v = unwrap(t, "std::vec::Vec")
        if v is not None:
            v = elem_expr(v)
            if v.startswith("crate::"):
                return json_of(v[len("crate::"):])
        return {}

    out_types = []
    kinds = []
    for tid in sorted(types):
        _, fields, json_names, strategies, res = types[tid]
        if tid.startswith("apimachinery::pkg::apis::meta::v1::WatchEvent"):
            continue
        fl = []
        for rname, rtype in fields:
            jname = json_names.get(rname)
            if jname is None:
                continue
            ej = elem_json_factory(rtype)
            fl.append((jname, expr(rtype, strategies.get(rname), tid, jname, lambda _v, ej=ej: ej)))
        out_types.append((tid, tid in ATOMIC_STRUCTS, fl))
        if res:
            kinds.append((res[0], res[1], res[2], tid))

    print("//! Generated by `tools/gen_builtin_schemas.py` from k8s-openapi 0.29 (`v1_33`). Do not edit.")
    print("//!")
    print("//! Field type expressions: `s` scalar, `u` untyped, `T:<type>` struct, `[a]` atomic")
    print("//! list of, `[s]` set of, `[m:k1,k2]` list-map of, `{g}` granular map of, `{a}` atomic")
    print("//! map of.")
    print()
    print("/// Key defaults of list-map key fields.")
    print("pub(super) static KEY_DEFAULTS: &[(&str, &str)] = &[")
    for k, v in KEY_DEFAULTS.items():
        print(f'    ("{k}", "{v}"),')
    print("];")
    print()
    print("/// (type, atomic struct, [(json field, type expression)]).")
    print("pub(super) type TypeEntry = (&'static str, bool, &'static [(&'static str, &'static str)]);")
    print()
    print("/// Every type, sorted by name.")
    print("#[rustfmt::skip]")
    print("pub(super) static TYPES: &[TypeEntry] = &[")
    for tid, atomic, fl in out_types:
        fs = ", ".join(f'("{j}", "{e}")' for j, e in fl)
        print(f'    ("{tid}", {"true" if atomic else "false"}, &[{fs}]),')
    print("];")
    print()
    print("/// (group, version, kind, type).")
    print("#[rustfmt::skip]")
    print("pub(super) static KINDS: &[(&str, &str, &str, &str)] = &[")
    for g, v, k, tid in sorted(kinds):
        print(f'    ("{g}", "{v}", "{k}", "{tid}"),')
    print("];")


main()
