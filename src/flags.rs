//! Settings are flags with environment twins (`--http` / `VOICE_EDGE_HTTP`), declared once, on
//! the config type that uses them, with clap's derive. This module holds what those types share.

/// The flags' own defaults, with the environment ignored: `Default` for a config that derives
/// its flags, so the default is written once (in the flag) and a test's `..Default::default()`
/// starts what `voice-edge` with no arguments starts, whatever `VOICE_EDGE_*` its shell has set.
pub fn defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    let cmd = T::augment_args(clap::Command::new("defaults")).mut_args(|a| a.env(None));
    let matches = cmd
        .try_get_matches_from(["defaults"])
        .expect("every flag of a config with a Default has a default");
    T::from_arg_matches(&matches).expect("defaults parse into their own config")
}
