//! x-kubernetes-validations (CEL) rules: compile errors at schema creation, evaluation
//! with kube's messages, messageExpression, reason, fieldPath, transition rules.

use gantry_schema::StructuralSchema;
use serde_json::{Value, json};

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn schema(spec_rules: Value) -> StructuralSchema {
    StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": spec_rules,
            "properties": {
                "minReplicas": {"type": "integer"},
                "maxReplicas": {"type": "integer", "maximum": 100},
                "ratio": {"type": "number"},
                "name": {"type": "string"},
                "immutable": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self.size() <= 5"}]}},
                "my-field": {"type": "integer"}
            }
        }}
    }))
    .unwrap_or_else(|e| panic!("{:?}", e.iter().map(gantry_schema::FieldError::message).collect::<Vec<_>>()))
}

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn msgs(s: &StructuralSchema, obj: Value) -> Vec<String> {
    s.validate(&obj)
        .iter()
        .map(gantry_schema::FieldError::message)
        .collect()
}

#[test]
fn failed_rule_uses_kube_message() {
    let s = schema(json!([{"rule": "self.minReplicas <= self.maxReplicas"}]));
    assert!(msgs(&s, json!({"spec": {"minReplicas": 1, "maxReplicas": 3}})).is_empty());
    assert_eq!(
        msgs(&s, json!({"spec": {"minReplicas": 5, "maxReplicas": 3}})),
        vec![r#"spec: Invalid value: "object": failed rule: self.minReplicas <= self.maxReplicas"#]
    );
}

#[test]
fn message_reason_field_path_and_message_expression() {
    let s = schema(json!([
        {"rule": "self.minReplicas <= self.maxReplicas", "message": "min must not exceed max", "fieldPath": ".minReplicas"},
        {"rule": "has(self.name)", "reason": "FieldValueRequired", "message": "name is required"},
        {"rule": "self.ratio < 1.0", "messageExpression": "'ratio ' + string(self.ratio) + ' is too big'"}
    ]));
    assert_eq!(
        msgs(
            &s,
            json!({"spec": {"minReplicas": 5, "maxReplicas": 3, "ratio": 2}})
        ),
        vec![
            r#"spec.minReplicas: Invalid value: "object": min must not exceed max"#,
            "spec: Required value: name is required",
            r#"spec: Invalid value: "object": ratio 2 is too big"#,
        ]
    );
}

#[test]
fn escaped_property_names_and_map_values() {
    let s = schema(json!([{"rule": "!has(self.my__dash__field) || self.my__dash__field > 0"}]));
    assert!(msgs(&s, json!({"spec": {"my-field": 1}})).is_empty());
    assert_eq!(msgs(&s, json!({"spec": {"my-field": 0}})).len(), 1);
    assert_eq!(
        msgs(
            &s,
            json!({"spec": {"labels": {"a": "short", "b": "toolong"}}})
        ),
        vec![r#"spec.labels[b]: Invalid value: "string": failed rule: self.size() <= 5"#]
    );
}

#[test]
fn string_extension_functions() {
    let s = schema(
        json!([{"rule": "!has(self.name) || self.name.lowerAscii() == self.name", "message": "name must be lower case"},
                          {"rule": "!has(self.name) || self.name.split('-').size() <= 2"}]),
    );
    assert!(msgs(&s, json!({"spec": {"name": "a-b"}})).is_empty());
    assert_eq!(
        msgs(&s, json!({"spec": {"name": "A-b-c"}})),
        vec![
            r#"spec: Invalid value: "object": name must be lower case"#,
            r#"spec: Invalid value: "object": failed rule: !has(self.name) || self.name.split('-').size() <= 2"#,
        ]
    );
}

#[test]
fn kube_list_and_regex_library() {
    let s = StructuralSchema::new(&json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.nums.isSorted()", "message": "sorted"},
            {"rule": "self.nums.sum() <= 10", "message": "sum"},
            {"rule": "self.nums.min() >= 1 && self.nums.max() <= 5", "message": "range"},
            {"rule": "self.name.find('[0-9]+') == '' || self.name.findAll('[0-9]').size() <= 2", "message": "digits"}
        ],
        "properties": {"nums": {"type": "array", "items": {"type": "integer"}}, "name": {"type": "string"}}}}}))
    .unwrap();
    let ok: Vec<String> = s
        .validate(&json!({"spec": {"nums": [1, 2, 3], "name": "a1"}}))
        .iter()
        .map(gantry_schema::FieldError::message)
        .collect();
    assert!(ok.is_empty(), "{ok:?}");
    let m: Vec<String> = s
        .validate(&json!({"spec": {"nums": [6, 5], "name": "a123"}}))
        .iter()
        .map(gantry_schema::FieldError::message)
        .collect();
    assert_eq!(
        m,
        vec![
            r#"spec: Invalid value: "object": sorted"#,
            r#"spec: Invalid value: "object": sum"#,
            r#"spec: Invalid value: "object": range"#,
            r#"spec: Invalid value: "object": digits"#,
        ]
    );
}

#[test]
fn runtime_errors_are_reported() {
    let s = schema(json!([{"rule": "self.name == 'x'"}]));
    assert_eq!(
        msgs(&s, json!({"spec": {}})),
        vec![
            r#"spec: Invalid value: "object": no such key: name evaluating rule: self.name == 'x'"#
        ]
    );
}

#[test]
fn transition_rules_only_on_update() {
    let s = schema(json!([]));
    let old = json!({"spec": {"immutable": "a"}});
    assert!(
        s.validate(&json!({"spec": {"immutable": "b"}})).is_empty(),
        "create: no oldSelf"
    );
    let errs: Vec<String> = s
        .validate_update(&json!({"spec": {"immutable": "b"}}), &old)
        .iter()
        .map(gantry_schema::FieldError::message)
        .collect();
    assert_eq!(
        errs,
        vec![r#"spec.immutable: Invalid value: "string": Value is immutable"#]
    );
    assert!(
        s.validate_update(&json!({"spec": {"immutable": "a", "name": "n"}}), &old)
            .is_empty()
    );
}

#[test]
fn schema_errors_block_rules() {
    let s = schema(json!([{"rule": "self.minReplicas <= self.maxReplicas"}]));
    assert_eq!(
        msgs(&s, json!({"spec": {"minReplicas": "x", "maxReplicas": 3}})),
        vec![
            r#"spec.minReplicas: Invalid value: "string": spec.minReplicas in body must be of type integer: "string""#,
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ]
    );
}

#[test]
fn root_rules_report_nil_path() {
    let s = StructuralSchema::new(&json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('a')"}],
        "properties": {"metadata": {"type": "object"}}
    }))
    .unwrap();
    assert!(s.validate(&json!({"metadata": {"name": "abc"}})).is_empty());
    assert_eq!(
        msgs(&s, json!({"metadata": {"name": "zzz"}})),
        vec![r#"<nil>: Invalid value: "object": failed rule: self.metadata.name.startsWith('a')"#]
    );
}

#[test]
fn bad_rules_reject_the_schema() {
    let errs = StructuralSchema::new_at(
        &json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.x +"}, {"rule": ""}, {"rule": "true", "reason": "Nope"}]}}}),
        "s",
    )
    .unwrap_err();
    let m: Vec<String> = errs
        .iter()
        .map(gantry_schema::FieldError::message)
        .collect();
    assert!(
        m[0].starts_with(r#"s.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "self.x +": compilation failed: ERROR: <input>:1:"#),
        "{}",
        m[0]
    );
    assert_eq!(
        m[1],
        "s.properties[spec].x-kubernetes-validations[1].rule: Required value: rule is not specified"
    );
    assert_eq!(
        m[2],
        r#"s.properties[spec].x-kubernetes-validations[2].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
    );
}

#[test]
fn hostile_rules_do_not_crash() {
    let deep_parens = format!("{}true{}", "(".repeat(1500), ")".repeat(1500));
    let long_chain = vec!["1"; 2000].join("+") + " > 0";
    let too_long = "a".repeat(5000);
    let compile = |rule: &str| {
        StructuralSchema::new(
            &json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": rule}]}}}),
        )
        .map_err(|errs| errs[0].message())
    };
    // deep nesting is refused by the parser's recursion limit, without crashing
    let e = compile(&deep_parens).unwrap_err();
    assert!(e.contains("compilation failed: ERROR: <input>"), "{e}");
    let e = compile(&too_long).unwrap_err();
    assert!(
        e.ends_with("compilation failed: ERROR: <input>: expression is longer than 4096 bytes"),
        "{e}"
    );
    // a long but valid rule compiles and evaluates
    let s = StructuralSchema::new(
        &json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": long_chain}]}}}),
    )
    .unwrap();
    assert!(s.validate(&json!({"spec": {}})).is_empty());
}

#[test]
fn defaults_must_satisfy_rules() {
    let errs = StructuralSchema::new_at(
        &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 3, "x-kubernetes-validations": [{"rule": "self % 2 == 0", "message": "must be even"}]}
        }}}}),
        "s",
    )
    .unwrap_err();
    assert_eq!(
        errs.iter()
            .map(gantry_schema::FieldError::message)
            .collect::<Vec<_>>(),
        vec![
            r#"s.properties[spec].properties[size].default: Invalid value: "integer": must be even"#
        ]
    );
}

#[test]
fn quadratic_rules_over_unbounded_lists_are_rejected() {
    let with_lists = |max_items: Option<i64>, rule: &str| {
        let mut list = json!({"type": "array", "items": {"type": "string"}});
        if let Some(m) = max_items {
            list["maxItems"] = json!(m);
        }
        StructuralSchema::new_at(
            &json!({"type": "object", "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": rule}],
                "properties": {"a": list.clone(), "b": list}}}}),
            "s",
        )
    };
    let quadratic = "self.a.all(x, self.b.exists(y, x == y))";
    let errs = with_lists(None, quadratic).unwrap_err();
    assert_eq!(
        errs[0].message(),
        "s.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    );
    assert!(
        with_lists(Some(100), quadratic).is_ok(),
        "bounded lists are fine"
    );
    assert!(
        with_lists(None, "self.a.all(x, x.size() < 10)").is_ok(),
        "linear rules are fine"
    );
    assert!(
        with_lists(None, "self.a.all(x, x.split('-').all(p, p != ''))").is_ok(),
        "dependent nesting is linear"
    );
}
