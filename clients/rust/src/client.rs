//! Connects a [`Bot`] to a referee and plays until stopped.
//!
//! One channel and one `Arena.Play` stream carry every match the bot is seated in. The stream
//! reader routes each message to a task per match, so a match sees its hooks and requests in
//! the referee's order while matches proceed independently. Every request is answered by its
//! own task, which runs the bot on a blocking thread and sends the referee's fallback when the
//! bot has not answered shortly before `deadline_ms + time_bank_ms` (or panicked, or returned
//! an action that is not legal). Answers of all matches go through one queue into the stream.
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
//! A stream the referee ends on purpose carries a `Goodbye` last (PROTOCOL.md §10.1), which
//! overrides the status the call ends with: `reconnect: false` ends [`run`] with `Ok`;
//! `reconnect: true` reconnects after `retry_after_ms` plus a little jitter
//! ([`goodbye_delay`]), which is not a failure and does not grow the backoff.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use log::{debug, error, info, warn};
use tokio::sync::mpsc;
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
    MatchEnded, RotationChoice, RotationRequest, Welcome,
};

/// The protocol version this client speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// First reconnect delay (before jitter).
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(200);
/// Longest reconnect delay (before jitter).
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// HTTP/2 keepalive ping interval; the referee permits one every 10 s or more.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(25);

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
/// back (all `Ok`), or the referee rejects the bot.
pub async fn run<B: Bot>(
    config: Config,
    bot: B,
    shutdown: impl Future<Output = ()>,
) -> Result<Summary, Error> {
    let endpoint = endpoint(&config)?;
    let mut runner = Runner::new(config, Arc::new(bot));
    let mut shutdown = pin!(shutdown);
    let mut attempt = 0u32;
    loop {
        let problem = match runner.session(&endpoint, shutdown.as_mut()).await {
            SessionEnd::Stopped => break,
            SessionEnd::Rejected(status) => {
                return Err(Error::Rejected {
                    code: status.code(),
                    message: runner.rejection_message(&status),
                });
            }
            SessionEnd::Goodbye(goodbye) => {
                if !goodbye.reconnect {
                    info!("the referee does not want the bot back; stopping");
                    break;
                }
                attempt = 0; // not a failure: the backoff starts afresh
                let delay = goodbye_delay(goodbye.retry_after_ms);
                info!(
                    "reconnecting in {:.2} s, as the referee asked",
                    delay.as_secs_f64()
                );
                tokio::select! {
                    () = shutdown.as_mut() => break,
                    () = sleep(delay) => {}
                }
                continue;
            }
            SessionEnd::Lost(problem) => problem,
        };
        if runner.welcomed {
            attempt = 0;
        }
        let delay = backoff_delay(attempt);
        attempt = attempt.saturating_add(1);
        warn!(
            "connection lost ({problem}); reconnecting in {:.2} s",
            delay.as_secs_f64()
        );
        tokio::select! {
            () = shutdown.as_mut() => break,
            () = sleep(delay) => {}
        }
    }
    Ok(Summary {
        matches_finished: runner.finished,
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

fn endpoint(config: &Config) -> Result<Endpoint, Error> {
    let tls = config.uses_tls();
    let uri = if config.address.contains("://") {
        config.address.clone()
    } else {
        format!(
            "{}://{}",
            if tls { "https" } else { "http" },
            config.address
        )
    };
    let endpoint = Endpoint::from_shared(uri)
        .map_err(|e| Error::Config(format!("bad referee address {:?}: {e}", config.address)))?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true);
    if tls {
        with_tls(endpoint, config)
    } else {
        Ok(endpoint)
    }
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

/// State that lives across reconnects, owned by the stream reader.
struct Runner<B: Bot> {
    shared: Arc<Shared<B>>,
    hello: Hello,
    token: String,
    max_matches: Option<usize>,
    connection: u64,
    welcomed: bool,
    last_error: Option<String>,
    /// The current stream's `Goodbye`, once the referee sent it.
    goodbye: Option<Goodbye>,
    matches: HashMap<String, mpsc::UnboundedSender<(Instant, Incoming)>>,
    ended: HashSet<String>,
    ended_order: VecDeque<String>,
    finished: usize,
}

impl<B: Bot> Runner<B> {
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
            ..Default::default()
        };
        Runner {
            hello,
            token: config.token.clone(),
            max_matches: config.max_matches,
            shared: Arc::new(Shared::new(bot, &config)),
            connection: 0,
            welcomed: false,
            last_error: None,
            goodbye: None,
            matches: HashMap::new(),
            ended: HashSet::new(),
            ended_order: VecDeque::new(),
            finished: 0,
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
        self.max_matches.is_some_and(|max| self.finished >= max)
    }

    /// One `Play` stream, from Hello until it ends or `shutdown` completes.
    async fn session<S>(&mut self, endpoint: &Endpoint, mut shutdown: Pin<&mut S>) -> SessionEnd
    where
        S: Future<Output = ()>,
    {
        self.connection += 1;
        self.welcomed = false;
        self.last_error = None;
        self.goodbye = None;
        debug!(
            "connecting to {} (connection {})",
            endpoint.uri(),
            self.connection
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
        let _outbox = OutboxGuard::install(&self.shared, self.connection, sender);
        let mut request = Request::new(UnboundedReceiverStream::new(receiver));
        match MetadataValue::try_from(format!("Bearer {}", self.token)) {
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
        loop {
            let message = tokio::select! {
                () = shutdown.as_mut() => break,
                message = incoming.message() => message,
            };
            match message {
                Ok(Some(message)) => match message.body {
                    Some(body) => self.dispatch(body, Instant::now()),
                    None => {
                        warn!("ignoring a message from the referee with no body this client knows")
                    }
                },
                Ok(None) => return SessionEnd::Lost("the referee ended the stream".into()),
                Err(status) => return self.ended_with(status),
            }
            if self.goodbye.is_some() {
                // The referee ends the call next, whatever its status: half-close and let it.
                break;
            }
            if self.max_matches_reached() {
                info!("played {} match(es); stopping", self.finished);
                break;
            }
        }
        // Stopping: half-close after the answers already queued, and give the referee a
        // moment to end the call on its side.
        self.shared.close_outbox();
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

    fn dispatch(&mut self, body: Incoming, received: Instant) {
        match &body {
            Incoming::Welcome(welcome) => return self.on_welcome(welcome),
            Incoming::Goodbye(goodbye) => return self.on_goodbye(goodbye.clone()),
            Incoming::Error(error) => {
                let code = error.code().as_str_name();
                warn!("protocol error from the referee: {code}: {}", error.message);
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
        let is_end = matches!(body, Incoming::MatchEnded(_));
        let worker = self.matches.entry(match_id.clone()).or_insert_with(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(play_match(
                Arc::clone(&self.shared),
                match_id.clone(),
                receiver,
            ));
            sender
        });
        let _ = worker.send((received, body));
        if is_end {
            self.matches.remove(&match_id);
            self.remember_ended(match_id);
            self.finished += 1;
        }
    }

    fn on_welcome(&mut self, welcome: &Welcome) {
        self.welcomed = true;
        info!(
            "connected as {:?} (session {}{})",
            welcome.bot_name,
            welcome.session_id,
            if welcome.resumed { ", resumed" } else { "" }
        );
        if welcome.protocol_version != PROTOCOL_VERSION {
            warn!(
                "the referee speaks protocol {}, this client {PROTOCOL_VERSION}",
                welcome.protocol_version
            );
        }
        if !welcome.resumed && !self.matches.is_empty() {
            // The reconnect came after the grace: the referee forfeited those seats.
            let lost: Vec<String> = self.matches.drain().map(|(id, _)| id).collect();
            warn!(
                "the referee did not resume {} match(es): {}",
                lost.len(),
                lost.join(", ")
            );
            for match_id in lost {
                self.shared.forget_match(&match_id);
                self.remember_ended(match_id);
            }
        }
    }

    /// The referee closes the stream on purpose (PROTOCOL.md §10.1); `run` decides what follows.
    fn on_goodbye(&mut self, goodbye: Goodbye) {
        let then = if goodbye.reconnect {
            format!("reconnect in {} ms", goodbye.retry_after_ms)
        } else {
            "do not reconnect".to_owned()
        };
        info!(
            "goodbye from the referee ({}, {then}): {}",
            goodbye.reason().as_str_name(),
            if goodbye.message.is_empty() {
                "no message"
            } else {
                goodbye.message.as_str()
            }
        );
        self.goodbye = Some(goodbye);
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
        self.shared.close_outbox();
    }
}

/// The messages of one match, in order: hooks run inline, requests get their own task.
async fn play_match<B: Bot>(
    shared: Arc<Shared<B>>,
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
                shared.open(Job::Rotation(request), received);
            }
            Incoming::DecisionRequest(request) => {
                shared.open(Job::Decision(Box::new(request)), received);
            }
            Incoming::AnswerResult(result) => {
                shared.on_answer_result(&result);
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
            // Welcome, Goodbye and ProtocolError are the reader's; nothing else reaches here.
            _ => {}
        }
    }
}

/// The match a message is about; `None` for the connection's own messages (Welcome, Goodbye,
/// ProtocolError) and for bodies this client does not handle.
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

fn log_match_end(end: &MatchEnded) {
    info!(
        "match {}: ended, totals {:?}, ranks {:?}{}",
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

/// State shared by the reader, the match tasks and the answer tasks.
struct Shared<B> {
    bot: Arc<B>,
    margin: Duration,
    use_time_bank: bool,
    send_fallback: bool,
    slow: Duration,
    outbox: Mutex<Option<Outbox>>,
    requests: Mutex<HashMap<RequestKey, Pending>>,
    /// Each match's newest request id: the only request of the match that can still be open.
    /// Locked only while `requests` is.
    latest: Mutex<HashMap<String, u64>>,
}

impl<B> Shared<B> {
    fn close_outbox(&self) {
        *lock(&self.outbox) = None;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Installs a connection's outbox and removes it again when dropped.
struct OutboxGuard<B> {
    shared: Arc<Shared<B>>,
    connection: u64,
}

impl<B> OutboxGuard<B> {
    fn install(
        shared: &Arc<Shared<B>>,
        connection: u64,
        sender: mpsc::UnboundedSender<BotMessage>,
    ) -> Self {
        *lock(&shared.outbox) = Some(Outbox { connection, sender });
        OutboxGuard {
            shared: Arc::clone(shared),
            connection,
        }
    }
}

impl<B> Drop for OutboxGuard<B> {
    fn drop(&mut self) {
        let mut outbox = lock(&self.shared.outbox);
        if outbox
            .as_ref()
            .is_some_and(|o| o.connection == self.connection)
        {
            *outbox = None;
        }
    }
}

impl<B: Bot> Shared<B> {
    fn new(bot: Arc<B>, config: &Config) -> Self {
        Shared {
            bot,
            margin: config.safety_margin,
            use_time_bank: config.use_time_bank,
            send_fallback: config.send_fallback,
            slow: config.slow,
            outbox: Mutex::new(None),
            requests: Mutex::new(HashMap::new()),
            latest: Mutex::new(HashMap::new()),
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

    /// A request arrived: put it to the bot, or, when the referee re-sends one after a
    /// reconnect, re-send the answer given already.
    fn open(self: &Arc<Self>, job: Job, received: Instant) {
        let key = job.key();
        let mut requests = lock(&self.requests);
        if let Some(pending) = requests.get_mut(&key) {
            let connection = lock(&self.outbox).as_ref().map(|o| o.connection);
            match &pending.answer {
                Some(answer) if !pending.closed && pending.sent_on != connection => {
                    info!(
                        "match {}: re-sending the answer to request {}",
                        key.0, key.1
                    );
                    let answer = answer.clone();
                    pending.sent_on = self.send(answer);
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
        tokio::spawn(Arc::clone(self).answer(key, job, expires_at));
    }

    /// Asks the bot, and answers with its choice or, when it is late or fails, the fallback.
    async fn answer(self: Arc<Self>, key: RequestKey, job: Job, expires_at: Instant) {
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
                    return self.answer_with(&key, None);
                }
            }
        } else {
            thinking.await
        };
        match outcome {
            Ok(Ok(answer)) => self.answer_with(&key, Some(answer)),
            Ok(Err(problem)) => {
                warn!(
                    "match {}, request {}: {problem}; sending the fallback",
                    key.0, key.1
                );
                self.answer_with(&key, None);
            }
            Err(panic) => {
                error!(
                    "match {}, request {}: the bot's {what} panicked ({panic}); sending the \
                     fallback",
                    key.0, key.1
                );
                self.answer_with(&key, None);
            }
        }
    }

    /// Sends `answer` (or the fallback, for `None`) unless the request is closed already.
    fn answer_with(&self, key: &RequestKey, answer: Option<BotMessage>) {
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
        pending.sent_on = self.send(answer);
        if pending.sent_on.is_none() {
            info!(
                "match {}, request {}: not connected; the answer goes out when the referee asks \
                 again",
                key.0, key.1
            );
        }
    }

    /// Queues `message` on the live stream; returns that stream's connection number.
    fn send(&self, message: BotMessage) -> Option<u64> {
        let outbox = lock(&self.outbox);
        let outbox = outbox.as_ref()?;
        outbox.sender.send(message).ok()?;
        Some(outbox.connection)
    }

    fn on_answer_result(&self, result: &AnswerResult) {
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
                        pending.sent_on = self.send(pending.fallback.clone());
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

    fn connect<B>(
        shared: &Arc<Shared<B>>,
        connection: u64,
    ) -> (OutboxGuard<B>, mpsc::UnboundedReceiver<BotMessage>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (OutboxGuard::install(shared, connection, sender), receiver)
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
        shared.open(Job::Decision(Box::new(decision(7, 1000))), Instant::now());
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
        shared.open(Job::Rotation(request.clone()), Instant::now());
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
        shared.open(Job::Decision(Box::new(request)), start);
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
        shared.open(Job::Decision(Box::new(request)), start);
        assert_eq!(shown(&next(&mut outbox, 1000).await), (8, SHOW_ONE));
        assert!(start.elapsed() < Duration::from_millis(350));
    }

    #[tokio::test]
    async fn an_action_off_the_legal_lists_becomes_the_fallback() {
        let mut bot = TestBot::new(0);
        bot.illegal = true;
        let shared = shared(bot, &config());
        let (_guard, mut outbox) = connect(&shared, 1);
        shared.open(Job::Decision(Box::new(decision(9, 1000))), Instant::now());
        assert_eq!(shown(&next(&mut outbox, 1000).await), (9, SHOW_ONE));
    }

    #[tokio::test]
    async fn illegal_answer_is_followed_by_the_fallback_once() {
        let shared = shared(TestBot::new(0), &config());
        let (_guard, mut outbox) = connect(&shared, 1);
        shared.open(Job::Decision(Box::new(decision(10, 1000))), Instant::now());
        assert_eq!(shown(&next(&mut outbox, 1000).await), (10, SHOW_TWO));
        shared.on_answer_result(&result(10, AnswerStatus::Illegal));
        assert_eq!(shown(&next(&mut outbox, 1000).await), (10, SHOW_ONE));
        shared.on_answer_result(&result(10, AnswerStatus::Illegal));
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
        shared.open(Job::Decision(Box::new(decision(11, 1000))), Instant::now());
        assert_eq!(shown(&next(&mut first, 1000).await), (11, SHOW_TWO));
        drop(guard);
        // The stream broke before the referee saw the answer; it re-sends the request.
        let (_guard, mut second) = connect(&shared, 2);
        shared.open(Job::Decision(Box::new(decision(11, 500))), Instant::now());
        assert_eq!(shown(&next(&mut second, 1000).await), (11, SHOW_TWO));
        shared.open(Job::Decision(Box::new(decision(11, 500))), Instant::now());
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
        shared.open(Job::Decision(Box::new(decision(12, 50))), Instant::now());
        shared.on_answer_result(&result(12, AnswerStatus::TimedOut));
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
        assert_eq!(runner.finished, 1);
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
        assert!(Runner::new(config(), Arc::new(TestBot::new(0))).hello.lean);
        let mut full = config();
        full.public_events = true;
        assert!(!Runner::new(full, Arc::new(TestBot::new(0))).hello.lean);
        assert!(!Runner::new(config(), Arc::new(Watcher)).hello.lean);
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
