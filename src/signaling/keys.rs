//! API keys for `/v1/realtime/*`: open by default (a dev tool should just work), or, with
//! `--require-keys`, a configured server key or an unexpired ephemeral `ek_…` key minted by
//! `POST /v1/realtime/client_secrets` — the flow browsers use, since they must never hold a
//! server key.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// Ephemeral keys kept at most; expired ones are pruned on every mint.
const MAX_EPHEMERAL: usize = 100_000;
/// Calls one ephemeral key may place: a client secret is one client's, for its session and a
/// retry or two, not a general credential (OpenAI's are short-lived per-session secrets too).
pub const CALLS_PER_EPHEMERAL: u32 = 3;
/// Calls whose creating key is remembered at most; expired entries are pruned on every record.
const MAX_OWNED_CALLS: usize = 100_000;
/// How long a call's creating key may act on it (a call outlives its ephemeral key).
const OWNER_TTL_SECS: u64 = 4 * 3600;

pub struct Keys {
    pub require: bool,
    server_keys: Vec<String>,
    ephemeral: Mutex<HashMap<String, Ephemeral>>,
    /// Call id → (the ephemeral key that created it, until when it may act on the call).
    owners: Mutex<HashMap<String, (String, u64)>>,
}

#[derive(Clone)]
pub struct Ephemeral {
    pub expires_at: u64,
    /// The session config attached at mint time (its `model` picks the stub).
    pub session: Value,
    /// Calls placed with it so far.
    pub calls: u32,
}

#[derive(Debug, PartialEq, Eq)]
pub enum KeyError {
    Missing,
    Invalid,
    Expired,
    /// An ephemeral key that placed its [`CALLS_PER_EPHEMERAL`] calls.
    Exhausted,
    /// A valid key, but not a server key nor the one that created this call.
    NotOwner,
}

impl KeyError {
    pub fn message(&self) -> &'static str {
        match self {
            KeyError::Missing => {
                "missing API key: send Authorization: Bearer <key> (mint an ephemeral key with POST /v1/realtime/client_secrets)"
            }
            KeyError::Invalid => "invalid API key",
            KeyError::Expired => "the ephemeral key has expired; mint a new one",
            KeyError::Exhausted => {
                "this ephemeral key has placed all the calls it may; mint a new one per session"
            }
            KeyError::NotOwner => {
                "this key did not create the call: use a server key or the key that created it"
            }
        }
    }
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Keys {
    pub fn new(require: bool, server_keys: Vec<String>) -> Self {
        Keys {
            require,
            server_keys,
            ephemeral: Mutex::new(HashMap::new()),
            owners: Mutex::new(HashMap::new()),
        }
    }

    pub fn open() -> Self {
        Self::new(false, vec![])
    }

    fn is_server_key(&self, key: &str) -> bool {
        self.server_keys
            .iter()
            .any(|k| super::admin_access::same_secret(k.as_bytes(), key.as_bytes()))
    }

    /// Checks a `/calls` request's key. Returns the ephemeral key's session, if one was used.
    pub fn check_call(&self, bearer: Option<&str>) -> Result<Option<Value>, KeyError> {
        let found = bearer.and_then(|k| self.ephemeral(k));
        if let Some(e) = &found
            && e.expires_at > now_secs()
        {
            return Ok(Some(e.session.clone()));
        }
        if !self.require {
            return Ok(None);
        }
        match bearer {
            None => Err(KeyError::Missing),
            Some(k) if self.is_server_key(k) => Ok(None),
            Some(_) if found.is_some() => Err(KeyError::Expired),
            Some(_) => Err(KeyError::Invalid),
        }
    }

    /// With keys required, counts a call against the ephemeral key placing it (after
    /// [`Self::check_call`] accepted it); refuses one beyond [`CALLS_PER_EPHEMERAL`].
    pub fn claim_call(&self, bearer: Option<&str>) -> Result<(), KeyError> {
        let Some(k) = bearer.filter(|k| self.require && k.starts_with("ek_")) else {
            return Ok(());
        };
        let mut map = self.ephemeral.lock().unwrap();
        let Some(e) = map.get_mut(k) else {
            return Ok(());
        };
        if e.calls >= CALLS_PER_EPHEMERAL {
            return Err(KeyError::Exhausted);
        }
        e.calls += 1;
        Ok(())
    }

    /// Remembers that `bearer`, an ephemeral key, created `call_id`, so it may hang up or
    /// renegotiate that call (and no other). Server keys need no record: they may act on any.
    pub fn record_owner(&self, call_id: &str, bearer: Option<&str>) {
        let Some(k) = bearer.filter(|k| self.require && k.starts_with("ek_")) else {
            return;
        };
        let now = now_secs();
        let mut owners = self.owners.lock().unwrap();
        if owners.len() >= MAX_OWNED_CALLS {
            owners.retain(|_, (_, until)| *until > now);
        }
        if owners.len() < MAX_OWNED_CALLS {
            owners.insert(call_id.to_owned(), (k.to_owned(), now + OWNER_TTL_SECS));
        }
    }

    /// Whether `bearer` may act on `call_id` (hang up, renegotiate): with keys required, a
    /// server key or the ephemeral key that created the call.
    pub fn check_owner(&self, bearer: Option<&str>, call_id: &str) -> Result<(), KeyError> {
        if !self.require {
            return Ok(());
        }
        let Some(k) = bearer else {
            return Err(KeyError::Missing);
        };
        if self.is_server_key(k) {
            return Ok(());
        }
        let owned = self
            .owners
            .lock()
            .unwrap()
            .get(call_id)
            .is_some_and(|(owner, until)| {
                *until > now_secs()
                    && super::admin_access::same_secret(owner.as_bytes(), k.as_bytes())
            });
        if owned {
            Ok(())
        } else if self.ephemeral(k).is_some() {
            Err(KeyError::NotOwner)
        } else {
            Err(KeyError::Invalid)
        }
    }

    /// Minting needs a server key when keys are required (as on the real service).
    pub fn check_mint(&self, bearer: Option<&str>) -> Result<(), KeyError> {
        if !self.require {
            return Ok(());
        }
        match bearer {
            None => Err(KeyError::Missing),
            Some(k) if self.is_server_key(k) => Ok(()),
            Some(_) => Err(KeyError::Invalid),
        }
    }

    fn ephemeral(&self, key: &str) -> Option<Ephemeral> {
        if !key.starts_with("ek_") {
            return None;
        }
        self.ephemeral.lock().unwrap().get(key).cloned()
    }

    /// `POST /v1/realtime/client_secrets` body → response JSON, or a message for a 400.
    pub fn mint(&self, body: &Value) -> Result<Value, String> {
        let seconds = match body.pointer("/expires_after/seconds") {
            None | Some(Value::Null) => 600,
            Some(v) => v
                .as_u64()
                .filter(|s| (10..=7200).contains(s))
                .ok_or_else(|| {
                    "expires_after.seconds must be an integer between 10 and 7200".to_owned()
                })?,
        };
        if let Some(anchor) = body.pointer("/expires_after/anchor")
            && anchor != "created_at"
        {
            return Err("expires_after.anchor must be \"created_at\"".to_owned());
        }
        let mut session = match body.get("session") {
            None | Some(Value::Null) => json!({"type": "realtime"}),
            Some(Value::Object(o)) => Value::Object(o.clone()),
            Some(_) => return Err("session must be an object".to_owned()),
        };
        match session.get("type").and_then(Value::as_str) {
            None | Some("realtime") => {}
            Some(other) => {
                return Err(format!(
                    "session.type {other:?} is not supported (only \"realtime\")"
                ));
            }
        }
        let now = now_secs();
        let expires_at = now + seconds;
        let value = format!("ek_{}", hex::encode(rand::random::<[u8; 16]>()));
        if let Value::Object(o) = &mut session {
            o.insert("type".into(), json!("realtime"));
            o.insert("object".into(), json!("realtime.session"));
            o.insert(
                "id".into(),
                json!(format!("sess_{}", hex::encode(rand::random::<[u8; 8]>()))),
            );
            o.entry("model").or_insert(json!("echo"));
            o.insert("expires_at".into(), json!(expires_at));
        }
        let mut map = self.ephemeral.lock().unwrap();
        map.retain(|_, e| e.expires_at > now);
        if map.len() >= MAX_EPHEMERAL {
            return Err("too many live ephemeral keys; try again later".to_owned());
        }
        map.insert(
            value.clone(),
            Ephemeral {
                expires_at,
                session: session.clone(),
                calls: 0,
            },
        );
        Ok(json!({"value": value, "expires_at": expires_at, "session": session}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_by_default_and_minted_keys_carry_their_session() {
        let k = Keys::open();
        assert_eq!(k.check_call(None), Ok(None));
        let r = k
            .mint(&json!({"session": {"type": "realtime", "model": "tts"}}))
            .unwrap();
        let v = r["value"].as_str().unwrap();
        assert!(v.starts_with("ek_"));
        assert_eq!(k.check_call(Some(v)).unwrap().unwrap()["model"], "tts");
    }

    #[test]
    fn required_keys_refuse_missing_invalid_and_expired() {
        let k = Keys::new(true, vec!["sk-test".into()]);
        assert_eq!(k.check_call(None), Err(KeyError::Missing));
        assert_eq!(k.check_call(Some("nope")), Err(KeyError::Invalid));
        assert_eq!(k.check_call(Some("sk-test")), Ok(None));
        assert_eq!(k.check_mint(Some("ek_x")), Err(KeyError::Invalid));
        let r = k
            .mint(&json!({"expires_after": {"anchor": "created_at", "seconds": 10}}))
            .unwrap();
        let v = r["value"].as_str().unwrap().to_owned();
        assert!(k.check_call(Some(&v)).is_ok());
        k.ephemeral.lock().unwrap().get_mut(&v).unwrap().expires_at = now_secs() - 1;
        assert_eq!(k.check_call(Some(&v)), Err(KeyError::Expired));
    }

    #[test]
    fn bad_mint_requests_are_explained() {
        let k = Keys::open();
        assert!(
            k.mint(&json!({"expires_after": {"seconds": 5}}))
                .unwrap_err()
                .contains("between 10 and 7200")
        );
        assert!(
            k.mint(&json!({"session": {"type": "transcription"}}))
                .is_err()
        );
        assert!(k.mint(&json!({"session": 3})).is_err());
    }
}
