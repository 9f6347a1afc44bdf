//! CronJob schedules as kube reads them (robfig/cron's standard parser: five
//! fields or a `@` descriptor), with its error messages.

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// A field's bounds and names (the first name is worth `min`).
struct Bounds {
    min: i64,
    max: i64,
    names: &'static [&'static str],
}

const FIELDS: [Bounds; 5] = [
    Bounds {
        min: 0,
        max: 59,
        names: &[],
    },
    Bounds {
        min: 0,
        max: 23,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 31,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 12,
        names: &MONTHS,
    },
    Bounds {
        min: 0,
        max: 6,
        names: &DAYS,
    },
];

/// kube's errors for a schedule (empty when valid).
pub fn errors(schedule: &str) -> Vec<String> {
    let mut out = vec![];
    if let Err(e) = parse(schedule) {
        out.push(e);
    }
    if schedule.contains("TZ") {
        out.push("cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into());
    }
    out
}

fn parse(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // The zone is kube's `timeZone` business; the TZ error is reported anyway.
        spec = spec.split_once(' ').map_or("", |(_, rest)| rest.trim());
    }
    if spec.starts_with('@') {
        return descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in fields.iter().zip(&FIELDS) {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            range(expr, bounds)?;
        }
    }
    Ok(())
}

fn descriptor(spec: &str) -> Result<(), String> {
    const NAMED: [&str; 7] = [
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
    ];
    if NAMED.contains(&spec) {
        return Ok(());
    }
    if let Some(d) = spec.strip_prefix("@every ") {
        return if is_go_duration(d) {
            Ok(())
        } else {
            Err(format!(
                "failed to parse duration {spec}: time: invalid duration {d:?}"
            ))
        };
    }
    Err(format!("unrecognized descriptor: {spec}"))
}

/// Go's `time.ParseDuration` syntax: `[-+]` then number-unit pairs (`1h30m`).
fn is_go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    let mut rest = s;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let num = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num == 0 || rest[..num] == *"." {
            return false;
        }
        rest = &rest[num..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        if !["ns", "us", "µs", "μs", "ms", "s", "m", "h"].contains(&&rest[..unit]) {
            return false;
        }
        rest = &rest[unit..];
    }
    true
}

fn int(expr: &str) -> Result<i64, String> {
    let n: i64 = expr.parse().map_err(|_| {
        format!("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: invalid syntax")
    })?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    Ok(n)
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<i64, String> {
    let lower = expr.to_ascii_lowercase();
    match b.names.iter().position(|n| *n == lower) {
        Some(i) => Ok(b.min + i64::try_from(i).expect("a dozen names")),
        None => int(expr),
    }
}

/// One range: `*`, `N`, `N-M`, each optionally `/STEP`.
fn range(expr: &str, b: &Bounds) -> Result<(), String> {
    let parts: Vec<&str> = expr.split('/').collect();
    let bounds: Vec<&str> = parts[0].split('-').collect();
    let (start, mut end) = if bounds[0] == "*" || bounds[0] == "?" {
        (b.min, b.max)
    } else {
        let start = int_or_name(bounds[0], b)?;
        match bounds.len() {
            1 => (start, start),
            2 => (start, int_or_name(bounds[1], b)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match parts.len() {
        1 => 1,
        2 => {
            if bounds.len() == 1 {
                end = b.max;
            }
            int(parts[1])?
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robfig_messages() {
        assert!(errors("*/5 * * * *").is_empty());
        assert!(errors("0 0 1 jan-mar MON-fri").is_empty());
        assert!(errors("@hourly").is_empty());
        assert!(errors("@every 1h30m").is_empty());
        assert_eq!(
            errors("not a schedule"),
            ["expected exactly 5 fields, found 3: [not a schedule]"]
        );
        assert_eq!(
            errors("61 * * * *"),
            ["end of range (61) above maximum (59): 61"]
        );
        assert_eq!(
            errors("* * 0 * *"),
            ["beginning of range (0) below minimum (1): 0"]
        );
        assert_eq!(
            errors("x * * * *"),
            ["failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"]
        );
        assert_eq!(errors("@often"), ["unrecognized descriptor: @often"]);
    }
}
