//! Kubernetes resource quantities (`500m`, `1Gi`, `2e3`) as exact numbers, for
//! comparing and adding them as kube's `resource.Quantity` does.
//!
//! Hand-written: the crates that parse quantities tie themselves to a
//! k8s-openapi version of their own, and kube's `QoS` class needs only parsing,
//! adding and comparing.

/// A quantity in nano-units (kube keeps at most nine decimal places too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(i128);

const NANO: i128 = 1_000_000_000;

impl Quantity {
    /// Parses kube's quantity syntax: a signed decimal number, then a binary
    /// suffix (`Ki`..`Ei`), a decimal one (`n`, `u`, `m`, none, `k`, `M`..`E`) or an
    /// exponent (`e3`, `E-2`). None when it is not one.
    pub fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(split);
        let (negative, digits) = match number.as_bytes().first() {
            Some(b'-') => (true, &number[1..]),
            Some(b'+') => (false, &number[1..]),
            _ => (false, number),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() && fraction.is_empty()
            || !(whole.bytes().chain(fraction.bytes())).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        // The number as an integer times 10^-scale.
        let mantissa: i128 = format!("{whole}{fraction}").parse().ok()?;
        let scale = i32::try_from(fraction.len()).ok()?;
        let (base, exponent): (i128, i32) = match suffix {
            "Ki" => (2, 10),
            "Mi" => (2, 20),
            "Gi" => (2, 30),
            "Ti" => (2, 40),
            "Pi" => (2, 50),
            "Ei" => (2, 60),
            "n" => (10, -9),
            "u" => (10, -6),
            "m" => (10, -3),
            "" => (10, 0),
            "k" => (10, 3),
            "M" => (10, 6),
            "G" => (10, 9),
            "T" => (10, 12),
            "P" => (10, 15),
            "E" => (10, 18),
            _ => {
                let e = suffix.strip_prefix(['e', 'E'])?;
                (10, e.parse().ok()?)
            }
        };
        let nanos = scaled(mantissa, scale, base, exponent)?;
        Some(Quantity(if negative { -nanos } else { nanos }))
    }

    /// Whether it is more than zero.
    pub fn is_positive(self) -> bool {
        self.0 > 0
    }
}

/// `mantissa * 10^-scale * base^exponent` in nano-units, rounded up as kube
/// rounds what it cannot keep; None past i128.
fn scaled(mantissa: i128, scale: i32, base: i128, exponent: i32) -> Option<i128> {
    let mut value = mantissa.checked_mul(NANO)?;
    let mut divisor: i128 = 1;
    let decimal_exponent = if base == 10 { exponent } else { 0 };
    match decimal_exponent - scale {
        e if e >= 0 => value = value.checked_mul(10i128.checked_pow(e.unsigned_abs())?)?,
        e => divisor = 10i128.checked_pow(e.unsigned_abs())?,
    }
    if base == 2 {
        value = value.checked_mul(2i128.checked_pow(exponent.unsigned_abs())?)?;
    }
    Some((value + divisor - 1) / divisor)
}

impl std::ops::Add for Quantity {
    type Output = Quantity;

    fn add(self, other: Quantity) -> Quantity {
        Quantity(self.0.saturating_add(other.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn equal_quantities_in_other_forms() {
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1.5"), q("1500m"));
        assert_eq!(q("2e3"), q("2k"));
        assert_eq!(q("100M"), q("0.1G"));
        assert!(q("0").is_positive().eq(&false));
        assert!(q("1n").is_positive());
        assert_eq!(q("250m") + q("750m"), q("1"));
        assert!(q("1Mi") > q("1M"));
        for bad in ["", "abc", "1Qi", "1.2.3", "-"] {
            assert!(Quantity::parse(bad).is_none(), "{bad}");
        }
    }
}
