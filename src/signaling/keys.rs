//! API keys for `/v1/realtime/*`: open by default (a dev tool should just work), or, with
//! `--require-keys`, a configured server key or an unexpired ephemeral `ek_…` key minted by
//! `POST /v1/realtime/client_secrets` — the flow browsers use, since they must never hold a
//! server key.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::model::ModelKind;
use serde_json::{Value, json};

/// Live ephemeral keys kept at most. A key is minted per client session and lives 10 minutes by
/// default, so this is 30 mints a second sustained; expired keys are pruned before a mint is
/// refused.
pub const MAX_EPHEMERAL: usize = 20_000;
/// The session config a key may carry, as compact JSON. Instructions and tool schemas of a
/// real agent are a few KB; without a bound, 100 mints of a 64 KB body grew the process by
/// 103 MB (a parsed `Value` costs many times its text).
pub const MAX_SESSION_BYTES: usize = 32 * 1024;
/// All live keys together (their values and session configs): ~1,000 keys at the session cap,
/// or every one of [`MAX_EPHEMERAL`] at a typical 1–2 KB.
pub const MAX_EPHEMERAL_BYTES: usize = 32 * 1024 * 1024;
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
    ephemeral: Mutex<EphemeralStore>,
    /// Call id → (the ephemeral key that created it, until when it may act on the call).
    owners: Mutex<HashMap<String, (String, u64)>>,
}

#[derive(Clone)]
pub struct Ephemeral {
    pub expires_at: u64,
    /// The session config attached at mint time (its `model` picks the stub), kept as its JSON
    /// text: that is what [`MAX_SESSION_BYTES`] bounds, and it is parsed only when a call uses it.
    pub session: Box<str>,
    /// Calls placed with it so far.
    pub calls: u32,
}

impl Ephemeral {
    fn session(&self) -> Value {
        serde_json::from_str(&self.session).unwrap_or_else(|_| json!({}))
    }
}

/// The live ephemeral keys and the bytes they hold, bounded by [`MAX_EPHEMERAL`] and
/// [`MAX_EPHEMERAL_BYTES`] (smaller in tests).
struct EphemeralStore {
    keys: HashMap<String, Ephemeral>,
    bytes: usize,
    max_keys: usize,
    max_bytes: usize,
}

impl Default for EphemeralStore {
    fn default() -> Self {
        EphemeralStore {
            keys: HashMap::new(),
            bytes: 0,
            max_keys: MAX_EPHEMERAL,
            max_bytes: MAX_EPHEMERAL_BYTES,
        }
    }
}

impl EphemeralStore {
    fn cost(key: &str, e: &Ephemeral) -> usize {
        key.len() + e.session.len()
    }

    fn get(&self, key: &str) -> Option<&Ephemeral> {
        self.keys.get(key)
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Ephemeral> {
        self.keys.get_mut(key)
    }

    fn prune(&mut self, now: u64) {
        let mut freed = 0;
        self.keys.retain(|k, e| {
            let keep = e.expires_at > now;
            if !keep {
                freed += Self::cost(k, e);
            }
            keep
        });
        self.bytes -= freed;
    }

    /// Stores a new key, pruning expired ones first; when still full, the seconds until the
    /// next key expires (when a retry may fit).
    fn insert(&mut self, key: String, e: Ephemeral, now: u64) -> Result<(), u64> {
        let cost = Self::cost(&key, &e);
        let fits = |s: &Self| s.keys.len() < s.max_keys && s.bytes + cost <= s.max_bytes;
        if !fits(self) {
            self.prune(now);
        }
        if !fits(self) {
            let next = self
                .keys
                .values()
                .map(|e| e.expires_at)
                .min()
                .unwrap_or(now);
            return Err(next.saturating_sub(now).max(1));
        }
        self.bytes += cost;
        self.keys.insert(key, e);
        Ok(())
    }
}

/// Why `POST /v1/realtime/client_secrets` minted nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum MintError {
    /// The request is wrong; the message says how (a 400).
    Invalid(String),
    /// The session config is larger than [`MAX_SESSION_BYTES`] (a 400): its size.
    SessionTooLarge(usize),
    /// The session config is refused by the rules of `session.update` (a 400 naming the field).
    Session(crate::realtime::ClientError),
    /// The key store is full of live keys (a 503); retry after this many seconds.
    Full { retry_after: u64 },
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

use crate::unix_time::now_secs;

impl Keys {
    pub fn new(require: bool, server_keys: Vec<String>) -> Self {
        Keys {
            require,
            server_keys,
            ephemeral: Mutex::default(),
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

    /// Whether `key` is one this server issued or was given: a server key, or an ephemeral key
    /// that has not expired (LAN pairing admits these beside its own key).
    pub fn knows(&self, key: &str) -> bool {
        self.is_server_key(key)
            || self
                .ephemeral(key)
                .is_some_and(|e| e.expires_at > now_secs())
    }

    /// Checks a `/calls` request's key. Returns the ephemeral key's session, if one was used.
    pub fn check_call(&self, bearer: Option<&str>) -> Result<Option<Value>, KeyError> {
        let found = bearer.and_then(|k| self.ephemeral(k));
        if let Some(e) = &found
            && e.expires_at > now_secs()
        {
            return Ok(Some(e.session()));
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

    /// `POST /v1/realtime/client_secrets` body → response JSON. `expires_after.seconds` outside
    /// the API's 10–7200 is refused as the API refuses it, so no key outlives two hours.
    pub fn mint(&self, body: &Value) -> Result<Value, MintError> {
        self.mint_at(body, now_secs())
    }

    fn mint_at(&self, body: &Value, now: u64) -> Result<Value, MintError> {
        let invalid = |m: &str| MintError::Invalid(m.to_owned());
        let seconds = match body.pointer("/expires_after/seconds") {
            None | Some(Value::Null) => 600,
            Some(v) => v
                .as_u64()
                .filter(|s| (10..=7200).contains(s))
                .ok_or_else(|| {
                    invalid("expires_after.seconds must be an integer between 10 and 7200")
                })?,
        };
        if let Some(anchor) = body.pointer("/expires_after/anchor")
            && anchor != "created_at"
        {
            return Err(invalid("expires_after.anchor must be \"created_at\""));
        }
        let mut session = match body.get("session") {
            None | Some(Value::Null) => json!({"type": "realtime"}),
            Some(Value::Object(o)) => Value::Object(o.clone()),
            Some(_) => return Err(invalid("session must be an object")),
        };
        let transcription = match session.get("type").and_then(Value::as_str) {
            None | Some("realtime") => false,
            Some("transcription") => true,
            Some(other) => {
                return Err(MintError::Invalid(format!(
                    "session.type {other:?} is not supported (\"realtime\" or \"transcription\")"
                )));
            }
        };
        let given = session.to_string().len();
        if given > MAX_SESSION_BYTES {
            return Err(MintError::SessionTooLarge(given));
        }
        // Refused now, as OpenAI refuses it, rather than at the call that would start with it;
        // the answer shows the session as `session.created` will.
        let effective = crate::realtime::connect_session::check(&ModelKind::Echo, &[&session])
            .map_err(MintError::Session)?;
        let expires_at = now + seconds;
        let value = format!("ek_{}", hex::encode(rand::random::<[u8; 16]>()));
        if let Value::Object(o) = &mut session {
            let (kind, object) = match transcription {
                true => ("transcription", "realtime.transcription_session"),
                false => ("realtime", "realtime.session"),
            };
            o.insert("type".into(), json!(kind));
            o.insert("object".into(), json!(object));
            o.insert(
                "id".into(),
                json!(format!("sess_{}", hex::encode(rand::random::<[u8; 8]>()))),
            );
            o.insert("expires_at".into(), json!(expires_at));
        }
        // Kept as given: a model only the response names must not outrank a call's `?model=`.
        let key = Ephemeral {
            expires_at,
            session: session.to_string().into(),
            calls: 0,
        };
        let (id, object) = (session["id"].clone(), session["object"].clone());
        let mut session = effective;
        session["id"] = id;
        session["object"] = object;
        session["expires_at"] = json!(expires_at);
        self.ephemeral
            .lock()
            .unwrap()
            .insert(value.clone(), key, now)
            .map_err(|retry_after| MintError::Full { retry_after })?;
        Ok(json!({"value": value, "expires_at": expires_at, "session": session}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_refused_by_the_update_rules_is_refused_at_mint_naming_the_field() {
        let k = Keys::open();
        let e = k
            .mint(&json!({"session": {"type": "realtime", "tool_choice": "sometimes"}}))
            .unwrap_err();
        let MintError::Session(e) = e else {
            panic!("{e:?}")
        };
        assert_eq!(e.param.as_deref(), Some("session.tool_choice"));
        let t = k
            .mint(&json!({"session": {"type": "transcription"}}))
            .unwrap();
        assert_eq!(t["session"]["object"], "realtime.transcription_session");
        let ok = k
            .mint(&json!({"session": {"type": "realtime", "instructions": "hi"}}))
            .unwrap();
        assert_eq!(ok["session"]["instructions"], "hi");
        assert_eq!(ok["session"]["object"], "realtime.session");
        assert!(ok["session"]["id"].as_str().unwrap().starts_with("sess_"));
    }

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
        let MintError::Invalid(m) = k
            .mint(&json!({"expires_after": {"seconds": 5}}))
            .unwrap_err()
        else {
            panic!("not an invalid request")
        };
        assert!(m.contains("between 10 and 7200"), "{m}");
        for bad in [
            json!({"expires_after": {"seconds": 7201}}),
            json!({"expires_after": {"seconds": 60.5}}),
            json!({"session": {"type": "translation"}}),
            json!({"session": 3}),
        ] {
            assert!(matches!(k.mint(&bad), Err(MintError::Invalid(_))), "{bad}");
        }
    }

    #[test]
    fn a_session_config_over_the_cap_is_refused_and_one_under_it_kept_as_text() {
        let k = Keys::open();
        let big = "x".repeat(MAX_SESSION_BYTES);
        let e = k
            .mint(&json!({"session": {"instructions": big}}))
            .unwrap_err();
        assert!(
            matches!(e, MintError::SessionTooLarge(n) if n > MAX_SESSION_BYTES),
            "{e:?}"
        );
        let fits = "x".repeat(MAX_SESSION_BYTES - 100);
        let r = k
            .mint(&json!({"session": {"instructions": fits, "model": "tts"}}))
            .unwrap();
        let store = k.ephemeral.lock().unwrap();
        assert_eq!(store.keys.len(), 1);
        assert!(store.bytes > MAX_SESSION_BYTES - 100 && store.bytes < MAX_SESSION_BYTES + 300);
        drop(store);
        let v = r["value"].as_str().unwrap();
        assert_eq!(k.check_call(Some(v)).unwrap().unwrap()["model"], "tts");
    }

    #[test]
    fn a_full_store_expires_old_keys_first_then_refuses_with_a_retry_time() {
        let k = Keys::open();
        {
            let mut s = k.ephemeral.lock().unwrap();
            s.max_keys = 3;
        }
        let mint = |at: u64, secs: u64| k.mint_at(&json!({"expires_after": {"seconds": secs}}), at);
        let t = 1_000_000;
        mint(t, 10).unwrap();
        mint(t, 600).unwrap();
        mint(t, 600).unwrap();
        // Full of live keys: refused, retry once the 10 s one expires.
        assert_eq!(
            mint(t + 1, 600).unwrap_err(),
            MintError::Full { retry_after: 9 }
        );
        // Once it has expired, it makes room.
        mint(t + 11, 600).unwrap();
        assert_eq!(k.ephemeral.lock().unwrap().keys.len(), 3);

        // By bytes: with room for one and a half big keys, a second big one is refused while
        // small ones still fit.
        let k = Keys::open();
        let big = json!({"session": {"instructions": "x".repeat(MAX_SESSION_BYTES - 200)}});
        k.mint_at(&big, t).unwrap();
        let one = k.ephemeral.lock().unwrap().bytes;
        k.ephemeral.lock().unwrap().max_bytes = one * 3 / 2;
        assert_eq!(
            k.mint_at(&big, t).unwrap_err(),
            MintError::Full { retry_after: 600 }
        );
        k.mint_at(&json!({}), t).unwrap();
        let s = k.ephemeral.lock().unwrap();
        assert_eq!(s.keys.len(), 2);
        assert!(s.bytes <= s.max_bytes, "{} > {}", s.bytes, s.max_bytes);
    }
}
