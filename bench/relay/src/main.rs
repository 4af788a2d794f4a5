//! bench-relay: UDP forwarding benchmark for the voice-edge relay.
//!
//! Subcommands:
//!   run      start every target as a child process, measure, print one markdown table (what `just bench-relay` runs)
//!   echo     UDP echo server (prints `listening ADDR`)
//!   sink     link-aware echo: answers voice-edge link datagrams with the same bytes
//!   forward  the baseline: batched single-thread forwarder speaking the link header to a sink
//!   load     run the load generator against one address and print its numbers

mod load;
mod net;
mod run;
mod servers;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

pub struct Args {
    map: HashMap<String, String>,
    flags: Vec<String>,
}

impl Args {
    fn parse(argv: &[String]) -> Result<Args, String> {
        let mut map = HashMap::new();
        let mut flags = Vec::new();
        let mut i = 0;
        while i < argv.len() {
            let a = &argv[i];
            let Some(name) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a:?}"));
            };
            if let Some((k, v)) = name.split_once('=') {
                map.insert(k.to_string(), v.to_string());
            } else if i + 1 < argv.len() && !argv[i + 1].starts_with("--") {
                map.insert(name.to_string(), argv[i + 1].clone());
                i += 1;
            } else {
                flags.push(name.to_string());
            }
            i += 1;
        }
        Ok(Args { map, flags })
    }

    pub fn get<T: FromStr>(&self, k: &str, default: T) -> Result<T, String> {
        match self.map.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{k}: cannot parse {v:?}")),
        }
    }

    pub fn opt(&self, k: &str) -> Option<&str> {
        self.map.get(k).map(|s| s.as_str())
    }

    pub fn flag(&self, k: &str) -> bool {
        self.flags.iter().any(|f| f == k)
    }

    pub fn secs(&self, k: &str, default: f64) -> Result<Duration, String> {
        Ok(Duration::from_secs_f64(self.get(k, default)?))
    }
}

const USAGE: &str = "usage: bench-relay <run|echo|sink|forward|load> [--options]
  run      [--voice-edge PATH] [--nginx PATH] [--rounds 5] [--flows 8] [--window 16] [--size 200]
           [--warmup 0.5] [--measure 2] [--win 0.25] [--rtt-rate 10000] [--rtt-secs 3] [--rtt-rounds 6] [--workers N]
           [--only direct,nginx,forward,voice-edge] [--ve-args 'extra relay args'] [--max-total 600] [--wait-idle 60] [--retry-noisy 45]
  echo     [--listen 127.0.0.1:0] [--max-secs 900]
  sink     [--listen 127.0.0.1:0] [--max-secs 900]
  forward  --upstream SINK_ADDR [--listen 127.0.0.1:0] [--max-secs 900]
  load     --target ADDR [--flows 8] [--window 16] [--size 200] [--username U] [--rtt-rate 10000]";

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let Some(cmd) = argv.get(1) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if cmd == "-h" || cmd == "--help" || cmd == "help" {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(&argv[2..]) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let r: Result<(), String> = (|| {
        let listen: SocketAddr = args.get("listen", "127.0.0.1:0".parse().unwrap())?;
        let max_secs: u64 = args.get("max-secs", 900)?;
        match cmd.as_str() {
            "run" => run::main(&args),
            "echo" => servers::echo(listen, false, max_secs).map_err(|e| e.to_string()),
            "sink" => servers::echo(listen, true, max_secs).map_err(|e| e.to_string()),
            "forward" => {
                let up: SocketAddr = args
                    .opt("upstream")
                    .ok_or("forward needs --upstream")?
                    .parse()
                    .map_err(|_| "bad --upstream")?;
                servers::forward(listen, net::v4(up).map_err(|e| e.to_string())?, max_secs)
                    .map_err(|e| e.to_string())
            }
            "load" => run::load_main(&args),
            other => Err(format!("unknown subcommand {other:?}\n{USAGE}")),
        }
    })();
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-relay {cmd}: {e}");
            ExitCode::FAILURE
        }
    }
}
