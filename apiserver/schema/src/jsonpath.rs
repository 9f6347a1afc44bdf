//! The JSONPath dialect of k8s.io/client-go/util/jsonpath, as used by
//! `additionalPrinterColumns` (always with `AllowMissingKeys(true)`).
//!
//! Hand-rolled: no Rust crate implements kube's dialect (`{}` templates, filters
//! like `[?(@.type=="Ready")]`, missing keys yielding nothing).

use serde_json::Value;

use crate::validation::json_eq;

/// Why a JSONPath expression could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPathError {
    /// The expression is malformed; the text says where.
    #[error("{0}")]
    Syntax(String),
}

/// A parsed JSONPath expression such as `.status.conditions[?(@.type=="Ready")].status`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    /// `.name` or `['name']`.
    Field(String),
    /// `..` — this node and all descendants.
    Recursive,
    /// `.*` or `[*]`.
    Wildcard,
    /// `[n]` (negative counts from the end).
    Index(i64),
    /// `[start:end:step]`.
    Slice(Option<i64>, Option<i64>, Option<i64>),
    /// `[a,b]` of indices or names.
    Union(Vec<Segment>),
    /// `[?(...)]`.
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Path(Vec<Segment>),
    Literal(Value),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Operand,
    op: Option<(String, Operand)>,
}

fn syntax(msg: impl Into<String>) -> JsonPathError {
    JsonPathError::Syntax(msg.into())
}

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    src: &'a str,
    /// Current filter nesting, bounded by [`MAX_FILTER_DEPTH`].
    filter_depth: usize,
}

/// Deepest accepted nesting of filters (`[?(@.a[?(...)])]`).
const MAX_FILTER_DEPTH: usize = 32;

const FIELD_TERMINATORS: &str = " .[],{}()|*=!<>\t\n";

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    /// Segments until a character that cannot continue a path (`stop`).
    fn segments(&mut self, in_filter: bool) -> Result<Vec<Segment>, JsonPathError> {
        let mut segs = Vec::new();
        loop {
            match self.peek() {
                Some('.') => {
                    self.pos += 1;
                    if self.eat('.') {
                        segs.push(Segment::Recursive);
                    }
                    if self.eat('*') {
                        segs.push(Segment::Wildcard);
                        continue;
                    }
                    if self.peek() == Some('[') {
                        continue;
                    }
                    let name = self.field_name();
                    if !name.is_empty() {
                        segs.push(Segment::Field(name));
                    } else if !matches!(segs.last(), Some(Segment::Recursive))
                        && self.peek().is_some()
                        && !in_filter
                    {
                        return Err(syntax(format!(
                            "invalid field name at position {} in {:?}",
                            self.pos, self.src
                        )));
                    }
                }
                Some('[') => {
                    self.pos += 1;
                    segs.push(self.bracket()?);
                }
                _ => break,
            }
        }
        Ok(segs)
    }

    fn field_name(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self.peek() {
            if c == '\\' && self.chars.get(self.pos + 1).is_some() {
                name.push(self.chars[self.pos + 1]);
                self.pos += 2;
                continue;
            }
            if FIELD_TERMINATORS.contains(c) {
                break;
            }
            name.push(c);
            self.pos += 1;
        }
        name
    }

    fn bracket(&mut self) -> Result<Segment, JsonPathError> {
        self.skip_ws();
        if self.eat('?') {
            if !self.eat('(') {
                return Err(syntax("expected '(' after '?' in filter"));
            }
            self.filter_depth += 1;
            if self.filter_depth > MAX_FILTER_DEPTH {
                return Err(syntax(format!(
                    "filters nested more than {MAX_FILTER_DEPTH} deep"
                )));
            }
            let f = self.filter()?;
            self.filter_depth -= 1;
            self.skip_ws();
            if !self.eat(')')
                || !{
                    self.skip_ws();
                    self.eat(']')
                }
            {
                return Err(syntax(format!("unclosed filter in {:?}", self.src)));
            }
            return Ok(Segment::Filter(f));
        }
        if self.eat('*') {
            self.skip_ws();
            return if self.eat(']') {
                Ok(Segment::Wildcard)
            } else {
                Err(syntax("expected ']' after '*'"))
            };
        }
        let start = self.pos;
        let Some(end) = self.chars[start..].iter().position(|c| *c == ']') else {
            return Err(syntax(format!("unclosed bracket in {:?}", self.src)));
        };
        let inner: String = self.chars[start..start + end].iter().collect();
        self.pos = start + end + 1;
        let parts: Vec<&str> = split_union(&inner);
        let mut segs = Vec::new();
        for part in &parts {
            segs.push(bracket_item(part.trim())?);
        }
        Ok(if segs.len() == 1 {
            segs.remove(0)
        } else {
            Segment::Union(segs)
        })
    }

    fn operand(&mut self) -> Result<Operand, JsonPathError> {
        self.skip_ws();
        match self.peek() {
            Some('@') => {
                self.pos += 1;
                Ok(Operand::Path(self.segments(true)?))
            }
            Some(q @ ('"' | '\'')) => {
                self.pos += 1;
                let mut s = String::new();
                loop {
                    match self.peek() {
                        None => return Err(syntax("unterminated string in filter")),
                        Some('\\') => {
                            self.pos += 1;
                            if let Some(c) = self.peek() {
                                s.push(c);
                                self.pos += 1;
                            }
                        }
                        Some(c) if c == q => {
                            self.pos += 1;
                            break;
                        }
                        Some(c) => {
                            s.push(c);
                            self.pos += 1;
                        }
                    }
                }
                Ok(Operand::Literal(Value::String(s)))
            }
            _ => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                {
                    self.pos += 1;
                }
                let word: String = self.chars[start..self.pos].iter().collect();
                match word.as_str() {
                    "true" => Ok(Operand::Literal(Value::Bool(true))),
                    "false" => Ok(Operand::Literal(Value::Bool(false))),
                    "nil" | "null" => Ok(Operand::Literal(Value::Null)),
                    w => {
                        if let Ok(i) = w.parse::<i64>() {
                            Ok(Operand::Literal(Value::from(i)))
                        } else if let Ok(f) = w.parse::<f64>() {
                            Ok(Operand::Literal(Value::from(f)))
                        } else {
                            Err(syntax(format!("unrecognized filter operand {w:?}")))
                        }
                    }
                }
            }
        }
    }

    fn filter(&mut self) -> Result<Filter, JsonPathError> {
        let left = self.operand()?;
        self.skip_ws();
        let mut op = String::new();
        while let Some(c) = self.peek().filter(|c| "=!<>".contains(*c)) {
            op.push(c);
            self.pos += 1;
        }
        if op.is_empty() {
            return Ok(Filter { left, op: None });
        }
        if !["==", "!=", "<", ">", "<=", ">="].contains(&op.as_str()) {
            return Err(syntax(format!("unrecognized filter operator {op:?}")));
        }
        let right = self.operand()?;
        Ok(Filter {
            left,
            op: Some((op, right)),
        })
    }
}

fn split_union(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quote: Option<char> = None;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ',') => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

fn bracket_item(part: &str) -> Result<Segment, JsonPathError> {
    if part.len() >= 2
        && (part.starts_with('\'') && part.ends_with('\'')
            || part.starts_with('"') && part.ends_with('"'))
    {
        return Ok(Segment::Field(part[1..part.len() - 1].to_string()));
    }
    if part.contains(':') {
        let nums: Vec<&str> = part.split(':').collect();
        if nums.len() > 3 {
            return Err(syntax(format!("invalid array slice {part:?}")));
        }
        let parse = |s: &str| -> Result<Option<i64>, JsonPathError> {
            let s = s.trim();
            if s.is_empty() {
                Ok(None)
            } else {
                s.parse::<i64>()
                    .map(Some)
                    .map_err(|_| syntax(format!("invalid array index {s:?}")))
            }
        };
        return Ok(Segment::Slice(
            parse(nums[0])?,
            parse(nums[1])?,
            parse(nums.get(2).copied().unwrap_or(""))?,
        ));
    }
    if part == "*" {
        return Ok(Segment::Wildcard);
    }
    part.parse::<i64>()
        .map(Segment::Index)
        .map_err(|_| syntax(format!("invalid array index {part:?}")))
}

impl JsonPath {
    /// Parses an expression (with or without surrounding `{}`).
    ///
    /// # Errors
    ///
    /// [`JsonPathError::Syntax`] if `expr` is not a valid expression.
    pub fn parse(expr: &str) -> Result<Self, JsonPathError> {
        let trimmed = expr.trim();
        let inner = match trimmed.strip_prefix('{') {
            Some(rest) => rest
                .strip_suffix('}')
                .ok_or_else(|| syntax(format!("unclosed action in {expr:?}")))?,
            None => trimmed,
        };
        let mut p = Parser {
            chars: inner.chars().collect(),
            pos: 0,
            src: expr,
            filter_depth: 0,
        };
        p.skip_ws();
        // kube accepts a leading `$` (root) as well.
        p.eat('$');
        let segments = p.segments(false)?;
        p.skip_ws();
        if p.pos != p.chars.len() {
            return Err(syntax(format!(
                "unrecognized character at position {} in {expr:?}",
                p.pos
            )));
        }
        Ok(JsonPath { segments })
    }

    /// All values the expression selects in `obj`, in document order (missing keys
    /// select nothing, as with kube's `AllowMissingKeys(true)`).
    pub fn find<'a>(&self, obj: &'a Value) -> Vec<&'a Value> {
        eval(&self.segments, vec![obj])
    }
}

fn eval<'a>(segments: &[Segment], start: Vec<&'a Value>) -> Vec<&'a Value> {
    let mut cur = start;
    for seg in segments {
        let mut next = Vec::new();
        for v in cur {
            apply(seg, v, &mut next);
        }
        cur = next;
    }
    cur
}

fn apply<'a>(seg: &Segment, v: &'a Value, out: &mut Vec<&'a Value>) {
    match seg {
        Segment::Field(name) => {
            if let Some(x) = v.as_object().and_then(|m| m.get(name)) {
                out.push(x);
            }
        }
        Segment::Recursive => {
            // Pre-order, iteratively (hostile depth must not overflow the stack).
            let mut stack = vec![v];
            while let Some(x) = stack.pop() {
                out.push(x);
                match x {
                    Value::Object(m) => {
                        let mut keys: Vec<&String> = m.keys().collect();
                        keys.sort();
                        stack.extend(keys.into_iter().rev().map(|k| &m[k]));
                    }
                    Value::Array(a) => stack.extend(a.iter().rev()),
                    _ => {}
                }
            }
        }
        Segment::Wildcard => match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.extend(keys.into_iter().map(|k| &m[k]));
            }
            Value::Array(a) => out.extend(a.iter()),
            _ => {}
        },
        Segment::Index(i) => {
            if let Value::Array(a) = v {
                let idx = if *i < 0 {
                    usize::try_from(i.unsigned_abs())
                        .ok()
                        .and_then(|back| a.len().checked_sub(back))
                } else {
                    usize::try_from(*i).ok()
                };
                if let Some(x) = idx.and_then(|idx| a.get(idx)) {
                    out.push(x);
                }
            }
        }
        // Array lengths fit an i64, and `i` stays in 0..len.
        #[allow(
            clippy::cast_possible_wrap,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        Segment::Slice(start, end, step) => {
            if let Value::Array(a) = v {
                let len = a.len() as i64;
                let norm = |x: i64| if x < 0 { (len + x).max(0) } else { x.min(len) };
                let s = norm(start.unwrap_or(0));
                let e = norm(end.unwrap_or(len));
                let step = step.unwrap_or(1).max(1);
                let mut i = s;
                while i < e {
                    out.push(&a[i as usize]);
                    i += step;
                }
            }
        }
        Segment::Union(parts) => {
            for p in parts {
                apply(p, v, out);
            }
        }
        Segment::Filter(f) => {
            let items: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                _ => vec![v],
            };
            for item in items {
                if filter_matches(f, item) {
                    out.push(item);
                }
            }
        }
    }
}

fn operand_value<'a>(o: &'a Operand, item: &'a Value) -> Option<&'a Value> {
    match o {
        Operand::Literal(v) => Some(v),
        Operand::Path(segs) => eval(segs, vec![item]).into_iter().next(),
    }
}

fn filter_matches(f: &Filter, item: &Value) -> bool {
    let Some(left) = operand_value(&f.left, item) else {
        return false;
    };
    let Some((op, right)) = &f.op else {
        // existence test
        return !left.is_null() && *left != Value::Bool(false);
    };
    let Some(right) = operand_value(right, item) else {
        return false;
    };
    match op.as_str() {
        "==" => json_eq(left, right),
        "!=" => !json_eq(left, right),
        _ => {
            let ord = match (left, right) {
                (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
                (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
                _ => None,
            };
            let Some(ord) = ord else { return false };
            match op.as_str() {
                "<" => ord.is_lt(),
                ">" => ord.is_gt(),
                "<=" => ord.is_le(),
                ">=" => ord.is_ge(),
                _ => false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_and_finds() {
        let obj = json!({"spec": {"size": 3, "a.b": 1, "list": [1, 2, 3]},
                         "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]}});
        let find = |e: &str| {
            JsonPath::parse(e)
                .unwrap()
                .find(&obj)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(find(".spec.size"), vec![json!(3)]);
        assert_eq!(find("{.spec.size}"), vec![json!(3)]);
        assert_eq!(find(".spec.missing"), Vec::<Value>::new());
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#),
            vec![json!("True")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type!='Ready')].type"),
            vec![json!("Synced")]
        );
        assert_eq!(find(".spec.list[-1]"), vec![json!(3)]);
        assert_eq!(find(".spec.list[0:2]"), vec![json!(1), json!(2)]);
        assert_eq!(find(".spec.list[*]").len(), 3);
        assert_eq!(find(".spec['a.b']"), vec![json!(1)]);
        assert_eq!(find(r".spec.a\.b"), vec![json!(1)]);
        assert_eq!(find("..type"), vec![json!("Ready"), json!("Synced")]);
        assert_eq!(find("..status").len(), 3);
        assert_eq!(find(".spec.list[?(@ > 1)]"), vec![json!(2), json!(3)]);
        assert!(JsonPath::parse(".spec[").is_err());
        let hostile = format!(".a{}{}", "[?(@.a".repeat(10_000), ")]".repeat(10_000));
        assert!(JsonPath::parse(&hostile).is_err());
        assert!(JsonPath::parse(".status.conditions[?(@.type=~\"x\")]").is_err());
    }
}
