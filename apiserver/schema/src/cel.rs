//! `x-kubernetes-validations`: CEL rules compiled at schema creation and evaluated on
//! custom resources, with kube's messages (`failed rule: ...`), `messageExpression`,
//! `reason`, `fieldPath`, transition rules (`oldSelf`) and ratcheting.
//!
//! Evaluation is dynamic (no static type check against the schema as cel-go does), so a
//! reference to an undeclared field is reported when it is evaluated (`no such key`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

use crate::error::{FieldError, FieldErrorKind};
use crate::path::{child, index, key};
use crate::schema::{AdditionalProperties, StructuralSchema};

/// One compiled `x-kubernetes-validations` entry.
#[derive(Clone)]
// `rule` is the entry's field of that name in `x-kubernetes-validations`.
#[allow(clippy::struct_field_names)]
pub(crate) struct Rule {
    pub(crate) rule: String,
    pub(crate) message: String,
    pub(crate) message_expression: Option<Arc<cel::Program>>,
    pub(crate) reason: String,
    pub(crate) field_path: String,
    pub(crate) program: Arc<cel::Program>,
    /// References `oldSelf`: only evaluated on updates with a correlated old value.
    pub(crate) transition: bool,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("rule", &self.rule)
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule
            && self.message == other.message
            && self.reason == other.reason
            && self.field_path == other.field_path
    }
}

const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Parses and compiles the `x-kubernetes-validations` of one node, reporting kube's
/// CRD errors under `path` (the node's path).
pub(crate) fn parse_rules(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) -> Vec<Rule> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let vpath = child(path, "x-kubernetes-validations");
    let Some(list) = v.as_array() else {
        errs.push(FieldError::new(
            FieldErrorKind::Invalid,
            vpath,
            Some(v.clone()),
            "must be an array",
        ));
        return Vec::new();
    };
    let mut rules = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let epath = index(&vpath, i);
        let get = |k: &str| {
            entry
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (rule, message, message_expr, reason, field_path) = (
            get("rule"),
            get("message"),
            get("messageExpression"),
            get("reason"),
            get("fieldPath"),
        );
        let trimmed_rule = rule.trim();
        let trimmed_msg = message.trim();
        let has_newline = |s: &str| s.contains('\n') || s.contains('\r');
        let rule_value = Some(Value::String(rule.clone()));
        if trimmed_rule.is_empty() {
            errs.push(FieldError::new(
                FieldErrorKind::Required,
                child(&epath, "rule"),
                None,
                "rule is not specified",
            ));
            continue;
        } else if !message.is_empty() && trimmed_msg.is_empty() {
            errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                child(&epath, "message"),
                Some(Value::String(message.clone())),
                "message must be non-empty if specified",
            ));
        } else if has_newline(trimmed_msg) {
            errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                child(&epath, "message"),
                Some(Value::String(message.clone())),
                "message must not contain line breaks",
            ));
        } else if has_newline(trimmed_rule) && trimmed_msg.is_empty() {
            errs.push(FieldError::new(
                FieldErrorKind::Required,
                child(&epath, "message"),
                None,
                "message must be specified if rule contains line breaks",
            ));
        }
        if !reason.is_empty() && !REASONS.contains(&reason.as_str()) {
            let quoted: Vec<String> = REASONS.iter().map(|r| crate::gofmt::quote(r)).collect();
            errs.push(FieldError::new(
                FieldErrorKind::NotSupported,
                child(&epath, "reason"),
                Some(Value::String(reason.clone())),
                format!("supported values: {}", quoted.join(", ")),
            ));
        }
        let program = match compile(&rule) {
            Ok(p) => p,
            Err(e) => {
                errs.push(FieldError::new(
                    FieldErrorKind::Invalid,
                    child(&epath, "rule"),
                    rule_value,
                    format!("compilation failed: {e}"),
                ));
                continue;
            }
        };
        let message_expression = if message_expr.trim().is_empty() {
            None
        } else {
            match compile(&message_expr) {
                Ok(p) => Some(Arc::new(p)),
                Err(e) => {
                    errs.push(FieldError::new(
                        FieldErrorKind::Invalid,
                        child(&epath, "messageExpression"),
                        Some(Value::String(message_expr.clone())),
                        format!("messageExpression compilation failed: {e}"),
                    ));
                    None
                }
            }
        };
        let transition = program.references().has_variable("oldSelf");
        rules.push(Rule {
            rule,
            message,
            message_expression,
            reason,
            field_path: field_path.trim_start_matches('.').to_string(),
            program: Arc::new(program),
            transition,
        });
    }
    rules
}

/// The CEL environment: the standard library plus the cel-go `ext.Strings` and
/// `ext.Lists` extensions (kube's base environment includes the strings extension).
static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    let mut env = cel::Env::stdlib();
    // Registration into a fresh stdlib env cannot conflict; ignore the Result.
    let _ = cel::extensions::strings(&mut env);
    let _ = cel::extensions::lists(&mut env);
    Arc::new(env)
});

/// A fresh evaluation context with kube's list and regex library functions.
fn context() -> cel::Context<'static, 'static> {
    let mut ctx = cel::Context::with_env(ENV.clone());
    // Names absent from ENV, so registration cannot conflict.
    let _ = ctx.add_function("isSorted", kube_lib::is_sorted);
    let _ = ctx.add_function("sum", kube_lib::sum);
    let _ = ctx.add_function("min", kube_lib::min);
    let _ = ctx.add_function("max", kube_lib::max);
    let _ = ctx.add_function("find", kube_lib::find);
    let _ = ctx.add_function("findAll", kube_lib::find_all);
    ctx
}

/// kube's CEL library additions (k8s.io/apiserver/pkg/cel/library): lists and regex.
mod kube_lib {
    use std::cmp::Ordering;
    use std::sync::Arc;

    use cel::extractors::This;
    use cel::{ExecutionError, Value};

    fn err(f: &str, msg: &str) -> ExecutionError {
        ExecutionError::function_error(f, msg)
    }

    /// `list.isSorted()`.
    pub(super) fn is_sorted(This(list): This<Arc<Vec<Value>>>) -> Result<bool, ExecutionError> {
        for w in list.windows(2) {
            match w[0].partial_cmp(&w[1]) {
                Some(Ordering::Greater) => return Ok(false),
                Some(_) => {}
                None => return Err(err("isSorted", "elements are not comparable")),
            }
        }
        Ok(true)
    }

    /// `list.sum()` of ints or doubles (0 for an empty list).
    pub(super) fn sum(This(list): This<Arc<Vec<Value>>>) -> Result<Value, ExecutionError> {
        let (mut i, mut f, mut is_float) = (0i64, 0f64, false);
        for v in list.iter() {
            match v {
                Value::Int(x) => {
                    i = i
                        .checked_add(*x)
                        .ok_or_else(|| err("sum", "integer overflow"))?;
                }
                Value::UInt(x) => {
                    i = i64::try_from(*x)
                        .ok()
                        .and_then(|x| i.checked_add(x))
                        .ok_or_else(|| err("sum", "integer overflow"))?;
                }
                Value::Float(x) => {
                    is_float = true;
                    f += x;
                }
                _ => return Err(err("sum", "no such overload")),
            }
        }
        Ok(if is_float {
            // An int added to doubles becomes a double, rounding as Go's float64(i).
            #[allow(clippy::cast_precision_loss)]
            Value::Float(f + i as f64)
        } else {
            Value::Int(i)
        })
    }

    fn extreme(name: &str, items: &[Value], want: Ordering) -> Result<Value, ExecutionError> {
        let mut best: Option<&Value> = None;
        for v in items {
            best = match best {
                None => Some(v),
                Some(b) => match v.partial_cmp(b) {
                    Some(o) if o == want => Some(v),
                    Some(_) => Some(b),
                    None => return Err(err(name, "elements are not comparable")),
                },
            };
        }
        best.cloned()
            .ok_or_else(|| err(name, &format!("{name} called on empty list")))
    }

    /// `list.min()`.
    pub(super) fn min(This(list): This<Arc<Vec<Value>>>) -> Result<Value, ExecutionError> {
        extreme("min", &list, Ordering::Less)
    }

    /// `list.max()`.
    pub(super) fn max(This(list): This<Arc<Vec<Value>>>) -> Result<Value, ExecutionError> {
        extreme("max", &list, Ordering::Greater)
    }

    fn regex(f: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
        crate::regex_compat::compile(pattern).map_err(|e| err(f, &e.to_string()))
    }

    /// `string.find(regex)`: the first match or `""`.
    // cel's extractors hand every argument over by value.
    #[allow(clippy::needless_pass_by_value)]
    pub(super) fn find(
        This(s): This<Arc<String>>,
        pattern: Arc<String>,
    ) -> Result<Value, ExecutionError> {
        let re = regex("find", &pattern)?;
        Ok(Value::String(Arc::new(
            re.find(&s)
                .map(|m| m.as_str().to_string())
                .unwrap_or_default(),
        )))
    }

    /// `string.findAll(regex)`: every match.
    // cel's extractors hand every argument over by value.
    #[allow(clippy::needless_pass_by_value)]
    pub(super) fn find_all(
        This(s): This<Arc<String>>,
        pattern: Arc<String>,
    ) -> Result<Value, ExecutionError> {
        let re = regex("findAll", &pattern)?;
        let all: Vec<Value> = re
            .find_iter(&s)
            .map(|m| Value::String(Arc::new(m.as_str().to_string())))
            .collect();
        Ok(Value::List(Arc::new(all)))
    }
}

/// Longest accepted rule or messageExpression (the CEL parser and evaluator recurse on
/// the expression's nesting; this bound plus [`STACK_SIZE`] keeps them off the guard page).
const MAX_EXPRESSION_LEN: usize = 4096;

/// Stack for CEL parsing/evaluation threads (reserved lazily by the OS).
const STACK_SIZE: usize = 256 << 20;

/// Runs `f` on a helper thread with a large stack; `None` if it panicked.
pub(crate) fn with_big_stack<R: Send>(f: impl FnOnce() -> R + Send) -> Option<R> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("gantry-schema-cel".into())
            .stack_size(STACK_SIZE)
            .spawn_scoped(scope, f)
            .ok()?
            .join()
            .ok()
    })
}

/// Compiles CEL off the caller's stack, turning parser panics into errors.
fn compile(src: &str) -> Result<cel::Program, String> {
    if src.len() > MAX_EXPRESSION_LEN {
        return Err(format!(
            "ERROR: <input>: expression is longer than {MAX_EXPRESSION_LEN} bytes"
        ));
    }
    match with_big_stack(|| ENV.compile(src).map_err(|e| e.to_string())) {
        Some(r) => r,
        None => Err("ERROR: <input>: unable to parse expression".into()),
    }
}

/// CEL identifier escaping of property names (kube's `escaping.Escape`).
fn escape(name: &str) -> String {
    const RESERVED: [&str; 18] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
    ];
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    name.replace("__", "__underscores__")
        .replace('.', "__dot__")
        .replace('-', "__dash__")
        .replace('/', "__slash__")
}

/// JSON → CEL value, typed by the schema (integer → int, number → double,
/// date-time strings → timestamp, declared properties → escaped names).
fn to_cel(v: &Value, s: Option<&StructuralSchema>) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            if s.is_some_and(|s| s.type_ == "number") {
                cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            } else if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(st) => {
            if s.is_some_and(|s| s.format == "date-time")
                && let Ok(t) = chrono::DateTime::parse_from_rfc3339(st)
            {
                return cel::Value::Timestamp(t);
            }
            cel::Value::String(Arc::new(st.clone()))
        }
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            cel::Value::List(Arc::new(a.iter().map(|x| to_cel(x, items)).collect()))
        }
        Value::Object(m) => {
            let mut out: HashMap<String, cel::Value> = HashMap::with_capacity(m.len());
            for (k, x) in m {
                match s {
                    Some(s) if s.properties.contains_key(k) => {
                        out.insert(escape(k), to_cel(x, s.properties.get(k)));
                    }
                    Some(s) => {
                        let ap = match &s.additional_properties {
                            Some(AdditionalProperties::Schema(ap)) => Some(&**ap),
                            _ => None,
                        };
                        out.insert(k.clone(), to_cel(x, ap));
                    }
                    None => {
                        out.insert(k.clone(), to_cel(x, None));
                    }
                }
            }
            out.into()
        }
    }
}

/// cel-go's wording for common runtime errors.
fn eval_error_text(e: &cel::ExecutionError) -> String {
    match e {
        cel::ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        cel::ExecutionError::UndeclaredReference(r) => format!("undeclared reference to '{r}'"),
        other => other.to_string(),
    }
}

fn rule_error_string(r: &Rule) -> String {
    if r.message.trim().is_empty() {
        r.rule.trim().to_string()
    } else {
        r.message.trim().to_string()
    }
}

fn rule_message_or_default(r: &Rule) -> String {
    if r.message.trim().is_empty() {
        format!("failed rule: {}", rule_error_string(r))
    } else {
        r.message.trim().to_string()
    }
}

/// Evaluates the rules of every node on its values (non-null), with ratcheting.
pub(crate) fn validate(
    s: &StructuralSchema,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if v.is_null() || old.is_some_and(|o| crate::validation::json_eq(o, v)) {
        return;
    }
    if !s.rules.is_empty() {
        eval_rules(s, v, old, path, errs);
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let old_x = old.and_then(|o| o.get(k));
                if let Some(p) = s.properties.get(k) {
                    validate(p, x, old_x, &child(path, k), errs);
                } else if let Some(AdditionalProperties::Schema(ap)) = &s.additional_properties {
                    validate(ap, x, old_x, &key(path, k), errs);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                let old_index = crate::validation::old_items_by_key(s, old);
                for (i, x) in a.iter().enumerate() {
                    let old_x = old_index
                        .as_ref()
                        .and_then(|m| m.get(&crate::validation::list_map_key(s, x)).copied());
                    validate(items, x, old_x, &index(path, i), errs);
                }
            }
        }
        _ => {}
    }
}

fn eval_rules(
    s: &StructuralSchema,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let self_val = to_cel(v, Some(s));
    let old_val = old.map(|o| to_cel(o, Some(s)));
    let field = if path.is_empty() {
        "<nil>".to_string()
    } else {
        path.to_string()
    };
    let type_value = Some(Value::String(s.type_.clone()));
    for r in &s.rules {
        if r.transition && old_val.is_none() {
            continue;
        }
        let mut ctx = context();
        ctx.add_variable_from_value("self", self_val.clone());
        if let Some(o) = &old_val {
            ctx.add_variable_from_value("oldSelf", o.clone());
        }
        match r.program.execute(&ctx) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(_) => {
                let fpath = if r.field_path.is_empty() {
                    field.clone()
                } else {
                    child(path, &r.field_path)
                };
                let detail = r
                    .message_expression
                    .as_ref()
                    .and_then(|me| match me.execute(&ctx) {
                        Ok(cel::Value::String(m)) if !m.trim().is_empty() && !m.contains('\n') => {
                            Some(m.trim().to_string())
                        }
                        _ => None,
                    })
                    .unwrap_or_else(|| rule_message_or_default(r));
                errs.push(match r.reason.as_str() {
                    "FieldValueForbidden" => {
                        FieldError::new(FieldErrorKind::Forbidden, fpath, None, detail)
                    }
                    "FieldValueRequired" => {
                        FieldError::new(FieldErrorKind::Required, fpath, None, detail)
                    }
                    "FieldValueDuplicate" => {
                        FieldError::new(FieldErrorKind::Duplicate, fpath, type_value.clone(), "")
                    }
                    _ => {
                        FieldError::new(FieldErrorKind::Invalid, fpath, type_value.clone(), detail)
                    }
                });
            }
            Err(e) => errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                field.clone(),
                type_value.clone(),
                format!(
                    "{} evaluating rule: {}",
                    eval_error_text(&e),
                    rule_error_string(r)
                ),
            )),
        }
    }
}

/// Whether any node has rules (kube only builds a CEL validator then).
pub(crate) fn has_rules(s: &StructuralSchema) -> bool {
    !s.rules.is_empty()
        || s.properties.values().any(has_rules)
        || s.items.as_deref().is_some_and(has_rules)
        || matches!(&s.additional_properties, Some(AdditionalProperties::Schema(ap)) if has_rules(ap))
}

/// kube's wording when a rule's estimated cost is over budget.
const COST_MESSAGE: &str = "estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

/// A stand-in for kube's static cost estimation, to keep hostile rules from running
/// for ever: a comprehension (`all`, `exists`, `map`, ...) nested inside another one
/// over an independent range is quadratic, and is only accepted when every list and map
/// under the node is bounded (`maxItems` / `maxProperties`), as kube would require.
pub(crate) fn cost_checks(s: &StructuralSchema, path: &str, errs: &mut Vec<FieldError>) {
    if s.rules.is_empty() || bounded(s) {
        return;
    }
    let vpath = child(path, "x-kubernetes-validations");
    for (i, r) in s.rules.iter().enumerate() {
        let risky =
            with_big_stack(|| quadratic(r.program.expression(), &[], false)).unwrap_or(true);
        if risky {
            errs.push(FieldError::new(
                FieldErrorKind::Forbidden,
                child(&index(&vpath, i), "rule"),
                None,
                COST_MESSAGE,
            ));
        }
    }
}

/// Every array and map below `s` has a size bound.
fn bounded(s: &StructuralSchema) -> bool {
    if s.preserve_unknown_fields && s.properties.is_empty() {
        return false;
    }
    if s.type_ == "array" && s.max_items.is_none() {
        return false;
    }
    if let Some(AdditionalProperties::Schema(ap)) = &s.additional_properties
        && (s.max_properties.is_none() || !bounded(ap))
    {
        return false;
    }
    s.properties.values().all(bounded) && s.items.as_deref().is_none_or(bounded)
}

/// Whether a comprehension is nested in another's body over a range that does not
/// depend on the outer iteration variables.
fn quadratic(e: &cel::IdedExpr, outer: &[String], inside: bool) -> bool {
    use cel::common::ast::{EntryExpr, Expr};
    match &e.expr {
        Expr::Comprehension(c) => {
            if inside && !references(&c.iter_range, outer) {
                return true;
            }
            let mut vars = outer.to_vec();
            vars.push(c.iter_var.clone());
            if let Some(v2) = &c.iter_var2 {
                vars.push(v2.clone());
            }
            quadratic(&c.iter_range, outer, inside)
                || quadratic(&c.accu_init, outer, inside)
                || quadratic(&c.loop_cond, &vars, true)
                || quadratic(&c.loop_step, &vars, true)
                || quadratic(&c.result, &vars, true)
        }
        Expr::Call(call) => {
            call.target
                .as_deref()
                .is_some_and(|t| quadratic(t, outer, inside))
                || call.args.iter().any(|a| quadratic(a, outer, inside))
        }
        Expr::List(l) => l.elements.iter().any(|x| quadratic(x, outer, inside)),
        Expr::Map(m) => m.entries.iter().any(|en| match &en.expr {
            EntryExpr::MapEntry(me) => {
                quadratic(&me.key, outer, inside) || quadratic(&me.value, outer, inside)
            }
            EntryExpr::StructField(sf) => quadratic(&sf.value, outer, inside),
        }),
        Expr::Struct(st) => st.entries.iter().any(|en| match &en.expr {
            EntryExpr::MapEntry(me) => {
                quadratic(&me.key, outer, inside) || quadratic(&me.value, outer, inside)
            }
            EntryExpr::StructField(sf) => quadratic(&sf.value, outer, inside),
        }),
        Expr::Select(sel) => quadratic(&sel.operand, outer, inside),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => false,
    }
}

/// Whether `e` mentions any of `vars`.
fn references(e: &cel::IdedExpr, vars: &[String]) -> bool {
    use cel::common::ast::{EntryExpr, Expr};
    match &e.expr {
        Expr::Ident(name) => vars.iter().any(|v| v == name),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .any(|x| references(x, vars)),
        Expr::Call(call) => {
            call.target.as_deref().is_some_and(|t| references(t, vars))
                || call.args.iter().any(|a| references(a, vars))
        }
        Expr::List(l) => l.elements.iter().any(|x| references(x, vars)),
        Expr::Map(m) => m.entries.iter().any(|en| match &en.expr {
            EntryExpr::MapEntry(me) => references(&me.key, vars) || references(&me.value, vars),
            EntryExpr::StructField(sf) => references(&sf.value, vars),
        }),
        Expr::Struct(st) => st.entries.iter().any(|en| match &en.expr {
            EntryExpr::MapEntry(me) => references(&me.key, vars) || references(&me.value, vars),
            EntryExpr::StructField(sf) => references(&sf.value, vars),
        }),
        Expr::Select(sel) => references(&sel.operand, vars),
        Expr::Literal(_) | Expr::Unspecified => false,
    }
}
