//! FlexFEC draft-03 — the format browsers negotiate as `video/flexfec-03`.
pub(crate) mod decoder;
pub(crate) mod encoder;
pub(crate) mod receiver;
pub(crate) mod sender;
