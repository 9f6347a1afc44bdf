//! String formats kube validates (kube-openapi `strfmt.Default`, restricted to the set
//! apiextensions-apiserver keeps; every other format is stripped and never checked).

use std::net::IpAddr;
use std::sync::LazyLock;

use base64::Engine;
use regex::Regex;

/// Formats kube keeps for validation, by normalized name (dashes removed).
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// The normalized format name when kube validates it, else `None` (e.g. `int32`).
pub(crate) fn supported(format: &str) -> Option<String> {
    let normalized = format.replace('-', "");
    SUPPORTED
        .contains(&normalized.as_str())
        .then_some(normalized)
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("static regex")
}

static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static EMAIL: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:[^<>@\s]*<)?[^<>@\s]+@[^<>@\s]+>?$"));
static URI: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:[a-zA-Z][a-zA-Z0-9+.\-]*:[^\s]*|/[^\s]*)$"));
static MAC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){7}|[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){19}|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){2}|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){3}|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){9})$",
    )
});
static CREDITCARD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$",
    )
});
static SSN: LazyLock<Regex> = LazyLock::new(|| re(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static HEXCOLOR: LazyLock<Regex> = LazyLock::new(|| re(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Regex> = LazyLock::new(|| {
    let c = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*";
    re(&format!(r"^rgb\({c},{c},{c}\)$"))
});
static TIME_PART: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});
static DURATION_UNITS: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(\d+)\s*([A-Za-zµ]+)\s*$"));
static GO_DURATION: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"));

/// Whether `s` is valid for the (normalized) format.
pub(crate) fn validates(format: &str, s: &str) -> bool {
    match format {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => URI.is_match(s),
        "email" => EMAIL.is_match(s),
        "hostname" => s.len() <= 255 && HOSTNAME.is_match(s),
        "ipv4" => s.parse::<IpAddr>().is_ok() && s.contains('.'),
        "ipv6" => s.parse::<IpAddr>().is_ok() && s.contains(':'),
        "cidr" => is_cidr(s),
        "mac" => MAC.is_match(s),
        "uuid" => UUID.is_match(s),
        "uuid3" => UUID3.is_match(s),
        "uuid4" => UUID4.is_match(s),
        "uuid5" => UUID5.is_match(s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => {
            let digits: String = s.chars().filter(char::is_ascii_digit).collect();
            CREDITCARD.is_match(&digits)
        }
        "ssn" => SSN.is_match(s),
        "hexcolor" => HEXCOLOR.is_match(s),
        "rgbcolor" => RGBCOLOR.is_match(s),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "date" => is_date(s),
        "duration" => is_duration(s),
        "datetime" => is_date_time(s),
        // `password`, and any format not checked here, accepts anything.
        _ => true,
    }
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    if bits.is_empty() || !bits.bytes().all(|b| b.is_ascii_digit()) || bits.len() > 3 {
        return false;
    }
    let Ok(n) = bits.parse::<u32>() else {
        return false;
    };
    n <= if ip.is_ipv4() { 32 } else { 128 }
}

fn isbn_chars(s: &str) -> Vec<char> {
    s.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

fn is_isbn10(s: &str) -> bool {
    let c = isbn_chars(s);
    if c.len() != 10
        || !c[..9].iter().all(char::is_ascii_digit)
        || !(c[9].is_ascii_digit() || c[9] == 'X')
    {
        return false;
    }
    let mut sum = 0u32;
    for (weight, ch) in (1u32..).zip(&c) {
        let v = if *ch == 'X' {
            10
        } else {
            ch.to_digit(10).unwrap_or(0)
        };
        sum += weight * v;
    }
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let c = isbn_chars(s);
    if c.len() != 13 || !c.iter().all(char::is_ascii_digit) {
        return false;
    }
    let sum: u32 = c
        .iter()
        .enumerate()
        .map(|(i, ch)| ch.to_digit(10).unwrap_or(0) * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    sum.is_multiple_of(10)
}

fn is_date(s: &str) -> bool {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() && s.len() == 10
}

/// strfmt `IsDateTime`: `<date>T<hh:mm:ss[.frac](Z|±hh:mm)>`, case-insensitive.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(caps) = TIME_PART.captures(parts[1]) else {
        return false;
    };
    let num = |i: usize| {
        caps.get(i)
            .and_then(|m| m.as_str().parse::<u32>().ok())
            .unwrap_or(99)
    };
    num(1) <= 23 && num(2) <= 59 && num(3) <= 59
}

/// strfmt `IsDuration`: Go `time.ParseDuration` syntax or `<n> <unit>` with a known unit.
fn is_duration(s: &str) -> bool {
    const UNITS: &[&str] = &[
        "ns",
        "nanosecond",
        "nanoseconds",
        "us",
        "µs",
        "microsecond",
        "microseconds",
        "mcs",
        "ms",
        "millisecond",
        "milliseconds",
        "s",
        "sec",
        "secs",
        "second",
        "seconds",
        "m",
        "min",
        "mins",
        "minute",
        "minutes",
        "h",
        "hr",
        "hrs",
        "hour",
        "hours",
        "d",
        "day",
        "days",
        "w",
        "wk",
        "wks",
        "week",
        "weeks",
    ];
    if GO_DURATION.is_match(s) {
        return true;
    }
    let Some(caps) = DURATION_UNITS.captures(s) else {
        return false;
    };
    let unit = caps[2].to_string();
    UNITS.contains(&unit.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_and_reject() {
        assert_eq!(supported("date-time").as_deref(), Some("datetime"));
        assert_eq!(supported("int32"), None);
        assert!(validates("datetime", "2024-01-02T03:04:05Z"));
        assert!(validates("datetime", "2024-01-02T03:04:05.123+01:00"));
        assert!(!validates("datetime", "2024-01-02 03:04:05"));
        assert!(!validates("datetime", "2024-13-02T03:04:05Z"));
        assert!(validates("byte", "aGVsbG8="));
        assert!(!validates("byte", "not base64!"));
        assert!(validates("ipv4", "10.0.0.1"));
        assert!(!validates("ipv4", "::1"));
        assert!(validates("ipv6", "::1"));
        assert!(validates("cidr", "10.0.0.0/8"));
        assert!(!validates("cidr", "10.0.0.0/33"));
        assert!(validates("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(!validates("uuid", "123e4567"));
        assert!(validates("duration", "1h30m"));
        assert!(validates("duration", "3 days"));
        assert!(!validates("duration", "soon"));
        assert!(validates("date", "2024-02-29"));
        assert!(!validates("date", "2023-02-29"));
        assert!(validates("isbn10", "0321751043"));
        assert!(validates("hostname", "example.com"));
        assert!(!validates("hostname", "-bad-.com"));
        assert!(validates("mac", "00:1a:2b:3c:4d:5e"));
    }
}
