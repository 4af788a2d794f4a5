//! `voice-edge`: with no subcommand, the all-in-one process for a laptop demo.

use std::net::SocketAddr;

use clap::Parser;
use voice_edge::allinone::{self, AllInOneConfig};

#[derive(Parser, Debug)]
#[command(
    name = "voice-edge",
    version,
    about = "A WebRTC edge for voice AI (relay + transceivers + signaling)"
)]
struct Cli {
    /// HTTP address for signaling, the demo page and admin endpoints.
    #[arg(long, env = "VOICE_EDGE_HTTP", default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// The relay's public UDP address: the only media address clients see.
    #[arg(long, env = "VOICE_EDGE_RELAY", default_value = "127.0.0.1:3478")]
    relay: SocketAddr,
    /// How many transceivers to run behind the relay.
    #[arg(long, env = "VOICE_EDGE_TRANSCEIVERS", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    transceivers: u16,
    /// Route secret (hex, ≥ 16 bytes) shared by relays and transceivers; random if not given.
    #[arg(long, env = "VOICE_EDGE_ROUTE_SECRET")]
    route_secret: Option<String>,
    /// Use this Redis for the flow cache instead of the embedded one (redis://HOST:PORT).
    #[arg(long, env = "VOICE_EDGE_REDIS_URL")]
    redis_url: Option<String>,
}

fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let running = allinone::start(AllInOneConfig {
            http: cli.http,
            relay: cli.relay,
            transceivers: cli.transceivers,
            route_secret: cli.route_secret,
            redis_url: cli.redis_url,
            ..Default::default()
        })
        .await?;
        println!(
            "voice-edge is running: open http://{}/ (relay udp {}, {} transceivers, flow cache redis {})",
            running.http_addr,
            running.relay_addr,
            running.transceivers.len(),
            running.redis_addr
        );
        tokio::signal::ctrl_c().await?;
        println!("stopping…");
        running.shutdown().await;
        Ok(())
    })
}
