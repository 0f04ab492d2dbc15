//! The vocabulary of approval, shared by everything that states a policy or a pause:
//! `--approval` flags, a scenario file's `spec.approval` and timeline pauses, operator
//! requests and the gate in `control::approvals`, which applies them. It is data (parsed,
//! shown, compared), so it lives below the layers that read it; the gate keeps the state
//! and the order in which sources win.

use std::fmt;

use serde::Serialize;

use crate::engine::disruption::{Command, Reason};

/// Whether a decision runs on its own or waits for an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Policy {
    Auto,
    Manual,
}

impl Policy {
    fn parse(s: &str) -> Result<Policy, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Policy::Auto),
            "manual" => Ok(Policy::Manual),
            other => Err(format!("policy {other:?} is neither auto nor manual")),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Auto => "auto",
            Policy::Manual => "manual",
        })
    }
}

/// One `--approval` rule: `[POOL/][REASON=]POLICY` or `POOL=POLICY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub nodepool: Option<String>,
    pub reason: Option<Reason>,
    pub policy: Policy,
}

impl Rule {
    /// Parses a rule. A key before `=` is a reason when it names one (Empty, Drifted,
    /// Underutilized, Expired), otherwise a NodePool; `POOL/REASON=` names both.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let Some((key, policy)) = text.split_once('=') else {
            return Ok(Rule {
                nodepool: None,
                reason: None,
                policy: Policy::parse(text)?,
            });
        };
        let policy = Policy::parse(policy)?;
        let key = key.trim();
        if let Some((pool, reason)) = key.split_once('/') {
            let reason = Reason::parse(reason).ok_or_else(|| {
                format!(
                    "{reason:?} is not a disruption reason (Empty, Drifted, Underutilized, Expired)"
                )
            })?;
            if pool.is_empty() {
                return Err(format!("rule {text:?} names no NodePool before '/'"));
            }
            return Ok(Rule {
                nodepool: Some(pool.to_string()),
                reason: Some(reason),
                policy,
            });
        }
        if key.is_empty() {
            return Err(format!("rule {text:?} has nothing before '='"));
        }
        Ok(match Reason::parse(key) {
            Some(reason) => Rule {
                nodepool: None,
                reason: Some(reason),
                policy,
            },
            None => Rule {
                nodepool: Some(key.to_string()),
                reason: None,
                policy,
            },
        })
    }
}

/// What a pause covers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Scope {
    All,
    NodePool(String),
    Reason(Reason),
}

impl Scope {
    /// `all`, a reason name, or `nodepool/NAME` (a bare name that is not a reason is a
    /// NodePool).
    pub fn parse(s: &str) -> Result<Scope, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty pause scope".into());
        }
        if s.eq_ignore_ascii_case("all") {
            return Ok(Scope::All);
        }
        if let Some(pool) = s.strip_prefix("nodepool/") {
            return Ok(Scope::NodePool(pool.to_string()));
        }
        Ok(match Reason::parse(s) {
            Some(r) => Scope::Reason(r),
            None => Scope::NodePool(s.to_string()),
        })
    }

    /// True when the command falls in the scope.
    pub fn covers(&self, cmd: &Command) -> bool {
        match self {
            Scope::All => true,
            Scope::Reason(r) => cmd.reason == *r,
            Scope::NodePool(p) => cmd.candidates.iter().any(|c| &c.nodepool == p),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::All => f.write_str("all"),
            Scope::NodePool(p) => write!(f, "nodepool/{p}"),
            Scope::Reason(r) => f.write_str(r.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_with_clear_errors() {
        assert_eq!(
            Rule::parse("manual").unwrap(),
            Rule {
                nodepool: None,
                reason: None,
                policy: Policy::Manual
            }
        );
        assert_eq!(
            Rule::parse("Drifted=auto").unwrap().reason,
            Some(Reason::Drifted)
        );
        let r = Rule::parse("gpu/underutilized=auto").unwrap();
        assert_eq!(r.nodepool.as_deref(), Some("gpu"));
        assert_eq!(r.reason, Some(Reason::Underutilized));
        assert_eq!(
            Rule::parse("gpu=manual").unwrap().nodepool.as_deref(),
            Some("gpu")
        );
        assert!(
            Rule::parse("gpu=sometimes")
                .unwrap_err()
                .contains("sometimes")
        );
        assert!(Rule::parse("gpu/Bored=auto").unwrap_err().contains("Bored"));
    }

    #[test]
    fn scopes_parse() {
        assert_eq!(Scope::parse("all").unwrap(), Scope::All);
        assert_eq!(
            Scope::parse("Drifted").unwrap(),
            Scope::Reason(Reason::Drifted)
        );
        assert_eq!(
            Scope::parse("nodepool/Empty").unwrap(),
            Scope::NodePool("Empty".into())
        );
        assert_eq!(Scope::parse("web").unwrap(), Scope::NodePool("web".into()));
    }
}
