package org.scoutarena.client;

import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.MetadataUtils;
import java.io.IOException;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.scoutarena.scout.v1.Action;
import org.scoutarena.scout.v1.ActionChoice;
import org.scoutarena.scout.v1.AnswerResult;
import org.scoutarena.scout.v1.ArenaGrpc;
import org.scoutarena.scout.v1.BotMessage;
import org.scoutarena.scout.v1.DecisionRequest;
import org.scoutarena.scout.v1.Goodbye;
import org.scoutarena.scout.v1.Hello;
import org.scoutarena.scout.v1.MatchAssignment;
import org.scoutarena.scout.v1.MatchEndStatus;
import org.scoutarena.scout.v1.MatchEnded;
import org.scoutarena.scout.v1.MatchStart;
import org.scoutarena.scout.v1.Probation;
import org.scoutarena.scout.v1.ProtocolError;
import org.scoutarena.scout.v1.PublicEvent;
import org.scoutarena.scout.v1.RefereeMessage;
import org.scoutarena.scout.v1.RotationChoice;
import org.scoutarena.scout.v1.RotationRequest;
import org.scoutarena.scout.v1.RoundEnded;
import org.scoutarena.scout.v1.Welcome;

/**
 * Plays a {@link ScoutBot} on a Scout Arena referee over its {@code Arena/Play} stream (and one
 * more per referee node it is assigned to, below).
 *
 * <p>A reader (gRPC's callback thread) routes every message by {@code match_id}; each match has
 * a serial queue on a shared thread pool, so a slow decision in one match never delays reading or
 * another match. Every request gets a deadline guard: if the bot has not answered shortly before
 * {@code deadline_ms + time_bank_ms}, the documented fallback (always legal) is sent instead. When
 * the stream is lost the client reconnects with exponential backoff (0.2 s doubling to 5 s, with
 * jitter); the referee then resumes the running matches and re-sends open requests with the same
 * {@code request_id}, which are answered without asking the bot twice. Rejections a retry cannot
 * fix end {@link #run()} with {@link ConnectionRejectedException}.
 *
 * <p>The client asks for a lean stream ({@code Hello.lean}, PROTOCOL.md §3.6.1) unless
 * {@link ClientConfig#publicEvents()} or {@link ScoutBot#wantsPublicEvents()} asks for events:
 * the referee then sends no {@code PublicEvent} and no {@code AnswerResult} for an accepted
 * answer. Nothing here waits for {@code ACCEPTED}: an answered request stays open until a verdict
 * closes it ({@code TIMED_OUT}) or the match moves on (its next request, its {@code RoundEnded},
 * its {@code MatchEnded}); a rejection ({@code ILLEGAL}, {@code MALFORMED}) keeps it open.
 *
 * <p>The {@code Hello} also sets {@code accepts_bundles} (PROTOCOL.md §3.6.2): the referee may
 * then send several queued messages in one {@code RefereeMessage.bundle}. The reader unpacks it
 * and handles each inner message, in order, exactly as if it had come alone, with the bundle's
 * arrival time as its own; a bundle inside a bundle is ignored (and logged). The client sends no
 * {@code BotMessage.bundle}: every answer goes out on its own.
 *
 * <p>A main stream the referee ends on purpose carries a {@code Goodbye} last (PROTOCOL.md §10.1),
 * which overrides the status the call ends with: {@code reconnect: false} makes {@link #run()}
 * return normally; {@code reconnect: true} reconnects after {@code retry_after_ms} plus a little
 * jitter ({@link Backoff#afterGoodbye}), which is not a failure and does not grow the backoff.
 *
 * <p>A ladder with referee nodes sends a {@code MatchAssignment} on the main stream (PROTOCOL.md
 * §3.8): the client then opens a {@code Play} stream to the node, with the ticket as bearer token
 * and the same {@code Hello}, unless it holds one there already, and plays the node's matches on
 * it exactly as on the main stream; every answer goes back on the stream that carried its request.
 * The tickets of unfinished matches are kept per node ({@code NodeTickets}): a lost node stream
 * is reopened after the usual backoff with the newest of them (a refused one is dropped, the next
 * tried), and let go when none is left. A node that cannot be reached for
 * {@link #NODE_UNREACHABLE_LIMIT} in a row (no stream there welcomed for that long) is gone: its
 * tickets are dropped and its link let go the same way (a later assignment there starts afresh).
 * A node stream's end, or its {@code Goodbye} whatever it says, never stops the bot or touches
 * the main stream: only the main stream's does.
 */
public final class ArenaClient {

  /** The protocol version this client speaks. */
  public static final int PROTOCOL_VERSION = 1;
  /**
   * How long a referee node may stay unreachable (no stream there welcomed) before the client
   * drops its tickets and lets it go (PROTOCOL.md §3.8 rule 4).
   */
  public static final Duration NODE_UNREACHABLE_LIMIT = Duration.ofSeconds(60);

  private static final Logger log = Logger.getLogger(ArenaClient.class.getName());
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Duration CLOSE_GRACE = Duration.ofSeconds(1);
  private static final int ENDED_MATCHES_REMEMBERED = 1024;
  private static final int NOT_SENT = -1;
  private static final Set<Status.Code> NEVER_RETRY = Set.of(
      Status.Code.UNAUTHENTICATED,
      Status.Code.PERMISSION_DENIED,
      Status.Code.INVALID_ARGUMENT,
      Status.Code.FAILED_PRECONDITION,
      Status.Code.UNIMPLEMENTED);

  private final ScoutBot bot;
  private final ManagedChannel channel;
  private final boolean ownsChannel;
  private final NodeChannels nodeChannels;
  private final Metadata headers;
  private final Hello hello;
  private final int maxMatches;
  private final int safetyMarginMs;
  private final boolean useTimeBank;
  private final Duration shutdownGiveUp;
  /** {@link #NODE_UNREACHABLE_LIMIT}, shorter in tests. */
  private final Duration nodeUnreachableLimit;

  private final ExecutorService workers = Executors.newCachedThreadPool(daemon("scout-bot"));
  /** One thread per node link, running its streams (PROTOCOL.md §3.8). */
  private final ExecutorService nodeLoops = Executors.newCachedThreadPool(daemon("scout-node"));
  private final ScheduledExecutorService timers =
      Executors.newSingleThreadScheduledExecutor(daemon("scout-clock"));
  private final Map<String, MatchState> matches = new ConcurrentHashMap<>();
  private final Map<RequestKey, PendingRequest> requests = new ConcurrentHashMap<>();
  /** Each match's newest request: the only one of the match that can still be open. */
  private final Map<String, PendingRequest> latest = new ConcurrentHashMap<>();
  private final Set<String> ended = Collections.synchronizedSet(Collections.newSetFromMap(
      new LinkedHashMap<>() {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
          return size() > ENDED_MATCHES_REMEMBERED;
        }
      }));
  private final NodeTickets tickets = new NodeTickets();
  /** The node links by address, open or reopening; guards their start and their end. */
  private final Map<String, NodeLink> nodes = new HashMap<>();
  /** Completed by {@link #stop()}, and by the end of {@link #run()} for the node links. */
  private final CompletableFuture<Void> stopped = new CompletableFuture<>();
  private final CountDownLatch terminated = new CountDownLatch(1);
  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicInteger finished = new AtomicInteger();
  /** Numbers every stream, of every link, so that an answer knows the stream it went out on. */
  private final AtomicInteger streams = new AtomicInteger();
  private final Link main = new Link("the referee");

  /** A client for {@code config}, on a channel of its own (plaintext or TLS, with keepalive). */
  public ArenaClient(ClientConfig config, ScoutBot bot) throws IOException {
    this(newChannel(config), true, config, bot, defaultNodeChannels(config));
  }

  /** A client on a channel the caller made and closes (tests, custom transports). */
  public ArenaClient(ManagedChannel channel, ClientConfig config, ScoutBot bot) {
    this(channel, false, config, bot, defaultNodeChannels(config));
  }

  /** A client whose node channels come from {@code nodeChannels} (tests). */
  ArenaClient(ManagedChannel channel, ClientConfig config, ScoutBot bot,
      NodeChannels nodeChannels) {
    this(channel, config, bot, nodeChannels, NODE_UNREACHABLE_LIMIT);
  }

  /**
   * A client whose node channels come from {@code nodeChannels} and which gives up on a node
   * after {@code nodeUnreachableLimit} instead of {@link #NODE_UNREACHABLE_LIMIT} (tests).
   */
  ArenaClient(ManagedChannel channel, ClientConfig config, ScoutBot bot,
      NodeChannels nodeChannels, Duration nodeUnreachableLimit) {
    this(channel, false, config, bot, nodeChannels, nodeUnreachableLimit);
  }

  private ArenaClient(ManagedChannel channel, boolean ownsChannel, ClientConfig config,
      ScoutBot bot, NodeChannels nodeChannels) {
    this(channel, ownsChannel, config, bot, nodeChannels, NODE_UNREACHABLE_LIMIT);
  }

  private ArenaClient(ManagedChannel channel, boolean ownsChannel, ClientConfig config,
      ScoutBot bot, NodeChannels nodeChannels, Duration nodeUnreachableLimit) {
    this.bot = bot;
    this.nodeUnreachableLimit = nodeUnreachableLimit;
    this.channel = channel;
    this.ownsChannel = ownsChannel;
    this.nodeChannels = nodeChannels;
    this.headers = bearer(config.token());
    this.hello = Hello.newBuilder()
        .setBotName(config.botName() != null ? config.botName() : bot.name())
        .setBotVersion(bot.version())
        .setProtocolVersion(PROTOCOL_VERSION)
        .setMaxConcurrentMatches(config.concurrency())
        .setLean(!(config.publicEvents() || bot.wantsPublicEvents()))
        .setAcceptsBundles(true) // onNext unpacks RefereeMessage.bundle (PROTOCOL.md §3.6.2)
        .build();
    this.maxMatches = config.maxMatches();
    this.safetyMarginMs = config.safetyMarginMs();
    this.useTimeBank = config.useTimeBank();
    this.shutdownGiveUp = Duration.ofMillis(config.shutdownGiveUpMs());
  }

  /**
   * A channel to {@code config.address()} ({@code host:port}, or {@code unix:/path} for a Unix
   * domain socket): TLS when asked (trusting {@code caCert}, presenting
   * {@code clientCert}), keepalive pings every 25 s also without calls (the referee permits one
   * every 10 s or more), 16 MiB receive limit.
   */
  public static ManagedChannel newChannel(ClientConfig config) throws IOException {
    return newChannel(config.address(), config.tls(), config);
  }

  /**
   * A channel to {@code address} like {@link #newChannel(ClientConfig)}'s, with TLS when
   * {@code tls} (and then the CA and client certificate of {@code config}).
   */
  static ManagedChannel newChannel(String address, boolean tls, ClientConfig config)
      throws IOException {
    if (address.startsWith("unix:")) {
      // grpc-netty-shaded serves unix: targets itself (epoll domain sockets); it asks every
      // channel for SO_KEEPALIVE, which a domain socket has not, and netty warns of it once per
      // connection (HTTP/2 keepalive pings still run). In a ladder's sandbox, which has no
      // network, netty also warns that it found no hardware address for its channel ids.
      QUIET_BOOTSTRAP_LOG.setLevel(Level.SEVERE);
      QUIET_MAC_ADDRESS_LOG.setLevel(Level.SEVERE);
    }
    ChannelCredentials credentials;
    if (tls) {
      TlsChannelCredentials.Builder secure = TlsChannelCredentials.newBuilder();
      if (config.caCert() != null) {
        secure.trustManager(config.caCert().toFile());
      }
      if (config.clientCert() != null) {
        secure.keyManager(config.clientCert().toFile(), config.clientKey().toFile());
      }
      credentials = secure.build();
    } else {
      credentials = InsecureChannelCredentials.create();
    }
    return Grpc.newChannelBuilder(address, credentials)
        .keepAliveTime(25, TimeUnit.SECONDS)
        .keepAliveTimeout(10, TimeUnit.SECONDS)
        .keepAliveWithoutCalls(true)
        .maxInboundMessageSize(16 * 1024 * 1024)
        .userAgent("scout-arena-java-kit")
        .build();
  }

  /** Held so that its level stays set (java.util.logging keeps loggers weakly). */
  private static final Logger QUIET_BOOTSTRAP_LOG =
      Logger.getLogger("io.grpc.netty.shaded.io.netty.bootstrap.Bootstrap");
  private static final Logger QUIET_MAC_ADDRESS_LOG =
      Logger.getLogger("io.grpc.netty.shaded.io.netty.util.internal.MacAddressUtil");

  /** Makes the channel to a referee node (PROTOCOL.md §3.8). */
  @FunctionalInterface
  interface NodeChannels {
    ManagedChannel open(String address, boolean tls) throws IOException;
  }

  private static NodeChannels defaultNodeChannels(ClientConfig config) {
    return (address, tls) -> newChannel(address, tls, config);
  }

  private static Metadata bearer(String credential) {
    Metadata metadata = new Metadata();
    metadata.put(AUTHORIZATION, "Bearer " + credential);
    return metadata;
  }

  /**
   * Plays until {@link #stop()}, until {@code maxMatches} matches ended, or until the referee says
   * {@code Goodbye} without asking the bot back; returns the number of matches that ended.
   * Reconnects on connection loss, and after a {@code Goodbye} with {@code reconnect: true}.
   *
   * @throws ConnectionRejectedException the referee refused the bot (do not retry)
   * @throws ReconnectGaveUpException the referee said Goodbye with reconnect: true and did not
   *     take the bot back within {@link ClientConfig#shutdownGiveUpMs()}
   * @throws InterruptedException the calling thread was interrupted
   */
  public int run()
      throws ConnectionRejectedException, ReconnectGaveUpException, InterruptedException {
    if (!started.compareAndSet(false, true)) {
      throw new IllegalStateException("run() can be called once");
    }
    try {
      int attempt = 0;
      // System.nanoTime() of a Goodbye{reconnect: true} the referee has not welcomed the bot
      // back since; null: none. The bot gives up shutdownGiveUp after it.
      Long shutdownSince = null;
      while (!stopped.isDone()) {
        Session current = open(main, channel, headers);
        log.fine(() -> "connecting (stream " + current.number + ")");
        Status status = awaitEnd(current);
        if (current.welcomed) {
          shutdownSince = null;
        }
        if (status == null) {
          closeGracefully(current);
          break;
        }
        Goodbye goodbye = current.goodbye;
        if (goodbye != null) {
          // A planned end of the stream: it overrides whatever status the call ends with.
          closeGracefully(current);
          if (!goodbye.getReconnect()) {
            log.info("the referee does not want the bot back; stopping");
            break;
          }
          attempt = 0; // not a failure: the backoff starts afresh
          if (shutdownSince == null) {
            shutdownSince = System.nanoTime();
          }
          Duration delay = Backoff.afterGoodbye(goodbye.getRetryAfterMs(),
              ThreadLocalRandom.current());
          log.info(String.format(Locale.ROOT, "reconnecting in %.2f s, as the referee asked",
              delay.toMillis() / 1000.0));
          if (sleepUnlessStopped(delay)) {
            break;
          }
          continue;
        }
        if (isRejection(status)) {
          throw new ConnectionRejectedException(status.getCode(), status.getDescription(),
              current.lastError);
        }
        if (current.welcomed) {
          attempt = 0;
        }
        if (shutdownSince != null
            && System.nanoTime() - shutdownSince >= shutdownGiveUp.toNanos()) {
          log.severe("connection lost (" + describe(status) + ")");
          throw new ReconnectGaveUpException(shutdownGiveUp);
        }
        Duration delay = Backoff.delay(attempt++, ThreadLocalRandom.current());
        log.warning(String.format(Locale.ROOT, "connection lost (%s); reconnecting in %.2f s",
            describe(status), delay.toMillis() / 1000.0));
        if (sleepUnlessStopped(delay)) {
          break;
        }
      }
      return finished.get();
    } finally {
      shutdown();
      terminated.countDown();
    }
  }

  /** Asks {@link #run()} to close the stream and return; safe from any thread, e.g. a signal. */
  public void stop() {
    stopped.complete(null);
  }

  /** Waits until {@link #run()} has returned and released its threads; false on timeout. */
  public boolean awaitTermination(Duration timeout) throws InterruptedException {
    return terminated.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** Statuses a reconnect would only repeat: the bot's configuration must change first. */
  static boolean isRejection(Status status) {
    if (NEVER_RETRY.contains(status.getCode())) {
      return true;
    }
    String details = status.getDescription() == null ? "" : status.getDescription();
    return status.getCode() == Status.Code.ABORTED
        && details.toLowerCase(Locale.ROOT).contains("superseded");
  }

  // --- connection ------------------------------------------------------------------------------

  /** Opens a {@code Play} stream of {@code link} through {@code via}, and says Hello. */
  private Session open(Link link, ManagedChannel via, Metadata credentials) {
    Session next = new Session(link, streams.incrementAndGet());
    // The channel keeps its own (slow) reconnect backoff; ours governs, so retry the TCP connect
    // now instead of failing fast on the channel's remembered failure.
    via.resetConnectBackoff();
    ArenaGrpc.newStub(via)
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(credentials))
        .play(next);
    next.send(BotMessage.newBuilder().setHello(hello).build());
    link.session = next;
    return next;
  }

  /**
   * The status that ended {@code current} (OK while a stream that said Goodbye is still open), or
   * null when {@link #stop()} came first.
   */
  private Status awaitEnd(Session current) throws InterruptedException {
    try {
      CompletableFuture.anyOf(current.done, stopped, current.bye).get();
    } catch (ExecutionException e) {
      throw new IllegalStateException(e);
    }
    return stopped.isDone() ? null : current.done.getNow(Status.OK);
  }

  private void closeGracefully(Session current) throws InterruptedException {
    current.halfClose();
    try {
      current.done.get(CLOSE_GRACE.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException | ExecutionException e) {
      log.fine("the referee did not end the call after the half-close; cancelling");
    } finally {
      current.cancel("the bot is stopping");
    }
  }

  /** True when stopped during the wait. */
  private boolean sleepUnlessStopped(Duration delay) throws InterruptedException {
    try {
      stopped.get(delay.toMillis(), TimeUnit.MILLISECONDS);
      return true;
    } catch (TimeoutException e) {
      return false;
    } catch (ExecutionException e) {
      throw new IllegalStateException(e);
    }
  }

  private void shutdown() throws InterruptedException {
    synchronized (nodes) {
      stopped.complete(null); // the node links close their streams too
      nodeLoops.shutdown();
    }
    if (!nodeLoops.awaitTermination(2 * CLOSE_GRACE.toMillis(), TimeUnit.MILLISECONDS)) {
      nodeLoops.shutdownNow();
    }
    main.session = null;
    workers.shutdownNow(); // interrupts bots still thinking; their answers are not needed
    timers.shutdownNow();
    if (ownsChannel) {
      channel.shutdownNow();
      channel.awaitTermination(2, TimeUnit.SECONDS);
    }
  }

  /** One line: the status code, its description, and the root cause if there is one. */
  static String describe(Status status) {
    if (status.isOk()) {
      return "the referee ended the stream";
    }
    StringBuilder text = new StringBuilder(status.getCode().toString());
    String details = status.getDescription();
    if (details != null && !details.isBlank()) {
      text.append(": ").append(details.lines().findFirst().orElse(""));
    }
    Throwable root = status.getCause();
    while (root != null && root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    if (root != null) {
      String cause = root.getMessage() == null ? root.getClass().getSimpleName()
          : root.getMessage();
      if (details == null || !details.contains(cause)) {
        text.append(" (").append(cause.length() > 160 ? cause.substring(0, 160) + "…" : cause)
            .append(')');
      }
    }
    return text.toString().replaceAll("\\s+", " ").trim();
  }

  // --- incoming messages -----------------------------------------------------------------------

  private void receive(Session from, RefereeMessage message, long receivedAt) {
    switch (message.getBodyCase()) {
      case WELCOME -> onWelcome(from, message.getWelcome());
      case GOODBYE -> onGoodbye(from, message.getGoodbye());
      case ERROR -> onProtocolError(from, message.getError());
      case MATCH_START -> onMatchStart(from.link, message.getMatchStart());
      case ROTATION_REQUEST ->
          onRotationRequest(from.link, message.getRotationRequest(), receivedAt);
      case DECISION_REQUEST ->
          onDecisionRequest(from.link, message.getDecisionRequest(), receivedAt);
      case ANSWER_RESULT -> onAnswerResult(message.getAnswerResult());
      case PUBLIC_EVENT -> {
        PublicEvent event = message.getPublicEvent();
        hook(from.link, event.getMatchId(), "onEvent", () -> bot.onEvent(event));
      }
      case ROUND_ENDED -> {
        RoundEnded roundEnded = message.getRoundEnded();
        closeLatest(roundEnded.getMatchId());
        hook(from.link, roundEnded.getMatchId(), "onRoundEnd", () -> bot.onRoundEnd(roundEnded));
      }
      case MATCH_ENDED -> onMatchEnded(from.link, message.getMatchEnded());
      case ASSIGNMENT -> onAssignment(message.getAssignment());
      case PROBATION -> onProbation(message.getProbation());
      // Session.onNext unpacks a bundle, so one here was inside another: never sent (§3.6.2).
      case BUNDLE -> log.warning("ignoring a bundle inside a bundle from " + from.link.label
          + " (" + message.getBundle().getMessagesCount() + " message(s))");
      // A body added to the protocol after this kit was built: ignore it (PROTOCOL.md §14).
      default -> log.fine("ignoring a referee message with a body this kit does not know");
    }
  }

  private void onWelcome(Session from, Welcome welcome) {
    from.welcomed = true;
    Link link = from.link;
    if (link instanceof NodeLink node) {
      node.reachableAt = System.nanoTime();
    }
    log.info(() -> "connected" + (link == main ? "" : " to " + link.label) + " as '"
        + welcome.getBotName() + "' (session " + welcome.getSessionId()
        + (welcome.getResumed() ? ", resumed" : "") + ")");
    if (welcome.getProtocolVersion() != PROTOCOL_VERSION) {
      log.warning(link.label + " speaks protocol " + welcome.getProtocolVersion()
          + ", this kit " + PROTOCOL_VERSION);
    }
    if (!welcome.getResumed()) {
      // Reconnected after the grace: the referee forfeited these seats and says no more of them.
      List<String> lost = matches.entrySet().stream()
          .filter(entry -> entry.getValue().link == link)
          .map(Map.Entry::getKey)
          .toList();
      if (!lost.isEmpty()) {
        log.warning(link.label + " did not resume " + lost.size() + " running match(es): "
            + lost);
        lost.forEach(matchId -> {
          tickets.matchEnded(matchId);
          forgetMatch(matchId);
        });
      }
    }
  }

  /** The referee closes the stream on purpose (§10.1); {@link #run()} decides what follows. */
  private void onGoodbye(Session from, Goodbye goodbye) {
    from.goodbye = goodbye;
    String then = goodbye.getReconnect()
        ? "reconnect in " + Integer.toUnsignedLong(goodbye.getRetryAfterMs()) + " ms"
        : "do not reconnect";
    log.info("goodbye from " + from.link.label + " (" + goodbye.getReason() + ", " + then + "): "
        + (goodbye.getMessage().isEmpty() ? "no message" : goodbye.getMessage()));
    from.bye.complete(goodbye);
  }

  private void onProtocolError(Session from, ProtocolError error) {
    from.lastError = error.getCode() + ": " + error.getMessage();
    log.warning("protocol error from " + from.link.label + ": " + from.lastError);
  }

  private void onMatchStart(Link link, MatchStart start) {
    MatchState match = match(link, start.getMatchId());
    if (match == null) {
      return;
    }
    match.seat = start.getSeat();
    if (start.getResumed()) {
      log.info(() -> "match " + start.getMatchId() + " resumed (seat " + start.getSeat()
          + ", bank " + start.getTimeBankMs() + " ms, strikes " + start.getStrikes() + ")");
    } else {
      log.info(() -> "match " + start.getMatchId() + " started: seat " + start.getSeat() + " of "
          + start.getNumPlayers() + " " + start.getPlayerNamesList() + ", "
          + start.getNumRounds() + " rounds, decision " + start.getTimeControl().getDecisionMs()
          + " ms, bank " + start.getTimeControl().getTimeBankMs() + " ms");
    }
    hook(link, start.getMatchId(), "onMatchStart", () -> bot.onMatchStart(start));
  }

  /** How a match ended: UNSPECIFIED (an older referee) reads as FINISHED. */
  public static MatchEndStatus endStatus(MatchEnded matchEnded) {
    return matchEnded.getStatus() == MatchEndStatus.MATCH_END_STATUS_UNSPECIFIED
        ? MatchEndStatus.MATCH_END_STATUS_FINISHED : matchEnded.getStatus();
  }

  /**
   * However it ended and on whichever stream (a ladder voids a node's match on the main
   * stream), the match's state, requests and ticket go; only a FINISHED match has a result.
   */
  private void onMatchEnded(Link link, MatchEnded matchEnded) {
    String matchId = matchEnded.getMatchId();
    tickets.matchEnded(matchId); // an assigned match: its ticket opens nothing any more
    if (ended.contains(matchId)) {
      return;
    }
    MatchState match = matches.get(matchId);
    MatchEndStatus status = endStatus(matchEnded);
    String how = status.name().replace("MATCH_END_STATUS_", "");
    if (match == null) {
      // No state here: voided before it began, or begun before a restart.
      forgetMatch(matchId);
      try {
        bot.onMatchEnd(matchEnded);
      } catch (RuntimeException e) {
        log.log(Level.WARNING, "match " + matchId + ": onMatchEnd threw", e);
      }
    } else {
      hook(link, matchId, "onMatchEnd", () -> bot.onMatchEnd(matchEnded));
      forgetMatch(matchId);
    }
    if (status != MatchEndStatus.MATCH_END_STATUS_FINISHED) {
      log.warning("match " + matchId + " ended " + how + " without a result: "
          + matchEnded.getReason());
    } else {
      int seat = match == null ? -1 : match.seat;
      String rank = seat >= 0 && seat < matchEnded.getRanksCount()
          ? ", our rank " + matchEnded.getRanks(seat) : "";
      log.info(() -> "match " + matchId + " ended " + how + ": totals "
          + matchEnded.getTotalsList() + ", ranks " + matchEnded.getRanksList() + rank
          + (matchEnded.getForfeitedSeatsCount() > 0
              ? ", forfeited seats " + matchEnded.getForfeitedSeatsList() : ""));
    }
    if (finished.incrementAndGet() == maxMatches) {
      log.info(() -> maxMatches + " match(es) ended; stopping");
      stop();
    }
  }

  private void onRotationRequest(Link link, RotationRequest request, long receivedAt) {
    RotationChoice.Builder choice = RotationChoice.newBuilder()
        .setMatchId(request.getMatchId())
        .setRequestId(request.getRequestId());
    BotMessage fallback = BotMessage.newBuilder().setRotation(choice.setRotate(false)).build();
    openRequest(link, request.getMatchId(), request.getRequestId(), "chooseRotation",
        request.getDeadlineMs(), request.getTimeBankMs(), receivedAt, fallback,
        () -> BotMessage.newBuilder()
            .setRotation(choice.setRotate(bot.chooseRotation(request)))
            .build());
  }

  private void onDecisionRequest(Link link, DecisionRequest request, long receivedAt) {
    String where = "match " + request.getMatchId() + ", request " + request.getRequestId();
    BotMessage fallback = actionChoice(request, Moves.fallback(request));
    openRequest(link, request.getMatchId(), request.getRequestId(), "act",
        request.getDeadlineMs(),
        request.getTimeBankMs(), receivedAt, fallback, () -> {
          Action action = bot.act(request);
          var problem = Moves.problem(action, request);
          if (problem.isPresent()) {
            log.warning(where + ": act returned an action the referee would refuse ("
                + problem.get() + "); sending the fallback");
            return fallback;
          }
          return actionChoice(request, action);
        });
  }

  private static BotMessage actionChoice(DecisionRequest request, Action action) {
    return BotMessage.newBuilder()
        .setAction(ActionChoice.newBuilder()
            .setMatchId(request.getMatchId())
            .setRequestId(request.getRequestId())
            .setAction(action))
        .build();
  }

  private void onAnswerResult(AnswerResult result) {
    PendingRequest pending = requests.get(new RequestKey(result.getMatchId(),
        result.getRequestId()));
    String where = "match " + result.getMatchId() + ", request " + result.getRequestId();
    switch (result.getStatus()) {
      case ANSWER_STATUS_ACCEPTED -> { // full streams only: nothing waits for it
        if (pending != null) {
          pending.close();
        }
      }
      case ANSWER_STATUS_ILLEGAL, ANSWER_STATUS_MALFORMED -> {
        log.warning(where + ": answer " + shortName(result) + ": " + result.getReason()
            + " (strikes: " + result.getStrikes() + ")");
        if (pending != null && pending.retryWithFallback()) {
          log.warning(where + ": the request stays open; sent the fallback");
        }
      }
      case ANSWER_STATUS_TIMED_OUT -> {
        if (pending != null) {
          pending.close();
          pending.cancelTask();
        }
        log.warning(where + ": TIMED_OUT: the referee played the fallback (strikes: "
            + result.getStrikes() + ", bank " + result.getTimeBankMs() + " ms)");
      }
      case ANSWER_STATUS_STALE -> log.info(where + ": answer STALE (ignored by the referee): "
          + result.getReason());
      case ANSWER_STATUS_UNKNOWN_MATCH -> log.warning(where + ": answer UNKNOWN_MATCH: "
          + result.getReason());
      default -> log.fine(where + ": answer status " + result.getStatusValue());
    }
  }

  private static String shortName(AnswerResult result) {
    return result.getStatus().name().replace("ANSWER_STATUS_", "");
  }

  /** The ladder's word on probation (PROTOCOL.md §3.9): logged, and the bot's hook told. */
  private void onProbation(Probation probation) {
    if (probation.getActive()) {
      log.warning("on probation: no matches are scheduled for the bot (" + probation.getReason()
          + "); " + (probation.getLiftedByReconnect()
              ? "a new connection lifts it (restart the bot once it is fixed)"
              : "only the bot's owner or the operator can lift it"));
    } else {
      log.info("probation lifted: matches will be scheduled again");
    }
    try {
      bot.onProbation(probation);
    } catch (RuntimeException e) {
      log.log(Level.WARNING, "onProbation threw", e);
    }
  }

  // --- referee nodes (PROTOCOL.md §3.8) ------------------------------------------------------

  /**
   * Play {@code assignment}'s match on its node: keep its ticket, and open a stream there unless
   * the node's link is open (or opening) already; the node then sends the match on it.
   */
  private void onAssignment(MatchAssignment assignment) {
    String matchId = assignment.getMatchId();
    String address = assignment.getAddress();
    if (address.isEmpty() || assignment.getTicket().isEmpty()) {
      log.warning("match " + matchId + ": ignoring an assignment without an address or ticket");
      return;
    }
    if (ended.contains(matchId)) {
      log.fine("match " + matchId + ": ignoring an assignment to a match that ended");
      return;
    }
    // Re-sent after each Welcome of the main stream (PROTOCOL.md §3.8) for a match still
    // running: its ticket is the one the node's link reopens with, and the link carries on.
    log.info("match " + matchId + " is on node " + address
        + (assignment.getTls() ? " (TLS)" : "")
        + (matches.containsKey(matchId) ? " (again, for a match the bot follows)" : ""));
    synchronized (nodes) {
      if (stopped.isDone()) {
        return;
      }
      NodeLink node = nodes.get(address);
      if (node == null) {
        ManagedChannel nodeChannel;
        try {
          nodeChannel = nodeChannels.open(address, assignment.getTls());
        } catch (IOException | IllegalArgumentException e) {
          log.warning("match " + matchId + ": cannot reach node " + address + ": "
              + e.getMessage());
          return;
        }
        node = new NodeLink(address, nodeChannel);
        nodes.put(address, node);
        tickets.add(address, matchId, assignment.getTicket());
        nodeLoops.execute(node);
      } else {
        tickets.add(address, matchId, assignment.getTicket());
      }
    }
  }

  // --- matches and requests --------------------------------------------------------------------

  /**
   * The state of a running match, created on first sight on {@code link}; null for a match that
   * ended.
   */
  private MatchState match(Link link, String matchId) {
    if (ended.contains(matchId)) {
      return null;
    }
    return matches.computeIfAbsent(matchId,
        id -> new MatchState(new SerialExecutor(workers), link));
  }

  /** The match moved on: its newest request is closed, answered or not (a lean stream never
   * says ACCEPTED), and a bot still thinking about it is interrupted. */
  private void closeLatest(String matchId) {
    PendingRequest newest = latest.get(matchId);
    if (newest != null) {
      newest.close();
      newest.cancelTask();
    }
  }

  private void forgetMatch(String matchId) {
    ended.add(matchId);
    matches.remove(matchId);
    latest.remove(matchId);
    requests.entrySet().removeIf(entry -> {
      if (!entry.getKey().matchId().equals(matchId)) {
        return false;
      }
      entry.getValue().close();
      entry.getValue().cancelTask();
      return true;
    });
  }

  private void hook(Link link, String matchId, String name, Runnable call) {
    MatchState match = match(link, matchId);
    if (match == null) {
      return;
    }
    submit(match, () -> {
      try {
        call.run();
      } catch (RuntimeException | Error e) {
        log.log(Level.WARNING, "match " + matchId + ": the bot's " + name + " raised", e);
      }
    });
  }

  private static void submit(MatchState match, Runnable task) {
    try {
      match.serial.execute(task);
    } catch (RejectedExecutionException e) {
      log.fine("shutting down; dropped a task");
    }
  }

  private void openRequest(Link link, String matchId, long requestId, String what,
      int deadlineMs, int timeBankMs, long receivedAt, BotMessage fallback,
      Supplier<BotMessage> ask) {
    MatchState match = match(link, matchId);
    if (match == null) {
      return;
    }
    RequestKey key = new RequestKey(matchId, requestId);
    String where = "match " + matchId + ", request " + requestId;
    PendingRequest known = requests.get(key);
    if (known != null) {
      // The referee asks again after a reconnect: resend an answer the old stream lost, or let
      // the bot (still thinking, under the original clock) finish.
      if (known.resendIfUnsent()) {
        log.info(where + ": re-sent the answer after the reconnect");
      }
      return;
    }
    long limitMs = Integer.toUnsignedLong(deadlineMs)
        + (useTimeBank ? Integer.toUnsignedLong(timeBankMs) : 0) - safetyMarginMs;
    long expiresAt = receivedAt + TimeUnit.MILLISECONDS.toNanos(limitMs);
    PendingRequest pending = new PendingRequest(link, fallback, expiresAt);
    closeLatest(matchId); // a new request: the match moved past the previous one
    requests.put(key, pending);
    latest.put(matchId, pending);
    if (limitMs <= 0) {
      log.warning(where + ": no time left to ask the bot (deadline " + deadlineMs + " ms, bank "
          + timeBankMs + " ms); sending the fallback");
      pending.answer(fallback);
      return;
    }
    long delayNanos = expiresAt - System.nanoTime();
    pending.guard = timers.schedule(() -> {
      if (pending.answer(fallback)) {
        log.warning(where + ": the bot's " + what + " did not return within " + limitMs
            + " ms; sent the fallback");
        pending.cancelTask();
      }
    }, delayNanos, TimeUnit.NANOSECONDS);
    FutureTask<Void> task = new FutureTask<>(() -> {
      if (pending.isAnswered()) {
        return;
      }
      long started = System.nanoTime();
      BotMessage answer;
      try {
        answer = ask.get();
      } catch (RuntimeException | Error e) {
        log.log(Level.WARNING, where + ": the bot's " + what + " raised; sending the fallback", e);
        answer = fallback;
      }
      BotMessage chosen = answer;
      if (pending.answer(chosen)) {
        log.fine(() -> where + ": " + what + " -> " + summary(chosen) + " in "
            + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) + " ms");
      }
    }, null);
    pending.task = task;
    submit(match, task);
  }

  private static String summary(BotMessage message) {
    return switch (message.getBodyCase()) {
      case ROTATION -> "rotate=" + message.getRotation().getRotate();
      case ACTION -> Moves.brief(message.getAction().getAction());
      default -> message.getBodyCase().toString();
    };
  }

  /** "60 s", "0.5 s". */
  private static String seconds(Duration duration) {
    long millis = duration.toMillis();
    return millis % 1000 == 0 ? millis / 1000 + " s"
        : String.format(Locale.ROOT, "%.3f", millis / 1000.0).replaceAll("0+$", "") + " s";
  }

  private static ThreadFactory daemon(String prefix) {
    AtomicInteger count = new AtomicInteger();
    return runnable -> {
      Thread thread = new Thread(runnable, prefix + "-" + count.incrementAndGet());
      thread.setDaemon(true);
      return thread;
    };
  }

  private record RequestKey(String matchId, long requestId) {}

  /**
   * Where the bot holds a {@code Play} stream, one at a time: the main referee, or a node. A
   * request's answers go on the current stream of the link that carried it.
   */
  private static class Link {
    /** For logs: "the referee", "node HOST:PORT". */
    final String label;
    volatile Session session;

    Link(String label) {
      this.label = label;
    }
  }

  /**
   * The streams to one referee node, opened for an assignment and run on a thread of their own:
   * when a stream ends (a fault or any Goodbye) it is reopened after the usual backoff with the
   * newest ticket of an unfinished match of the node; a ticket the node refuses is dropped and
   * the next one tried; with none left the link is let go. A node that cannot be reached for
   * {@code nodeUnreachableLimit} in a row (no stream there welcomed since, counted from the link's
   * creation before the first welcome) is gone: when an attempt then fails, its tickets are
   * dropped and the link is let go the same way. Only {@link #stop()} or the end of
   * {@link #run()} closes it otherwise; it never stops the bot.
   */
  private final class NodeLink extends Link implements Runnable {
    private final String address;
    private final ManagedChannel nodeChannel;
    /**
     * When the node was last known reachable ({@link System#nanoTime()}): the link's creation,
     * then each welcome on a stream there and the end of each welcomed stream.
     */
    volatile long reachableAt = System.nanoTime();

    NodeLink(String address, ManagedChannel nodeChannel) {
      super("node " + address);
      this.address = address;
      this.nodeChannel = nodeChannel;
    }

    @Override
    public void run() {
      try {
        play();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        session = null;
        nodeChannel.shutdownNow();
        log.info("closed the stream to " + label);
      }
    }

    private void play() throws InterruptedException {
      int attempt = 0;
      String ticket = ticketOrLetGo();
      while (ticket != null) {
        log.info("opening a stream to " + label);
        Session current = open(this, nodeChannel, bearer(ticket));
        Status status = awaitEnd(current);
        if (status == null) {
          closeGracefully(current);
          return;
        }
        boolean refused = current.goodbye == null
            && status.getCode() == Status.Code.UNAUTHENTICATED;
        if (refused) {
          log.warning(label + " refused a ticket (" + describe(status) + "); dropping it");
          tickets.refused(address, ticket);
        } else if (current.goodbye != null) {
          closeGracefully(current);
        }
        if (current.welcomed) {
          attempt = 0;
          reachableAt = System.nanoTime(); // it was reachable until this stream ended
        } else if (System.nanoTime() - reachableAt >= nodeUnreachableLimit.toNanos()) {
          giveUp();
          return;
        }
        ticket = ticketOrLetGo();
        if (ticket != null && !refused) {
          Duration delay = Backoff.delay(attempt++, ThreadLocalRandom.current());
          log.warning(String.format(Locale.ROOT, "the stream to %s ended (%s); reopening in %.2f s",
              label, current.goodbye != null ? "goodbye" : describe(status),
              delay.toMillis() / 1000.0));
          if (sleepUnlessStopped(delay)) {
            return;
          }
        }
      }
    }

    /**
     * The node could not be reached for {@code nodeUnreachableLimit} (PROTOCOL.md §3.8 rule 4):
     * drop its tickets and let the link go as when none is left (the ladder has voided its
     * matches, so their state is forgotten too); a later assignment there starts afresh.
     */
    private void giveUp() {
      int dropped;
      synchronized (nodes) {
        dropped = tickets.dropAll(address);
        nodes.remove(address, this);
      }
      log.warning(label + " unreachable for " + seconds(nodeUnreachableLimit) + "; dropping its "
          + dropped + " ticket(s) and letting it go");
      List<String> voided = matches.entrySet().stream()
          .filter(entry -> entry.getValue().link == this)
          .map(Map.Entry::getKey)
          .toList();
      voided.forEach(ArenaClient.this::forgetMatch);
    }

    /**
     * The ticket to open the next stream with, or null after letting the link go (no unfinished
     * match of the node is left); atomic with {@link #onAssignment}'s look-up of the link.
     */
    private String ticketOrLetGo() {
      synchronized (nodes) {
        String ticket = tickets.newest(address);
        if (ticket == null) {
          nodes.remove(address, this);
          log.info("no unfinished match is left on " + label + "; letting its stream go");
        }
        return ticket;
      }
    }
  }

  private static final class MatchState {
    final SerialExecutor serial;
    /** The link whose streams carry the match. */
    final Link link;
    volatile int seat = -1;

    MatchState(SerialExecutor serial, Link link) {
      this.serial = serial;
      this.link = link;
    }
  }

  /** One request until its match ends: its answer, where that went, and its guard. */
  private final class PendingRequest {
    /** The link that carried the request: its answers go on that link's current stream. */
    private final Link link;
    private final BotMessage fallback;
    private final long expiresAt;
    private BotMessage answer;
    private int sentOn = NOT_SENT;
    private boolean closed;
    private boolean fallbackSent;
    volatile ScheduledFuture<?> guard;
    volatile Future<?> task;

    PendingRequest(Link link, BotMessage fallback, long expiresAt) {
      this.link = link;
      this.fallback = fallback;
      this.expiresAt = expiresAt;
    }

    synchronized boolean isAnswered() {
      return answer != null || closed;
    }

    /** Sends {@code message} unless the request has an answer already; true when it was sent. */
    boolean answer(BotMessage message) {
      synchronized (this) {
        if (answer != null || closed) {
          return false;
        }
        answer = message;
        fallbackSent = message.equals(fallback);
        deliver();
      }
      ScheduledFuture<?> timer = guard;
      if (timer != null) {
        timer.cancel(false);
      }
      return true;
    }

    /** After ILLEGAL/MALFORMED the request stays open: the fallback is always legal. */
    synchronized boolean retryWithFallback() {
      if (closed || fallbackSent || System.nanoTime() >= expiresAt) {
        return false;
      }
      answer = fallback;
      fallbackSent = true;
      deliver();
      return true;
    }

    /** After a reconnect: re-sends an answer that did not go out on the current stream. */
    synchronized boolean resendIfUnsent() {
      Session current = link.session;
      if (answer == null || closed || current == null || sentOn == current.number) {
        return false;
      }
      deliver();
      return true;
    }

    synchronized void close() {
      closed = true;
      ScheduledFuture<?> timer = guard;
      if (timer != null) {
        timer.cancel(false);
      }
    }

    void cancelTask() {
      Future<?> running = task;
      if (running != null) {
        running.cancel(true);
      }
    }

    /**
     * Sends the answer on the link's current stream if it has been welcomed (caller holds the
     * lock).
     */
    private void deliver() {
      Session current = link.session;
      if (current != null && current.welcomed && current.send(answer)) {
        sentOn = current.number;
      } else {
        sentOn = NOT_SENT; // answered when the referee re-sends the request after a reconnect
        log.info("not connected; the answer goes out when the referee asks again");
      }
    }
  }

  /** One {@code Play} call: the request stream, and how the call ended. */
  private final class Session implements ClientResponseObserver<BotMessage, RefereeMessage> {
    final Link link;
    final int number;
    final CompletableFuture<Status> done = new CompletableFuture<>();
    /** Completed when the referee says Goodbye. */
    final CompletableFuture<Goodbye> bye = new CompletableFuture<>();
    volatile Goodbye goodbye;
    volatile boolean welcomed;
    volatile String lastError;
    private ClientCallStreamObserver<BotMessage> requestStream;
    private boolean closed;

    Session(Link link, int number) {
      this.link = link;
      this.number = number;
    }

    @Override
    public void beforeStart(ClientCallStreamObserver<BotMessage> stream) {
      this.requestStream = stream;
    }

    synchronized boolean send(BotMessage message) {
      if (closed) {
        return false;
      }
      try {
        requestStream.onNext(message);
        return true;
      } catch (RuntimeException e) {
        log.log(Level.FINE, "send failed", e);
        return false;
      }
    }

    synchronized void halfClose() {
      if (!closed) {
        closed = true;
        requestStream.onCompleted();
      }
    }

    synchronized void cancel(String why) {
      closed = true;
      if (!done.isDone()) {
        requestStream.cancel(why, null);
      }
    }

    private synchronized void markClosed() {
      closed = true;
    }

    /**
     * A message from the referee. A bundle (PROTOCOL.md §3.6.2) is unpacked here: each inner
     * message, in order, takes the path a message sent alone takes, with the bundle's arrival
     * time as its own (its deadline counts from there).
     */
    @Override
    public void onNext(RefereeMessage message) {
      long receivedAt = System.nanoTime();
      if (message.hasBundle()) {
        for (RefereeMessage inner : message.getBundle().getMessagesList()) {
          handle(inner, receivedAt);
        }
      } else {
        handle(message, receivedAt);
      }
    }

    private void handle(RefereeMessage message, long receivedAt) {
      try {
        receive(this, message, receivedAt);
      } catch (RuntimeException e) {
        log.log(Level.SEVERE, "failed to handle a message from the referee: " + message, e);
      }
    }

    @Override
    public void onError(Throwable error) {
      markClosed();
      done.complete(Status.fromThrowable(error));
    }

    @Override
    public void onCompleted() {
      markClosed();
      done.complete(Status.OK);
    }
  }
}
