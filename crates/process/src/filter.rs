//! The seccomp filter of confined programs: system calls that would reach
//! around the other walls are refused with EPERM.
//!
//! - always: the kernel keyring (`keyctl`, `add_key`, `request_key`: the
//!   user's keys are per uid, not per sandbox) and io_uring (whose
//!   operations are not seen by seccomp);
//! - without Unix sockets (`locked`, and `workspace-write` unless the
//!   operator allows them): `socket(AF_UNIX, …)`, so no pathname socket
//!   (a terminal multiplexer's, docker.sock, the user's D-Bus) and no
//!   abstract socket can be reached (`socketpair` still works);
//! - on Landlock ABIs that do not handle truncation: `truncate`, `openat2`
//!   and opening read-only with `O_TRUNC`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// What the filter must refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterSpec {
    /// Unix-domain sockets may be created.
    pub unix_sockets: bool,
    /// Landlock cannot refuse truncation of read-only files.
    pub guard_truncate: bool,
}

/// Compile the filter for this machine's architecture.
pub fn build(spec: FilterSpec) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("seccomp: unsupported architecture: {e}"))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(call, Vec::new());
    }
    if !spec.unix_sockets {
        rules.insert(
            libc::SYS_socket,
            vec![rule(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?],
        );
    }
    if spec.guard_truncate {
        rules.insert(libc::SYS_truncate, Vec::new());
        rules.insert(libc::SYS_openat2, Vec::new());
        let trunc_read_only = |arg| {
            rule(
                arg,
                SeccompCmpOp::MaskedEq((libc::O_TRUNC | libc::O_ACCMODE) as u64),
                libc::O_TRUNC as u64,
            )
        };
        rules.insert(libc::SYS_openat, vec![trunc_read_only(2)?]);
        #[cfg(target_arch = "x86_64")]
        rules.insert(libc::SYS_open, vec![trunc_read_only(1)?]);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    filter.try_into().map_err(|e| format!("seccomp: {e:?}"))
}

fn rule(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompRule, String> {
    let condition = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|e| format!("seccomp: {e}"))?;
    SeccompRule::new(vec![condition]).map_err(|e| format!("seccomp: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_this_machine() {
        for unix_sockets in [false, true] {
            for guard_truncate in [false, true] {
                let bpf = build(FilterSpec {
                    unix_sockets,
                    guard_truncate,
                })
                .unwrap();
                assert!(!bpf.is_empty());
            }
        }
    }
}
