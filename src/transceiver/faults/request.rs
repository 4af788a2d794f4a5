//! What a fault request says: the API's body checked into a typed [`Fault`], and the state a
//! call's faults report back.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::impairment::{ImpairmentStats, Params};

/// Which way a network impairment applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    Both,
    ToClient,
    FromClient,
}

/// A network impairment as the API states it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NetworkSpec {
    /// Probability in 0..=1 that a datagram is lost.
    pub loss: f64,
    pub delay_ms: u32,
    pub jitter_ms: u32,
    /// 0 is unlimited.
    pub bandwidth_kbps: u32,
    pub direction: Direction,
}

impl NetworkSpec {
    /// Whether it changes anything at all (an all-zero impairment is none).
    pub fn is_noop(&self) -> bool {
        self.loss == 0.0 && self.delay_ms == 0 && self.jitter_ms == 0 && self.bandwidth_kbps == 0
    }

    pub(super) fn params(&self) -> Params {
        Params {
            loss: self.loss,
            delay: Duration::from_millis(self.delay_ms.into()),
            jitter: Duration::from_millis(self.jitter_ms.into()),
            rate_bps: u64::from(self.bandwidth_kbps) * 1000,
        }
    }
}

/// What the transceiver holding a call is asked to do to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Fault {
    /// Replaces the call's network impairment.
    Network(NetworkSpec),
    /// Drops everything both ways for this long.
    Blackout { duration_ms: u64 },
    /// The client's NAT gives it a new external port.
    NatRebind,
    /// The session hits its maximum duration: the Realtime `error` event, then the call ends.
    SessionExpired,
    /// Removes the network impairment (`DELETE …/faults`).
    ClearNetwork,
    /// Changes nothing; answers the state (`GET …/faults`).
    Status,
}

/// A fault request as the public API takes it: most go to the call's transceiver, a relay
/// restart to the process that runs the relays.
#[derive(Debug, Clone, PartialEq)]
pub enum Requested {
    Call(Fault),
    RelayRestart,
}

impl Requested {
    /// The `applied` name the API answers with.
    pub fn name(&self) -> &'static str {
        match self {
            Requested::RelayRestart => "relay_restart",
            Requested::Call(f) => match f {
                Fault::Network(_) => "network",
                Fault::Blackout { .. } => "blackout",
                Fault::NatRebind => "nat_rebind",
                Fault::SessionExpired => "session_expired",
                Fault::ClearNetwork => "clear_network",
                Fault::Status => "status",
            },
        }
    }
}

/// Why a fault request was refused: the parameter at fault and what was wrong, for a 400 that
/// names it.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRequestError {
    pub param: String,
    pub message: String,
}

fn bad(param: &str, message: impl Into<String>) -> FaultRequestError {
    FaultRequestError {
        param: param.into(),
        message: message.into(),
    }
}

/// Reads and checks a `POST …/faults` body. Checked by hand rather than by serde so that every
/// refusal names the one parameter that was wrong, as the Realtime API's errors do.
pub fn parse_request(body: &Value) -> Result<Requested, FaultRequestError> {
    let Some(obj) = body.as_object() else {
        return Err(bad("", "the body must be a JSON object with a \"type\""));
    };
    let kind = match obj.get("type") {
        Some(Value::String(s)) => s.as_str(),
        None | Some(Value::Null) => return Err(bad("type", "Missing required parameter: 'type'.")),
        Some(_) => return Err(bad("type", "Invalid type for 'type': expected a string.")),
    };
    let allowed: &[&str] = match kind {
        "network" => &[
            "type",
            "loss",
            "delay_ms",
            "jitter_ms",
            "bandwidth_kbps",
            "direction",
        ],
        "blackout" => &["type", "duration_ms"],
        "nat_rebind" | "session_expired" | "relay_restart" => &["type"],
        other => {
            return Err(bad(
                "type",
                format!(
                    "Invalid value for 'type': {other:?}; expected network, blackout, nat_rebind, session_expired or relay_restart."
                ),
            ));
        }
    };
    if let Some(unknown) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(
            unknown,
            format!("Unknown parameter: '{unknown}' (a {kind} fault takes {allowed:?})."),
        ));
    }
    Ok(match kind {
        "network" => Requested::Call(Fault::Network(NetworkSpec {
            loss: number(obj, "loss", 0.0, 1.0)?.unwrap_or(0.0),
            delay_ms: integer(obj, "delay_ms", 0, 5000)?.unwrap_or(0) as u32,
            jitter_ms: integer(obj, "jitter_ms", 0, 2000)?.unwrap_or(0) as u32,
            bandwidth_kbps: match integer(obj, "bandwidth_kbps", 0, 100_000)? {
                Some(b @ 1..8) => {
                    return Err(bad(
                        "bandwidth_kbps",
                        format!(
                            "Invalid value for 'bandwidth_kbps': {b}; expected 0 (unlimited) or 8 to 100000."
                        ),
                    ));
                }
                b => b.unwrap_or(0) as u32,
            },
            direction: match obj.get("direction") {
                None | Some(Value::Null) => Direction::Both,
                Some(v) => serde_json::from_value(v.clone()).map_err(|_| {
                    bad(
                        "direction",
                        format!(
                            "Invalid value for 'direction': {v}; expected \"both\", \"to_client\" or \"from_client\"."
                        ),
                    )
                })?,
            },
        })),
        "blackout" => Requested::Call(Fault::Blackout {
            duration_ms: integer(obj, "duration_ms", 1, 60_000)?
                .ok_or_else(|| bad("duration_ms", "Missing required parameter: 'duration_ms'."))?,
        }),
        "nat_rebind" => Requested::Call(Fault::NatRebind),
        "session_expired" => Requested::Call(Fault::SessionExpired),
        _ => Requested::RelayRestart,
    })
}

fn number(
    obj: &Map<String, Value>,
    key: &str,
    min: f64,
    max: f64,
) -> Result<Option<f64>, FaultRequestError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if (min..=max).contains(&x) => Ok(Some(x)),
            _ => Err(bad(
                key,
                format!("Invalid value for '{key}': {n}; expected {min} to {max}."),
            )),
        },
        Some(_) => Err(bad(
            key,
            format!("Invalid type for '{key}': expected a number."),
        )),
    }
}

fn integer(
    obj: &Map<String, Value>,
    key: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, FaultRequestError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(x) if (min..=max).contains(&x) => Ok(Some(x)),
            _ => Err(bad(
                key,
                format!("Invalid value for '{key}': {n}; expected an integer from {min} to {max}."),
            )),
        },
        Some(_) => Err(bad(
            key,
            format!("Invalid type for '{key}': expected an integer."),
        )),
    }
}

/// A call's faults as the API reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultState {
    /// The network impairment in force, or none.
    pub network: Option<NetworkSpec>,
    /// How much of a blackout is left.
    pub blackout_remaining_ms: Option<u64>,
    /// NAT rebindings applied to this call so far.
    pub nat_rebinds: u32,
    /// The address the transceiver now sees the client at, after a NAT rebinding.
    pub client_seen_as: Option<SocketAddr>,
    pub to_client: Option<ImpairmentStats>,
    pub from_client: Option<ImpairmentStats>,
    pub dropped_blackout: u64,
    /// Replies to a NAT mapping the client no longer has.
    pub dropped_old_mapping: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn param_of(v: Value) -> String {
        parse_request(&v).unwrap_err().param
    }

    #[test]
    fn requests_are_checked_and_refusals_name_the_parameter() {
        assert_eq!(
            parse_request(&json!({"type": "network", "loss": 0.2, "delay_ms": 100})).unwrap(),
            Requested::Call(Fault::Network(NetworkSpec {
                loss: 0.2,
                delay_ms: 100,
                ..Default::default()
            }))
        );
        assert_eq!(
            parse_request(
                &json!({"type": "network", "direction": "to_client", "bandwidth_kbps": 8})
            )
            .unwrap(),
            Requested::Call(Fault::Network(NetworkSpec {
                bandwidth_kbps: 8,
                direction: Direction::ToClient,
                ..Default::default()
            }))
        );
        assert_eq!(
            parse_request(&json!({"type": "blackout", "duration_ms": 1500})).unwrap(),
            Requested::Call(Fault::Blackout { duration_ms: 1500 })
        );
        assert_eq!(
            parse_request(&json!({"type": "relay_restart"})).unwrap(),
            Requested::RelayRestart
        );
        assert_eq!(param_of(json!({"type": "network", "loss": 1.5})), "loss");
        assert_eq!(param_of(json!({"type": "network", "loss": "x"})), "loss");
        assert_eq!(
            param_of(json!({"type": "network", "delay_ms": 5001})),
            "delay_ms"
        );
        assert_eq!(
            param_of(json!({"type": "network", "delay_ms": -1})),
            "delay_ms"
        );
        assert_eq!(
            param_of(json!({"type": "network", "jitter_ms": 2.5})),
            "jitter_ms"
        );
        assert_eq!(
            param_of(json!({"type": "network", "bandwidth_kbps": 7})),
            "bandwidth_kbps"
        );
        assert_eq!(
            param_of(json!({"type": "network", "bandwidth_kbps": 100001})),
            "bandwidth_kbps"
        );
        assert_eq!(
            param_of(json!({"type": "network", "direction": "up"})),
            "direction"
        );
        assert_eq!(param_of(json!({"type": "network", "los": 0.1})), "los");
        assert_eq!(param_of(json!({"type": "blackout"})), "duration_ms");
        assert_eq!(
            param_of(json!({"type": "blackout", "duration_ms": 0})),
            "duration_ms"
        );
        assert_eq!(
            param_of(json!({"type": "blackout", "duration_ms": 60001})),
            "duration_ms"
        );
        assert_eq!(param_of(json!({"type": "nat_rebind", "port": 1})), "port");
        assert_eq!(param_of(json!({"type": "meteor"})), "type");
        assert_eq!(param_of(json!({"loss": 0.1})), "type");
        assert_eq!(param_of(json!({"type": 3})), "type");
    }

    #[test]
    fn fault_round_trips_over_the_control_wire() {
        for f in [
            Fault::Network(NetworkSpec {
                loss: 0.5,
                delay_ms: 10,
                jitter_ms: 2,
                bandwidth_kbps: 64,
                direction: Direction::FromClient,
            }),
            Fault::Blackout { duration_ms: 5 },
            Fault::NatRebind,
            Fault::SessionExpired,
            Fault::ClearNetwork,
            Fault::Status,
        ] {
            let s = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<Fault>(&s).unwrap(), f, "{s}");
        }
    }
}
