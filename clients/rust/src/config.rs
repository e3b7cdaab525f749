//! Client settings, and the launch convention every Scout Arena bot program follows: the
//! environment (`SCOUT_ADDRESS`, `SCOUT_TOKEN`, `SCOUT_TLS`, `SCOUT_CA_CERT`,
//! `SCOUT_BOT_NAME`, `SCOUT_CONCURRENCY`, `SCOUT_PUBLIC_EVENTS`) overridden by command-line
//! flags.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Default `max_concurrent_matches` declared in Hello.
pub const DEFAULT_CONCURRENCY: u32 = 8;
/// Default time before the referee's limit at which the client sends the fallback.
pub const DEFAULT_SAFETY_MARGIN: Duration = Duration::from_millis(100);

/// How to reach the referee and how to play there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The referee, `host:port` (or a full `http://` / `https://` URI).
    pub address: String,
    /// The bot's token, sent as `authorization: Bearer <token>`.
    pub token: String,
    /// Connect with TLS.
    pub tls: bool,
    /// PEM file of the CA to trust instead of the system roots (implies TLS).
    pub ca_cert: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (with `client_key`; implies TLS).
    pub client_cert: Option<PathBuf>,
    /// PEM key of `client_cert`.
    pub client_key: Option<PathBuf>,
    /// Display name sent in Hello (the referee's name for the token is authoritative).
    pub bot_name: String,
    /// Free text sent in Hello.
    pub bot_version: String,
    /// Matches the referee may run at once for this bot (at least 1), over the main stream and
    /// the streams to referee nodes together.
    pub max_concurrent_matches: u32,
    /// Stop after this many matches have ended (`None`: run until stopped).
    pub max_matches: Option<usize>,
    /// Send the fallback this long before the referee's limit (deadline plus bank).
    pub safety_margin: Duration,
    /// Let the bot think into the time bank; `false` falls back at the decision deadline.
    pub use_time_bank: bool,
    /// Answer with the fallback when the bot overruns. Only switch this off to test how the
    /// referee's timeouts (`TIMED_OUT`, a strike) are handled.
    pub send_fallback: bool,
    /// Testing aid: sleep this long before asking the bot, as if it were slow.
    pub slow: Duration,
    /// Ask for the full stream (`Hello.lean = false`): every `PublicEvent` and an
    /// `AnswerResult` for accepted answers too. Default `false`: a lean stream (PROTOCOL.md
    /// §3.6.1), unless the bot's [`wants_public_events`](crate::Bot::wants_public_events) says
    /// otherwise.
    pub public_events: bool,
    /// After a `Goodbye` with `reconnect: true`, how long to keep reconnecting before giving
    /// up (a referee not back by then was stopped for good): 15 minutes.
    pub shutdown_give_up: Duration,
    /// Log debug messages.
    pub verbose: bool,
}

impl Config {
    /// Settings for `address` and `token`, everything else at its default.
    pub fn new(address: impl Into<String>, token: impl Into<String>) -> Self {
        Config {
            address: address.into(),
            token: token.into(),
            tls: false,
            ca_cert: None,
            client_cert: None,
            client_key: None,
            bot_name: "rust-bot".into(),
            bot_version: env!("CARGO_PKG_VERSION").into(),
            max_concurrent_matches: DEFAULT_CONCURRENCY,
            max_matches: None,
            safety_margin: DEFAULT_SAFETY_MARGIN,
            use_time_bank: true,
            send_fallback: true,
            slow: Duration::ZERO,
            public_events: false,
            shutdown_give_up: Duration::from_secs(15 * 60),
            verbose: false,
        }
    }

    /// Whether the connection uses TLS: asked for, or implied by a certificate.
    pub fn uses_tls(&self) -> bool {
        self.tls || self.ca_cert.is_some() || self.client_cert.is_some()
    }

    /// The settings of a bot program: the process environment, overridden by the process's
    /// command-line flags.
    pub fn from_env_and_args() -> Result<Parsed, UsageError> {
        Self::parse(|name| std::env::var(name).ok(), std::env::args().skip(1))
    }

    /// The settings from an environment lookup and command-line arguments (without the
    /// program name). Flags override the environment.
    pub fn parse<E, I>(env: E, args: I) -> Result<Parsed, UsageError>
    where
        E: Fn(&str) -> Option<String>,
        I: IntoIterator<Item = String>,
    {
        let env = |name: &str| env(name).filter(|value| !value.trim().is_empty());
        let mut address = env("SCOUT_ADDRESS");
        let mut token = env("SCOUT_TOKEN");
        let mut config = Config::new("", "");
        config.tls = env("SCOUT_TLS").is_some_and(|value| is_true(&value));
        config.ca_cert = env("SCOUT_CA_CERT").map(PathBuf::from);
        if let Some(name) = env("SCOUT_BOT_NAME") {
            config.bot_name = name;
        }
        if let Some(value) = env("SCOUT_CONCURRENCY") {
            config.max_concurrent_matches = parse_concurrency("SCOUT_CONCURRENCY", &value)?;
        }
        config.public_events = env("SCOUT_PUBLIC_EVENTS").is_some_and(|value| is_true(&value));

        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value)),
                _ => (arg.clone(), None),
            };
            let mut value = || -> Result<String, UsageError> {
                match inline {
                    Some(value) => Ok(value.to_owned()),
                    None => args
                        .next()
                        .ok_or_else(|| UsageError(format!("{flag} needs a value"))),
                }
            };
            match flag.as_str() {
                "-h" | "--help" => return Ok(Parsed::Help),
                "-V" | "--version" => return Ok(Parsed::Version),
                "--address" => address = Some(value()?),
                "--token" => token = Some(value()?),
                "--tls" => config.tls = true,
                "--ca-cert" => config.ca_cert = Some(value()?.into()),
                "--client-cert" => config.client_cert = Some(value()?.into()),
                "--client-key" => config.client_key = Some(value()?.into()),
                "--name" => config.bot_name = value()?,
                "--concurrency" | "--max-concurrent" => {
                    config.max_concurrent_matches = parse_concurrency(&flag, &value()?)?;
                }
                "--max-matches" => config.max_matches = Some(parse_number(&flag, &value()?)?),
                "--safety-margin-ms" => {
                    config.safety_margin = Duration::from_millis(parse_number(&flag, &value()?)?);
                }
                "--no-time-bank" => config.use_time_bank = false,
                "--no-fallback" => config.send_fallback = false,
                "--public-events" => config.public_events = true,
                "--slow-ms" => config.slow = Duration::from_millis(parse_number(&flag, &value()?)?),
                "--shutdown-give-up-ms" => {
                    config.shutdown_give_up =
                        Duration::from_millis(parse_number::<u64>(&flag, &value()?)?.max(1));
                }
                "-v" | "--verbose" => config.verbose = true,
                _ => return Err(UsageError(format!("unknown argument {arg:?} (see --help)"))),
            }
            if inline.is_some() && !takes_value(&flag) {
                return Err(UsageError(format!("{flag} takes no value")));
            }
        }

        config.address = address.ok_or_else(|| {
            UsageError("no referee address: pass --address HOST:PORT or set SCOUT_ADDRESS".into())
        })?;
        config.token = token.ok_or_else(|| {
            UsageError("no bot token: pass --token TOKEN or set SCOUT_TOKEN".into())
        })?;
        if config.client_cert.is_some() != config.client_key.is_some() {
            return Err(UsageError(
                "--client-cert and --client-key go together".into(),
            ));
        }
        if config.max_matches == Some(0) {
            return Err(UsageError("--max-matches must be at least 1".into()));
        }
        Ok(Parsed::Run(Box::new(config)))
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Connect and play with these settings.
    Run(Box<Config>),
    /// Print the usage text.
    Help,
    /// Print the version.
    Version,
}

/// A problem with the command line or the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The usage text of a bot program.
pub const USAGE: &str = "\
Usage: scout-bot [OPTIONS]

Plays a SCOUT bot on a Scout Arena referee until stopped (SIGINT/SIGTERM: exit 0) or until the
referee rejects it (exit 1). Flags override the environment.

Options:
  --address HOST:PORT      referee, or unix:/PATH   [env: SCOUT_ADDRESS, required]
  --token TOKEN            bot token                  [env: SCOUT_TOKEN, required]
  --tls                    connect with TLS           [env: SCOUT_TLS=1]
  --ca-cert FILE           PEM CA to trust (implies --tls)         [env: SCOUT_CA_CERT]
  --client-cert FILE       PEM client certificate for mutual TLS (with --client-key)
  --client-key FILE        PEM key of the client certificate
  --name NAME              display name sent in Hello [env: SCOUT_BOT_NAME]
  --concurrency N          matches to play at once    [env: SCOUT_CONCURRENCY, default 8]
  --max-matches N          stop after N matches have ended
  --safety-margin-ms MS    send the fallback this long before the referee's limit [100]
  --no-time-bank           fall back at the decision deadline, never draw on the bank
  --slow-ms MS             testing: wait MS before asking the bot, as if it were slow
  --no-fallback            testing: never send the fallback; let the referee time out
  --public-events          ask for every public event and accepted result, not a lean
                           stream                     [env: SCOUT_PUBLIC_EVENTS=1]
  --shutdown-give-up-ms MS after a shutdown goodbye, give up reconnecting after MS (exit 1)
                           [900000: 15 min]
  -v, --verbose            log debug messages
  -h, --help               print this help
  -V, --version            print the version
";

fn takes_value(flag: &str) -> bool {
    !matches!(
        flag,
        "--tls"
            | "--no-time-bank"
            | "--no-fallback"
            | "--public-events"
            | "--verbose"
            | "--help"
            | "--version"
    )
}

fn is_true(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

fn parse_number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, UsageError> {
    value.trim().parse().map_err(|_| {
        UsageError(format!(
            "{name} must be a non-negative integer, got {value:?}"
        ))
    })
}

fn parse_concurrency(name: &str, value: &str) -> Result<u32, UsageError> {
    match parse_number(name, value)? {
        0 => Err(UsageError(format!("{name} must be at least 1"))),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(env: &[(&str, &str)], args: &[&str]) -> Result<Parsed, UsageError> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::parse(
            |name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            args.iter().map(|arg| arg.to_string()),
        )
    }

    fn config(env: &[(&str, &str)], args: &[&str]) -> Config {
        match parse(env, args) {
            Ok(Parsed::Run(config)) => *config,
            other => panic!("expected settings, got {other:?}"),
        }
    }

    #[test]
    fn reads_the_environment() {
        let config = config(
            &[
                ("SCOUT_ADDRESS", "referee:50051"),
                ("SCOUT_TOKEN", "secret"),
                ("SCOUT_TLS", "1"),
                ("SCOUT_CA_CERT", "/ca.pem"),
                ("SCOUT_BOT_NAME", "mybot"),
                ("SCOUT_CONCURRENCY", "3"),
            ],
            &[],
        );
        assert_eq!(config.address, "referee:50051");
        assert_eq!(config.token, "secret");
        assert!(config.tls);
        assert_eq!(config.ca_cert, Some(PathBuf::from("/ca.pem")));
        assert_eq!(config.bot_name, "mybot");
        assert_eq!(config.max_concurrent_matches, 3);
        assert!(config.send_fallback && config.use_time_bank);
    }

    #[test]
    fn flags_override_the_environment() {
        let env = [
            ("SCOUT_ADDRESS", "a:1"),
            ("SCOUT_TOKEN", "t1"),
            ("SCOUT_CONCURRENCY", "3"),
        ];
        let config = config(
            &env,
            &[
                "--address",
                "b:2",
                "--token=t2",
                "--concurrency",
                "5",
                "--slow-ms=1500",
            ],
        );
        assert_eq!(
            (config.address.as_str(), config.token.as_str()),
            ("b:2", "t2")
        );
        assert_eq!(config.max_concurrent_matches, 5);
        assert_eq!(config.slow, Duration::from_millis(1500));
        assert!(!config.tls);
        assert_eq!(config.max_concurrent_matches, 5);
    }

    #[test]
    fn defaults() {
        let config = config(&[("SCOUT_ADDRESS", "a:1"), ("SCOUT_TOKEN", "t")], &[]);
        assert_eq!(config.max_concurrent_matches, DEFAULT_CONCURRENCY);
        assert_eq!(config.safety_margin, DEFAULT_SAFETY_MARGIN);
        assert!(!config.uses_tls());
        assert_eq!(config.max_matches, None);
        assert!(!config.public_events, "a lean stream by default");
    }

    #[test]
    fn public_events_from_the_environment_or_a_flag() {
        let base = [("SCOUT_ADDRESS", "a:1"), ("SCOUT_TOKEN", "t")];
        let with = |value| [base[0], base[1], ("SCOUT_PUBLIC_EVENTS", value)];
        assert!(config(&with("1"), &[]).public_events);
        assert!(!config(&with("0"), &[]).public_events);
        assert!(config(&base, &["--public-events"]).public_events);
        assert!(parse(&base, &["--public-events=1"]).is_err());
    }

    #[test]
    fn certificates_imply_tls() {
        let config = config(
            &[("SCOUT_TLS", "0")],
            &["--address=a:1", "--token=t", "--ca-cert=x"],
        );
        assert!(!config.tls);
        assert!(config.uses_tls());
    }

    #[test]
    fn usage_errors() {
        assert!(parse(&[], &["--token", "t"]).is_err());
        assert!(parse(&[("SCOUT_ADDRESS", "a:1")], &[]).is_err());
        let env = [("SCOUT_ADDRESS", "a:1"), ("SCOUT_TOKEN", "t")];
        assert!(parse(&env, &["--concurrency", "0"]).is_err());
        assert!(
            parse(
                &[("SCOUT_CONCURRENCY", "many"), ("SCOUT_ADDRESS", "a:1")],
                &[]
            )
            .is_err()
        );
        assert!(parse(&env, &["--token"]).is_err());
        assert!(parse(&env, &["--bogus"]).is_err());
        assert!(parse(&env, &["--tls=1"]).is_err());
        assert!(parse(&env, &["--client-cert", "c.pem"]).is_err());
        assert_eq!(parse(&[], &["--help"]), Ok(Parsed::Help));
    }
}
