//! Programs and environment variables: granted by the base grant or by
//! name. A variable whose name says it holds a secret passes only when the
//! operator names it.

use super::decide::{Asking, Decided};
use super::grants::is_secret_env;
use super::schema::PluginOrigin;

/// The programs granted.
pub(super) fn programs(asking: &Asking) -> Decided<Vec<String>> {
    let mut decided = Decided::all(Vec::new());
    for program in &asking.request().programs {
        if asking.base.programs.contains(program) || asking.named(|g| &g.programs, program) {
            decided.granted.push(program.clone());
        } else {
            decided.denied.push(format!(
                "programs: {program}{}",
                asking.hint(&format!("programs = [\"{program}\"]"))
            ));
        }
    }
    decided
}

/// The environment variables granted.
pub(super) fn env(asking: &Asking) -> Decided<Vec<String>> {
    let mut decided = Decided::all(Vec::new());
    for var in &asking.request().env {
        let by_name = asking.named(|g| &g.env, var);
        let by_default = asking.base.env.contains(var) && !is_secret_env(var);
        if by_name || by_default {
            decided.granted.push(var.clone());
        } else if asking.policy.locked()
            && asking.origin == PluginOrigin::Builtin
            && !is_secret_env(var)
        {
            // Locked mode passes no unnamed variable, by design: a
            // first-party tool's programs get the sandbox's own base
            // environment (PATH, a private HOME and TMPDIR) instead.
            // Nothing for the operator to act on, so no warning.
        } else if is_secret_env(var) {
            decided.denied.push(format!(
                "env: {var} is a secret, passed only when granted by name{}",
                asking.hint(&format!("env = [\"{var}\"]"))
            ));
        } else {
            decided.denied.push(format!(
                "env: {var}{}",
                asking.hint(&format!("env = [\"{var}\"]"))
            ));
        }
    }
    decided
}
