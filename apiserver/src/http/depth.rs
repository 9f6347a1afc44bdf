//! Nesting depth of request bodies, measured before they are parsed.
//!
//! libyaml (under `serde_yaml`) keeps one "simple key" per open flow collection and
//! walks them all for every token, so `[[[[...` costs time quadratic in its depth
//! before any recursion limit is reached: 100,000 levels took seconds of CPU. A
//! linear scan first refuses bodies nested deeper than [`MAX_DEPTH`], which is also
//! the recursion limit of the JSON and YAML decoders behind it.

/// Deepest nesting accepted (`serde_json`'s and `serde_yaml`'s recursion limit).
pub const MAX_DEPTH: usize = 128;

/// 400 when `body` nests deeper than [`MAX_DEPTH`]: YAML media types are scanned as
/// YAML, everything else as JSON (protobuf decoding has its own recursion limit).
pub fn check(content_type: &str, body: &[u8]) -> Result<(), crate::error::ApiError> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    let (deep, what) = if media.contains("protobuf") {
        (false, "")
    } else if media.contains("yaml") {
        (yaml_exceeds(body, MAX_DEPTH), "error decoding YAML")
    } else {
        (json_exceeds(body, MAX_DEPTH), "error decoding JSON body")
    };
    if deep {
        return Err(crate::error::ApiError::bad_request(format!(
            "{what}: exceeded max depth of {MAX_DEPTH}"
        )));
    }
    Ok(())
}

/// Whether a JSON text nests arrays/objects deeper than `limit`.
pub fn json_exceeds(body: &[u8], limit: usize) -> bool {
    let (mut depth, mut i) = (0usize, 0usize);
    while i < body.len() {
        match body[i] {
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => i = skip_double_quoted(body, i + 1),
            _ => {}
        }
        i += 1;
    }
    false
}

/// Whether a YAML text nests flow collections (`[`, `{`) deeper than `limit`.
///
/// Tokenizes as libyaml does as far as flow depth goes: indicators count only at
/// the start of a token, never inside quoted, plain or block scalars or comments.
/// (Block nesting costs indentation, so its depth is bounded by the body size.)
pub fn yaml_exceeds(body: &[u8], limit: usize) -> bool {
    let mut flow = 0usize;
    let mut i = 0usize;
    let mut line_start = 0usize;
    while i < body.len() {
        // To the next token: blanks, line breaks, comments.
        match body[i] {
            b' ' | b'\t' => {
                i += 1;
                continue;
            }
            b'\r' | b'\n' => {
                i += 1;
                line_start = i;
                continue;
            }
            b'#' => {
                i = line_end(body, i);
                continue;
            }
            _ => {}
        }
        let next_blank = body.get(i + 1).is_none_or(u8::is_ascii_whitespace);
        i = match body[i] {
            b'[' | b'{' => {
                flow += 1;
                if flow > limit {
                    return true;
                }
                i + 1
            }
            b']' | b'}' => {
                flow = flow.saturating_sub(1);
                i + 1
            }
            b',' => i + 1,
            b'\'' => skip_single_quoted(body, i + 1),
            b'"' => skip_double_quoted(body, i + 1) + 1,
            b'|' | b'>' if flow == 0 => {
                match skip_block_scalar(body, i, indent(body, line_start), limit) {
                    Some(end) => end,
                    None => return true,
                }
            }
            // As libyaml: in flow context `?` and `:` are indicators wherever a token starts.
            b'?' | b':' if flow > 0 || next_blank => i + 1,
            b'-' if next_blank => i + 1,
            b'-' | b'.' if i == line_start && is_document_marker(&body[i..]) => i + 3,
            b'%' if flow == 0 && i == line_start => line_end(body, i),
            _ => skip_plain(body, i, flow > 0),
        };
    }
    false
}

/// `---` or `...` followed by a blank or the end.
fn is_document_marker(rest: &[u8]) -> bool {
    (rest.starts_with(b"---") || rest.starts_with(b"..."))
        && rest.get(3).is_none_or(u8::is_ascii_whitespace)
}

fn line_end(body: &[u8], i: usize) -> usize {
    body[i..]
        .iter()
        .position(|&c| c == b'\n' || c == b'\r')
        .map_or(body.len(), |p| i + p)
}

fn indent(body: &[u8], line_start: usize) -> usize {
    body[line_start..]
        .iter()
        .take_while(|&&c| c == b' ')
        .count()
}

/// Past the closing `"` (from just after the opening one); `\` escapes.
fn skip_double_quoted(body: &[u8], mut i: usize) -> usize {
    while i < body.len() {
        match body[i] {
            b'\\' => i += 2,
            b'"' => return i,
            _ => i += 1,
        }
    }
    body.len()
}

/// Past the closing `'` (from just after the opening one); `''` is a quote.
fn skip_single_quoted(body: &[u8], mut i: usize) -> usize {
    while i < body.len() {
        if body[i] == b'\'' {
            if body.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    body.len()
}

/// Past a plain scalar: it ends at `: ` or ` #`, in flow context also at a flow
/// indicator (and goes on across lines), in block context at the line end.
fn skip_plain(body: &[u8], mut i: usize, in_flow: bool) -> usize {
    let start = i;
    while i < body.len() {
        let c = body[i];
        let next = body.get(i + 1).copied();
        let next_blank = next.is_none_or(|n| n.is_ascii_whitespace());
        if c == b':' && (next_blank || (in_flow && next.is_some_and(|n| b",?[]{}".contains(&n)))) {
            break;
        }
        if in_flow && b",[]{}".contains(&c) {
            break;
        }
        if c == b'#' && i > start && body[i - 1].is_ascii_whitespace() {
            break;
        }
        if !in_flow && (c == b'\n' || c == b'\r') {
            break;
        }
        i += 1;
    }
    i.max(start + 1)
}

/// Past a block scalar (`|` or `>` on a line indented `parent`): its content is the
/// following lines that are blank or indented more than `parent`, up to the first
/// line indented less than the first content line. The content is text, but its
/// brackets are still counted (opening minus closing: JSON in a ConfigMap passes),
/// in case it was mistaken for one. None: deeper than `limit`.
fn skip_block_scalar(body: &[u8], i: usize, parent: usize, limit: usize) -> Option<usize> {
    let mut pos = line_end(body, i);
    let mut content: Option<usize> = None;
    let mut depth = 0usize;
    while pos < body.len() {
        let start = pos + 1 + usize::from(body[pos] == b'\r' && body.get(pos + 1) == Some(&b'\n'));
        if start > body.len() {
            break;
        }
        let end = line_end(body, start);
        let line = &body[start..end];
        let ind = line.iter().take_while(|&&c| c == b' ').count();
        let blank = line[ind..].iter().all(u8::is_ascii_whitespace);
        if !blank {
            let need = *content.get_or_insert(ind);
            if ind < need || ind <= parent {
                return Some(pos);
            }
        }
        for &c in line {
            match c {
                b'[' | b'{' => depth += 1,
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth > limit {
                return None;
            }
        }
        pos = end;
    }
    Some(body.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_depth() {
        assert!(!json_exceeds(br#"{"a":[1,{"b":"[[[[[["}]}"#, 3));
        assert!(json_exceeds(br#"{"a":[[1]]}"#, 2));
        assert!(json_exceeds(&[b'['; 200], MAX_DEPTH));
        assert!(!json_exceeds(br#"{"a":"\"[[[["}"#, 1));
    }

    #[test]
    fn yaml_flow_depth() {
        let deep = format!("x: {}", "[".repeat(100_000));
        assert!(yaml_exceeds(deep.as_bytes(), MAX_DEPTH));
        assert!(yaml_exceeds(b"a: [[[1]]]", 2));
        assert!(!yaml_exceeds(b"a: [[1]]\nb: {c: [d]}", 2));
        // Brackets inside scalars and comments are text.
        let text = b"a: '[[[[' \nb: \"{{{{\\\"[[\"\nc: x[[[[ y\nd: [don't, 'it''s [['] # [[[[\n";
        assert!(!yaml_exceeds(text, 1));
        // A block scalar (here JSON) is text, up to its dedent.
        let block = b"data:\n  f.json: |\n    {{{{]]}}}} [[[]]]\n    '\n  g: [[[\n";
        assert!(!yaml_exceeds(block, 4));
        assert!(yaml_exceeds(block, 3));
        assert!(yaml_exceeds(b"a: |\n  {{{{{\n", 4), "deep text counts");
        // A document marker before a flow collection.
        assert!(yaml_exceeds(b"--- [[[[\n", 3));
        // A value after a JSON-like key: `:` then a quoted `]`.
        assert!(!yaml_exceeds(br#"{"a":"]]]","b":[[1]]}"#, 3));
        assert!(yaml_exceeds(br#"{"a":"]]]","b":[[[1]]]}"#, 3));
        // A quote inside a flow plain scalar does not open a quoted scalar.
        assert!(yaml_exceeds(b"[a 'b, ']]]]', [[[[", 4));
        // JSON is YAML.
        assert!(yaml_exceeds(br#"{"a":[[[1]]]}"#, 3));
        assert!(!yaml_exceeds(br#"{"a":"]]]","b":[[1]]}"#, 3));
    }
}
