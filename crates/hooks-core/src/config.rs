//! Validated hook configuration: \[A1\]-\[A2\], \[C1\]-\[C2\], \[G1\]-\[G2\].
//!
//! Values arrive as the strings an operator wrote (an environment variable or a
//! command-line flag); reading the environment is the shell's job. A value that
//! exists is valid: a bad one is refused when it is built, with a
//! [`ConfigError`] that names the setting and the value.

use crate::prelude::*;

use core::fmt;
use core::time::Duration;

/// Environment variable: which servers may hook \[A1\]-\[A2\].
pub const ENV_HOOK_SERVERS: &str = "MCP_HOOK_SERVERS";
/// Environment variable: per-hook call deadline in milliseconds \[C1\].
pub const ENV_HOOK_TIMEOUT_MS: &str = "SPROUT_AGENT_HOOK_TIMEOUT_MS";
/// Environment variable: session-wide `_Stop` objection budget \[C2\].
pub const ENV_STOP_MAX_REJECTIONS: &str = "SPROUT_AGENT_STOP_MAX_REJECTIONS";
/// Environment variable: what the `_Stop` budget is counted over \[G1\].
pub const ENV_STOP_BUDGET_SCOPE: &str = "SPROUT_AGENT_STOP_BUDGET_SCOPE";
/// Environment variable: whether the consecutive rule holds \[G2\].
pub const ENV_STOP_DECLINE_RULE: &str = "SPROUT_AGENT_STOP_DECLINE_RULE";

/// A configuration value that was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The setting, as the operator wrote it: an environment variable or a flag.
    pub setting: String,
    /// The value as given.
    pub value: String,
    /// What a valid value looks like.
    pub expected: &'static str,
}

impl ConfigError {
    fn new(setting: &str, value: &str, expected: &'static str) -> ConfigError {
        ConfigError {
            setting: setting.to_owned(),
            value: value.to_owned(),
            expected,
        }
    }

    /// The same error, naming `setting` instead (a flag that overrode the
    /// environment variable, say).
    pub fn for_setting(mut self, setting: impl Into<String>) -> ConfigError {
        self.setting = setting.into();
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?} is not valid: expected {}",
            self.setting, self.value, self.expected
        )
    }
}

impl core::error::Error for ConfigError {}

/// Which servers may hook \[A1\]-\[A2\].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Allowlist {
    /// No server may hook \[A1\]. The default.
    #[default]
    Off,
    /// Every configured server may hook (`*`).
    All,
    /// Exactly these names (trimmed, duplicates removed, in the order given).
    Names(Vec<String>),
}

impl Allowlist {
    /// Parses the value of `MCP_HOOK_SERVERS`.
    ///
    /// Unset, empty, or only blanks and commas: [`Allowlist::Off`] \[A1\]. `*`:
    /// [`Allowlist::All`]. Otherwise comma-separated names, trimmed \[A2\]. `*`
    /// together with names is an error. Names are not checked against the
    /// server name rules here: a listed name that matches no configured server
    /// is a warning at start-up \[A3\], whatever the reason.
    pub fn parse(value: &str) -> Result<Allowlist, ConfigError> {
        let mut star = false;
        let mut names: Vec<String> = Vec::new();
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if item == "*" {
                star = true;
            } else if !names.iter().any(|n| n == item) {
                names.push(item.to_owned());
            }
        }
        match (star, names.is_empty()) {
            (false, true) => Ok(Allowlist::Off),
            (true, true) => Ok(Allowlist::All),
            (false, false) => Ok(Allowlist::Names(names)),
            (true, false) => Err(ConfigError::new(
                ENV_HOOK_SERVERS,
                value,
                "either `*` alone (every server may hook) or a comma-separated list of \
                 server names, not both",
            )),
        }
    }

    /// Whether the server named `name` may hook.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Allowlist::Off => false,
            Allowlist::All => true,
            Allowlist::Names(names) => names.iter().any(|n| n == name),
        }
    }

    /// Whether hooks are on at all.
    pub fn is_off(&self) -> bool {
        matches!(self, Allowlist::Off)
    }
}

/// The per-hook call deadline \[C1\]: 1 to 600000 ms, default 2500.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HookTimeout(
    // Invariant: within MIN..=MAX milliseconds.
    Duration,
);

impl HookTimeout {
    /// The default, 2.5 s.
    pub const DEFAULT: HookTimeout = HookTimeout(Duration::from_millis(2500));
    const MIN_MS: u64 = 1;
    const MAX_MS: u64 = 600_000;

    /// Parses a millisecond count, as `SPROUT_AGENT_HOOK_TIMEOUT_MS` holds it.
    pub fn parse(value: &str) -> Result<HookTimeout, ConfigError> {
        parse_in_range(value, Self::MIN_MS, Self::MAX_MS)
            .map(|ms| HookTimeout(Duration::from_millis(ms)))
            .ok_or_else(|| {
                ConfigError::new(
                    ENV_HOOK_TIMEOUT_MS,
                    value,
                    "a whole number of milliseconds from 1 to 600000",
                )
            })
    }

    /// From a millisecond count; `None` outside 1..=600000.
    pub fn from_millis(ms: u64) -> Option<HookTimeout> {
        (Self::MIN_MS..=Self::MAX_MS)
            .contains(&ms)
            .then(|| HookTimeout(Duration::from_millis(ms)))
    }

    /// The deadline as a duration.
    pub fn duration(self) -> Duration {
        self.0
    }
}

impl Default for HookTimeout {
    fn default() -> Self {
        HookTimeout::DEFAULT
    }
}

/// The session-wide `_Stop` objection budget \[S3\], \[C2\]: 0 to 1000, default 3.
/// Zero disables `_Stop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopBudget(
    // Invariant: at most MAX.
    u32,
);

impl StopBudget {
    /// The default, 3.
    pub const DEFAULT: StopBudget = StopBudget(3);
    const MAX: u32 = 1000;

    /// Parses the value of `SPROUT_AGENT_STOP_MAX_REJECTIONS`.
    pub fn parse(value: &str) -> Result<StopBudget, ConfigError> {
        parse_in_range(value, 0, u64::from(Self::MAX))
            .map(|n| StopBudget(n as u32))
            .ok_or_else(|| {
                ConfigError::new(
                    ENV_STOP_MAX_REJECTIONS,
                    value,
                    "a whole number from 0 to 1000 (0 disables _Stop)",
                )
            })
    }

    /// From a count; `None` above 1000. With [`HookTimeout::from_millis`],
    /// the way to settings from numbers rather than the strings
    /// [`HookConfig::from_values`] reads:
    ///
    /// ```
    /// use hooks_core::{HookConfig, HookTimeout, StopBudget};
    ///
    /// let config = HookConfig {
    ///     timeout: HookTimeout::from_millis(800).expect("1 to 600000 ms"),
    ///     stop_budget: StopBudget::new(5).expect("at most 1000"),
    ///     ..HookConfig::default()
    /// };
    /// assert_eq!(config.stop_budget.get(), 5);
    /// assert_eq!(StopBudget::new(1001), None);
    /// assert_eq!(HookTimeout::from_millis(0), None);
    /// ```
    pub fn new(n: u32) -> Option<StopBudget> {
        (n <= Self::MAX).then_some(StopBudget(n))
    }

    /// The budget as a count.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for StopBudget {
    fn default() -> Self {
        StopBudget::DEFAULT
    }
}

/// What the `_Stop` budget counts over \[G1\]: the session (the seed's rule
/// \[S3\], the default) or each prompt (refilled when the next one begins).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BudgetScope {
    /// One budget for the whole session \[S3\].
    #[default]
    Session,
    /// A fresh budget for every prompt.
    Prompt,
}

impl BudgetScope {
    /// Parses the value of `SPROUT_AGENT_STOP_BUDGET_SCOPE`: `session` or
    /// `prompt`, surrounding blanks allowed.
    pub fn parse(value: &str) -> Result<BudgetScope, ConfigError> {
        match value.trim() {
            "session" => Ok(BudgetScope::Session),
            "prompt" => Ok(BudgetScope::Prompt),
            _ => Err(ConfigError::new(
                ENV_STOP_BUDGET_SCOPE,
                value,
                "`session` (one budget per session) or `prompt` (refilled for every prompt)",
            )),
        }
    }

    /// The scope as the setting writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetScope::Session => "session",
            BudgetScope::Prompt => "prompt",
        }
    }
}

/// Whether the consecutive rule \[S2\] holds \[G2\]: `on` (the default) lets a
/// model that ends again right after an objection go; `off` asks `_Stop` at
/// every bare end-of-turn until the budget is spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeclineRule {
    /// The consecutive rule holds \[S2\].
    #[default]
    On,
    /// Every bare end-of-turn asks `_Stop` while the budget lasts.
    Off,
}

impl DeclineRule {
    /// Parses the value of `SPROUT_AGENT_STOP_DECLINE_RULE`: `on` or `off`,
    /// surrounding blanks allowed.
    pub fn parse(value: &str) -> Result<DeclineRule, ConfigError> {
        match value.trim() {
            "on" => Ok(DeclineRule::On),
            "off" => Ok(DeclineRule::Off),
            _ => Err(ConfigError::new(
                ENV_STOP_DECLINE_RULE,
                value,
                "`on` (a model that ends again right after an objection is let go) or `off`",
            )),
        }
    }

    /// The rule as the setting writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeclineRule::On => "on",
            DeclineRule::Off => "off",
        }
    }
}

/// A decimal integer in `min..=max`, surrounding blanks allowed.
fn parse_in_range(value: &str, min: u64, max: u64) -> Option<u64> {
    let trimmed = value.trim();
    if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    trimmed
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
}

/// The whole hook policy configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookConfig {
    /// Who may hook.
    pub allowlist: Allowlist,
    /// Per-call deadline.
    pub timeout: HookTimeout,
    /// `_Stop` objection budget.
    pub stop_budget: StopBudget,
    /// What the budget counts over \[G1\].
    pub stop_budget_scope: BudgetScope,
    /// Whether the consecutive rule holds \[G2\].
    pub stop_decline_rule: DeclineRule,
}

impl HookConfig {
    /// Builds the configuration from the three seed settings' raw values,
    /// `None` where unset; stop governance keeps its defaults (see
    /// [`HookConfig::with_stop_governance`]). Command-line flags that override them \[C3\] are the shell's
    /// business: it passes the winning value and, on error, renames the setting
    /// with [`ConfigError::for_setting`].
    pub fn from_values(
        hook_servers: Option<&str>,
        timeout_ms: Option<&str>,
        stop_max_rejections: Option<&str>,
    ) -> Result<HookConfig, ConfigError> {
        Ok(HookConfig {
            allowlist: hook_servers
                .map(Allowlist::parse)
                .transpose()?
                .unwrap_or_default(),
            timeout: timeout_ms
                .map(HookTimeout::parse)
                .transpose()?
                .unwrap_or_default(),
            stop_budget: stop_max_rejections
                .map(StopBudget::parse)
                .transpose()?
                .unwrap_or_default(),
            stop_budget_scope: BudgetScope::default(),
            stop_decline_rule: DeclineRule::default(),
        })
    }

    /// The same configuration with the stop governance settings' raw values
    /// \[G1\]-\[G2\] applied, `None` where unset (the default stays).
    pub fn with_stop_governance(
        mut self,
        budget_scope: Option<&str>,
        decline_rule: Option<&str>,
    ) -> Result<HookConfig, ConfigError> {
        if let Some(value) = budget_scope {
            self.stop_budget_scope = BudgetScope::parse(value)?;
        }
        if let Some(value) = decline_rule {
            self.stop_decline_rule = DeclineRule::parse(value)?;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Allowlist {
        Allowlist::Names(list.iter().map(|s| s.to_string()).collect())
    }

    // [A1]
    #[test]
    fn allowlist_off_when_unset_empty_or_blank() {
        for v in ["", "   ", ",", " , ,, "] {
            assert_eq!(Allowlist::parse(v), Ok(Allowlist::Off), "{v:?}");
        }
        assert_eq!(
            HookConfig::from_values(None, None, None).unwrap().allowlist,
            Allowlist::Off
        );
        assert!(!Allowlist::Off.allows("any"));
    }

    // [A2]
    #[test]
    fn allowlist_star_or_trimmed_names() {
        assert_eq!(Allowlist::parse("*"), Ok(Allowlist::All));
        assert_eq!(Allowlist::parse(" * , "), Ok(Allowlist::All));
        assert_eq!(
            Allowlist::parse(" todo , gate,todo"),
            Ok(names(&["todo", "gate"]))
        );
        assert!(names(&["todo"]).allows("todo"));
        assert!(!names(&["todo"]).allows("gate"));
        let err = Allowlist::parse("*,todo").unwrap_err();
        assert_eq!(err.setting, "MCP_HOOK_SERVERS");
        assert_eq!(err.value, "*,todo");
        assert!(
            err.to_string()
                .starts_with("MCP_HOOK_SERVERS=\"*,todo\" is not valid")
        );
    }

    // [C1]
    #[test]
    fn hook_timeout_range_c1() {
        assert_eq!(
            HookConfig::default().timeout.duration(),
            Duration::from_millis(2500)
        );
        assert_eq!(
            HookTimeout::parse("1").unwrap().duration(),
            Duration::from_millis(1)
        );
        assert_eq!(
            HookTimeout::parse(" 600000 ").unwrap().duration(),
            Duration::from_secs(600)
        );
        for bad in [
            "0",
            "600001",
            "-5",
            "2.5",
            "",
            "1e3",
            "+7",
            "99999999999999999999999",
        ] {
            let err = HookTimeout::parse(bad).unwrap_err();
            assert_eq!(err.setting, "SPROUT_AGENT_HOOK_TIMEOUT_MS", "{bad:?}");
            assert_eq!(err.value, bad);
        }
    }

    // [C2]
    #[test]
    fn stop_budget_range_c2() {
        assert_eq!(HookConfig::default().stop_budget.get(), 3);
        assert_eq!(StopBudget::parse("0").unwrap().get(), 0);
        assert_eq!(StopBudget::parse("1000").unwrap().get(), 1000);
        for bad in ["1001", "-1", "three", ""] {
            let err = StopBudget::parse(bad).unwrap_err();
            assert_eq!(err.setting, "SPROUT_AGENT_STOP_MAX_REJECTIONS", "{bad:?}");
        }
    }

    // [C3]: the shell renames the setting when a flag supplied the value.
    #[test]
    fn errors_can_name_the_flag() {
        let err = HookTimeout::parse("0")
            .unwrap_err()
            .for_setting("--hook-timeout-ms");
        assert_eq!(
            err.to_string(),
            "--hook-timeout-ms=\"0\" is not valid: expected a whole number of milliseconds from 1 to 600000"
        );
    }

    // [G1], [G3]: `session` (the default) or `prompt`; anything else names the variable.
    #[test]
    fn budget_scope_g1() {
        assert_eq!(
            HookConfig::default().stop_budget_scope,
            BudgetScope::Session
        );
        assert_eq!(BudgetScope::parse(" prompt "), Ok(BudgetScope::Prompt));
        assert_eq!(BudgetScope::parse("session"), Ok(BudgetScope::Session));
        for bad in ["", "Prompt", "turn", "session,prompt"] {
            let err = BudgetScope::parse(bad).unwrap_err();
            assert_eq!(err.setting, "SPROUT_AGENT_STOP_BUDGET_SCOPE", "{bad:?}");
            assert_eq!(err.value, bad);
        }
        assert_eq!(
            BudgetScope::parse("turn").unwrap_err().to_string(),
            "SPROUT_AGENT_STOP_BUDGET_SCOPE=\"turn\" is not valid: expected `session` (one budget \
             per session) or `prompt` (refilled for every prompt)"
        );
    }

    // [G2], [G3]: `on` (the default) or `off`; anything else names the variable.
    #[test]
    fn decline_rule_g2() {
        assert_eq!(HookConfig::default().stop_decline_rule, DeclineRule::On);
        assert_eq!(DeclineRule::parse("off"), Ok(DeclineRule::Off));
        assert_eq!(DeclineRule::parse(" on"), Ok(DeclineRule::On));
        for bad in ["", "true", "OFF", "0"] {
            let err = DeclineRule::parse(bad).unwrap_err();
            assert_eq!(err.setting, "SPROUT_AGENT_STOP_DECLINE_RULE", "{bad:?}");
        }
        let config = HookConfig::default()
            .with_stop_governance(Some("prompt"), Some("off"))
            .unwrap();
        assert_eq!(
            (config.stop_budget_scope, config.stop_decline_rule),
            (BudgetScope::Prompt, DeclineRule::Off)
        );
        let kept = config.clone().with_stop_governance(None, None).unwrap();
        assert_eq!(kept, config);
        let err = HookConfig::default()
            .with_stop_governance(Some("session"), Some("maybe"))
            .unwrap_err();
        assert_eq!(err.setting, "SPROUT_AGENT_STOP_DECLINE_RULE");
    }

    #[test]
    fn from_values_reports_the_first_bad_setting() {
        let err = HookConfig::from_values(Some("*"), Some("abc"), Some("5")).unwrap_err();
        assert_eq!(err.setting, "SPROUT_AGENT_HOOK_TIMEOUT_MS");
        let ok = HookConfig::from_values(Some("a,b"), Some("100"), Some("0")).unwrap();
        assert_eq!(ok.allowlist, names(&["a", "b"]));
        assert_eq!(ok.timeout.duration(), Duration::from_millis(100));
        assert_eq!(ok.stop_budget.get(), 0);
    }
}
