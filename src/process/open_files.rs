//! The open-files limit (RLIMIT_NOFILE): every request in flight holds a socket, so a run
//! (and the self-benchmark's simulator, which inherits the limit) needs as many descriptors
//! as streams. Read and raised here only; what a run needs is the load generator's to say.

/// The soft and hard open-files limits (`libc::RLIM_INFINITY` for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    pub soft: libc::rlim_t,
    pub hard: libc::rlim_t,
}

/// This process's open-files limits; None where they cannot be read.
pub fn limits() -> Option<OpenFiles> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    Some(OpenFiles {
        soft: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}

/// Raises the soft open-files limit to the hard one; whether it took.
pub fn raise_to_hard(limits: OpenFiles) -> bool {
    let raised = libc::rlimit {
        rlim_cur: limits.hard,
        rlim_max: limits.hard,
    };
    // SAFETY: setrlimit reads the struct it is given.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 }
}

/// Raises the soft open-files limit to the hard limit where it is lower. Returns the soft
/// limit now (0 where it cannot be read).
pub fn raise_open_files() -> libc::rlim_t {
    let Some(limits) = self::limits() else {
        return 0;
    };
    if limits.soft < limits.hard && raise_to_hard(limits) {
        return limits.hard;
    }
    limits.soft
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_read_and_raised_no_higher_than_the_hard_one() {
        let before = limits().expect("the limits of this process");
        let now = raise_open_files();
        assert!(now >= before.soft);
        assert!(now <= before.hard);
    }
}
