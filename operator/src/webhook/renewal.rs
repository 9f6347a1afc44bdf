//! When the webhook certificate Secret's content is renewed, decided from
//! the content and the time alone (no cluster), as cert-controller's
//! rotator does it:
//!
//! - the serving certificate is renewed when less than a third of its
//!   validity remains, when it lacks a host, or when it is unusable;
//! - the CA is renewed when less than a third of its validity remains: the
//!   new CA signs from then on, and the old one stays in `ca.crt` (so in
//!   every `caBundle`) until it expires, so the serving certificate it
//!   signed is still trusted;
//! - the serving certificate moves to the new CA once that CA has been in
//!   the bundle for [`Lifetimes::overlap`], time enough for every replica
//!   to see it and write it into the webhook configurations; no serving
//!   certificate is signed by a CA younger than that (a due renewal
//!   waits), unless it is unusable or lacks a host;
//! - an unusable CA (garbage, a key that does not match) is replaced by a
//!   new one, with a new serving certificate.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;

use super::material::{Authority, Serving, to_data, unix};

/// How long a generated CA is valid: ten years. It is renewed after two
/// thirds of that, so a working cluster never sees it expire.
pub const CA_LIFETIME: Duration = Duration::from_hours(24 * 3650);
/// How long a generated serving certificate is valid: 90 days, as
/// cert-manager's default. Renewed after 60.
pub const SERVING_LIFETIME: Duration = Duration::from_hours(24 * 90);

/// Validity of the certificates generated; [`CA_LIFETIME`] and
/// [`SERVING_LIFETIME`] unless tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// Of a CA.
    pub ca: Duration,
    /// Of a serving certificate.
    pub serving: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self {
            ca: CA_LIFETIME,
            serving: SERVING_LIFETIME,
        }
    }
}

impl Lifetimes {
    /// Both lifetimes, refused unless the CA outlives the serving
    /// certificate: the overlap must end before the old CA expires.
    pub fn new(ca: Duration, serving: Duration) -> Result<Self, String> {
        if serving.is_zero() || ca <= serving {
            return Err(format!(
                "the CA lifetime ({}s) must be longer than the serving certificate's ({}s)",
                ca.as_secs(),
                serving.as_secs()
            ));
        }
        Ok(Self { ca, serving })
    }

    /// How long a new CA is trusted before it signs the serving
    /// certificate: a sixth of the serving lifetime (15 days by default),
    /// much longer than replicas take to see the Secret and write the
    /// bundle, and shorter than the third of its validity that the old CA
    /// and a due serving certificate have left.
    pub fn overlap(&self) -> Duration {
        self.serving / 6
    }
}

/// What to do with the Secret's content.
#[derive(Debug)]
pub struct Plan {
    /// The new content, if it must change.
    pub write: Option<BTreeMap<String, ByteString>>,
    /// Why it changes, one line per reason.
    pub reasons: Vec<String>,
    /// Whether a reason is an unusable content (logged as an error).
    pub repaired: bool,
    /// When to look again even if the Secret does not change (seconds
    /// since the Unix epoch).
    pub next_check: i64,
}

/// The plan for `data` (empty: no Secret yet) and a serving certificate
/// for `hosts`, at `now`.
pub fn plan(
    data: &BTreeMap<String, ByteString>,
    hosts: &[String],
    lifetimes: Lifetimes,
    now: SystemTime,
) -> anyhow::Result<Plan> {
    let at = unix(now);
    let mut reasons = Vec::new();
    let mut repaired = false;
    let authority = match Authority::read(data) {
        Err(why) => {
            if !data.is_empty() {
                reasons.push(format!("the CA is unusable ({why}): a new CA"));
                repaired = true;
            }
            None
        }
        Ok(mut authority) => {
            let before = authority.older.len();
            authority.older.retain(|ca| ca.not_after > at);
            if authority.older.len() < before {
                reasons.push("an older CA expired: out of the bundle".into());
            }
            if at >= authority.signing.renew_at() {
                reasons.push(
                    "the CA is in the last third of its validity: a new CA, the old one stays trusted"
                        .into(),
                );
                let mut older = vec![authority.signing.clone()];
                older.extend(authority.older);
                Some(Authority::generate(now, lifetimes.ca, older)?)
            } else {
                Some(authority)
            }
        }
    };
    let (authority, serving) = match authority {
        None => {
            if data.is_empty() {
                reasons.push("no Secret: a new CA and serving certificate".into());
            }
            let authority = Authority::generate(now, lifetimes.ca, Vec::new())?;
            let serving = authority.issue(hosts, now, lifetimes.serving)?;
            (authority, serving)
        }
        Some(authority) => {
            let trusted_long_enough = at >= overlap_end(&authority, lifetimes);
            let why = match Serving::read(data, &authority) {
                Err(why) => {
                    repaired = true;
                    Some(format!("the serving certificate is unusable ({why})"))
                }
                Ok(s) if !s.covers(hosts) => {
                    Some("the serving certificate lacks a host of this replica".into())
                }
                Ok(s) if trusted_long_enough && !s.by_signing_ca => {
                    Some("the new CA has been trusted long enough to sign".into())
                }
                // Under a CA younger than the overlap, a due renewal waits
                // for the overlap's end (the certificate has a sixth of its
                // validity left then, at least).
                Ok(s) if trusted_long_enough && at >= s.cert.renew_at() => {
                    Some("the serving certificate is in the last third of its validity".into())
                }
                Ok(s) => {
                    let next = next_check(&authority, &s, lifetimes);
                    let write = (!reasons.is_empty()).then(|| to_data(&authority, &s));
                    return Ok(Plan {
                        write,
                        reasons,
                        repaired,
                        next_check: next,
                    });
                }
            };
            reasons.extend(why.map(|w| format!("{w}: a new serving certificate")));
            let serving = authority.issue(hosts, now, lifetimes.serving)?;
            (authority, serving)
        }
    };
    Ok(Plan {
        write: Some(to_data(&authority, &serving)),
        reasons,
        repaired,
        next_check: next_check(&authority, &serving, lifetimes),
    })
}

/// When the signing CA has been trusted for the overlap.
fn overlap_end(authority: &Authority, lifetimes: Lifetimes) -> i64 {
    authority.signing.issued_at() + secs(lifetimes.overlap())
}

/// The earliest time at which the plan for this content changes.
fn next_check(authority: &Authority, serving: &Serving, lifetimes: Lifetimes) -> i64 {
    let overlap_end = overlap_end(authority, lifetimes);
    let mut times = vec![
        serving.cert.renew_at().max(overlap_end),
        authority.signing.renew_at(),
    ];
    if !serving.by_signing_ca {
        times.push(overlap_end);
    }
    times.extend(authority.older.iter().map(|ca| ca.not_after));
    times.into_iter().min().expect("never empty")
}

fn secs(d: Duration) -> i64 {
    d.as_secs().cast_signed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::material::{Authority, CA_CRT, Serving, TLS_CRT};

    fn hosts() -> Vec<String> {
        vec!["w.ns.svc".into(), "127.0.0.1".into()]
    }

    const LIFETIMES: Lifetimes = Lifetimes {
        ca: Duration::from_mins(50),
        serving: Duration::from_mins(5),
    };

    fn after(start: SystemTime, secs: u64) -> SystemTime {
        start + Duration::from_secs(secs)
    }

    /// Apply the plan at `now` as the rotator would; the reasons.
    fn step(data: &mut BTreeMap<String, ByteString>, now: SystemTime) -> Vec<String> {
        let plan = plan(data, &hosts(), LIFETIMES, now).unwrap();
        if let Some(new) = plan.write {
            *data = new;
        }
        plan.reasons
    }

    fn read(data: &BTreeMap<String, ByteString>) -> (Authority, Serving) {
        let authority = Authority::read(data).unwrap();
        let serving = Serving::read(data, &authority).unwrap();
        (authority, serving)
    }

    #[test]
    fn serving_certificate_renewed_in_its_last_third_under_the_same_ca() {
        let start = SystemTime::now();
        let mut data = BTreeMap::new();
        assert_eq!(
            step(&mut data, start),
            ["no Secret: a new CA and serving certificate"]
        );
        let (ca, first) = read(&data);
        let plan = plan(&data, &hosts(), LIFETIMES, after(start, 10)).unwrap();
        assert!(plan.write.is_none(), "{:?}", plan.reasons);
        assert_eq!(plan.next_check, first.cert.renew_at());
        // 300 s, backdated by 15: renewed from 2/3 of 315 s on.
        assert!(step(&mut data, after(start, 180)).is_empty());
        assert_eq!(
            step(&mut data, after(start, 200)),
            [
                "the serving certificate is in the last third of its validity: a new serving certificate"
            ]
        );
        let (same_ca, second) = read(&data);
        assert_eq!(same_ca.bundle_pem(), ca.bundle_pem());
        assert_ne!(second.cert.pem, first.cert.pem);
    }

    #[test]
    fn ca_rotation_keeps_the_old_ca_trusted_until_the_serving_certificate_moves() {
        let start = SystemTime::now();
        let mut data = BTreeMap::new();
        step(&mut data, start);
        let (old_ca, _) = read(&data);
        let mut now = start;
        // Walk through the CA's life as the rotator would, checking each
        // time that the serving certificate is trusted by the bundle.
        let mut cas_seen = vec![old_ca.signing.pem.clone()];
        let mut moved = false;
        while unix(now) < old_ca.signing.not_after + 10 {
            let plan = plan(&data, &hosts(), LIFETIMES, now).unwrap();
            if let Some(new) = plan.write {
                data = new;
            }
            let (ca, serving) = read(&data);
            assert!(
                serving.cert.not_after > unix(now),
                "expired serving cert at {now:?}"
            );
            if ca.signing.pem != *cas_seen.last().unwrap() {
                cas_seen.push(ca.signing.pem.clone());
                assert!(
                    !serving.by_signing_ca,
                    "the new CA signs only after the overlap"
                );
                assert_eq!(ca.older.len(), 1, "the old CA stays trusted");
            }
            if cas_seen.len() == 2 && serving.by_signing_ca && !moved {
                moved = true;
                assert!(unix(now) >= ca.signing.issued_at() + 50, "overlap of 50 s");
                assert!(ca.older.iter().all(|c| c.not_after > unix(now)));
            }
            now = after(now, 7);
        }
        assert!(moved, "the serving certificate moved to the new CA");
        let (ca, _) = read(&data);
        assert!(ca.older.is_empty(), "the expired CA left the bundle");
    }

    #[test]
    fn unusable_parts_are_replaced_and_named() {
        let start = SystemTime::now();
        let mut data = BTreeMap::new();
        step(&mut data, start);
        let (ca, _) = read(&data);

        let mut bad_serving = data.clone();
        bad_serving.insert(TLS_CRT.into(), ByteString(b"garbage".to_vec()));
        let repair = plan(&bad_serving, &hosts(), LIFETIMES, start).unwrap();
        assert!(repair.repaired);
        assert_eq!(
            repair.reasons,
            [
                "the serving certificate is unusable (tls.crt holds no certificate): a new serving certificate"
            ]
        );
        let (kept, _) = read(&repair.write.unwrap());
        assert_eq!(kept.bundle_pem(), ca.bundle_pem(), "the CA is kept");

        let mut bad_ca = data.clone();
        bad_ca.insert(CA_CRT.into(), ByteString(vec![0xff, 0xfe]));
        let repair = plan(&bad_ca, &hosts(), LIFETIMES, start).unwrap();
        assert!(repair.repaired);
        assert_eq!(
            repair.reasons,
            ["the CA is unusable (ca.crt is not text): a new CA"]
        );
        let (new_ca, _) = read(&repair.write.unwrap());
        assert_ne!(new_ca.bundle_pem(), ca.bundle_pem());

        // A replica with one more host re-issues; one with fewer does not.
        let more = plan_for(&data, &["w.ns.svc", "127.0.0.1", "extra"], start);
        assert_eq!(
            more.reasons,
            ["the serving certificate lacks a host of this replica: a new serving certificate"]
        );
        assert!(plan_for(&data, &["w.ns.svc"], start).write.is_none());
    }

    fn plan_for(data: &BTreeMap<String, ByteString>, hosts: &[&str], now: SystemTime) -> Plan {
        let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_string()).collect();
        plan(data, &hosts, LIFETIMES, now).unwrap()
    }

    #[test]
    fn lifetimes_must_leave_room_for_the_overlap() {
        assert!(Lifetimes::new(Duration::from_mins(1), Duration::from_mins(1)).is_err());
        assert!(Lifetimes::new(Duration::from_secs(61), Duration::from_mins(1)).is_ok());
        let defaults = Lifetimes::default();
        assert!(Lifetimes::new(defaults.ca, defaults.serving).is_ok());
        assert_eq!(defaults.overlap(), Duration::from_hours(24 * 15));
    }
}
