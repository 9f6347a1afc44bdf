//! One policy evaluated over one request with one parameter, as kube's validator:
//! matchConditions, then variables, validations and their messages, all under one
//! [`Budget`] (kube's `RuntimeCELCostBudget`). Runs on a CEL thread
//! ([`cel::with_big_stack`]).

use std::collections::HashMap;

use serde_json::Value;

use super::super::cel::{self, Activation, Budget, EvalError, Program};
use super::Policy;

/// kube's `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
/// kube's error once the budget is spent.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// A failed validation (or an evaluation error under `failurePolicy: Fail`); the
/// binding's validation actions decide what it does.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// The message.
    pub message: String,
    /// The status reason (`Invalid` when unset).
    pub reason: Option<String>,
}

/// Everything but the parameter: `object`, `oldObject`, `request`, `namespaceObject`.
pub struct Inputs {
    /// The bindings, without `params` and `variables`.
    pub activation: Activation,
}

impl Inputs {
    /// Converts the request's values once (call from a CEL thread: deep values).
    pub fn new(
        object: Option<&Value>,
        old: Option<&Value>,
        request: &Value,
        namespace: Option<&Value>,
    ) -> Result<Self, String> {
        let mut activation = Activation::default();
        activation.bind_json("object", object.unwrap_or(&Value::Null))?;
        activation.bind_json("oldObject", old.unwrap_or(&Value::Null))?;
        activation.bind_json("request", request)?;
        activation.bind_json("namespaceObject", namespace.unwrap_or(&Value::Null))?;
        Ok(Inputs { activation })
    }
}

fn expression_error(program: &Program, e: &EvalError) -> String {
    let detail = match e {
        EvalError::CostLimit => "operation cancelled: actual cost limit exceeded".to_string(),
        EvalError::OutOfBudget => OUT_OF_BUDGET.to_string(),
        EvalError::Failed(m) => m.clone(),
    };
    format!(
        "expression '{}' resulted in error: {detail}",
        program.source()
    )
}

/// Evaluates `policy` with `param`: the denials its validations produce (errors
/// included when the failure policy is Fail). Empty: admitted.
pub fn validate(policy: &Policy, inputs: &Inputs, param: Option<&Value>) -> Vec<Denial> {
    let on_error = |message: String| {
        if policy.fail {
            vec![Denial {
                message,
                reason: None,
            }]
        } else {
            vec![]
        }
    };
    let mut activation = inputs.activation.clone();
    if let Err(e) = activation.bind_json("params", param.unwrap_or(&Value::Null)) {
        return on_error(e);
    }
    match match_conditions(policy, &activation) {
        Ok(true) => {}
        Err(e) if policy.fail => return on_error(e),
        Ok(false) | Err(_) => return vec![],
    }
    let mut budget = Budget::runtime();
    let mut variables: HashMap<String, ::cel::Value> = HashMap::new();
    for v in &policy.variables {
        let mut scoped = activation.clone();
        scoped.bind("variables", variables.clone().into());
        match cel::evaluate_here(&v.program, &scoped, &mut budget) {
            Ok(value) => {
                variables.insert(v.name.clone(), value);
            }
            Err(EvalError::OutOfBudget) => return on_error(OUT_OF_BUDGET.into()),
            // Unbound: an expression using it fails with `no such key`.
            Err(_) => {}
        }
    }
    activation.bind("variables", variables.into());
    let mut denials = vec![];
    let mut failed = vec![];
    for v in &policy.validations {
        match cel::evaluate_here(&v.program, &activation, &mut budget) {
            Ok(::cel::Value::Bool(true)) => {}
            Ok(::cel::Value::Bool(false)) => failed.push(v),
            Ok(other) => denials.extend(on_error(format!(
                "expression '{}' resulted in error: expected a bool, got {}",
                v.program.source(),
                type_name(&other)
            ))),
            Err(EvalError::OutOfBudget) => return on_error(OUT_OF_BUDGET.into()),
            Err(e) => denials.extend(on_error(expression_error(&v.program, &e))),
        }
    }
    for v in failed {
        let mut message = String::new();
        if let Some(me) = &v.message_expression {
            match cel::evaluate_here(me, &activation, &mut budget) {
                Ok(::cel::Value::String(s)) => {
                    let s = s.trim();
                    if s.len() <= MAX_MESSAGE_BYTES && !s.contains('\n') {
                        message = s.to_string();
                    }
                }
                Err(EvalError::OutOfBudget) => {
                    denials.extend(on_error(format!(
                        "failed messageExpression: {OUT_OF_BUDGET}"
                    )));
                    continue;
                }
                _ => {}
            }
        }
        if message.is_empty() {
            message = v.message.as_deref().unwrap_or("").trim().to_string();
        }
        if message.is_empty() {
            message = format!("failed expression: {}", v.program.source().trim());
        }
        denials.push(Denial {
            message,
            reason: v.reason.clone(),
        });
    }
    denials
}

/// kube's matchConditions matcher: Ok(false) as soon as one is false; errors
/// (aggregated as kube's `utilerrors.NewAggregate`) when none is.
fn match_conditions(policy: &Policy, activation: &Activation) -> Result<bool, String> {
    let mut budget = Budget::runtime();
    let mut errors = vec![];
    for c in &policy.match_conditions {
        match cel::evaluate_here(&c.program, activation, &mut budget) {
            Ok(::cel::Value::Bool(false)) => return Ok(false),
            Ok(::cel::Value::Bool(true)) => {}
            Ok(other) => errors.push(format!(
                "expression '{}' resulted in error: expected a bool, got {}",
                c.program.source(),
                type_name(&other)
            )),
            Err(EvalError::OutOfBudget) => return Err(OUT_OF_BUDGET.into()),
            Err(e) => errors.push(expression_error(&c.program, &e)),
        }
    }
    match errors.len() {
        0 => Ok(true),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

fn type_name(v: &::cel::Value) -> &'static str {
    match v {
        ::cel::Value::List(_) => "list",
        ::cel::Value::Map(_) => "map",
        ::cel::Value::Int(_) => "int",
        ::cel::Value::UInt(_) => "uint",
        ::cel::Value::Float(_) => "double",
        ::cel::Value::String(_) => "string",
        ::cel::Value::Bytes(_) => "bytes",
        ::cel::Value::Null => "null",
        _ => "dyn",
    }
}
