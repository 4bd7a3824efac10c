//! CPU lists: the kernel's range-list format (`0-11,16-27`), as in
//! `/sys/devices/system/cpu/online` and perf's `-C`.

use std::fmt;

/// Largest CPU number accepted in a list (the kernel's NR_CPUS limit is 8192).
pub(crate) const MAX_CPU: u32 = 8191;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("invalid CPU list '{list}': {why}")]
    Malformed { list: String, why: String },
}

/// Parse a range list such as `0,2-3` into sorted, de-duplicated CPU numbers.
pub fn parse_cpu_list(list: &str) -> Result<Vec<u32>, CpuListError> {
    let bad = |why: &str| CpuListError::Malformed {
        list: list.to_string(),
        why: why.to_string(),
    };
    let trimmed = list.trim();
    if trimmed.is_empty() {
        return Err(bad("it is empty"));
    }
    let mut cpus = Vec::new();
    for part in trimmed.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(bad("empty item between commas"));
        }
        let num = |s: &str| -> Result<u32, CpuListError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(&format!("'{s}' is not a CPU number")));
            }
            let n: u32 = s.parse().map_err(|_| bad(&format!("'{s}' is too large")))?;
            if n > MAX_CPU {
                return Err(bad(&format!(
                    "CPU {n} is above the kernel's limit of {MAX_CPU}"
                )));
            }
            Ok(n)
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(bad(&format!("range '{part}' goes backwards")));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Format CPU numbers back as a compact range list.
pub(crate) struct CpuList<'a>(pub &'a [u32]);

impl fmt::Display for CpuList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let c = self.0;
        let mut first = true;
        while i < c.len() {
            let mut j = i;
            while j + 1 < c.len() && c[j + 1] == c[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j > i {
                write!(f, "{}-{}", c[i], c[j])?;
            } else {
                write!(f, "{}", c[i])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

/// The online CPUs, from `/sys/devices/system/cpu/online`.
pub fn online_cpus() -> anyhow::Result<Vec<u32>> {
    let path = "/sys/devices/system/cpu/online";
    let s =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {path}: {e}"))?;
    Ok(parse_cpu_list(&s)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_and_singles() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("0,2-3").unwrap(), vec![0, 2, 3]);
        assert_eq!(parse_cpu_list("0-11,16-27\n").unwrap().len(), 24);
        assert_eq!(parse_cpu_list("3,1,1-2").unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            " ",
            "a",
            "1,",
            ",1",
            "1,,2",
            "3-1",
            "1-",
            "-1",
            "1-2-3",
            "0x1",
            "99999999999",
            "9000",
        ] {
            let e = parse_cpu_list(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("'{bad}'")), "{bad}: {e}");
        }
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(CpuList(&[0, 1, 2, 5, 7, 8]).to_string(), "0-2,5,7-8");
        assert_eq!(CpuList(&[]).to_string(), "");
        assert_eq!(CpuList(&[4]).to_string(), "4");
    }

    #[test]
    fn online_cpus_are_readable_here() {
        let cpus = online_cpus().unwrap();
        assert!(!cpus.is_empty());
    }
}
