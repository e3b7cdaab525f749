//! Connects a [`Bot`] to a referee and plays until stopped.
//!
//! One channel and one `Arena.Play` stream, the main stream, carry every match the bot is seated
//! in (except those a ladder assigns to another referee node, below). The stream reader routes
//! each message to a task per match, so a match sees its hooks and requests in the referee's
//! order while matches proceed independently. Every request is answered by its own task, which
//! runs the bot on a blocking thread and sends the referee's fallback when the bot has not
//! answered shortly before `deadline_ms + time_bank_ms` (or panicked, or returned an action that
//! is not legal). Answers of all matches of a stream go through one queue into that stream.
//!
//! When the stream is lost the client reconnects with exponential backoff (0.2 s doubling to
//! 5 s, with jitter); the referee then resumes the running matches and re-sends their open
//! requests with the same `request_id`. A request already answered is answered again from
//! memory, never put to the bot twice. Statuses a retry cannot fix (bad token, bad protocol,
//! a newer connection with the same token) end [`run`] with [`Error::Rejected`].
//!
//! The client asks for a lean stream (`Hello.lean`, PROTOCOL.md §3.6.1) unless
//! [`Config::public_events`] or [`Bot::wants_public_events`] says otherwise: the referee then
//! sends no `PublicEvent` and no `AnswerResult` for an accepted answer. Nothing here waits for
//! `ACCEPTED`: an answered request stays open until a verdict closes it (`TIMED_OUT`, `STALE`,
//! ...) or the match moves on (its next request, its `RoundEnded`, its `MatchEnded`); a
//! rejection (`ILLEGAL`, `MALFORMED`) keeps it open.
//!
//! The client also says it reads bundles (`Hello.accepts_bundles`, PROTOCOL.md §3.6.2): the
//! referee may then send what it has queued for the stream as one `RefereeBundle`. The reader
//! unpacks it and handles each inner message, in order, exactly as if it had come on its own,
//! with the bundle's arrival time as the inner messages' (their deadlines count from it). A
//! bundle inside a bundle (which the referee never sends) is ignored with a log line. The
//! client sends no bundles itself: every answer is a message of its own.
//!
//! A stream the referee ends on purpose carries a `Goodbye` last (PROTOCOL.md §10.1), which
//! overrides the status the call ends with: `reconnect: false` ends [`run`] with `Ok`;
//! `reconnect: true` reconnects after `retry_after_ms` plus a little jitter
//! ([`goodbye_delay`]), which is not a failure and does not grow the backoff.
//!
//! A ladder that spreads its matches over several referee nodes sends a `MatchAssignment` on
//! that stream (PROTOCOL.md §3.8). The client then opens a second stream to the node, with the
//! assignment's ticket as bearer token and the same Hello, unless it has one there already (open,
//! opening or waiting to reconnect), and plays the match on it like on the main stream: every
//! answer goes back on the stream that carried its request. It keeps, per node, the tickets of
//! the assigned matches that have not ended; a node stream that ends is reopened after the usual
//! backoff with the newest of them (a ticket the node refuses is dropped, the next one tried),
//! and let go when none is left. A node that cannot be reached for [`NODE_UNREACHABLE_CUTOFF`]
//! in a row (no stream there welcomed for that long) is gone: its tickets are dropped and its
//! stream let go (the ladder has voided those matches). A node stream's end or `Goodbye` never
//! ends [`run`] and never touches the main stream.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use log::{debug, error, info, warn};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, timeout};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::Endpoint;
use tonic::{Code, Request, Status};

use crate::bot::Bot;
use crate::config::Config;
use crate::game::{check_action, fallback_action};
use crate::proto::arena_client::ArenaClient;
use crate::proto::bot_message::Body as Outgoing;
use crate::proto::referee_message::Body as Incoming;
use crate::proto::{
    ActionChoice, AnswerResult, AnswerStatus, BotMessage, DecisionRequest, Goodbye, Hello,
    MatchAssignment, MatchEndStatus, MatchEnded, Probation, RefereeMessage, RotationChoice,
    RotationRequest, Welcome,
};
use crate::target::{Target, unix_path};

/// The protocol version this client speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// First reconnect delay (before jitter).
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(200);
/// Longest reconnect delay (before jitter).
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// HTTP/2 keepalive ping interval; the referee permits one every 10 s or more.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(25);
/// A referee node with no stream there welcomed for this long is gone (PROTOCOL.md §3.8 rule
/// 4): the bot drops its tickets for that node and lets it go.
pub const NODE_UNREACHABLE_CUTOFF: Duration = Duration::from_secs(60);

const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The referee refuses bot messages above 64 KiB.
const MAX_SEND_BYTES: usize = 64 * 1024;
const MAX_RECEIVE_BYTES: usize = 16 * 1024 * 1024;
/// On stop, how long to wait for the referee to end the call after the half-close.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
const ENDED_MATCHES_REMEMBERED: usize = 1024;

/// Why [`run`] gave up.
#[derive(Debug)]
pub enum Error {
    /// The settings cannot work (bad address, unreadable certificate, TLS not compiled in).
    Config(String),
    /// The referee said `Goodbye` with `reconnect: true` and did not take the bot back within
    /// [`Config::shutdown_give_up`].
    GaveUp(Duration),
    /// The referee refused the bot for a reason reconnecting cannot fix.
    Rejected {
        /// The gRPC status code.
        code: Code,
        /// The status message (plus the last `ProtocolError`, if any).
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(message) => f.write_str(message),
            Error::GaveUp(after) => write!(
                f,
                "the referee did not come back within {} s of its shutdown goodbye; giving up",
                after.as_secs_f64()
            ),
            Error::Rejected { code, message } => write!(
                f,
                "the referee rejected the connection ({}): {}",
                code_name(*code),
                if message.is_empty() {
                    "no details"
                } else {
                    message
                }
            ),
        }
    }
}

impl std::error::Error for Error {}

/// What a finished [`run`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Matches that ended while the bot was connected.
    pub matches_finished: usize,
}

/// Plays `bot` on the referee described by `config` until `shutdown` completes, or
/// `config.max_matches` matches have ended, or the referee says `Goodbye` without asking the bot
/// back (all `Ok`), or the referee rejects the bot. Only the main stream (to `config.address`)
/// decides this; the streams to referee nodes close when `run` ends.
pub async fn run<B: Bot>(
    config: Config,
    bot: B,
    shutdown: impl Future<Output = ()>,
) -> Result<Summary, Error> {
    let endpoint = endpoint(&config.address, config.uses_tls(), &config)?;
    let token = config.token.clone();
    let mut runner = Runner::new(config, Arc::new(bot));
    let mut shutdown = pin!(shutdown);
    let mut attempt = 0u32;
    // Since when the referee has been away after a `Goodbye{reconnect: true}`, until it welcomes
    // the bot again: after `shutdown_give_up` of that the bot gives up.
    let mut shutdown_since: Option<Instant> = None;
    let give_up = runner.shared.config.shutdown_give_up;
    let outcome = loop {
        let end = runner.session(&endpoint, &token, shutdown.as_mut()).await;
        if runner.welcomed {
            shutdown_since = None;
        }
        let problem = match end {
            SessionEnd::Stopped => break Ok(()),
            SessionEnd::Rejected(status) => {
                break Err(Error::Rejected {
                    code: status.code(),
                    message: runner.rejection_message(&status),
                });
            }
            SessionEnd::Goodbye(goodbye) => {
                if !goodbye.reconnect {
                    info!("the referee does not want the bot back; stopping");
                    break Ok(());
                }
                attempt = 0; // not a failure: the backoff starts afresh
                shutdown_since.get_or_insert_with(Instant::now);
                let delay = goodbye_delay(goodbye.retry_after_ms);
                info!(
                    "reconnecting in {:.2} s, as the referee asked",
                    delay.as_secs_f64()
                );
                tokio::select! {
                    () = shutdown.as_mut() => break Ok(()),
                    () = sleep(delay) => {}
                }
                continue;
            }
            SessionEnd::Lost(problem) => problem,
        };
        if runner.welcomed {
            attempt = 0;
        }
        if shutdown_since.is_some_and(|since| since.elapsed() >= give_up) {
            error!("connection lost ({problem})");
            break Err(Error::GaveUp(give_up));
        }
        let delay = backoff_delay(attempt);
        attempt = attempt.saturating_add(1);
        warn!(
            "connection lost ({problem}); reconnecting in {:.2} s",
            delay.as_secs_f64()
        );
        tokio::select! {
            () = shutdown.as_mut() => break Ok(()),
            () = sleep(delay) => {}
        }
    };
    runner.shared.close_node_streams().await;
    outcome.map(|()| Summary {
        matches_finished: runner.shared.finished(),
    })
}

/// The reconnect delay before attempt `attempt` (0-based): 0.2 s doubling up to 5 s, times a
/// random factor in [0.5, 1] so that many bots do not reconnect in lockstep.
pub fn backoff_delay(attempt: u32) -> Duration {
    let step = BACKOFF_INITIAL
        .saturating_mul(1 << attempt.min(16))
        .min(BACKOFF_MAX);
    step.mul_f64(0.5 + 0.5 * random_unit())
}

/// The wait before reconnecting after a `Goodbye` with `reconnect: true`: the referee's
/// `retry_after_ms` plus a little jitter (up to a tenth of it, plus 100 ms), so that many bots
/// do not come back at the same instant.
pub fn goodbye_delay(retry_after_ms: u32) -> Duration {
    let base = Duration::from_millis(u64::from(retry_after_ms));
    base + (base / 10 + Duration::from_millis(100)).mul_f64(random_unit())
}

/// A random number in [0, 1), from the standard library's randomly keyed hasher.
fn random_unit() -> f64 {
    (RandomState::new().hash_one(0u8) >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether a status ends the bot for good: retrying would only repeat it.
pub fn is_rejection(status: &Status) -> bool {
    match status.code() {
        Code::Unauthenticated
        | Code::PermissionDenied
        | Code::InvalidArgument
        | Code::FailedPrecondition
        | Code::Unimplemented => true,
        // Another process took over this token; reconnecting would take it back and forth.
        Code::Aborted => status.message().to_lowercase().contains("superseded"),
        _ => false,
    }
}

fn code_name(code: Code) -> String {
    // `Code`'s Debug is CamelCase; the protocol documents use the canonical UPPER_SNAKE names.
    let mut name = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// The channel to `address`: over TLS with the certificates of `config` when `tls`, otherwise
/// plaintext; a `unix:` address is a Unix domain socket (plaintext only).
fn endpoint(address: &str, tls: bool, config: &Config) -> Result<Target, Error> {
    let unix = unix_path(address).transpose().map_err(Error::Config)?;
    if unix.is_some() && tls {
        return Err(Error::Config(format!(
            "{address:?}: TLS over a Unix domain socket is not supported"
        )));
    }
    let uri = if unix.is_some() {
        "http://localhost".to_owned()
    } else if address.contains("://") {
        address.to_owned()
    } else {
        format!("{}://{address}", if tls { "https" } else { "http" })
    };
    let endpoint = Endpoint::from_shared(uri)
        .map_err(|e| Error::Config(format!("bad referee address {address:?}: {e}")))?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true);
    Ok(match unix {
        Some(path) => Target::unix(endpoint, path),
        None if tls => Target::tcp(with_tls(endpoint, config)?),
        None => Target::tcp(endpoint),
    })
}

#[cfg(feature = "tls")]
fn with_tls(endpoint: Endpoint, config: &Config) -> Result<Endpoint, Error> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))
    };
    let mut tls = ClientTlsConfig::new();
    tls = match &config.ca_cert {
        Some(path) => tls.ca_certificate(Certificate::from_pem(read(path)?)),
        None => tls.with_native_roots(),
    };
    if let (Some(cert), Some(key)) = (&config.client_cert, &config.client_key) {
        tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    endpoint
        .tls_config(tls)
        .map_err(|e| Error::Config(format!("bad TLS settings: {e}")))
}

#[cfg(not(feature = "tls"))]
fn with_tls(_endpoint: Endpoint, _config: &Config) -> Result<Endpoint, Error> {
    Err(Error::Config(
        "TLS was asked for, but this build has no TLS support (build with the `tls` feature)"
            .into(),
    ))
}

enum SessionEnd {
    /// Stopped on purpose (shutdown, or `max_matches` reached).
    Stopped,
    /// The referee ended the stream on purpose, with this `Goodbye`.
    Goodbye(Goodbye),
    /// A status that says not to reconnect.
    Rejected(Status),
    /// Anything else: reconnect.
    Lost(String),
}

/// A stream the bot plays on: the main one (to `Config::address`, with the token), or one to a
/// referee node that an assignment named (with the tickets of its matches). The answers to a
/// request go out on the route of the stream that carried it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Route {
    Main,
    Node(String),
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Main => f.write_str("the referee"),
            Route::Node(address) => write!(f, "node {address}"),
        }
    }
}

/// State of one route that lives across its reconnects, owned by the stream's reader.
struct Runner<B: Bot> {
    shared: Arc<Shared<B>>,
    route: Route,
    hello: Hello,
    max_matches: Option<usize>,
    /// The current stream's number (unique among every route's streams).
    connection: u64,
    welcomed: bool,
    last_error: Option<String>,
    /// The current stream's `Goodbye`, once the referee sent it.
    goodbye: Option<Goodbye>,
    matches: HashMap<String, mpsc::UnboundedSender<(Instant, Incoming)>>,
    ended: HashSet<String>,
    ended_order: VecDeque<String>,
}

impl<B: Bot> Runner<B> {
    /// The main stream's runner.
    fn new(config: Config, bot: Arc<B>) -> Self {
        // Any Hello field not named here keeps its default, so this builds against any
        // revision of the proto.
        #[allow(clippy::needless_update)]
        let hello = Hello {
            bot_name: config.bot_name.clone(),
            bot_version: config.bot_version.clone(),
            protocol_version: PROTOCOL_VERSION,
            max_concurrent_matches: config.max_concurrent_matches.max(1),
            lean: !(config.public_events || bot.wants_public_events()),
            // The reader unpacks `RefereeMessage.bundle` (see `Runner::receive`).
            accepts_bundles: true,
            ..Default::default()
        };
        let max_matches = config.max_matches;
        let shared = Arc::new(Shared::new(bot, &config));
        Runner::on_route(shared, Route::Main, hello, max_matches)
    }

    fn on_route(
        shared: Arc<Shared<B>>,
        route: Route,
        hello: Hello,
        max_matches: Option<usize>,
    ) -> Self {
        Runner {
            shared,
            route,
            hello,
            max_matches,
            connection: 0,
            welcomed: false,
            last_error: None,
            goodbye: None,
            matches: HashMap::new(),
            ended: HashSet::new(),
            ended_order: VecDeque::new(),
        }
    }

    fn rejection_message(&self, status: &Status) -> String {
        let mut message = status.message().to_owned();
        if let Some(error) = &self.last_error
            && !message.contains(error.as_str())
        {
            message = format!("{message} [{error}]");
        }
        message.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn max_matches_reached(&self) -> bool {
        self.max_matches
            .is_some_and(|max| self.shared.finished() >= max)
    }

    /// One `Play` stream with `authorization: Bearer <bearer>`, from Hello until it ends or
    /// `shutdown` completes.
    async fn session<S>(
        &mut self,
        endpoint: &Target,
        bearer: &str,
        mut shutdown: Pin<&mut S>,
    ) -> SessionEnd
    where
        S: Future<Output = ()>,
    {
        self.connection = self.shared.next_connection();
        self.welcomed = false;
        self.last_error = None;
        self.goodbye = None;
        debug!(
            "connecting to {} (connection {})",
            endpoint, self.connection
        );
        let channel = tokio::select! {
            () = shutdown.as_mut() => return SessionEnd::Stopped,
            connected = endpoint.connect() => match connected {
                Ok(channel) => channel,
                Err(e) => return SessionEnd::Lost(error_chain(&e)),
            },
        };
        let mut client = ArenaClient::new(channel)
            .max_encoding_message_size(MAX_SEND_BYTES)
            .max_decoding_message_size(MAX_RECEIVE_BYTES);
        let (sender, receiver) = mpsc::unbounded_channel();
        let hello = BotMessage {
            body: Some(Outgoing::Hello(self.hello.clone())),
        };
        sender.send(hello).expect("the receiver is alive");
        let _outbox = OutboxGuard::install(&self.shared, &self.route, self.connection, sender);
        let mut request = Request::new(UnboundedReceiverStream::new(receiver));
        match MetadataValue::try_from(format!("Bearer {bearer}")) {
            Ok(bearer) => request.metadata_mut().insert("authorization", bearer),
            Err(_) => {
                return SessionEnd::Rejected(Status::unauthenticated(
                    "the token has characters a header cannot carry",
                ));
            }
        };
        let mut incoming = tokio::select! {
            () = shutdown.as_mut() => return SessionEnd::Stopped,
            response = client.play(request) => match response {
                Ok(response) => response.into_inner(),
                Err(status) => return self.ended_with(status),
            },
        };
        let mut finished = self.shared.finished.subscribe();
        loop {
            let message = tokio::select! {
                () = shutdown.as_mut() => break,
                // Matches that end on the other streams count towards `max_matches` too.
                Ok(()) = finished.changed(), if self.max_matches.is_some() => {
                    if self.max_matches_reached() {
                        info!("played {} match(es); stopping", self.shared.finished());
                        break;
                    }
                    continue;
                }
                message = incoming.message() => message,
            };
            match message {
                Ok(Some(message)) => self.receive(message, Instant::now()),
                Ok(None) => return SessionEnd::Lost("the referee ended the stream".into()),
                Err(status) => return self.ended_with(status),
            }
            if self.goodbye.is_some() {
                // The referee ends the call next, whatever its status: half-close and let it.
                break;
            }
            if self.max_matches_reached() {
                info!("played {} match(es); stopping", self.shared.finished());
                break;
            }
        }
        // Stopping: half-close after the answers already queued, and give the referee a
        // moment to end the call on its side.
        self.shared.close_outbox(&self.route, self.connection);
        let drain = async { while let Ok(Some(_)) = incoming.message().await {} };
        let _ = timeout(CLOSE_GRACE, drain).await;
        match self.goodbye.take() {
            Some(goodbye) => SessionEnd::Goodbye(goodbye),
            None => SessionEnd::Stopped,
        }
    }

    fn ended_with(&self, status: Status) -> SessionEnd {
        if is_rejection(&status) {
            SessionEnd::Rejected(status)
        } else {
            SessionEnd::Lost(describe(&status))
        }
    }

    /// Whether the stream is read no further: the referee said `Goodbye` (it ends the call
    /// next), or `max_matches` matches have ended.
    fn stops_reading(&self) -> bool {
        self.goodbye.is_some() || self.max_matches_reached()
    }

    /// One message read off the stream at `received`. A bundle (PROTOCOL.md §3.6.2) is
    /// unpacked: each inner message, in order, goes the way a message sent on its own goes, with
    /// the bundle's arrival time, and those after one that stops the reading are dropped as
    /// they would be unread.
    fn receive(&mut self, message: RefereeMessage, received: Instant) {
        match message.body {
            Some(Incoming::Bundle(bundle)) => {
                let count = bundle.messages.len();
                for (index, inner) in bundle.messages.into_iter().enumerate() {
                    if self.stops_reading() {
                        debug!(
                            "{}: not reading the last {} message(s) of a bundle",
                            self.route,
                            count - index
                        );
                        break;
                    }
                    self.receive_one(inner, received);
                }
            }
            body => self.receive_one(RefereeMessage { body }, received),
        }
    }

    /// One message on its own, or one of a bundle's.
    fn receive_one(&mut self, message: RefereeMessage, received: Instant) {
        match message.body {
            Some(body) => self.dispatch(body, received),
            None => warn!("ignoring a message from the referee with no body this client knows"),
        }
    }

    fn dispatch(&mut self, body: Incoming, received: Instant) {
        match &body {
            Incoming::Welcome(welcome) => return self.on_welcome(welcome),
            Incoming::Bundle(_) => {
                // `receive` unpacks the bundles read off the stream: this one was in a bundle.
                warn!("ignoring a bundle inside a bundle from {}", self.route);
                return;
            }
            Incoming::Goodbye(goodbye) => return self.on_goodbye(goodbye.clone()),
            Incoming::Assignment(assignment) => return self.on_assignment(assignment),
            Incoming::Probation(probation) => return self.on_probation(probation),
            Incoming::Error(error) => {
                let code = error.code().as_str_name();
                warn!(
                    "protocol error from {}: {code}: {}",
                    self.route, error.message
                );
                self.last_error = Some(format!("{code}: {}", error.message));
                return;
            }
            _ => {}
        }
        let Some(match_id) = match_id_of(&body) else {
            debug!("ignoring a message whose body this client does not handle");
            return;
        };
        let match_id = match_id.to_owned();
        if self.ended.contains(&match_id) {
            debug!("match {match_id}: ignoring a message after the match ended");
            return;
        }
        if let Incoming::AnswerResult(result) = &body
            && !self.matches.contains_key(&match_id)
        {
            log_result(result);
            return;
        }
        if let Incoming::MatchEnded(end) = &body {
            // Whichever stream says so (a ladder voids a node's match on the main stream), the
            // match's ticket opens nothing any more.
            lock(&self.shared.tickets).match_ended_anywhere(&match_id);
            if !self.matches.contains_key(&match_id) {
                // No state here (voided before it began, or begun before a restart).
                log_match_end(end);
                self.shared.bot.on_match_end(end);
                self.shared.forget_match(&match_id);
                self.remember_ended(match_id);
                self.shared.finished.send_modify(|finished| *finished += 1);
                return;
            }
        }
        let is_end = matches!(body, Incoming::MatchEnded(_));
        let worker = self.matches.entry(match_id.clone()).or_insert_with(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(play_match(
                Arc::clone(&self.shared),
                self.route.clone(),
                match_id.clone(),
                receiver,
            ));
            sender
        });
        let _ = worker.send((received, body));
        if is_end {
            self.matches.remove(&match_id);
            self.drop_ticket(&match_id);
            self.remember_ended(match_id);
            self.shared.finished.send_modify(|finished| *finished += 1);
        }
    }

    fn on_welcome(&mut self, welcome: &Welcome) {
        self.welcomed = true;
        info!(
            "connected to {} as {:?} (session {}{})",
            self.route,
            welcome.bot_name,
            welcome.session_id,
            if welcome.resumed { ", resumed" } else { "" }
        );
        if welcome.protocol_version != PROTOCOL_VERSION {
            warn!(
                "{} speaks protocol {}, this client {PROTOCOL_VERSION}",
                self.route, welcome.protocol_version
            );
        }
        if !welcome.resumed && !self.matches.is_empty() {
            // The reconnect came after the grace: the referee forfeited those seats.
            let lost: Vec<String> = self.matches.drain().map(|(id, _)| id).collect();
            warn!(
                "{} did not resume {} match(es): {}",
                self.route,
                lost.len(),
                lost.join(", ")
            );
            for match_id in lost {
                self.shared.forget_match(&match_id);
                self.drop_ticket(&match_id);
                self.remember_ended(match_id);
            }
        }
    }

    /// The referee closes the stream on purpose (PROTOCOL.md §10.1); what follows is for `run`
    /// to decide on the main stream, and for [`follow_node`] on a node's.
    fn on_goodbye(&mut self, goodbye: Goodbye) {
        let then = if goodbye.reconnect {
            format!("reconnect in {} ms", goodbye.retry_after_ms)
        } else {
            "do not reconnect".to_owned()
        };
        info!(
            "goodbye from {} ({}, {then}): {}",
            self.route,
            goodbye.reason().as_str_name(),
            if goodbye.message.is_empty() {
                "no message"
            } else {
                goodbye.message.as_str()
            }
        );
        self.goodbye = Some(goodbye);
    }

    /// The ladder's word on probation (PROTOCOL.md §3.9): logged, and the bot's hook told.
    fn on_probation(&self, probation: &Probation) {
        if probation.active {
            warn!(
                "on probation: no matches are scheduled for the bot ({}); {}",
                probation.reason,
                if probation.lifted_by_reconnect {
                    "a new connection lifts it (restart the bot once it is fixed)"
                } else {
                    "only the bot's owner or the operator can lift it"
                }
            );
        } else {
            info!("probation lifted: matches will be scheduled again");
        }
        self.shared.bot.on_probation(probation);
    }

    /// A match on a referee node (PROTOCOL.md §3.8): keep its ticket, and open a stream to the
    /// node unless one is open (or opening) there already, which then carries the match. An
    /// assignment re-sent for a match the bot follows (after every Welcome of the main stream)
    /// replaces its ticket: the node stream reopens with it, and no second stream is opened.
    fn on_assignment(&self, assignment: &MatchAssignment) {
        let (match_id, address) = (&assignment.match_id, &assignment.address);
        if address.is_empty() || assignment.ticket.is_empty() {
            warn!("match {match_id}: ignoring an assignment without an address or a ticket");
            return;
        }
        info!("match {match_id}: assigned to node {address}");
        let mut tickets = lock(&self.shared.tickets);
        if !tickets.assign(address, match_id, &assignment.ticket) {
            return;
        }
        let endpoint = match endpoint(address, assignment.tls, &self.shared.config) {
            Ok(endpoint) => endpoint,
            Err(problem) => {
                error!("node {address}: {problem}; cannot play match {match_id} there");
                tickets.release(address);
                return;
            }
        };
        drop(tickets);
        let node = Runner::on_route(
            Arc::clone(&self.shared),
            Route::Node(address.clone()),
            self.hello.clone(),
            self.max_matches,
        );
        let mut streams = lock(&self.shared.node_streams);
        while streams.try_join_next().is_some() {} // forget the streams already let go
        streams.spawn(follow_node(node, address.clone(), endpoint));
    }

    /// The match is over (or lost) on this stream: on a node's, its ticket opens nothing any
    /// more.
    fn drop_ticket(&self, match_id: &str) {
        if let Route::Node(address) = &self.route {
            lock(&self.shared.tickets).match_ended(address, match_id);
        }
    }

    fn remember_ended(&mut self, match_id: String) {
        if self.ended.insert(match_id.clone()) {
            self.ended_order.push_back(match_id);
        }
        while self.ended_order.len() > ENDED_MATCHES_REMEMBERED {
            if let Some(old) = self.ended_order.pop_front() {
                self.ended.remove(&old);
            }
        }
    }
}

impl<B: Bot> Drop for Runner<B> {
    fn drop(&mut self) {
        self.shared.close_outbox(&self.route, self.connection);
        if self.route == Route::Main {
            // `run` is over, or was dropped: so are the node streams.
            lock(&self.shared.node_streams).abort_all();
        }
    }
}

/// Plays the matches of one referee node on a stream there (`runner` routes to it), opened with
/// the newest ticket of an unfinished match there. A stream that ends (a fault or any `Goodbye`)
/// is reopened after the backoff while such a ticket is left, and let go when none is; a ticket
/// the node refuses is dropped and the next one tried (PROTOCOL.md §3.8). When an attempt fails
/// and no stream there has been welcomed for [`Shared::node_cutoff`] (counted from the end of
/// the last welcomed stream, or from the link's creation if none was), the node is gone: all its
/// tickets are dropped and the link ends as with no ticket left. This never ends `run`.
async fn follow_node<B: Bot>(mut runner: Runner<B>, address: String, endpoint: Target) {
    let shared = Arc::clone(&runner.shared);
    let mut stopping = shared.stopping.subscribe();
    let mut shutdown = pin!(async move {
        let _ = stopping.wait_for(|stop| *stop).await;
    });
    let mut attempt = 0u32;
    // The last moment a stream to the node was known welcomed: the link's creation until one is.
    let mut reachable_at = Instant::now();
    loop {
        let Some((match_id, ticket)) = lock(&shared.tickets).newest(&address) else {
            info!("node {address}: no unfinished match there; letting its stream go");
            return;
        };
        info!("node {address}: opening a stream (ticket of match {match_id})");
        let end = runner.session(&endpoint, &ticket, shutdown.as_mut()).await;
        if runner.welcomed {
            // Welcomed, and up until it ended just now.
            reachable_at = Instant::now();
        }
        let delay = match end {
            SessionEnd::Stopped => {
                info!("node {address}: stream closed");
                return;
            }
            SessionEnd::Rejected(status) => {
                warn!(
                    "node {address}: refused the ticket ({}); dropping it",
                    describe(&status)
                );
                lock(&shared.tickets).refused(&address, &ticket);
                continue;
            }
            SessionEnd::Goodbye(goodbye) if goodbye.reconnect => {
                attempt = 0;
                goodbye_delay(goodbye.retry_after_ms)
            }
            end => {
                if let SessionEnd::Lost(problem) = end {
                    warn!("node {address}: stream lost ({problem})");
                }
                if runner.welcomed {
                    attempt = 0;
                }
                let delay = backoff_delay(attempt);
                attempt = attempt.saturating_add(1);
                delay
            }
        };
        if !runner.welcomed && reachable_at.elapsed() >= shared.node_cutoff {
            let dropped = lock(&shared.tickets).give_up(&address);
            warn!(
                "node {address} unreachable for {} s; dropping its {} ticket(s) and letting it go",
                shared.node_cutoff.as_secs_f64(),
                dropped.len()
            );
            // Those matches are void: forget their requests (the runner's match tasks end with
            // it).
            for match_id in dropped.into_iter().chain(runner.matches.keys().cloned()) {
                shared.forget_match(&match_id);
            }
            return;
        }
        if lock(&shared.tickets).holds(&address) {
            info!(
                "node {address}: reopening its stream in {:.2} s for the unfinished match(es)",
                delay.as_secs_f64()
            );
            tokio::select! {
                () = shutdown.as_mut() => return,
                () = sleep(delay) => {}
            }
        }
    }
}

/// The tickets of the assigned matches that have not ended, per node address (PROTOCOL.md
/// §3.8). An address is here exactly while the bot has a stream there (open, opening or
/// waiting to reopen), with no ticket left once its matches have ended.
#[derive(Debug, Default)]
struct Tickets {
    /// Each node's tickets, oldest first: `(match_id, ticket)`.
    nodes: HashMap<String, Vec<(String, String)>>,
}

impl Tickets {
    /// Keeps the ticket of a match assigned to `address` (a fresh one replaces the match's
    /// older ticket). Returns whether `address` had no stream: the caller opens one.
    fn assign(&mut self, address: &str, match_id: &str, ticket: &str) -> bool {
        let opens = !self.nodes.contains_key(address);
        let tickets = self.nodes.entry(address.to_owned()).or_default();
        tickets.retain(|(id, _)| id != match_id);
        tickets.push((match_id.to_owned(), ticket.to_owned()));
        opens
    }

    /// The ticket to (re)open `address`'s stream with, the newest one, and its match. `None`
    /// when no match there is unfinished; the stream is let go then, and the next assignment
    /// opens a new one.
    fn newest(&mut self, address: &str) -> Option<(String, String)> {
        let newest = self
            .nodes
            .get(address)
            .and_then(|tickets| tickets.last())
            .cloned();
        if newest.is_none() {
            self.release(address);
        }
        newest
    }

    /// Whether an unfinished match on `address` holds a ticket.
    fn holds(&self, address: &str) -> bool {
        self.nodes
            .get(address)
            .is_some_and(|tickets| !tickets.is_empty())
    }

    /// The match ended, on whichever stream said so: its ticket opens nothing any more.
    fn match_ended_anywhere(&mut self, match_id: &str) {
        for tickets in self.nodes.values_mut() {
            tickets.retain(|(id, _)| id != match_id);
        }
    }

    /// The match ended: its ticket opens nothing any more.
    fn match_ended(&mut self, address: &str, match_id: &str) {
        if let Some(tickets) = self.nodes.get_mut(address) {
            tickets.retain(|(id, _)| id != match_id);
        }
    }

    /// The node refused `ticket` (`UNAUTHENTICATED`, or another status a retry cannot fix).
    fn refused(&mut self, address: &str, ticket: &str) {
        if let Some(tickets) = self.nodes.get_mut(address) {
            tickets.retain(|(_, held)| held != ticket);
        }
    }

    /// The bot has no stream to `address` any more (nor its tickets).
    fn release(&mut self, address: &str) {
        self.nodes.remove(address);
    }

    /// `address` is gone (unreachable too long): drops all its tickets and lets its stream go,
    /// as [`release`](Self::release) does. Returns the matches whose tickets were dropped.
    fn give_up(&mut self, address: &str) -> Vec<String> {
        self.nodes
            .remove(address)
            .unwrap_or_default()
            .into_iter()
            .map(|(match_id, _)| match_id)
            .collect()
    }
}

/// The messages of one match, in order: hooks run inline, requests get their own task, and
/// the answers go out on `route`, the stream the match is played on.
async fn play_match<B: Bot>(
    shared: Arc<Shared<B>>,
    route: Route,
    match_id: String,
    mut inbox: mpsc::UnboundedReceiver<(Instant, Incoming)>,
) {
    let bot = &shared.bot;
    while let Some((received, body)) = inbox.recv().await {
        match body {
            Incoming::MatchStart(start) => {
                info!(
                    "match {match_id}: {} seat {} of {} ({}){}",
                    if start.resumed {
                        "resumed,"
                    } else {
                        "started,"
                    },
                    start.seat,
                    start.num_players,
                    start.player_names.join(", "),
                    if start.resumed {
                        format!(
                            ", bank {} ms, {} strike(s)",
                            start.time_bank_ms, start.strikes
                        )
                    } else {
                        String::new()
                    }
                );
                bot.on_match_start(&start);
            }
            Incoming::RotationRequest(request) => {
                shared.open(&route, Job::Rotation(request), received);
            }
            Incoming::DecisionRequest(request) => {
                shared.open(&route, Job::Decision(Box::new(request)), received);
            }
            Incoming::AnswerResult(result) => {
                shared.on_answer_result(&route, &result);
                bot.on_answer_result(&result);
            }
            Incoming::PublicEvent(event) => bot.on_event(&event),
            Incoming::RoundEnded(round) => {
                shared.close_latest(&match_id);
                bot.on_round_end(&round);
            }
            Incoming::MatchEnded(end) => {
                log_match_end(&end);
                bot.on_match_end(&end);
                shared.forget_match(&match_id);
                return;
            }
            // Welcome, Goodbye, MatchAssignment, ProtocolError and bundles are the reader's;
            // nothing else reaches here.
            _ => {}
        }
    }
}

/// The match a message is about; `None` for the connection's own messages (Welcome, Goodbye,
/// MatchAssignment, ProtocolError, bundles) and for bodies this client does not handle.
fn match_id_of(body: &Incoming) -> Option<&str> {
    match body {
        Incoming::MatchStart(m) => Some(&m.match_id),
        Incoming::RotationRequest(m) => Some(&m.match_id),
        Incoming::DecisionRequest(m) => Some(&m.match_id),
        Incoming::AnswerResult(m) => Some(&m.match_id),
        Incoming::PublicEvent(m) => Some(&m.match_id),
        Incoming::RoundEnded(m) => Some(&m.match_id),
        Incoming::MatchEnded(m) => Some(&m.match_id),
        _ => None,
    }
}

/// How a match ended: `Unspecified` (an older referee) reads as `Finished`.
pub fn end_status(end: &MatchEnded) -> MatchEndStatus {
    match end.status() {
        MatchEndStatus::Unspecified => MatchEndStatus::Finished,
        status => status,
    }
}

fn log_match_end(end: &MatchEnded) {
    let status = end_status(end);
    if status != MatchEndStatus::Finished {
        warn!(
            "match {}: ended {} without a result: {}",
            end.match_id,
            status.as_str_name().trim_start_matches("MATCH_END_STATUS_"),
            end.reason
        );
        return;
    }
    info!(
        "match {}: ended FINISHED, totals {:?}, ranks {:?}{}",
        end.match_id,
        end.totals,
        end.ranks,
        if end.forfeited_seats.is_empty() {
            String::new()
        } else {
            format!(", forfeited seats {:?}", end.forfeited_seats)
        }
    );
}

fn log_result(result: &AnswerResult) {
    let status = result.status().as_str_name();
    info!(
        "match {}, request {}: {status} {}",
        result.match_id, result.request_id, result.reason
    );
}

/// A request put to the bot.
enum Job {
    Rotation(RotationRequest),
    Decision(Box<DecisionRequest>),
}

impl Job {
    fn key(&self) -> RequestKey {
        match self {
            Job::Rotation(r) => (r.match_id.clone(), r.request_id),
            Job::Decision(r) => (r.match_id.clone(), r.request_id),
        }
    }

    /// The referee's limit: the decision time plus the bank, both counted from when the
    /// request was sent.
    fn limits(&self) -> (u32, u32) {
        match self {
            Job::Rotation(r) => (r.deadline_ms, r.time_bank_ms),
            Job::Decision(r) => (r.deadline_ms, r.time_bank_ms),
        }
    }

    fn fallback(&self) -> BotMessage {
        match self {
            Job::Rotation(r) => rotation_answer(r, false),
            Job::Decision(r) => decision_answer(r, fallback_action(r)),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Job::Rotation(_) => "choose_rotation",
            Job::Decision(_) => "decide",
        }
    }

    /// Runs the bot (on a blocking thread) and returns its answer, or why it cannot be sent.
    fn answer<B: Bot>(self, bot: &B) -> Result<BotMessage, String> {
        match self {
            Job::Rotation(request) => Ok(rotation_answer(&request, bot.choose_rotation(&request))),
            Job::Decision(request) => {
                let action = bot.decide(&request);
                check_action(&request, &action)?;
                Ok(decision_answer(&request, action))
            }
        }
    }
}

fn rotation_answer(request: &RotationRequest, rotate: bool) -> BotMessage {
    BotMessage {
        body: Some(Outgoing::Rotation(RotationChoice {
            match_id: request.match_id.clone(),
            request_id: request.request_id,
            rotate,
        })),
    }
}

fn decision_answer(request: &DecisionRequest, action: crate::proto::Action) -> BotMessage {
    BotMessage {
        body: Some(Outgoing::Action(ActionChoice {
            match_id: request.match_id.clone(),
            request_id: request.request_id,
            action: Some(action),
        })),
    }
}

type RequestKey = (String, u64);

/// What the client remembers of a request until its match ends.
struct Pending {
    /// When the client must have answered (shortly before the referee's limit).
    expires_at: Instant,
    fallback: BotMessage,
    answer: Option<BotMessage>,
    /// The connection the answer went out on.
    sent_on: Option<u64>,
    fallback_sent: bool,
    closed: bool,
}

struct Outbox {
    connection: u64,
    sender: mpsc::UnboundedSender<BotMessage>,
}

/// State shared by the readers of every route, the match tasks and the answer tasks.
struct Shared<B> {
    bot: Arc<B>,
    /// The settings `run` was given; node streams use its TLS certificates.
    config: Config,
    margin: Duration,
    use_time_bank: bool,
    send_fallback: bool,
    slow: Duration,
    /// The live stream of each route.
    outboxes: Mutex<HashMap<Route, Outbox>>,
    /// Streams opened so far, on every route.
    connections: AtomicU64,
    requests: Mutex<HashMap<RequestKey, Pending>>,
    /// Each match's newest request id: the only request of the match that can still be open.
    /// Locked only while `requests` is.
    latest: Mutex<HashMap<String, u64>>,
    /// Matches that ended, on every route.
    finished: watch::Sender<usize>,
    tickets: Mutex<Tickets>,
    /// The tasks of the node streams ([`follow_node`]).
    node_streams: Mutex<JoinSet<()>>,
    /// Becomes `true` when `run` ends: the node streams close.
    stopping: watch::Sender<bool>,
    /// How long a node may go without a welcomed stream before it is given up:
    /// [`NODE_UNREACHABLE_CUTOFF`]; shorter only in tests.
    node_cutoff: Duration,
}

impl<B> Shared<B> {
    /// Removes `route`'s outbox if it is still connection `connection`'s.
    fn close_outbox(&self, route: &Route, connection: u64) {
        let mut outboxes = lock(&self.outboxes);
        if outboxes
            .get(route)
            .is_some_and(|outbox| outbox.connection == connection)
        {
            outboxes.remove(route);
        }
    }

    fn next_connection(&self) -> u64 {
        self.connections.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn finished(&self) -> usize {
        *self.finished.borrow()
    }

    /// Half-closes the node streams and waits a moment for them to end.
    async fn close_node_streams(&self) {
        self.stopping.send_replace(true);
        let mut streams = std::mem::take(&mut *lock(&self.node_streams));
        let _ = timeout(2 * CLOSE_GRACE, async {
            while streams.join_next().await.is_some() {}
        })
        .await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Installs a connection's outbox as its route's and removes it again when dropped.
struct OutboxGuard<B> {
    shared: Arc<Shared<B>>,
    route: Route,
    connection: u64,
}

impl<B> OutboxGuard<B> {
    fn install(
        shared: &Arc<Shared<B>>,
        route: &Route,
        connection: u64,
        sender: mpsc::UnboundedSender<BotMessage>,
    ) -> Self {
        lock(&shared.outboxes).insert(route.clone(), Outbox { connection, sender });
        OutboxGuard {
            shared: Arc::clone(shared),
            route: route.clone(),
            connection,
        }
    }
}

impl<B> Drop for OutboxGuard<B> {
    fn drop(&mut self) {
        self.shared.close_outbox(&self.route, self.connection);
    }
}

impl<B: Bot> Shared<B> {
    fn new(bot: Arc<B>, config: &Config) -> Self {
        Shared {
            bot,
            config: config.clone(),
            margin: config.safety_margin,
            use_time_bank: config.use_time_bank,
            send_fallback: config.send_fallback,
            slow: config.slow,
            outboxes: Mutex::new(HashMap::new()),
            connections: AtomicU64::new(0),
            requests: Mutex::new(HashMap::new()),
            latest: Mutex::new(HashMap::new()),
            finished: watch::channel(0).0,
            tickets: Mutex::new(Tickets::default()),
            node_streams: Mutex::new(JoinSet::new()),
            stopping: watch::channel(false).0,
            node_cutoff: NODE_UNREACHABLE_CUTOFF,
        }
    }

    fn forget_match(&self, match_id: &str) {
        let mut requests = lock(&self.requests);
        requests.retain(|(id, _), _| id != match_id);
        lock(&self.latest).remove(match_id);
    }

    /// The match moved on without a new request for this seat (its round ended): its newest
    /// request is closed, whether or not the referee said it was accepted.
    fn close_latest(&self, match_id: &str) {
        let mut requests = lock(&self.requests);
        let latest = lock(&self.latest).get(match_id).copied();
        if let Some(pending) = latest.and_then(|id| requests.get_mut(&(match_id.to_owned(), id))) {
            pending.closed = true;
        }
    }

    /// A request arrived on `route`: put it to the bot, or, when the referee re-sends one after
    /// a reconnect, re-send the answer given already. The answer goes out on `route`.
    fn open(self: &Arc<Self>, route: &Route, job: Job, received: Instant) {
        let key = job.key();
        let mut requests = lock(&self.requests);
        if let Some(pending) = requests.get_mut(&key) {
            let connection = lock(&self.outboxes).get(route).map(|o| o.connection);
            match &pending.answer {
                Some(answer) if !pending.closed && pending.sent_on != connection => {
                    info!(
                        "match {}: re-sending the answer to request {}",
                        key.0, key.1
                    );
                    let answer = answer.clone();
                    pending.sent_on = self.send(route, answer);
                }
                _ => debug!("match {}: request {} again; already in hand", key.0, key.1),
            }
            return;
        }
        let (deadline_ms, bank_ms) = job.limits();
        let bank_ms = if self.use_time_bank { bank_ms } else { 0 };
        let limit = Duration::from_millis(u64::from(deadline_ms) + u64::from(bank_ms));
        let expires_at = received + limit.saturating_sub(self.margin);
        // A new request means the match moved on: the previous one was accepted (a lean stream
        // does not say so), timed out or superseded.
        let previous = lock(&self.latest).insert(key.0.clone(), key.1);
        if let Some(pending) = previous.and_then(|id| requests.get_mut(&(key.0.clone(), id))) {
            pending.closed = true;
        }
        requests.insert(
            key.clone(),
            Pending {
                expires_at,
                fallback: job.fallback(),
                answer: None,
                sent_on: None,
                fallback_sent: false,
                closed: false,
            },
        );
        drop(requests);
        debug!(
            "match {}: request {} ({}), {deadline_ms} + {bank_ms} ms",
            key.0,
            key.1,
            job.name()
        );
        tokio::spawn(Arc::clone(self).answer(route.clone(), key, job, expires_at));
    }

    /// Asks the bot, and answers on `route` with its choice or, when it is late or fails, the
    /// fallback.
    async fn answer(self: Arc<Self>, route: Route, key: RequestKey, job: Job, expires_at: Instant) {
        let what = job.name();
        let bot = Arc::clone(&self.bot);
        let slow = self.slow;
        let thinking = tokio::task::spawn_blocking(move || {
            if !slow.is_zero() {
                std::thread::sleep(slow);
            }
            job.answer(&*bot)
        });
        let outcome = if self.send_fallback {
            match timeout(
                expires_at.saturating_duration_since(Instant::now()),
                thinking,
            )
            .await
            {
                Ok(joined) => joined,
                Err(_) => {
                    warn!(
                        "match {}, request {}: the bot's {what} did not answer in time; \
                         sending the fallback",
                        key.0, key.1
                    );
                    return self.answer_with(&route, &key, None);
                }
            }
        } else {
            thinking.await
        };
        match outcome {
            Ok(Ok(answer)) => self.answer_with(&route, &key, Some(answer)),
            Ok(Err(problem)) => {
                warn!(
                    "match {}, request {}: {problem}; sending the fallback",
                    key.0, key.1
                );
                self.answer_with(&route, &key, None);
            }
            Err(panic) => {
                error!(
                    "match {}, request {}: the bot's {what} panicked ({panic}); sending the \
                     fallback",
                    key.0, key.1
                );
                self.answer_with(&route, &key, None);
            }
        }
    }

    /// Sends `answer` (or the fallback, for `None`) on `route` unless the request is closed
    /// already.
    fn answer_with(&self, route: &Route, key: &RequestKey, answer: Option<BotMessage>) {
        let mut requests = lock(&self.requests);
        let Some(pending) = requests.get_mut(key) else {
            return; // the match ended meanwhile
        };
        if pending.closed {
            warn!(
                "match {}, request {}: closed before the bot answered (timed out, or the match \
                 moved on); answer dropped",
                key.0, key.1
            );
            return;
        }
        let answer = answer.unwrap_or_else(|| {
            pending.fallback_sent = true;
            pending.fallback.clone()
        });
        pending.answer = Some(answer.clone());
        pending.sent_on = self.send(route, answer);
        if pending.sent_on.is_none() {
            info!(
                "match {}, request {}: not connected; the answer goes out when the referee asks \
                 again",
                key.0, key.1
            );
        }
    }

    /// Queues `message` on `route`'s live stream; returns that stream's connection number.
    fn send(&self, route: &Route, message: BotMessage) -> Option<u64> {
        let outboxes = lock(&self.outboxes);
        let outbox = outboxes.get(route)?;
        outbox.sender.send(message).ok()?;
        Some(outbox.connection)
    }

    /// The referee's verdict on an answer, on `route`: a rejection gets the fallback there.
    fn on_answer_result(&self, route: &Route, result: &AnswerResult) {
        let key = (result.match_id.clone(), result.request_id);
        let where_ = format!("match {}, request {}", key.0, key.1);
        let mut requests = lock(&self.requests);
        let pending = requests.get_mut(&key);
        match result.status() {
            AnswerStatus::Accepted => {
                // Full streams only: nothing waits for it.
                debug!("{where_}: accepted");
                if let Some(pending) = pending {
                    pending.closed = true;
                }
            }
            AnswerStatus::Illegal | AnswerStatus::Malformed => {
                warn!(
                    "{where_}: answer {}: {} (strikes: {})",
                    result.status().as_str_name(),
                    result.reason,
                    result.strikes
                );
                // The request stays open after a rejection, and the fallback is always legal.
                if let Some(pending) = pending {
                    let may_retry = !pending.closed
                        && !pending.fallback_sent
                        && pending.answer.as_ref() != Some(&pending.fallback)
                        && Instant::now() < pending.expires_at;
                    if may_retry {
                        warn!("{where_}: sending the fallback");
                        pending.fallback_sent = true;
                        pending.answer = Some(pending.fallback.clone());
                        pending.sent_on = self.send(route, pending.fallback.clone());
                    }
                }
            }
            AnswerStatus::TimedOut => {
                warn!(
                    "{where_}: TIMED_OUT: the referee played the fallback (strikes: {}, bank {} ms)",
                    result.strikes, result.time_bank_ms
                );
                if let Some(pending) = pending {
                    pending.closed = true;
                }
            }
            AnswerStatus::Stale | AnswerStatus::UnknownMatch | AnswerStatus::Unspecified => {
                info!(
                    "{where_}: {} {}",
                    result.status().as_str_name(),
                    result.reason
                );
                if let Some(pending) = pending {
                    pending.closed = true;
                }
            }
        }
    }
}

fn describe(status: &Status) -> String {
    let name = code_name(status.code());
    if status.message().is_empty() {
        name
    } else {
        format!("{name}: {}", status.message())
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Action, Card, End, MatchStart, Observation, Scout, Show};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Shows `legal_shows[1]` (not the fallback), after `delay`; counts its decisions.
    struct TestBot {
        delay: Duration,
        illegal: bool,
        calls: AtomicUsize,
    }

    impl TestBot {
        fn new(delay_ms: u64) -> Self {
            TestBot {
                delay: Duration::from_millis(delay_ms),
                illegal: false,
                calls: AtomicUsize::new(0),
            }
        }
    }

    impl Bot for TestBot {
        fn decide(&self, request: &DecisionRequest) -> Action {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.delay);
            if self.illegal {
                return Show {
                    start: 40,
                    length: 2,
                }
                .into();
            }
            request.legal_shows[1].into()
        }

        fn choose_rotation(&self, _request: &RotationRequest) -> bool {
            true
        }
    }

    fn config() -> Config {
        let mut config = Config::new("127.0.0.1:1", "token");
        config.safety_margin = Duration::from_millis(20);
        config
    }

    fn shared(bot: TestBot, config: &Config) -> Arc<Shared<TestBot>> {
        Arc::new(Shared::new(Arc::new(bot), config))
    }

    /// A main stream, connection `connection`.
    fn connect<B>(
        shared: &Arc<Shared<B>>,
        connection: u64,
    ) -> (OutboxGuard<B>, mpsc::UnboundedReceiver<BotMessage>) {
        connect_route(shared, &Route::Main, connection)
    }

    fn connect_route<B>(
        shared: &Arc<Shared<B>>,
        route: &Route,
        connection: u64,
    ) -> (OutboxGuard<B>, mpsc::UnboundedReceiver<BotMessage>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (
            OutboxGuard::install(shared, route, connection, sender),
            receiver,
        )
    }

    fn decision(request_id: u64, deadline_ms: u32) -> DecisionRequest {
        DecisionRequest {
            match_id: "m1".into(),
            request_id,
            observation: Some(Observation {
                hand: vec![Card { face: 3, other: 1 }, Card { face: 4, other: 2 }],
                ..Default::default()
            }),
            legal_shows: vec![
                Show {
                    start: 0,
                    length: 1,
                },
                Show {
                    start: 0,
                    length: 2,
                },
            ],
            deadline_ms,
            ..Default::default()
        }
    }

    fn shown(message: &BotMessage) -> (u64, Show) {
        match &message.body {
            Some(Outgoing::Action(ActionChoice {
                request_id,
                action:
                    Some(Action {
                        kind: Some(crate::proto::action::Kind::Show(show)),
                    }),
                ..
            })) => (*request_id, *show),
            other => panic!("expected a Show answer, got {other:?}"),
        }
    }

    async fn next(receiver: &mut mpsc::UnboundedReceiver<BotMessage>, ms: u64) -> BotMessage {
        timeout(Duration::from_millis(ms), receiver.recv())
            .await
            .expect("an answer in time")
            .expect("the outbox is open")
    }

    fn result(request_id: u64, status: AnswerStatus) -> AnswerResult {
        AnswerResult {
            match_id: "m1".into(),
            request_id,
            status: status.into(),
            ..Default::default()
        }
    }

    const SHOW_ONE: Show = Show {
        start: 0,
        length: 1,
    };
    const SHOW_TWO: Show = Show {
        start: 0,
        length: 2,
    };

    #[tokio::test]
    async fn answers_with_the_bots_choice() {
        let shared = shared(TestBot::new(0), &config());
        let (_guard, mut outbox) = connect(&shared, 1);
        shared.open(
            &Route::Main,
            Job::Decision(Box::new(decision(7, 1000))),
            Instant::now(),
        );
        assert_eq!(shown(&next(&mut outbox, 1000).await), (7, SHOW_TWO));
    }

    #[tokio::test]
    async fn answers_rotations() {
        let shared = shared(TestBot::new(0), &config());
        let (_guard, mut outbox) = connect(&shared, 1);
        let request = RotationRequest {
            match_id: "m1".into(),
            request_id: 3,
            deadline_ms: 1000,
            ..Default::default()
        };
        shared.open(&Route::Main, Job::Rotation(request.clone()), Instant::now());
        assert_eq!(
            next(&mut outbox, 1000).await,
            rotation_answer(&request, true)
        );
    }

    #[tokio::test]
    async fn falls_back_shortly_before_the_deadline() {
        let shared = shared(TestBot::new(600), &config());
        let (_guard, mut outbox) = connect(&shared, 1);
        let mut request = decision(8, 100);
        request.time_bank_ms = 50;
        let start = Instant::now();
        shared.open(&Route::Main, Job::Decision(Box::new(request)), start);
        assert_eq!(shown(&next(&mut outbox, 1000).await), (8, SHOW_ONE));
        let elapsed = start.elapsed();
        assert!(elapsed >= Duration::from_millis(120), "{elapsed:?}");
        assert!(elapsed < Duration::from_millis(150), "{elapsed:?}");
        // The bot's late answer is not sent as well.
        assert!(
            timeout(Duration::from_millis(500), outbox.recv())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn no_time_bank_falls_back_at_the_deadline() {
        let mut config = config();
        config.use_time_bank = false;
        let shared = shared(TestBot::new(600), &config);
        let (_guard, mut outbox) = connect(&shared, 1);
        let mut request = decision(8, 100);
        request.time_bank_ms = 10_000;
        let start = Instant::now();
        shared.open(&Route::Main, Job::Decision(Box::new(request)), start);
        assert_eq!(shown(&next(&mut outbox, 1000).await), (8, SHOW_ONE));
        assert!(start.elapsed() < Duration::from_millis(350));
    }

    #[tokio::test]
    async fn an_action_off_the_legal_lists_becomes_the_fallback() {
        let mut bot = TestBot::new(0);
        bot.illegal = true;
        let shared = shared(bot, &config());
        let (_guard, mut outbox) = connect(&shared, 1);
        shared.open(
            &Route::Main,
            Job::Decision(Box::new(decision(9, 1000))),
            Instant::now(),
        );
        assert_eq!(shown(&next(&mut outbox, 1000).await), (9, SHOW_ONE));
    }

    #[tokio::test]
    async fn illegal_answer_is_followed_by_the_fallback_once() {
        let shared = shared(TestBot::new(0), &config());
        let (_guard, mut outbox) = connect(&shared, 1);
        shared.open(
            &Route::Main,
            Job::Decision(Box::new(decision(10, 1000))),
            Instant::now(),
        );
        assert_eq!(shown(&next(&mut outbox, 1000).await), (10, SHOW_TWO));
        shared.on_answer_result(&Route::Main, &result(10, AnswerStatus::Illegal));
        assert_eq!(shown(&next(&mut outbox, 1000).await), (10, SHOW_ONE));
        shared.on_answer_result(&Route::Main, &result(10, AnswerStatus::Illegal));
        assert!(
            timeout(Duration::from_millis(100), outbox.recv())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_resent_request_is_answered_from_memory() {
        let shared = shared(TestBot::new(0), &config());
        let (guard, mut first) = connect(&shared, 1);
        shared.open(
            &Route::Main,
            Job::Decision(Box::new(decision(11, 1000))),
            Instant::now(),
        );
        assert_eq!(shown(&next(&mut first, 1000).await), (11, SHOW_TWO));
        drop(guard);
        // The stream broke before the referee saw the answer; it re-sends the request.
        let (_guard, mut second) = connect(&shared, 2);
        shared.open(
            &Route::Main,
            Job::Decision(Box::new(decision(11, 500))),
            Instant::now(),
        );
        assert_eq!(shown(&next(&mut second, 1000).await), (11, SHOW_TWO));
        shared.open(
            &Route::Main,
            Job::Decision(Box::new(decision(11, 500))),
            Instant::now(),
        );
        assert!(
            timeout(Duration::from_millis(100), second.recv())
                .await
                .is_err()
        );
        assert_eq!(shared.bot.calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn timed_out_request_drops_the_late_answer() {
        let mut config = config();
        config.send_fallback = false;
        let shared = shared(TestBot::new(200), &config);
        let (_guard, mut outbox) = connect(&shared, 1);
        shared.open(
            &Route::Main,
            Job::Decision(Box::new(decision(12, 50))),
            Instant::now(),
        );
        shared.on_answer_result(&Route::Main, &result(12, AnswerStatus::TimedOut));
        assert!(
            timeout(Duration::from_millis(400), outbox.recv())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn messages_are_handled_in_order_and_late_ones_ignored() {
        let mut runner = Runner::new(config(), Arc::new(TestBot::new(0)));
        let (_guard, mut outbox) = connect(&runner.shared, 1);
        let start = MatchStart {
            match_id: "m1".into(),
            num_players: 2,
            ..Default::default()
        };
        runner.dispatch(Incoming::MatchStart(start), Instant::now());
        runner.dispatch(
            Incoming::DecisionRequest(decision(13, 1000)),
            Instant::now(),
        );
        assert_eq!(shown(&next(&mut outbox, 1000).await), (13, SHOW_TWO));
        let end = MatchEnded {
            match_id: "m1".into(),
            ..Default::default()
        };
        runner.dispatch(Incoming::MatchEnded(end), Instant::now());
        assert_eq!(runner.shared.finished(), 1);
        // Later messages about the ended match are ignored.
        runner.dispatch(
            Incoming::DecisionRequest(decision(14, 1000)),
            Instant::now(),
        );
        assert!(
            timeout(Duration::from_millis(100), outbox.recv())
                .await
                .is_err()
        );
    }

    /// Records, in order, the hooks and requests it gets: `start m1`, `rotate m1 1`, ...
    #[derive(Default)]
    struct RecordingBot {
        log: Mutex<Vec<String>>,
    }

    impl RecordingBot {
        fn note(&self, entry: String) {
            lock(&self.log).push(entry);
        }

        /// The entries about `match_id`, in order.
        fn of(&self, match_id: &str) -> Vec<String> {
            let tag = format!(" {match_id}");
            lock(&self.log)
                .iter()
                .filter(|entry| entry.contains(&tag))
                .cloned()
                .collect()
        }
    }

    impl Bot for RecordingBot {
        fn decide(&self, request: &DecisionRequest) -> Action {
            self.note(format!(
                "decide {} {}",
                request.match_id, request.request_id
            ));
            request.legal_shows[1].into()
        }
        fn choose_rotation(&self, request: &RotationRequest) -> bool {
            self.note(format!(
                "rotate {} {}",
                request.match_id, request.request_id
            ));
            true
        }
        fn on_match_start(&self, start: &MatchStart) {
            self.note(format!("start {}", start.match_id));
        }
        fn on_match_end(&self, end: &MatchEnded) {
            self.note(format!("end {}", end.match_id));
        }
    }

    fn message(body: Incoming) -> RefereeMessage {
        RefereeMessage { body: Some(body) }
    }

    fn bundle(messages: Vec<RefereeMessage>) -> RefereeMessage {
        message(Incoming::Bundle(crate::proto::RefereeBundle { messages }))
    }

    /// The match and request an answer is for.
    fn answered(message: &BotMessage) -> (String, u64) {
        match &message.body {
            Some(Outgoing::Rotation(choice)) => (choice.match_id.clone(), choice.request_id),
            Some(Outgoing::Action(choice)) => (choice.match_id.clone(), choice.request_id),
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    /// Feeds `steps` to a fresh main-stream runner, each step's messages one by one or, when
    /// `bundled`, as one bundle that ends with `nested` (a bundle in the bundle), and returns
    /// each step's answers (sorted by match: different matches answer concurrently) once
    /// `expected[i]` of them came and no more followed, and the runner.
    async fn feed(
        steps: &[Vec<RefereeMessage>],
        expected: &[usize],
        bundled: bool,
        nested: &RefereeMessage,
    ) -> (Vec<Vec<BotMessage>>, Runner<RecordingBot>) {
        let mut runner = Runner::new(config(), Arc::new(RecordingBot::default()));
        let (_guard, mut outbox) = connect(&runner.shared, 1);
        let mut answers = Vec::new();
        for (step, &count) in steps.iter().zip(expected) {
            if bundled {
                let mut messages = step.clone();
                messages.push(nested.clone());
                runner.receive(bundle(messages), Instant::now());
            } else {
                for single in step {
                    runner.receive(single.clone(), Instant::now());
                }
            }
            let mut got = Vec::new();
            for _ in 0..count {
                got.push(next(&mut outbox, 1000).await);
            }
            assert!(
                timeout(Duration::from_millis(150), outbox.recv())
                    .await
                    .is_err(),
                "no answer beyond the {count} expected"
            );
            got.sort_by_key(answered);
            answers.push(got);
        }
        (answers, runner)
    }

    #[tokio::test]
    async fn a_bundle_is_handled_as_its_messages_sent_alone() {
        let start = |match_id: &str| {
            message(Incoming::MatchStart(MatchStart {
                match_id: match_id.into(),
                num_players: 2,
                ..Default::default()
            }))
        };
        let rotation = RotationRequest {
            match_id: "m1".into(),
            request_id: 1,
            deadline_ms: 2000,
            ..Default::default()
        };
        let decide = |match_id: &str, request_id| {
            let mut request = decision(request_id, 2000);
            request.match_id = match_id.into();
            message(Incoming::DecisionRequest(request))
        };
        let end = |match_id: &str| {
            message(Incoming::MatchEnded(MatchEnded {
                match_id: match_id.into(),
                ..Default::default()
            }))
        };
        let steps = [
            // Two matches start, each with a request.
            vec![
                start("m1"),
                message(Incoming::RotationRequest(rotation.clone())),
                start("m2"),
                decide("m2", 5),
            ],
            // m2 ends, so its request after the end is ignored; m1 moves on.
            vec![end("m2"), decide("m2", 6), decide("m1", 2)],
        ];
        let expected = [2, 1];
        // Only in the bundles, and ignored there: a bundle inside a bundle.
        let nested = bundle(vec![decide("m1", 9), decide("m3", 1)]);
        let (alone, alone_runner) = feed(&steps, &expected, false, &nested).await;
        let (bundled, runner) = feed(&steps, &expected, true, &nested).await;
        assert_eq!(bundled, alone);
        let mut m2_answer = decision(5, 2000);
        m2_answer.match_id = "m2".into();
        assert_eq!(
            bundled[0],
            vec![
                rotation_answer(&rotation, true),
                decision_answer(&m2_answer, SHOW_TWO.into())
            ]
        );
        assert_eq!(shown(&bundled[1][0]), (2, SHOW_TWO));
        assert_eq!(answered(&bundled[1][0]).0, "m1");
        // Each match saw its messages in the order of the bundle, as when they came alone.
        let bot = &runner.shared.bot;
        assert_eq!(bot.of("m1"), ["start m1", "rotate m1 1", "decide m1 2"]);
        assert_eq!(bot.of("m2"), ["start m2", "decide m2 5", "end m2"]);
        for match_id in ["m1", "m2"] {
            assert_eq!(bot.of(match_id), alone_runner.shared.bot.of(match_id));
        }
        assert!(bot.of("m3").is_empty());
        assert_eq!(runner.shared.finished(), 1);
        assert_eq!(alone_runner.shared.finished(), 1);
    }

    #[tokio::test]
    async fn a_bundles_requests_count_from_the_bundles_arrival() {
        // The bot never answers in time: the fallback is due shortly before deadline_ms after
        // the bundle arrived, not after the moment its request was taken out of it.
        let mut runner = Runner::new(config(), Arc::new(TestBot::new(1000)));
        let (_guard, mut outbox) = connect(&runner.shared, 1);
        let start = MatchStart {
            match_id: "m1".into(),
            num_players: 2,
            ..Default::default()
        };
        let arrived = Instant::now() - Duration::from_millis(300);
        runner.receive(
            bundle(vec![
                message(Incoming::MatchStart(start)),
                message(Incoming::DecisionRequest(decision(4, 400))),
            ]),
            arrived,
        );
        let unpacked = Instant::now();
        assert_eq!(shown(&next(&mut outbox, 1000).await), (4, SHOW_ONE));
        assert!(arrived.elapsed() >= Duration::from_millis(380));
        let waited = unpacked.elapsed();
        assert!(waited < Duration::from_millis(250), "{waited:?}");
    }

    #[test]
    fn hello_asks_for_a_lean_stream_unless_events_are_wanted() {
        struct Watcher;
        impl Bot for Watcher {
            fn decide(&self, request: &DecisionRequest) -> Action {
                fallback_action(request)
            }
            fn wants_public_events(&self) -> bool {
                true
            }
        }
        let lean = Runner::new(config(), Arc::new(TestBot::new(0)))
            .hello
            .clone();
        assert!(lean.lean);
        let mut full = config();
        full.public_events = true;
        let full = Runner::new(full, Arc::new(TestBot::new(0))).hello.clone();
        assert!(!full.lean);
        let watcher = Runner::new(config(), Arc::new(Watcher)).hello.clone();
        assert!(!watcher.lean);
        // Bundles are accepted, lean or not.
        for hello in [lean, full, watcher] {
            assert!(hello.accepts_bundles, "{hello:?}");
        }
    }

    #[tokio::test]
    async fn a_lean_match_needs_no_accepted_results() {
        // No ACCEPTED, no PublicEvent: the next request (or the round's end) closes a request.
        // A rejection keeps it open and gets the fallback; a stray verdict on a request the
        // match has moved past gets nothing.
        let mut runner = Runner::new(config(), Arc::new(TestBot::new(0)));
        let (_guard, mut outbox) = connect(&runner.shared, 1);
        let now = Instant::now;
        let rotation = |request_id| RotationRequest {
            match_id: "m1".into(),
            request_id,
            deadline_ms: 2000,
            ..Default::default()
        };
        let start = MatchStart {
            match_id: "m1".into(),
            num_players: 2,
            ..Default::default()
        };
        runner.dispatch(Incoming::MatchStart(start), now());
        runner.dispatch(Incoming::RotationRequest(rotation(1)), now());
        assert_eq!(
            next(&mut outbox, 1000).await,
            rotation_answer(&rotation(1), true)
        );
        runner.dispatch(Incoming::DecisionRequest(decision(2, 2000)), now());
        assert_eq!(shown(&next(&mut outbox, 1000).await), (2, SHOW_TWO));
        runner.dispatch(
            Incoming::AnswerResult(result(1, AnswerStatus::Illegal)),
            now(),
        );
        runner.dispatch(
            Incoming::AnswerResult(result(2, AnswerStatus::Illegal)),
            now(),
        );
        assert_eq!(shown(&next(&mut outbox, 1000).await), (2, SHOW_ONE));
        runner.dispatch(Incoming::DecisionRequest(decision(3, 2000)), now());
        assert_eq!(shown(&next(&mut outbox, 1000).await), (3, SHOW_TWO));
        let round = crate::proto::RoundEnded {
            match_id: "m1".into(),
            ..Default::default()
        };
        runner.dispatch(Incoming::RoundEnded(round), now());
        runner.dispatch(
            Incoming::AnswerResult(result(3, AnswerStatus::Illegal)),
            now(),
        );
        runner.dispatch(Incoming::RotationRequest(rotation(4)), now());
        assert_eq!(
            next(&mut outbox, 1000).await,
            rotation_answer(&rotation(4), true)
        );
        let end = MatchEnded {
            match_id: "m1".into(),
            ..Default::default()
        };
        runner.dispatch(Incoming::MatchEnded(end), now());
        assert!(
            timeout(Duration::from_millis(200), outbox.recv())
                .await
                .is_err()
        );
        assert_eq!(runner.shared.bot.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn goodbye_delay_is_retry_after_plus_a_little_jitter() {
        for _ in 0..100 {
            let delay = goodbye_delay(800).as_millis();
            assert!((800..=980).contains(&delay), "{delay}");
            assert!(goodbye_delay(0).as_millis() <= 100);
        }
    }

    #[tokio::test]
    async fn a_goodbye_is_noted() {
        let mut runner = Runner::new(config(), Arc::new(TestBot::new(0)));
        let goodbye = Goodbye {
            reason: crate::proto::GoodbyeReason::Shutdown.into(),
            reconnect: true,
            retry_after_ms: 800,
            ..Default::default()
        };
        runner.dispatch(Incoming::Goodbye(goodbye.clone()), Instant::now());
        assert_eq!(runner.goodbye, Some(goodbye));
    }

    fn ticket(match_id: &str, ticket: &str) -> Option<(String, String)> {
        Some((match_id.into(), ticket.into()))
    }

    #[test]
    fn tickets_are_kept_per_node_until_their_matches_end() {
        let mut tickets = Tickets::default();
        assert!(
            tickets.assign("node-a:1", "m1", "t1"),
            "the first match opens a stream"
        );
        assert!(
            !tickets.assign("node-a:1", "m2", "t2"),
            "later ones come on it"
        );
        assert!(
            tickets.assign("node-b:1", "m3", "t3"),
            "another node, another stream"
        );
        assert_eq!(tickets.newest("node-a:1"), ticket("m2", "t2"));
        // A fresh ticket for a match replaces its older one and is the newest.
        assert!(!tickets.assign("node-a:1", "m1", "t1b"));
        assert_eq!(tickets.newest("node-a:1"), ticket("m1", "t1b"));
        tickets.match_ended("node-a:1", "m1");
        assert_eq!(tickets.newest("node-a:1"), ticket("m2", "t2"));
        // A refused ticket is dropped; the node's other tickets are untouched.
        tickets.refused("node-a:1", "t2");
        assert!(!tickets.holds("node-a:1"));
        assert!(tickets.holds("node-b:1"));
        // No ticket left: the stream is let go, and the next assignment opens a new one.
        assert!(
            !tickets.assign("node-a:1", "m4", "t4"),
            "still streaming until let go"
        );
        tickets.match_ended("node-a:1", "m4");
        assert_eq!(tickets.newest("node-a:1"), None);
        assert!(tickets.assign("node-a:1", "m5", "t5"));
        assert_eq!(tickets.newest("node-b:1"), ticket("m3", "t3"));
    }

    #[tokio::test]
    async fn answers_go_back_on_the_stream_that_carried_the_request() {
        let shared = shared(TestBot::new(0), &config());
        let node = Route::Node("node-a:1".into());
        let (_main_guard, mut main) = connect(&shared, 1);
        let (_node_guard, mut on_node) = connect_route(&shared, &node, 2);
        let mut request = decision(20, 1000);
        request.match_id = "on-node".into();
        shared.open(&node, Job::Decision(Box::new(request)), Instant::now());
        shared.open(
            &Route::Main,
            Job::Decision(Box::new(decision(21, 1000))),
            Instant::now(),
        );
        assert_eq!(shown(&next(&mut on_node, 1000).await), (20, SHOW_TWO));
        assert_eq!(shown(&next(&mut main, 1000).await), (21, SHOW_TWO));
        let mut rejected = result(20, AnswerStatus::Illegal);
        rejected.match_id = "on-node".into();
        shared.on_answer_result(&node, &rejected);
        assert_eq!(shown(&next(&mut on_node, 1000).await), (20, SHOW_ONE));
        assert!(
            timeout(Duration::from_millis(100), main.recv())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_match_ended_on_a_node_stream_drops_its_ticket_but_keeps_the_stream() {
        let main = Runner::new(config(), Arc::new(TestBot::new(0)));
        let address = "node-a:1";
        let mut node = Runner::on_route(
            Arc::clone(&main.shared),
            Route::Node(address.into()),
            main.hello.clone(),
            None,
        );
        {
            let mut tickets = lock(&main.shared.tickets);
            assert!(tickets.assign(address, "m1", "t1"));
            assert!(!tickets.assign(address, "m2", "t2"));
        }
        let start = MatchStart {
            match_id: "m1".into(),
            num_players: 2,
            ..Default::default()
        };
        node.dispatch(Incoming::MatchStart(start), Instant::now());
        let end = MatchEnded {
            match_id: "m1".into(),
            ..Default::default()
        };
        node.dispatch(Incoming::MatchEnded(end), Instant::now());
        assert_eq!(main.shared.finished(), 1, "counted with the main stream's");
        let mut tickets = lock(&main.shared.tickets);
        assert_eq!(tickets.newest(address), ticket("m2", "t2"));
        tickets.match_ended(address, "m2");
        assert!(!tickets.holds(address));
        assert!(
            !tickets.assign(address, "m3", "t3"),
            "the stream stays for later matches"
        );
    }

    #[tokio::test]
    async fn an_unreachable_node_is_given_up_after_the_cutoff() {
        // A port nothing listens on: every attempt there fails.
        let address = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("its address").to_string()
        };
        let cutoff = Duration::from_millis(600);
        let mut shared = Shared::new(Arc::new(TestBot::new(0)), &config());
        shared.node_cutoff = cutoff;
        let mut main = Runner::on_route(Arc::new(shared), Route::Main, Hello::default(), None);
        let assign = |match_id: &str, ticket: &str| {
            Incoming::Assignment(MatchAssignment {
                match_id: match_id.into(),
                address: address.clone(),
                ticket: ticket.into(),
                tls: false,
            })
        };
        let start = Instant::now();
        main.dispatch(assign("m1", "t1"), start);
        main.dispatch(assign("m2", "t2"), start);
        assert!(lock(&main.shared.tickets).holds(&address));
        let mut streams = std::mem::take(&mut *lock(&main.shared.node_streams));
        assert_eq!(streams.len(), 1, "one link for the node's two matches");
        timeout(cutoff + Duration::from_secs(5), streams.join_next())
            .await
            .expect("the link ends soon after the cutoff")
            .expect("it was running")
            .expect("it did not panic");
        let elapsed = start.elapsed();
        assert!(elapsed >= cutoff, "not before the cutoff: {elapsed:?}");
        let mut tickets = lock(&main.shared.tickets);
        assert!(!tickets.holds(&address), "both tickets dropped");
        assert!(!tickets.nodes.contains_key(&address), "the node is let go");
        assert!(
            tickets.assign(&address, "m3", "t3"),
            "a later assignment there starts afresh"
        );
    }

    #[test]
    fn backoff_doubles_up_to_five_seconds_with_jitter() {
        for attempt in 0..40 {
            let step = (200u64 << attempt.min(16)).min(5000);
            let delay = backoff_delay(attempt).as_millis() as u64;
            assert!(delay >= step / 2 && delay <= step, "{attempt}: {delay}");
        }
    }

    #[test]
    fn rejections_are_not_retried() {
        assert!(is_rejection(&Status::unauthenticated("unknown bot token")));
        assert!(is_rejection(&Status::invalid_argument("expected hello")));
        assert!(is_rejection(&Status::failed_precondition("protocol")));
        assert!(is_rejection(&Status::aborted(
            "superseded by a newer connection with the same token"
        )));
        assert!(!is_rejection(&Status::aborted("something else")));
        assert!(!is_rejection(&Status::unavailable("referee restarting")));
        assert!(!is_rejection(&Status::deadline_exceeded("no hello")));
        assert!(!is_rejection(&Status::cancelled("")));
    }

    #[test]
    fn status_names_are_canonical() {
        assert_eq!(code_name(Code::Unauthenticated), "UNAUTHENTICATED");
        assert_eq!(code_name(Code::FailedPrecondition), "FAILED_PRECONDITION");
        let error = Error::Rejected {
            code: Code::Unauthenticated,
            message: "unknown bot token".into(),
        };
        assert_eq!(
            error.to_string(),
            "the referee rejected the connection (UNAUTHENTICATED): unknown bot token"
        );
    }

    #[test]
    fn scout_fallback_matches_the_first_listed_scout() {
        let mut request = decision(1, 1000);
        request.legal_shows.clear();
        let scout = Scout {
            end: End::Left.into(),
            flip: false,
            insert_at: 0,
        };
        request.legal_scouts = vec![scout];
        assert_eq!(fallback_action(&request), scout.into());
    }
}
