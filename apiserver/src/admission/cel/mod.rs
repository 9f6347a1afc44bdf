//! The one CEL engine of admission: webhook matchConditions and
//! `ValidatingAdmissionPolicy` expressions are compiled and evaluated here, with kube's
//! cost limits enforced through [`cost`].

pub mod cost;

use std::sync::{Arc, LazyLock};

use serde_json::Value;

/// kube's `PerCallLimit`: the cost one expression evaluation may spend.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// kube's `RuntimeCELCostBudget`: the cost one policy evaluation (all its
/// expressions) may spend.
pub const RUNTIME_BUDGET: u64 = 10_000_000;
/// Longest expression accepted (guards the parser's recursion).
pub const MAX_EXPRESSION_LEN: usize = 5 * 1024;
/// Stack of the threads compiling and evaluating CEL: both recurse over the AST.
const STACK: usize = 64 << 20;

/// The standard library plus the cel-go `ext.Strings` and `ext.Lists` extensions,
/// as kube's base environment.
static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    let mut env = cel::Env::stdlib();
    // Registration into a fresh stdlib env cannot conflict; ignore the Result.
    let _ = cel::extensions::strings(&mut env);
    let _ = cel::extensions::lists(&mut env);
    Arc::new(env)
});

/// A compiled, cost-instrumented expression.
#[derive(Clone)]
pub struct Program {
    source: String,
    ast: Arc<cel::IdedExpr>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Program").field(&self.source).finish()
    }
}

impl Program {
    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// Runs `f` on a helper thread with a large stack (the parser and the interpreter
/// recurse); None when the thread could not start or panicked.
pub fn with_big_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("gantry-admission-cel".into())
            .stack_size(STACK)
            .spawn_scoped(s, f)
            .ok()?
            .join()
            .ok()
    })
}

/// Compiles an expression (call from a thread of [`with_big_stack`], or use
/// [`compile`]).
pub fn compile_here(src: &str) -> Result<Program, String> {
    if src.len() > MAX_EXPRESSION_LEN {
        return Err(format!(
            "expression is longer than {MAX_EXPRESSION_LEN} bytes"
        ));
    }
    let ast = ENV.parser().parse(src).map_err(|e| e.to_string())?;
    Ok(Program {
        source: src.to_string(),
        ast: Arc::new(cost::instrument(ast)),
    })
}

/// Compiles an expression on a helper thread, turning parser panics into errors.
pub fn compile(src: &str) -> Result<Program, String> {
    with_big_stack(|| compile_here(src)).unwrap_or_else(|| Err("unable to parse expression".into()))
}

/// Why an evaluation gave no value.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalError {
    /// The expression passed its own limit (kube: `operation cancelled: actual cost
    /// limit exceeded`).
    CostLimit,
    /// The evaluation passed what was left of the caller's budget.
    OutOfBudget,
    /// A runtime error (no such key, no matching overload, ...).
    Failed(String),
}

/// The variables of an evaluation, converted once.
#[derive(Default, Clone)]
pub struct Activation {
    vars: Vec<(String, cel::Value)>,
}

impl Activation {
    /// Binds `name` to a JSON value.
    pub fn bind_json(&mut self, name: &str, value: &Value) -> Result<(), String> {
        let v = cel::to_value(value).map_err(|e| e.to_string())?;
        self.bind(name, v);
        Ok(())
    }

    /// Binds `name` to a CEL value.
    pub fn bind(&mut self, name: &str, value: cel::Value) {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_string(), value));
    }
}

/// What is left of a budget shared by several evaluations (kube's remaining
/// `RuntimeCELCostBudget`).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Cost still allowed.
    pub remaining: u64,
}

impl Budget {
    /// kube's budget for one policy evaluation.
    pub fn runtime() -> Self {
        Budget {
            remaining: RUNTIME_BUDGET,
        }
    }
}

/// Evaluates `program` against `activation` (call from a thread of
/// [`with_big_stack`]), charging `budget`. The expression may spend at most
/// [`PER_CALL_LIMIT`] and what is left of the budget.
pub fn evaluate_here(
    program: &Program,
    activation: &Activation,
    budget: &mut Budget,
) -> Result<cel::Value, EvalError> {
    let limit = PER_CALL_LIMIT.min(budget.remaining);
    let meter = cost::Meter::new(limit);
    let mut ctx = cel::Context::with_env(ENV.clone());
    // The name cannot be written in CEL source, so nothing else declares it.
    let _ = ctx.add_function::<cost::HostFunction, _>(cost::METER_FN, meter.function());
    for (name, value) in &activation.vars {
        ctx.add_variable_from_value(name.clone(), value.clone());
    }
    let result = cel::Value::resolve(&program.ast, &ctx);
    let used = meter.used();
    budget.remaining = budget.remaining.saturating_sub(used);
    if meter.exceeded() {
        // The budget, not the per-expression limit, was the tighter bound.
        return Err(if limit < PER_CALL_LIMIT {
            EvalError::OutOfBudget
        } else {
            EvalError::CostLimit
        });
    }
    result.map_err(|e| EvalError::Failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(src: &str, budget: &mut Budget) -> Result<cel::Value, EvalError> {
        with_big_stack(|| {
            let p = compile_here(src).expect("compiles");
            evaluate_here(&p, &Activation::default(), budget)
        })
        .expect("evaluates")
    }

    fn ok(src: &str) -> cel::Value {
        eval(src, &mut Budget::runtime()).expect("evaluates")
    }

    #[test]
    fn instrumented_programs_keep_their_meaning() {
        assert_eq!(ok("[1, 2, 3].map(x, x * 2)"), ok("[2, 4, 6]"));
        assert_eq!(ok("[1, 2, 3].filter(x, x > 1).size()"), cel::Value::Int(2));
        assert_eq!(ok("[1, 2, 3].all(x, x > 0)"), cel::Value::Bool(true));
        assert_eq!(ok("[1, 2, 3].exists(x, x == 2)"), cel::Value::Bool(true));
        assert_eq!(
            ok("[1, 2, 3].exists_one(x, x == 2)"),
            cel::Value::Bool(true)
        );
        assert_eq!(
            ok("'abc'.startsWith('a') && 1 + 1 == 2"),
            cel::Value::Bool(true)
        );
        assert_eq!(ok("{'a': 1}.a"), cel::Value::Int(1));
        assert_eq!(ok("has({'a': 1}.a) ? 'y' : 'n'"), ok("'y'"));
        // Errors absorbed by logic, as CEL's commutative && / ||.
        assert_eq!(ok("1 / 0 == 1 || true"), cel::Value::Bool(true));
        assert!(matches!(
            eval("1 / 0 == 1", &mut Budget::runtime()),
            Err(EvalError::Failed(_))
        ));
    }

    /// Nested comprehensions that would run 20^6 iterations: stopped at the limit,
    /// quickly, even where `||` absorbs the error.
    #[test]
    fn hostile_expressions_stop_at_the_limit() {
        let l = format!(
            "[{}]",
            (0..20).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
        );
        let bomb =
            format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, {l}.all(e, {l}.all(f, true))))))");
        for src in [
            bomb.clone(),
            format!("{bomb} || true"),
            format!("{l}.map(a, {l}.map(b, {l}.map(c, {l}.map(d, {l}.map(e, {l}.filter(f, true)))))).size() > 0"),
            // Strings doubling: charged by size.
            "['a'].map(x, x + x).map(x, x + x).map(x, x + x).map(x, x + x).size() == 1 && \
             [0,1,2,3,4,5,6,7,8,9].all(i, [0,1,2,3,4,5,6,7,8,9].all(j, [0,1,2,3,4,5,6,7,8,9].all(k, [0,1,2,3,4,5,6,7,8,9].all(l, [0,1,2,3,4,5,6,7,8,9].all(m, [0,1,2,3,4,5,6,7,8,9].all(n, true))))))"
                .to_string(),
        ] {
            let started = std::time::Instant::now();
            let mut budget = Budget::runtime();
            assert_eq!(eval(&src, &mut budget), Err(EvalError::CostLimit), "{src}");
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "{src}");
            assert!(budget.remaining < RUNTIME_BUDGET - PER_CALL_LIMIT);
        }
    }

    #[test]
    fn the_budget_is_shared() {
        let l = format!(
            "[{}]",
            (0..100)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let costly = format!("{l}.all(a, {l}.all(b, {l}.all(c, true)))");
        let mut budget = Budget { remaining: 500_000 };
        assert_eq!(eval(&costly, &mut budget), Err(EvalError::OutOfBudget));
        let mut budget = Budget::runtime();
        assert_eq!(
            eval("[1].all(x, true)", &mut budget),
            Ok(cel::Value::Bool(true))
        );
        assert!(budget.remaining < RUNTIME_BUDGET);
    }
}
