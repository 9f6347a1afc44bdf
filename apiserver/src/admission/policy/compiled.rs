//! Stored policies and bindings, parsed and with their expressions compiled once
//! (at every reload), as kube's policy source does.

use k8s_openapi::api::admissionregistration::v1 as admreg;
use serde_json::Value;

use super::super::cel::{self, Program};

/// A named expression (matchCondition, variable).
#[derive(Debug, Clone)]
pub struct Named {
    /// Its name.
    pub name: String,
    /// The compiled expression.
    pub program: Program,
}

/// One `spec.validations` entry.
#[derive(Debug, Clone)]
pub struct Validation {
    /// The expression.
    pub program: Program,
    /// `message`.
    pub message: Option<String>,
    /// `messageExpression`, compiled.
    pub message_expression: Option<Program>,
    /// `reason` (default Invalid).
    pub reason: Option<String>,
}

/// A `ValidatingAdmissionPolicy`, compiled.
#[derive(Debug, Clone)]
pub struct Policy {
    /// metadata.name.
    pub name: String,
    /// `failurePolicy: Fail` (the default), else Ignore.
    pub fail: bool,
    /// `paramKind` (apiVersion, kind).
    pub param_kind: Option<(String, String)>,
    /// `matchConstraints`.
    pub constraints: admreg::MatchResources,
    /// `matchConditions`.
    pub match_conditions: Vec<Named>,
    /// `variables`, in order.
    pub variables: Vec<Named>,
    /// `validations`.
    pub validations: Vec<Validation>,
    /// An expression that did not compile: every matching request meets it
    /// (kube's `ConfigurationError`).
    pub configuration_error: Option<String>,
}

/// A `ValidatingAdmissionPolicyBinding`.
#[derive(Debug, Clone)]
pub struct Binding {
    /// metadata.name.
    pub name: String,
    /// `policyName`.
    pub policy: String,
    /// `paramRef`.
    pub param_ref: Option<admreg::ParamRef>,
    /// `matchResources` (None: everything the policy matches).
    pub match_resources: Option<admreg::MatchResources>,
    /// `validationActions`.
    pub actions: Vec<String>,
}

impl Policy {
    /// Parses and compiles a stored policy; None when it does not decode.
    pub fn parse(obj: &Value) -> Option<Policy> {
        let p: admreg::ValidatingAdmissionPolicy = serde_json::from_value(obj.clone()).ok()?;
        let spec = p.spec.unwrap_or_default();
        let mut errors = vec![];
        let mut compile = |src: &str| match cel::compile(src) {
            Ok(p) => Some(p),
            Err(e) => {
                errors.push(format!("compilation failed: {e}"));
                None
            }
        };
        let named = |list: Vec<(String, String)>,
                     compile: &mut dyn FnMut(&str) -> Option<Program>| {
            list.into_iter()
                .filter_map(|(name, src)| compile(&src).map(|program| Named { name, program }))
                .collect::<Vec<_>>()
        };
        let match_conditions = named(
            spec.match_conditions
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.name, c.expression))
                .collect(),
            &mut compile,
        );
        let variables = named(
            spec.variables
                .unwrap_or_default()
                .into_iter()
                .map(|v| (v.name, v.expression))
                .collect(),
            &mut compile,
        );
        let mut validations = vec![];
        for v in spec.validations.unwrap_or_default() {
            let Some(program) = compile(&v.expression) else {
                continue;
            };
            let message_expression = v
                .message_expression
                .filter(|m| !m.trim().is_empty())
                .and_then(|m| compile(&m));
            validations.push(Validation {
                program,
                message: v.message,
                message_expression,
                reason: v.reason,
            });
        }
        Some(Policy {
            name: p.metadata.name.unwrap_or_default(),
            fail: spec.failure_policy.as_deref() != Some("Ignore"),
            param_kind: spec.param_kind.map(|pk| {
                (
                    pk.api_version.unwrap_or_default(),
                    pk.kind.unwrap_or_default(),
                )
            }),
            constraints: spec.match_constraints.unwrap_or_default(),
            match_conditions,
            variables,
            validations,
            configuration_error: (!errors.is_empty()).then(|| errors.join("; ")),
        })
    }
}

impl Binding {
    /// Parses a stored binding; None when it does not decode.
    pub fn parse(obj: &Value) -> Option<Binding> {
        let b: admreg::ValidatingAdmissionPolicyBinding =
            serde_json::from_value(obj.clone()).ok()?;
        let spec = b.spec.unwrap_or_default();
        Some(Binding {
            name: b.metadata.name.unwrap_or_default(),
            policy: spec.policy_name.unwrap_or_default(),
            param_ref: spec.param_ref,
            match_resources: spec.match_resources,
            actions: spec.validation_actions.unwrap_or_default(),
        })
    }
}
