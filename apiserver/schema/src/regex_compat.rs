//! Go RE2 semantics on top of the `regex` crate: Go's `\d`, `\w`, `\s`, `\b` are ASCII
//! only, the `regex` crate's are Unicode-aware. Patterns are rewritten so that these
//! classes match exactly what kube's Go `regexp` matches.
//!
//! Hand-rolled: a small pattern rewriter; no crate offers Go's regexp dialect.

/// Compiles `pattern` with Go's meaning of the Perl classes.
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&rewrite(pattern))
}

fn rewrite(p: &str) -> String {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 16);
    let mut in_class = false;
    let mut class_start = 0usize; // index of the first char after `[` (and `^`)
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let e = chars[i + 1];
            let replacement = match (in_class, e) {
                (false, 'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'b' | 'B') => {
                    Some(format!("(?-u:\\{e})"))
                }
                (true, 'd') => Some("0-9".to_string()),
                (true, 'w') => Some("0-9A-Za-z_".to_string()),
                (true, 's') => Some("\\t\\n\\x0C\\r\\x20".to_string()),
                (true, 'D') => Some("[^0-9]".to_string()),
                (true, 'W') => Some("[^0-9A-Za-z_]".to_string()),
                (true, 'S') => Some("[^\\t\\n\\x0C\\r\\x20]".to_string()),
                _ => None,
            };
            if let Some(r) = replacement {
                out.push_str(&r);
            } else {
                out.push(c);
                out.push(e);
            }
            i += 2;
            continue;
        }
        if !in_class && c == '[' {
            in_class = true;
            out.push(c);
            i += 1;
            if i < chars.len() && chars[i] == '^' {
                out.push('^');
                i += 1;
            }
            class_start = i;
            continue;
        }
        if in_class && c == '[' && chars.get(i + 1) == Some(&':') {
            // POSIX class like [:alpha:]: copy through to ":]"
            let rest: String = chars[i..].iter().collect();
            if let Some(end) = rest.find(":]") {
                out.push_str(&rest[..end + 2]);
                i += rest[..end + 2].chars().count();
                continue;
            }
        }
        if in_class && c == ']' && i != class_start {
            in_class = false;
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii_like_go() {
        let re = compile(r"^\d+$").unwrap();
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣"), "Arabic-Indic digits are not \\d in Go");
        let re = compile(r"^[\w-]+$").unwrap();
        assert!(re.is_match("a_b-1"));
        assert!(!re.is_match("é"));
        let re = compile(r"^[^\s]+$").unwrap();
        assert!(re.is_match("abc"));
        assert!(!re.is_match("a c"));
        let re = compile(r"^[\D]$").unwrap();
        assert!(re.is_match("x") && !re.is_match("1"));
        let re = compile(r"^[]a]+$").unwrap();
        assert!(re.is_match("]a]"));
        let re = compile(r"^[[:alpha:]]+\.\d$").unwrap();
        assert!(re.is_match("ab.1"));
        assert!(compile(r"\bword\b").unwrap().is_match("a word here"));
        assert!(compile("(").is_err());
    }
}
