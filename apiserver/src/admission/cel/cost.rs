//! A runtime cost bound for the `cel` crate, which has none of its own.
//!
//! kube bounds CEL by cost: cel-go counts every evaluation step and stops an
//! expression past `PerCallLimit`, a policy evaluation past `RuntimeCELCostBudget`.
//! The `cel` crate's interpreter offers no step hook, cancellation or budget, and a
//! wall-clock deadline on a helper thread is no bound: Rust cannot stop a thread, so
//! a runaway evaluation would go on burning a core after the request gave up.
//!
//! What the crate does offer is an inspectable, rebuildable AST and host functions
//! evaluated as ordinary calls. So every program is rewritten once, at compile time,
//! to call a metering function ([`METER_FN`]) at the points where work happens:
//! - around every call (operators and functions alike) and each of its operands,
//!   charging 1 per call plus the size of the values it takes and makes (list and map
//!   entries, a tenth of a string's bytes, as kube charges string traversal);
//! - at every iteration of every comprehension (`all`, `exists`, `map`, ...), before
//!   the iteration's body runs.
//!
//! CEL without comprehensions evaluates each AST node at most once, so the work of an
//! evaluation is bounded by the AST size times the metered iterations, plus the sizes
//! the meter charged. Once the meter is past its limit every metering call fails:
//! the error stops the comprehension it is in, and though `||`/`&&` may absorb it (as
//! CEL's logic requires), every later comprehension stops at its first iteration, so
//! the rest of the evaluation is bounded by the AST. The caller then reports the
//! overrun whatever value came out.
//!
//! The metering calls leave the shapes the interpreter optimises alone (a `map` or
//! `filter` building its list in place, an `all`/`exists` folding `@result`): calls on
//! a comprehension's accumulator are not wrapped.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators,
};
use cel::common::types::{CelBytes, CelInt, CelString};
use cel::common::value::CowVal;
use cel::{ExecutionError, FunctionContext};

/// The host function the rewritten programs call: `METER_FN(weight, value)` charges
/// `weight` plus the size of `value` and returns `value`.
pub const METER_FN: &str = "@gantry_cost";

/// A host function as the `cel` crate takes it (its own alias is private).
pub type HostFunction = Box<
    dyn for<'c, 'v> Fn(&mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError>
        + Send
        + Sync,
>;

/// Cost spent by one evaluation, against a limit.
#[derive(Debug)]
pub struct Meter {
    used: AtomicU64,
    limit: u64,
}

impl Meter {
    /// A meter allowing `limit`.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Meter {
            used: AtomicU64::new(0),
            limit,
        })
    }

    /// Cost charged so far (may pass the limit by the last charge).
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether the limit was passed.
    pub fn exceeded(&self) -> bool {
        self.used() > self.limit
    }

    fn charge(&self, cost: u64) -> bool {
        let before = self.used.fetch_add(cost, Ordering::Relaxed);
        before.saturating_add(cost) <= self.limit
    }

    /// The metering host function bound to this meter.
    pub fn function(self: &Arc<Self>) -> HostFunction {
        let meter = self.clone();
        host(move |ftx| {
            let value = ftx.args.pop().ok_or_else(|| ftx.error("missing value"))?;
            let weight = ftx
                .args
                .pop()
                .and_then(|w| w.downcast_ref::<CelInt>().map(|i| *i.inner()))
                .unwrap_or(1);
            let cost = u64::try_from(weight).unwrap_or(1) + size_of(&value);
            if meter.charge(cost) {
                Ok(value)
            } else {
                Err(ExecutionError::function_error(
                    "cost",
                    "actual cost limit exceeded",
                ))
            }
        })
    }
}

/// Gives a closure the higher-ranked signature of a [`HostFunction`].
fn host<F>(f: F) -> HostFunction
where
    F: for<'c, 'v> Fn(&mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError>
        + Send
        + Sync
        + 'static,
{
    Box::new(f)
}

/// The size kube's cost model charges for traversing a value.
fn size_of(value: &CowVal<'_, '_>) -> u64 {
    if let Some(s) = value.downcast_ref::<CelString>() {
        return (s.inner().len() as u64).div_ceil(10);
    }
    if let Some(b) = value.downcast_ref::<CelBytes>() {
        return (b.inner().len() as u64).div_ceil(10);
    }
    value
        .as_sizer()
        .map_or(0, |s| u64::try_from(*s.size().inner()).unwrap_or(0))
}

fn meter(weight: i64, expr: IdedExpr) -> IdedExpr {
    IdedExpr {
        id: expr.id,
        expr: Expr::Call(CallExpr {
            func_name: METER_FN.to_string(),
            target: None,
            args: vec![
                IdedExpr {
                    id: expr.id,
                    expr: Expr::Literal(LiteralValue::Int(CelInt::from(weight))),
                },
                expr,
            ],
        }),
    }
}

/// Rewrites a parsed program so that evaluating it charges a [`Meter`].
pub fn instrument(expr: IdedExpr) -> IdedExpr {
    rewrite(expr, &Scope::default())
}

/// The names comprehensions bind around a node.
#[derive(Clone, Default)]
struct Scope {
    /// Accumulators (`@result`): calls on them are the interpreter's, left alone.
    accumulators: BTreeSet<String>,
    /// Iteration variables: values, like the admission variables.
    variables: BTreeSet<String>,
}

/// The variables of admission expressions.
const VARIABLES: [&str; 7] = [
    "object",
    "oldObject",
    "params",
    "request",
    "namespaceObject",
    "variables",
    "authorizer",
];

/// Whether `name` is a variable: an admission one, or one a comprehension binds
/// (`scope` holds the comprehensions' variables).
fn is_variable(name: &str, scope: &Scope) -> bool {
    VARIABLES.contains(&name) || scope.variables.contains(name) || scope.accumulators.contains(name)
}

/// The root identifier of `a.b.c`, None for anything else.
fn qualified_root(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Ident(n) => Some(n),
        Expr::Select(s) if !s.test => qualified_root(&s.operand),
        _ => None,
    }
}

fn is_ident_in(e: &IdedExpr, names: &BTreeSet<String>) -> bool {
    matches!(&e.expr, Expr::Ident(n) if names.contains(n))
}

fn rewrite(e: IdedExpr, scope: &Scope) -> IdedExpr {
    let id = e.id;
    let expr = match e.expr {
        Expr::Call(call) => {
            let on_accumulator = call
                .args
                .iter()
                .any(|a| is_ident_in(a, &scope.accumulators))
                || call
                    .target
                    .as_deref()
                    .is_some_and(|t| is_ident_in(t, &scope.accumulators));
            let operand = |a: IdedExpr| {
                let a = rewrite(a, scope);
                if on_accumulator { a } else { meter(0, a) }
            };
            // `strings.quote(x)` parses as a call on the target `strings`: a qualified
            // name the interpreter resolves as a function namespace, so it must stay
            // as written. Names rooted in a variable are values, and metered.
            let target = call.target.map(|t| {
                Box::new(match qualified_root(&t) {
                    Some(root) if !is_variable(root, scope) => rewrite(*t, scope),
                    _ => operand(*t),
                })
            });
            let call = CallExpr {
                func_name: call.func_name,
                target,
                args: call.args.into_iter().map(operand).collect(),
            };
            let node = IdedExpr {
                id,
                expr: Expr::Call(call),
            };
            return if on_accumulator { node } else { meter(1, node) };
        }
        Expr::Comprehension(c) => Expr::Comprehension(Box::new(comprehension(*c, scope))),
        Expr::List(mut l) => {
            l.elements = l.elements.into_iter().map(|x| rewrite(x, scope)).collect();
            Expr::List(l)
        }
        Expr::Map(mut m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(me) = &mut entry.expr {
                    me.key = rewrite(std::mem::take(&mut me.key), scope);
                    me.value = rewrite(std::mem::take(&mut me.value), scope);
                }
            }
            Expr::Map(m)
        }
        Expr::Struct(mut s) => {
            for entry in &mut s.entries {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    f.value = rewrite(std::mem::take(&mut f.value), scope);
                }
            }
            Expr::Struct(s)
        }
        Expr::Select(mut s) => {
            *s.operand = rewrite(std::mem::take(&mut *s.operand), scope);
            Expr::Select(s)
        }
        other => other,
    };
    IdedExpr { id, expr }
}

/// Where a comprehension's iterations are metered: before each body runs.
fn comprehension(c: ComprehensionExpr, outer: &Scope) -> ComprehensionExpr {
    let iter_range = rewrite(c.iter_range, outer);
    let accu_init = rewrite(c.accu_init, outer);
    let mut inner = outer.clone();
    inner.accumulators.insert(c.accu_var.clone());
    inner.variables.insert(c.iter_var.clone());
    inner.variables.extend(c.iter_var2.clone());
    let loop_cond = rewrite(c.loop_cond, &inner);
    let loop_step = rewrite(c.loop_step, &inner);
    let result = rewrite(c.result, &inner);
    let mut c = ComprehensionExpr {
        iter_range,
        accu_init,
        loop_cond,
        loop_step,
        result,
        ..c
    };
    // `map`/`filter` (a literal loop condition, the accumulator as the result, a step
    // appending to it) are run by the interpreter without evaluating the condition's
    // shape again: meter the filter's guard or the appended element instead, which it
    // evaluates first at every iteration.
    if matches!(c.loop_cond.expr, Expr::Literal(_))
        && matches!(&c.result.expr, Expr::Ident(n) if *n == c.accu_var)
        && let Some(slot) = append_slot(&mut c.loop_step, &c.accu_var)
    {
        *slot = meter(1, std::mem::take(slot));
        return c;
    }
    c.loop_cond = meter(1, c.loop_cond);
    c
}

/// The guard of `guard ? @result + [e] : @result`, or `e` of `@result + [e]`.
fn append_slot<'a>(step: &'a mut IdedExpr, accu: &str) -> Option<&'a mut IdedExpr> {
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == accu);
    let Expr::Call(call) = &mut step.expr else {
        return None;
    };
    if call.func_name == operators::CONDITIONAL
        && call.args.len() == 3
        && is_accu(&call.args[2])
        && is_append(&call.args[1], accu)
    {
        return call.args.first_mut();
    }
    if call.func_name == operators::ADD
        && call.args.len() == 2
        && is_accu(&call.args[0])
        && let Expr::List(l) = &mut call.args[1].expr
    {
        return l.elements.first_mut();
    }
    None
}

fn is_append(e: &IdedExpr, accu: &str) -> bool {
    matches!(&e.expr, Expr::Call(c) if c.func_name == operators::ADD
        && c.args.len() == 2
        && matches!(&c.args[0].expr, Expr::Ident(n) if n == accu)
        && matches!(c.args[1].expr, Expr::List(_)))
}
