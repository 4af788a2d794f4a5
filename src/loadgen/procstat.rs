//! What the server costs, read from /proc: CPU time (utime + stime) and resident memory, and,
//! for a loopback URL, which process listens on the signaling port.

use std::net::IpAddr;
use std::time::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub at: Instant,
    /// utime + stime, in seconds.
    pub cpu_s: f64,
    pub rss_kb: u64,
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// `pid` = None reads this process.
pub fn sample(pid: Option<u32>) -> Option<Sample> {
    let dir = match pid {
        Some(p) => format!("/proc/{p}"),
        None => "/proc/self".to_owned(),
    };
    let at = Instant::now();
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    // The command name may contain spaces and parentheses; fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')' the first field is #3 (state), so utime (#14) and stime (#15) are at 11 and 12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("{dir}/status")).ok()?;
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())?;
    Some(Sample {
        at,
        cpu_s: (utime + stime) / clock_ticks_per_second(),
        rss_kb,
    })
}

/// CPU seconds per thread of a process: (tid, name, utime + stime).
pub fn threads(pid: u32) -> Vec<(u32, String, f64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    let hz = clock_ticks_per_second();
    let mut out = vec![];
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let (Some(u), Some(s)) = (
            f.get(11).and_then(|v| v.parse::<f64>().ok()),
            f.get(12).and_then(|v| v.parse::<f64>().ok()),
        ) else {
            continue;
        };
        out.push((tid, name, (u + s) / hz));
    }
    out
}

/// Percent of one core per thread name between two [`threads`] readings, busiest first.
pub fn thread_percents(
    a: &[(u32, String, f64)],
    b: &[(u32, String, f64)],
    wall_s: f64,
) -> Vec<(String, f64)> {
    if wall_s <= 0.0 {
        return vec![];
    }
    let before: std::collections::HashMap<u32, f64> = a.iter().map(|(t, _, c)| (*t, *c)).collect();
    let mut by_name: Vec<(String, f64)> = vec![];
    for (tid, name, cpu) in b {
        let d = (cpu - before.get(tid).copied().unwrap_or(0.0)).max(0.0) / wall_s * 100.0;
        match by_name.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v += d,
            None => by_name.push((name.clone(), d)),
        }
    }
    by_name.sort_by(|x, y| y.1.total_cmp(&x.1));
    by_name
}

/// Percent of one core used between two samples.
pub fn cpu_percent(a: &Sample, b: &Sample) -> Option<f64> {
    let wall = b.at.duration_since(a.at).as_secs_f64();
    (wall > 0.0).then(|| (b.cpu_s - a.cpu_s) / wall * 100.0)
}

/// Whole-machine CPU time, from the first line of /proc/stat, in seconds summed over all
/// cores.
#[derive(Debug, Clone, Copy)]
pub struct HostCpu {
    pub busy: f64,
    pub total: f64,
    /// Interrupt and softirq time: on loopback, much of the UDP stack (delivery to the
    /// receiving socket) runs here rather than in either process.
    pub irq: f64,
    /// Time the hypervisor ran something else while this VM wanted the CPU.
    pub steal: f64,
}

pub fn host_cpu() -> Option<HostCpu> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<f64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    let total: f64 = v.iter().take(8).sum();
    let idle = v[3] + v[4];
    let irq = v.get(5).copied().unwrap_or(0.0) + v.get(6).copied().unwrap_or(0.0);
    let hz = clock_ticks_per_second();
    Some(HostCpu {
        busy: (total - idle) / hz,
        total: total / hz,
        irq: irq / hz,
        steal: v.get(7).copied().unwrap_or(0.0) / hz,
    })
}

/// Datagrams the kernel dropped because a UDP socket's receive buffer was full, machine-wide
/// (`RcvbufErrors` in /proc/net/snmp).
pub fn udp_rcvbuf_errors() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let names: Vec<&str> = udp.next()?.split_whitespace().collect();
    let values: Vec<&str> = udp.next()?.split_whitespace().collect();
    let i = names.iter().position(|n| *n == "RcvbufErrors")?;
    values.get(i)?.parse().ok()
}

/// Datagrams dropped on the UDP sockets a process has open (the `drops` column of
/// /proc/net/udp{,6} for the socket inodes in /proc/PID/fd); `pid` = None is this process.
pub fn process_udp_drops(pid: Option<u32>) -> Option<u64> {
    let dir = match pid {
        Some(p) => format!("/proc/{p}"),
        None => "/proc/self".to_owned(),
    };
    let mut inodes = std::collections::HashSet::new();
    for fd in std::fs::read_dir(format!("{dir}/fd")).ok()?.flatten() {
        if let Ok(t) = std::fs::read_link(fd.path())
            && let Some(i) = t
                .to_str()
                .and_then(|s| s.strip_prefix("socket:["))
                .and_then(|s| s.strip_suffix(']'))
        {
            inodes.insert(i.to_owned());
        }
    }
    let mut drops = 0;
    for table in ["net/udp", "net/udp6"] {
        let Ok(text) = std::fs::read_to_string(format!("{dir}/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 13 && inodes.contains(f[9]) {
                drops += f[12].parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some(drops)
}

/// The process (other than this one) with a listening TCP socket on `port`, found through
/// /proc/net/tcp{,6} and the socket inodes in /proc/*/fd. Only meaningful for loopback URLs.
pub fn find_listener(ip: IpAddr, port: u16) -> Option<u32> {
    if !ip.is_loopback() && !ip.is_unspecified() {
        return None;
    }
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" {
                continue; // not LISTEN
            }
            let Some(local_port) = f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
            else {
                continue;
            };
            if local_port == port && f[9] != "0" {
                inodes.push(format!("socket:[{}]", f[9]));
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue; // another user's process, or gone
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path())
                && inodes.iter().any(|i| target.as_os_str() == i.as_str())
            {
                return Some(pid);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_this_process() {
        let a = sample(None).expect("read /proc/self");
        assert!(a.rss_kb > 0);
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = sample(None).unwrap();
        assert!(b.cpu_s >= a.cpu_s);
        assert!(cpu_percent(&a, &b).is_some());
        let h = host_cpu().unwrap();
        assert!(h.busy > 0.0 && h.total >= h.busy && h.busy >= h.irq);
        assert!(udp_rcvbuf_errors().is_some());
        let _s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(process_udp_drops(None).is_some());
    }

    #[test]
    fn finds_no_listener_on_a_closed_port_and_skips_itself() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        // The only listener is this process, which is excluded.
        assert_eq!(find_listener("127.0.0.1".parse().unwrap(), port), None);
    }
}
