package org.scoutarena.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.scoutarena.client.GroupsTest.cards;
import static org.scoutarena.client.GroupsTest.show;

import com.google.protobuf.UnknownFieldSet;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerBuilder;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.scoutarena.scout.v1.Action;
import org.scoutarena.scout.v1.AnswerResult;
import org.scoutarena.scout.v1.AnswerStatus;
import org.scoutarena.scout.v1.ArenaGrpc;
import org.scoutarena.scout.v1.BotMessage;
import org.scoutarena.scout.v1.DecisionRequest;
import org.scoutarena.scout.v1.End;
import org.scoutarena.scout.v1.Goodbye;
import org.scoutarena.scout.v1.GoodbyeReason;
import org.scoutarena.scout.v1.MatchAssignment;
import org.scoutarena.scout.v1.MatchEnded;
import org.scoutarena.scout.v1.MatchStart;
import org.scoutarena.scout.v1.Observation;
import org.scoutarena.scout.v1.RefereeBundle;
import org.scoutarena.scout.v1.RefereeMessage;
import org.scoutarena.scout.v1.RotationRequest;
import org.scoutarena.scout.v1.RoundEnded;
import org.scoutarena.scout.v1.Scout;
import org.scoutarena.scout.v1.Welcome;

/** The client against a scripted in-process referee: the test thread plays the referee. */
class ArenaClientTest {

  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Context.Key<String> SEEN_AUTHORIZATION = Context.key("authorization");

  /** One Play call as the fake referee sees it. */
  record Stream(String authorization, BlockingQueue<BotMessage> in,
      StreamObserver<RefereeMessage> out, CompletableFuture<Void> closed) {

    BotMessage next() throws InterruptedException {
      BotMessage message = in.poll(5, TimeUnit.SECONDS);
      assertNotNull(message, "expected a message from the bot");
      return message;
    }

    void send(RefereeMessage message) {
      out.onNext(message);
    }
  }

  private final BlockingQueue<Stream> streams = new LinkedBlockingQueue<>();
  private final ExecutorService runner = Executors.newSingleThreadExecutor();
  private final List<Server> servers = new java.util.ArrayList<>();
  private ManagedChannel channel;

  @BeforeEach
  void startFakeReferee() throws Exception {
    String name = InProcessServerBuilder.generateName();
    fakeReferee(name, "Bearer good"::equals, streams);
    channel = InProcessChannelBuilder.forName(name).build();
  }

  /** A referee at in-process {@code name}: it lets in the authorizations {@code authorized}
   * accepts (UNAUTHENTICATED otherwise) and hands their Play calls to {@code into}. */
  private void fakeReferee(String name, Predicate<String> authorized, BlockingQueue<Stream> into)
      throws Exception {
    fakeReferee(InProcessServerBuilder.forName(name), authorized, into);
  }

  /** The same referee, served by {@code server} (in-process or on a TCP port). */
  private void fakeReferee(ServerBuilder<?> server, Predicate<String> authorized,
      BlockingQueue<Stream> into) throws Exception {
    ArenaGrpc.ArenaImplBase arena = new ArenaGrpc.ArenaImplBase() {
      @Override
      public StreamObserver<BotMessage> play(StreamObserver<RefereeMessage> out) {
        Stream stream = new Stream(SEEN_AUTHORIZATION.get(), new LinkedBlockingQueue<>(), out,
            new CompletableFuture<>());
        into.add(stream);
        return new StreamObserver<>() {
          @Override
          public void onNext(BotMessage message) {
            stream.in.add(message);
          }

          @Override
          public void onError(Throwable t) {
            stream.closed.complete(null);
          }

          @Override
          public void onCompleted() {
            stream.closed.complete(null);
            out.onCompleted();
          }
        };
      }
    };
    ServerInterceptor auth = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
          ServerCallHandler<Q, R> next) {
        String value = headers.get(AUTHORIZATION);
        if (!authorized.test(value)) {
          call.close(Status.UNAUTHENTICATED.withDescription("unknown bot token"), new Metadata());
          return new ServerCall.Listener<>() {};
        }
        return Contexts.interceptCall(Context.current().withValue(SEEN_AUTHORIZATION, value),
            call, headers, next);
      }
    };
    servers.add(server
        .addService(ServerInterceptors.intercept(arena, auth))
        .build()
        .start());
  }

  @AfterEach
  void stop() throws Exception {
    runner.shutdownNow();
    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    for (Server server : servers) {
      server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private Future<Integer> play(ScoutBot bot, String token, String... flags) throws Exception {
    List<String> args = new java.util.ArrayList<>(List.of("--address", "in-process", "--token",
        token, "--bot-name", "tester", "--concurrency", "3"));
    args.addAll(List.of(flags));
    ArenaClient client = new ArenaClient(channel, ClientConfig.parse(args, Map.of()), bot);
    return runner.submit(client::run);
  }

  private static ScoutBot bot(Function<DecisionRequest, Action> act) {
    return new ScoutBot() {
      @Override
      public boolean chooseRotation(RotationRequest request) {
        return true;
      }

      @Override
      public Action act(DecisionRequest request) {
        return act.apply(request);
      }
    };
  }

  private static RefereeMessage welcome(boolean resumed) {
    return RefereeMessage.newBuilder().setWelcome(Welcome.newBuilder().setProtocolVersion(1)
        .setBotName("tester").setSessionId("s-1").setResumed(resumed)).build();
  }

  private static RefereeMessage matchStart(String matchId, boolean resumed) {
    return RefereeMessage.newBuilder().setMatchStart(MatchStart.newBuilder().setMatchId(matchId)
        .setSeat(0).addPlayerNames("tester").addPlayerNames("other").setNumPlayers(2)
        .setNumRounds(2).setResumed(resumed).setTimeBankMs(10000)).build();
  }

  /** A decision on hand faces 4 4 9 with shows (0,1), (0,2), (1,1), (2,1). */
  private static DecisionRequest decision(String matchId, long requestId, int deadlineMs,
      int bankMs) {
    return DecisionRequest.newBuilder().setMatchId(matchId).setRequestId(requestId)
        .setObservation(Observation.newBuilder().setMatchId(matchId)
            .addAllHand(cards("4/1 4/2 9/3")))
        .addLegalShows(show(0, 1)).addLegalShows(show(0, 2)).addLegalShows(show(1, 1))
        .addLegalShows(show(2, 1))
        .setDeadlineMs(deadlineMs).setTimeBankMs(bankMs)
        .build();
  }

  private static RefereeMessage wrap(DecisionRequest request) {
    return RefereeMessage.newBuilder().setDecisionRequest(request).build();
  }

  private static RefereeMessage result(String matchId, long requestId, AnswerStatus status) {
    return RefereeMessage.newBuilder().setAnswerResult(AnswerResult.newBuilder()
        .setMatchId(matchId).setRequestId(requestId).setStatus(status)).build();
  }

  private static RefereeMessage matchEnded(String matchId) {
    return RefereeMessage.newBuilder().setMatchEnded(MatchEnded.newBuilder().setMatchId(matchId)
        .addTotals(3).addTotals(1).addRanks(1).addRanks(2).setRecordId(matchId)).build();
  }

  private Stream handshake(boolean resumed) throws Exception {
    Stream stream = streams.poll(5, TimeUnit.SECONDS);
    assertNotNull(stream, "the bot should open Play");
    assertEquals("Bearer good", stream.authorization());
    BotMessage hello = stream.next();
    assertTrue(hello.hasHello(), "the first message must be Hello");
    stream.send(welcome(resumed));
    return stream;
  }

  @Test
  void playsAMatchAndStopsAfterMaxMatches() throws Exception {
    Future<Integer> run = play(bot(request -> Moves.show(0, 2)), "good", "--max-matches", "1");
    Stream stream = streams.poll(5, TimeUnit.SECONDS);
    assertNotNull(stream);
    BotMessage hello = stream.next();
    assertEquals("tester", hello.getHello().getBotName());
    assertEquals(1, hello.getHello().getProtocolVersion());
    assertEquals(3, hello.getHello().getMaxConcurrentMatches());
    assertTrue(hello.getHello().getLean(), "a lean stream by default");
    assertTrue(hello.getHello().getAcceptsBundles(), "the kit reads bundles");
    stream.send(welcome(false));
    // A body from a newer protocol revision: ignored.
    stream.send(RefereeMessage.newBuilder().setUnknownFields(UnknownFieldSet.newBuilder()
        .addField(99, UnknownFieldSet.Field.newBuilder().addVarint(1).build()).build()).build());
    stream.send(matchStart("m-1", false));
    stream.send(RefereeMessage.newBuilder().setRotationRequest(RotationRequest.newBuilder()
        .setMatchId("m-1").setRequestId(1).addAllHand(cards("4/1 4/2 9/3"))
        .setDeadlineMs(1000).setTimeBankMs(1000)).build());
    BotMessage rotation = stream.next();
    assertEquals("m-1", rotation.getRotation().getMatchId());
    assertEquals(1, rotation.getRotation().getRequestId());
    assertTrue(rotation.getRotation().getRotate());
    stream.send(result("m-1", 1, AnswerStatus.ANSWER_STATUS_ACCEPTED));

    stream.send(wrap(decision("m-1", 2, 1000, 1000)));
    BotMessage action = stream.next();
    assertEquals(2, action.getAction().getRequestId());
    assertEquals(Moves.show(0, 2), action.getAction().getAction());
    stream.send(result("m-1", 2, AnswerStatus.ANSWER_STATUS_ACCEPTED));

    stream.send(matchEnded("m-1"));
    assertEquals(1, run.get(5, TimeUnit.SECONDS));
    stream.closed().get(5, TimeUnit.SECONDS); // the bot half-closed or cancelled its stream
  }

  @Test
  void sendsTheFallbackBeforeDeadlinePlusBank() throws Exception {
    CompletableFuture<Boolean> interrupted = new CompletableFuture<>();
    Future<Integer> run = play(bot(request -> {
      try {
        Thread.sleep(10_000);
        interrupted.complete(false);
      } catch (InterruptedException e) {
        interrupted.complete(true);
      }
      return Moves.show(2, 1);
    }), "good", "--safety-margin-ms", "400");
    Stream stream = handshake(false);
    stream.send(matchStart("m-1", false));
    long sent = System.nanoTime();
    stream.send(wrap(decision("m-1", 5, 600, 400)));
    BotMessage action = stream.next();
    long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sent);
    assertEquals(Moves.show(0, 1), action.getAction().getAction(), "legal_shows[0]");
    // limit = 600 + 400 - 400 = 600 ms: well before the referee's 1000 ms
    assertTrue(elapsedMs >= 550 && elapsedMs < 1000, "fallback after " + elapsedMs + " ms");
    assertTrue(interrupted.get(5, TimeUnit.SECONDS), "the late bot is interrupted");
    assertNull(stream.in().poll(300, TimeUnit.MILLISECONDS), "nothing else is sent");
    run.cancel(true);
  }

  @Test
  void replacesUnlistedAnswersAndRetriesRejectedOnesWithTheFallback() throws Exception {
    Scout scout = Scout.newBuilder().setEnd(End.END_LEFT).setInsertAt(1).build();
    AtomicInteger calls = new AtomicInteger();
    Future<Integer> run = play(bot(request -> calls.incrementAndGet() == 1
        ? Moves.show(1, 2) // not listed: the client sends legal_shows[0] instead
        : Moves.scoutAndShow(scout, show(0, 2))), "good");
    Stream stream = handshake(false);
    stream.send(matchStart("m-1", false));
    stream.send(wrap(decision("m-1", 1, 1000, 0)));
    assertEquals(Moves.show(0, 1), stream.next().getAction().getAction());
    stream.send(result("m-1", 1, AnswerStatus.ANSWER_STATUS_ACCEPTED));

    DecisionRequest combo = decision("m-1", 2, 1000, 0).toBuilder().clearLegalShows()
        .setObservation(decision("m-1", 2, 1000, 0).getObservation().toBuilder()
            .addAllActiveSet(cards("5/3 5/7")))
        .addLegalScouts(Scout.newBuilder().setEnd(End.END_LEFT).setInsertAt(0))
        .addLegalScouts(scout)
        .setScoutAndShowAvailable(true)
        .build();
    stream.send(wrap(combo));
    assertTrue(stream.next().getAction().getAction().hasScoutAndShow());
    stream.send(RefereeMessage.newBuilder().setAnswerResult(AnswerResult.newBuilder()
        .setMatchId("m-1").setRequestId(2).setStatus(AnswerStatus.ANSWER_STATUS_ILLEGAL)
        .setReason("does not beat").setStrikes(1)).build());
    BotMessage retry = stream.next();
    assertEquals(2, retry.getAction().getRequestId());
    assertEquals(Moves.fallback(combo), retry.getAction().getAction());
    run.cancel(true);
  }

  @Test
  void asksForTheFullStreamWithPublicEventsOrWhenTheBotWantsThem() throws Exception {
    Future<Integer> flagged = play(bot(Moves::fallback), "good", "--public-events");
    Stream first = streams.poll(5, TimeUnit.SECONDS);
    assertNotNull(first);
    BotMessage flaggedHello = first.next();
    assertFalse(flaggedHello.getHello().getLean(), "--public-events: the full stream");
    assertTrue(flaggedHello.getHello().getAcceptsBundles(), "bundles on a full stream too");
    flagged.cancel(true);
    first.out().onError(Status.UNAVAILABLE.asRuntimeException());

    ScoutBot watcher = new ScoutBot() {
      @Override
      public boolean chooseRotation(RotationRequest request) {
        return false;
      }

      @Override
      public Action act(DecisionRequest request) {
        return Moves.fallback(request);
      }

      @Override
      public boolean wantsPublicEvents() {
        return true;
      }
    };
    ArenaClient client = new ArenaClient(channel, ClientConfig.parse(List.of("--address", "x",
        "--token", "good"), Map.of()), watcher);
    ExecutorService own = Executors.newSingleThreadExecutor();
    try {
      Future<Integer> wanting = own.submit(client::run);
      Stream second = streams.poll(5, TimeUnit.SECONDS);
      assertNotNull(second);
      assertFalse(second.next().getHello().getLean(), "wantsPublicEvents: the full stream");
      client.stop();
      wanting.get(5, TimeUnit.SECONDS);
    } finally {
      own.shutdownNow();
    }
  }

  private static RefereeMessage roundEnded(String matchId) {
    return RefereeMessage.newBuilder().setRoundEnded(RoundEnded.newBuilder().setMatchId(matchId))
        .build();
  }

  private static RefereeMessage rotationRequest(String matchId, long requestId) {
    return RefereeMessage.newBuilder().setRotationRequest(RotationRequest.newBuilder()
        .setMatchId(matchId).setRequestId(requestId).addAllHand(cards("4/1 4/2 9/3"))
        .setDeadlineMs(2000)).build();
  }

  @Test
  void playsALeanMatchWithoutAcceptedResultsOrEvents() throws Exception {
    // No ACCEPTED, no PublicEvent: the next request (or the round's end) closes a request. A
    // rejection keeps it open and gets the fallback; a stray verdict on a request the match
    // has moved past gets nothing.
    AtomicInteger calls = new AtomicInteger();
    Future<Integer> run = play(bot(request -> {
      calls.incrementAndGet();
      return Moves.show(0, 2);
    }), "good", "--max-matches", "1");
    Stream stream = handshake(false);
    stream.send(matchStart("m-1", false));
    stream.send(rotationRequest("m-1", 1));
    assertTrue(stream.next().getRotation().getRotate());
    stream.send(wrap(decision("m-1", 2, 2000, 0)));
    assertEquals(Moves.show(0, 2), stream.next().getAction().getAction());
    stream.send(result("m-1", 1, AnswerStatus.ANSWER_STATUS_ILLEGAL)); // stray: 2 closed it
    stream.send(result("m-1", 2, AnswerStatus.ANSWER_STATUS_ILLEGAL));
    BotMessage retry = stream.next();
    assertEquals(2, retry.getAction().getRequestId());
    assertEquals(Moves.show(0, 1), retry.getAction().getAction(), "the fallback");
    stream.send(wrap(decision("m-1", 3, 2000, 0)));
    BotMessage third = stream.next();
    assertEquals(3, third.getAction().getRequestId());
    assertEquals(Moves.show(0, 2), third.getAction().getAction());
    stream.send(roundEnded("m-1"));
    stream.send(result("m-1", 3, AnswerStatus.ANSWER_STATUS_ILLEGAL)); // stray: the round ended
    stream.send(rotationRequest("m-1", 4));
    BotMessage fourth = stream.next();
    assertEquals(4, fourth.getRotation().getRequestId());
    assertTrue(fourth.getRotation().getRotate());
    stream.send(matchEnded("m-1"));
    assertEquals(1, run.get(5, TimeUnit.SECONDS));
    assertNull(stream.in().poll(300, TimeUnit.MILLISECONDS), "nothing else is sent");
    assertEquals(2, calls.get());
  }

  @Test
  void reconnectsAndResendsALostAnswerWithoutAskingTheBotAgain() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    Future<Integer> run = play(bot(request -> {
      calls.incrementAndGet();
      return Moves.show(0, 2);
    }), "good");
    Stream first = handshake(false);
    first.send(matchStart("m-1", false));
    first.send(wrap(decision("m-1", 9, 5000, 5000)));
    assertEquals(Moves.show(0, 2), first.next().getAction().getAction());
    first.out().onError(Status.UNAVAILABLE.withDescription("referee restarting")
        .asRuntimeException()); // the answer is "lost"

    Stream second = handshake(true);
    second.send(matchStart("m-1", true));
    second.send(wrap(decision("m-1", 9, 3000, 5000))); // the open request, re-sent
    BotMessage again = second.next();
    assertEquals(9, again.getAction().getRequestId());
    assertEquals(Moves.show(0, 2), again.getAction().getAction());
    assertEquals(1, calls.get(), "the bot is asked once");
    // No ACCEPTED ever came (a lean stream): the next request is answered as usual.
    second.send(wrap(decision("m-1", 10, 3000, 5000)));
    assertEquals(10, second.next().getAction().getRequestId());
    assertEquals(2, calls.get());
    assertFalse(run.isDone());
    run.cancel(true);
  }

  private static RefereeMessage bundle(RefereeMessage... messages) {
    return RefereeMessage.newBuilder().setBundle(RefereeBundle.newBuilder()
        .addAllMessages(List.of(messages))).build();
  }

  /** The next {@code count} answers, keyed "match/request". */
  private static Map<String, BotMessage> answers(Stream stream, int count) throws Exception {
    Map<String, BotMessage> byRequest = new java.util.TreeMap<>();
    for (int i = 0; i < count; i++) {
      BotMessage answer = stream.next();
      String key = answer.hasRotation()
          ? answer.getRotation().getMatchId() + "/" + answer.getRotation().getRequestId()
          : answer.getAction().getMatchId() + "/" + answer.getAction().getRequestId();
      assertNull(byRequest.put(key, answer), "answered twice: " + key);
    }
    return byRequest;
  }

  @Test
  void handlesEachMessageOfABundleAsIfItCameAlone() throws Exception {
    // What the bot sees, per match, in order: the same as for the messages sent one by one.
    Map<String, List<String>> seen = new ConcurrentHashMap<>();
    ScoutBot recorder = new ScoutBot() {
      private void note(String matchId, String what) {
        seen.computeIfAbsent(matchId, id -> new CopyOnWriteArrayList<>()).add(what);
      }

      @Override
      public void onMatchStart(MatchStart start) {
        note(start.getMatchId(), "start");
      }

      @Override
      public boolean chooseRotation(RotationRequest request) {
        note(request.getMatchId(), "rotation " + request.getRequestId());
        return true;
      }

      @Override
      public Action act(DecisionRequest request) {
        note(request.getMatchId(), "act " + request.getRequestId());
        return Moves.show(0, 2);
      }

      @Override
      public void onRoundEnd(RoundEnded roundEnded) {
        note(roundEnded.getMatchId(), "round end");
      }
    };
    BlockingQueue<String> warnings = new LinkedBlockingQueue<>();
    Handler capture = new Handler() {
      @Override
      public void publish(LogRecord record) {
        warnings.add(record.getMessage());
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    Logger clientLog = Logger.getLogger(ArenaClient.class.getName());
    clientLog.addHandler(capture);
    try {
      Future<Integer> run = play(recorder, "good", "--max-matches", "2");
      Stream stream = streams.poll(5, TimeUnit.SECONDS);
      assertNotNull(stream);
      BotMessage hello = stream.next();
      assertTrue(hello.getHello().getAcceptsBundles(), "Hello says the kit reads bundles");
      stream.send(welcome(false));

      // MatchStart + RotationRequest of two matches in one message: each request answered.
      stream.send(bundle(matchStart("m-1", false), rotationRequest("m-1", 1),
          matchStart("m-2", false), rotationRequest("m-2", 1)));
      Map<String, BotMessage> rotations = answers(stream, 2);
      assertEquals(Set.of("m-1/1", "m-2/1"), rotations.keySet());
      assertTrue(rotations.get("m-1/1").getRotation().getRotate());
      assertTrue(rotations.get("m-2/1").getRotation().getRotate());

      // DecisionRequests of two matches in one message: both answered, as if sent alone.
      stream.send(bundle(wrap(decision("m-1", 2, 2000, 0)), wrap(decision("m-2", 2, 2000, 0))));
      Map<String, BotMessage> actions = answers(stream, 2);
      assertEquals(Set.of("m-1/2", "m-2/2"), actions.keySet());
      assertEquals(Moves.show(0, 2), actions.get("m-1/2").getAction().getAction());
      assertEquals(Moves.show(0, 2), actions.get("m-2/2").getAction().getAction());

      // An inner message is routed like a lone one: a verdict closes or reopens its request.
      stream.send(bundle(result("m-1", 2, AnswerStatus.ANSWER_STATUS_ILLEGAL)));
      BotMessage retry = stream.next();
      assertEquals(2, retry.getAction().getRequestId());
      assertEquals("m-1", retry.getAction().getMatchId());
      assertEquals(Moves.show(0, 1), retry.getAction().getAction(), "the fallback");

      // A bundle inside a bundle is ignored (with a log line); its neighbours are not.
      stream.send(bundle(bundle(wrap(decision("m-1", 3, 2000, 0))),
          wrap(decision("m-2", 3, 2000, 0))));
      BotMessage third = stream.next();
      assertEquals("m-2", third.getAction().getMatchId());
      assertEquals(3, third.getAction().getRequestId());
      assertNull(stream.in().poll(300, TimeUnit.MILLISECONDS), "the nested request is ignored");
      String nested = null;
      for (String message : warnings) {
        if (message.contains("bundle inside a bundle")) {
          nested = message;
        }
      }
      assertNotNull(nested, "a nested bundle is logged");
      stream.send(bundle()); // an empty bundle: nothing to do

      // A round's end and the next round's rotation in one message, in that order.
      stream.send(bundle(roundEnded("m-1"), rotationRequest("m-1", 4)));
      BotMessage fourth = stream.next();
      assertEquals("m-1", fourth.getRotation().getMatchId());
      assertEquals(4, fourth.getRotation().getRequestId());

      // The ends of both matches in one message: run() counts both and returns.
      stream.send(bundle(matchEnded("m-1"), matchEnded("m-2")));
      assertEquals(2, run.get(5, TimeUnit.SECONDS));
      assertNull(stream.in().poll(300, TimeUnit.MILLISECONDS), "nothing else is sent");
      assertEquals(List.of("start", "rotation 1", "act 2", "round end", "rotation 4"),
          seen.get("m-1"));
      assertEquals(List.of("start", "rotation 1", "act 2", "act 3"), seen.get("m-2"));
    } finally {
      clientLog.removeHandler(capture);
    }
  }

  private static RefereeMessage goodbye(GoodbyeReason reason, boolean reconnect, int retryMs) {
    return RefereeMessage.newBuilder().setGoodbye(Goodbye.newBuilder().setReason(reason)
        .setMessage("test").setReconnect(reconnect).setRetryAfterMs(retryMs)).build();
  }

  @Test
  void aGoodbyeWithoutReconnectEndsRunNormally() throws Exception {
    Future<Integer> run = play(bot(Moves::fallback), "good");
    Stream stream = handshake(false);
    stream.send(goodbye(GoodbyeReason.GOODBYE_REASON_FINISHED, false, 0));
    // The bot half-closes after the goodbye; the fake referee then ends the call.
    stream.closed().get(5, TimeUnit.SECONDS);
    assertEquals(0, run.get(5, TimeUnit.SECONDS));
    assertNull(streams.poll(300, TimeUnit.MILLISECONDS), "no second Play call");
  }

  @Test
  void aGoodbyeWithReconnectComesBackAfterRetryAfter() throws Exception {
    Future<Integer> run = play(bot(Moves::fallback), "good");
    Stream first = handshake(false);
    first.send(goodbye(GoodbyeReason.GOODBYE_REASON_SHUTDOWN, true, 400));
    long sent = System.nanoTime();
    Stream second = handshake(false);
    long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sent);
    assertTrue(waitedMs >= 390, "reconnected after " + waitedMs + " ms");
    second.send(goodbye(GoodbyeReason.GOODBYE_REASON_FINISHED, false, 0));
    assertEquals(0, run.get(5, TimeUnit.SECONDS));
    assertNull(streams.poll(300, TimeUnit.MILLISECONDS), "no third Play call");
  }

  @Test
  void anUnknownTokenEndsRunWithARejection() throws Exception {
    Future<Integer> run = play(bot(Moves::fallback), "bad");
    ExecutionException error = org.junit.jupiter.api.Assertions.assertThrows(
        ExecutionException.class, () -> run.get(5, TimeUnit.SECONDS));
    ConnectionRejectedException rejected =
        assertInstanceOf(ConnectionRejectedException.class, error.getCause());
    assertEquals(Status.Code.UNAUTHENTICATED, rejected.code());
    assertTrue(rejected.getMessage().contains("unknown bot token"));
  }

  @Test
  void supersededEndsRunWithARejection() throws Exception {
    Future<Integer> run = play(bot(Moves::fallback), "good");
    Stream stream = handshake(false);
    stream.out().onError(Status.ABORTED
        .withDescription("superseded by a newer connection with the same token")
        .asRuntimeException());
    ExecutionException error = org.junit.jupiter.api.Assertions.assertThrows(
        ExecutionException.class, () -> run.get(5, TimeUnit.SECONDS));
    assertEquals(Status.Code.ABORTED,
        assertInstanceOf(ConnectionRejectedException.class, error.getCause()).code());
  }

  @Test
  void whichStatusesAreFinal() {
    assertTrue(ArenaClient.isRejection(Status.UNAUTHENTICATED));
    assertTrue(ArenaClient.isRejection(Status.INVALID_ARGUMENT));
    assertTrue(ArenaClient.isRejection(Status.FAILED_PRECONDITION));
    assertTrue(ArenaClient.isRejection(Status.ABORTED.withDescription(
        "superseded by a newer connection with the same token")));
    assertFalse(ArenaClient.isRejection(Status.ABORTED.withDescription("something else")));
    assertFalse(ArenaClient.isRejection(Status.UNAVAILABLE));
    assertFalse(ArenaClient.isRejection(Status.CANCELLED));
    assertFalse(ArenaClient.isRejection(Status.DEADLINE_EXCEEDED));
    assertFalse(ArenaClient.isRejection(Status.RESOURCE_EXHAUSTED));
    assertFalse(ArenaClient.isRejection(Status.OK));
  }

  @Test
  void describesAnEndedStreamOnOneLine() {
    assertEquals("the referee ended the stream", ArenaClient.describe(Status.OK));
    assertEquals("UNAVAILABLE: io exception (Connection refused)", ArenaClient.describe(
        Status.UNAVAILABLE.withDescription("io exception\nChannel Pipeline: [SslHandler#0]")
            .withCause(new java.io.IOException("outer",
                new java.net.ConnectException("Connection refused")))));
    assertEquals("CANCELLED", ArenaClient.describe(Status.CANCELLED));
  }

  private static RefereeMessage assignment(String matchId, String address, String ticket) {
    return RefereeMessage.newBuilder().setAssignment(MatchAssignment.newBuilder()
        .setMatchId(matchId).setAddress(address).setTicket(ticket)).build();
  }

  @Test
  void playsAssignedMatchesOnANodeStreamAndReopensItOnlyWhileATicketIsLeft() throws Exception {
    // The node lets in live tickets only, and notes every authorization it was offered.
    String node = InProcessServerBuilder.generateName();
    Set<String> live = ConcurrentHashMap.newKeySet();
    live.addAll(List.of("Bearer t-1", "Bearer t-2"));
    List<String> offered = new CopyOnWriteArrayList<>();
    BlockingQueue<Stream> nodeStreams = new LinkedBlockingQueue<>();
    fakeReferee(node, authorization -> offered.add(authorization) && live.contains(authorization),
        nodeStreams);
    List<String> tlsAsked = new CopyOnWriteArrayList<>();
    ArenaClient client = new ArenaClient(channel, ClientConfig.parse(List.of("--address", "main",
        "--token", "good", "--bot-name", "tester"), Map.of()), bot(request -> Moves.show(0, 2)),
        (address, tls) -> {
          tlsAsked.add(address + (tls ? " tls" : " plaintext"));
          return InProcessChannelBuilder.forName(address).build();
        });
    Future<Integer> run = runner.submit(client::run);
    Stream main = streams.poll(5, TimeUnit.SECONDS);
    assertNotNull(main);
    BotMessage hello = main.next();
    main.send(welcome(false));

    main.send(assignment("m-1", node, "t-1"));
    Stream first = nodeStreams.poll(5, TimeUnit.SECONDS);
    assertNotNull(first, "the bot should open Play on the node");
    assertEquals("Bearer t-1", first.authorization());
    assertEquals(hello, first.next(), "the same Hello as on the main stream");
    assertEquals(List.of(node + " plaintext"), tlsAsked);
    first.send(welcome(false));
    first.send(matchStart("m-1", false));
    main.send(assignment("m-2", node, "t-2"));
    first.send(matchStart("m-2", false));
    assertNull(nodeStreams.poll(300, TimeUnit.MILLISECONDS), "one stream per node");

    first.send(wrap(decision("m-1", 7, 5000, 5000)));
    BotMessage answer = first.next();
    assertEquals("m-1", answer.getAction().getMatchId());
    assertEquals(7, answer.getAction().getRequestId());
    assertNull(main.in().poll(200, TimeUnit.MILLISECONDS), "the answer goes where it was asked");

    // Cut the node stream: t-2 (the newest) is refused and dropped, t-1 opens it again.
    live.remove("Bearer t-2");
    first.out().onError(Status.UNAVAILABLE.withDescription("node restarting").asRuntimeException());
    Stream second = nodeStreams.poll(5, TimeUnit.SECONDS);
    assertNotNull(second, "the bot should reopen its node stream");
    assertEquals("Bearer t-1", second.authorization());
    assertEquals(List.of("Bearer t-1", "Bearer t-2", "Bearer t-1"), offered);
    assertTrue(second.next().hasHello());
    second.send(welcome(true));
    second.send(matchStart("m-1", true));
    second.send(wrap(decision("m-1", 7, 3000, 5000))); // the open request, re-sent
    assertEquals(answer, second.next(), "the lost answer, re-sent on the new node stream");

    // The last match with a ticket ends: a Goodbye then lets the node stream go, and the bot
    // keeps playing on its main stream.
    second.send(matchEnded("m-1"));
    second.send(goodbye(GoodbyeReason.GOODBYE_REASON_FINISHED, false, 0));
    second.closed().get(5, TimeUnit.SECONDS);
    assertNull(nodeStreams.poll(500, TimeUnit.MILLISECONDS), "no ticket left: no new stream");
    assertEquals(3, offered.size());
    assertFalse(run.isDone(), "a node's Goodbye never stops the bot");
    main.send(matchStart("m-3", false));
    main.send(wrap(decision("m-3", 1, 2000, 0)));
    assertEquals("m-3", main.next().getAction().getMatchId());
    run.cancel(true);
  }

  @Test
  void givesUpOnANodeUnreachableForTheLimitAndStartsAfreshOnALaterAssignment() throws Exception {
    int port;
    try (ServerSocket probe = new ServerSocket(0)) {
      port = probe.getLocalPort(); // free again once closed: nothing listens there
    }
    String node = "127.0.0.1:" + port;
    BlockingQueue<String> warnings = new LinkedBlockingQueue<>();
    Handler capture = new Handler() {
      @Override
      public void publish(LogRecord record) {
        warnings.add(record.getMessage());
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    Logger clientLog = Logger.getLogger(ArenaClient.class.getName());
    clientLog.addHandler(capture);
    try {
      ClientConfig config = ClientConfig.parse(List.of("--address", "main", "--token", "good",
          "--bot-name", "tester"), Map.of());
      List<String> opened = new CopyOnWriteArrayList<>();
      Duration limit = Duration.ofSeconds(1);
      ArenaClient client = new ArenaClient(channel, config, bot(request -> Moves.show(0, 2)),
          (address, tls) -> {
            opened.add(address);
            return ArenaClient.newChannel(address, tls, config);
          }, limit);
      Future<Integer> run = runner.submit(client::run);
      Stream main = handshake(false);

      long assignedAt = System.nanoTime();
      main.send(assignment("m-1", node, "t-1"));
      main.send(assignment("m-2", node, "t-2"));
      String gaveUp = null;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (gaveUp == null && System.nanoTime() < deadline) {
        String message = warnings.poll(100, TimeUnit.MILLISECONDS);
        if (message != null && message.contains("unreachable")) {
          gaveUp = message;
        }
      }
      assertNotNull(gaveUp, "the bot should give up on a node it cannot reach");
      assertTrue(System.nanoTime() - assignedAt >= limit.toNanos(), "not before the limit");
      assertEquals("node " + node + " unreachable for 1 s; dropping its 2 ticket(s) and letting"
          + " it go", gaveUp);
      assertEquals(List.of(node), opened);
      assertFalse(run.isDone(), "an unreachable node never stops the bot");

      // The node comes up: the bot, holding no ticket for it any more, does not come back ...
      BlockingQueue<Stream> nodeStreams = new LinkedBlockingQueue<>();
      fakeReferee(Grpc.newServerBuilderForPort(port, InsecureServerCredentials.create()),
          authorization -> true, nodeStreams);
      assertNull(nodeStreams.poll(1500, TimeUnit.MILLISECONDS), "the link was let go");

      // ... until a later assignment there, which starts afresh with its own ticket only.
      main.send(assignment("m-3", node, "t-3"));
      Stream fresh = nodeStreams.poll(10, TimeUnit.SECONDS);
      assertNotNull(fresh, "a later assignment opens a new node stream");
      assertEquals("Bearer t-3", fresh.authorization());
      assertEquals(List.of(node, node), opened, "a new link, with a channel of its own");
      assertTrue(fresh.next().hasHello());
      fresh.send(welcome(false));
      fresh.send(matchStart("m-3", false));
      fresh.send(matchEnded("m-3"));
      fresh.out().onError(Status.UNAVAILABLE.withDescription("cut").asRuntimeException());
      assertNull(nodeStreams.poll(1000, TimeUnit.MILLISECONDS),
          "the dropped tickets t-1 and t-2 reopen nothing");

      main.send(matchStart("m-4", false));
      main.send(wrap(decision("m-4", 1, 2000, 0)));
      assertEquals("m-4", main.next().getAction().getMatchId(), "the main stream plays on");
      run.cancel(true);
    } finally {
      clientLog.removeHandler(capture);
    }
  }
}
