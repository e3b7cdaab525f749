package scout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

// fakeArena is an in-memory referee whose Play is the test's function.
type fakeArena struct {
	scoutv1.UnimplementedArenaServer
	play func(grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error
}

func (f *fakeArena) Play(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
	return f.play(stream)
}

type playFunc func(grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error

// runAgainst runs the client against a fake referee until the test ends, and returns Run's
// result channel.
func runAgainst(t *testing.T, bot Bot, cfg Config, play playFunc) (<-chan error, context.CancelFunc) {
	t.Helper()
	return runAgainstReferees(t, bot, cfg, map[string]playFunc{"bufnet": play})
}

// runAgainstReferees runs the client against fake referees by host ("passthrough:///" + host
// reaches one; the client's Config.Address is "bufnet"), until the test ends, and returns
// Run's result channel.
func runAgainstReferees(t *testing.T, bot Bot, cfg Config, referees map[string]playFunc) (<-chan error, context.CancelFunc) {
	t.Helper()
	listeners := make(map[string]*bufconn.Listener, len(referees))
	for host, play := range referees {
		lis := bufconn.Listen(1 << 20)
		srv := grpc.NewServer()
		scoutv1.RegisterArenaServer(srv, &fakeArena{play: play})
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		listeners[host] = lis
	}

	cfg.Address = "passthrough:///bufnet"
	if cfg.Token == "" {
		cfg.Token = "secret"
	}
	if cfg.MaxConcurrentMatches == 0 {
		cfg.MaxConcurrentMatches = 4
	}
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(
		func(ctx context.Context, host string) (net.Conn, error) {
			lis := listeners[host]
			if lis == nil {
				return nil, fmt.Errorf("no fake referee at %q", host)
			}
			return lis.DialContext(ctx)
		}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, bot)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return done, cancel
}

// testWriter sends the client's logs to the test log (shown with -v or on failure).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// handshake checks the token and Hello and answers with Welcome.
func handshake(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage], wantMax uint32, resumed bool) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer secret" {
		return status.Errorf(codes.Unauthenticated, "unknown bot token %v", got)
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil || hello.GetProtocolVersion() != 1 || hello.GetMaxConcurrentMatches() != wantMax {
		return status.Errorf(codes.InvalidArgument, "bad hello %v", first)
	}
	return stream.Send(&scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_Welcome{
		Welcome: &scoutv1.Welcome{ProtocolVersion: 1, BotName: "bot", SessionId: "s", Resumed: resumed}}})
}

func decision(matchID string, id uint64, deadlineMs, bankMs uint32) *scoutv1.RefereeMessage {
	return &scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_DecisionRequest{DecisionRequest: &scoutv1.DecisionRequest{
		MatchId:     matchID,
		RequestId:   id,
		Observation: &scoutv1.Observation{MatchId: matchID, Hand: cards(1, 2, 2, 3, 7, 8)},
		LegalShows:  []*scoutv1.Show{{Start: 0, Length: 1}, {Start: 0, Length: 2}, {Start: 2, Length: 1}},
		DeadlineMs:  deadlineMs,
		TimeBankMs:  bankMs,
	}}}
}

func matchStart(matchID string) *scoutv1.RefereeMessage {
	return &scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_MatchStart{MatchStart: &scoutv1.MatchStart{
		MatchId: matchID, NumPlayers: 2, NumRounds: 2}}}
}

type answer struct {
	msg *scoutv1.BotMessage
	at  time.Time
}

// collect reads the bot's answers into a channel until the stream ends.
func collect(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) <-chan answer {
	out := make(chan answer, 16)
	go func() {
		defer close(out)
		for {
			msg, err := stream.Recv()
			if err != nil {
				return
			}
			out <- answer{msg, time.Now()}
		}
	}()
	return out
}

func next(t *testing.T, answers <-chan answer, within time.Duration) answer {
	t.Helper()
	select {
	case a, ok := <-answers:
		if !ok {
			t.Fatal("the stream ended")
		}
		return a
	case <-time.After(within):
		t.Fatal("no answer in time")
	}
	return answer{}
}

func TestConcurrentMatches(t *testing.T) {
	// The bot's answer in match A waits until it was asked in match B: this only finishes when
	// the two matches are played at once.
	askedB := make(chan struct{})
	bot := ActFunc(func(ctx context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		if req.GetMatchId() == "A" {
			select {
			case <-askedB:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			close(askedB)
		}
		return ShowAction(req.GetLegalShows()[1]), nil
	})
	answers := make(chan answer, 4)
	runAgainst(t, bot, Config{MaxConcurrentMatches: 2}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		if err := handshake(stream, 2, false); err != nil {
			return err
		}
		for _, m := range []*scoutv1.RefereeMessage{matchStart("A"), matchStart("B"), decision("A", 1, 5000, 0), decision("B", 9, 5000, 0)} {
			if err := stream.Send(m); err != nil {
				return err
			}
		}
		for a := range collect(stream) {
			answers <- a
		}
		return nil
	})
	got := map[string]uint64{}
	for range 2 {
		a := next(t, answers, 3*time.Second).msg.GetAction()
		if !proto.Equal(a.GetAction(), ShowAction(&scoutv1.Show{Start: 0, Length: 2})) {
			t.Errorf("answer %v; want the bot's show 0+2", a)
		}
		got[a.GetMatchId()] = a.GetRequestId()
	}
	if got["A"] != 1 || got["B"] != 9 {
		t.Errorf("answers by match = %v; want A:1 B:9", got)
	}
}

func TestFallbackBeforeDeadline(t *testing.T) {
	// A bot that never answers: the client sends the fallback shortly before deadline + bank.
	bot := ActFunc(func(ctx context.Context, _ *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	sent := make(chan time.Time, 1)
	answers := make(chan answer, 4)
	runAgainst(t, bot, Config{SafetyMargin: 100 * time.Millisecond}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		if err := handshake(stream, 4, false); err != nil {
			return err
		}
		sent <- time.Now()
		if err := stream.Send(decision("M", 3, 200, 300)); err != nil {
			return err
		}
		for a := range collect(stream) {
			answers <- a
		}
		return nil
	})
	start := <-sent
	a := next(t, answers, 3*time.Second)
	elapsed := a.at.Sub(start)
	if elapsed < 300*time.Millisecond || elapsed > 500*time.Millisecond {
		t.Errorf("fallback after %v; want about 400 ms (deadline 200 + bank 300 - margin 100)", elapsed)
	}
	want := ShowAction(&scoutv1.Show{Start: 0, Length: 1})
	if got := a.msg.GetAction(); got.GetRequestId() != 3 || !proto.Equal(got.GetAction(), want) {
		t.Errorf("fallback %v; want the first legal show for request 3", got)
	}
}

func TestDisableDeadlineFallback(t *testing.T) {
	// With the deadline fallback off, a bot that does not answer sends nothing; the referee's
	// TIMED_OUT cancels the bot's context.
	cancelled := make(chan struct{})
	bot := ActFunc(func(ctx context.Context, _ *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	answers := make(chan answer, 4)
	runAgainst(t, bot, Config{DisableDeadlineFallback: true}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		if err := handshake(stream, 4, false); err != nil {
			return err
		}
		if err := stream.Send(decision("M", 2, 100, 100)); err != nil {
			return err
		}
		in := collect(stream)
		time.Sleep(600 * time.Millisecond)
		if err := stream.Send(&scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_AnswerResult{AnswerResult: &scoutv1.AnswerResult{
			MatchId: "M", RequestId: 2, Status: scoutv1.AnswerStatus_ANSWER_STATUS_TIMED_OUT, Strikes: 1}}}); err != nil {
			return err
		}
		for a := range in {
			answers <- a
		}
		return nil
	})
	select {
	case <-cancelled:
	case <-time.After(3 * time.Second):
		t.Fatal("TIMED_OUT did not cancel the bot's context")
	}
	select {
	case a := <-answers:
		t.Errorf("the client answered %v; want nothing", a.msg)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestIllegalAnswerGetsTheFallback(t *testing.T) {
	// Request 5: the bot's listed show is judged ILLEGAL by the referee, so the client sends
	// the fallback while the request stays open. Request 6: the bot returns a show the legal
	// list does not hold, so the client sends the fallback instead of earning a strike.
	bot := ActFunc(func(_ context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		if req.GetRequestId() == 6 {
			return ShowAction(&scoutv1.Show{Start: 1, Length: 2}), nil
		}
		return ShowAction(req.GetLegalShows()[2]), nil
	})
	answers := make(chan answer, 4)
	runAgainst(t, bot, Config{}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		if err := handshake(stream, 4, false); err != nil {
			return err
		}
		if err := stream.Send(decision("M", 5, 2000, 0)); err != nil {
			return err
		}
		in := collect(stream)
		answers <- <-in
		if err := stream.Send(&scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_AnswerResult{AnswerResult: &scoutv1.AnswerResult{
			MatchId: "M", RequestId: 5, Status: scoutv1.AnswerStatus_ANSWER_STATUS_ILLEGAL, Strikes: 1}}}); err != nil {
			return err
		}
		answers <- <-in
		if err := stream.Send(decision("M", 6, 2000, 0)); err != nil {
			return err
		}
		for a := range in {
			answers <- a
		}
		return nil
	})
	fallback := ShowAction(&scoutv1.Show{Start: 0, Length: 1})
	expect := []struct {
		id     uint64
		action *scoutv1.Action
	}{{5, ShowAction(&scoutv1.Show{Start: 2, Length: 1})}, {5, fallback}, {6, fallback}}
	for i, want := range expect {
		got := next(t, answers, 3*time.Second).msg.GetAction()
		if got.GetRequestId() != want.id || !proto.Equal(got.GetAction(), want.action) {
			t.Errorf("answer %d: %v; want %v for request %d", i, got, want.action, want.id)
		}
	}
}

// The Hello also always sets accepts_bundles: the client unpacks RefereeMessage.bundle.
func TestHelloAsksForALeanStreamUnlessPublicEvents(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cfg      Config
		wantLean bool
	}{{"default", Config{}, true}, {"PublicEvents", Config{PublicEvents: true}, false}} {
		t.Run(tt.name, func(t *testing.T) {
			hellos := make(chan *scoutv1.Hello, 1)
			bot := ActFunc(func(context.Context, *scoutv1.DecisionRequest) (*scoutv1.Action, error) { return nil, nil })
			runAgainst(t, bot, tt.cfg, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
				first, err := stream.Recv()
				if err != nil {
					return err
				}
				hellos <- first.GetHello()
				<-stream.Context().Done()
				return nil
			})
			select {
			case hello := <-hellos:
				if hello == nil || hello.GetLean() != tt.wantLean || !hello.GetAcceptsBundles() {
					t.Errorf("Hello %v; want lean %t and accepts_bundles", hello, tt.wantLean)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("no Hello")
			}
		})
	}
}

// rotatingBot rotates every hand and shows LegalShows[2] (never the fallback).
type rotatingBot struct{ asked chan uint64 }

func (b rotatingBot) ChooseRotation(_ context.Context, req *scoutv1.RotationRequest) (bool, error) {
	b.asked <- req.GetRequestId()
	return true, nil
}

func (b rotatingBot) Act(_ context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
	b.asked <- req.GetRequestId()
	return ShowAction(req.GetLegalShows()[2]), nil
}

func rotationRequestMsg(matchID string, id uint64) *scoutv1.RefereeMessage {
	return &scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_RotationRequest{RotationRequest: &scoutv1.RotationRequest{
		MatchId: matchID, RequestId: id, Hand: cards(1, 2, 3), DeadlineMs: 2000}}}
}

func verdict(matchID string, id uint64, status scoutv1.AnswerStatus) *scoutv1.RefereeMessage {
	return &scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_AnswerResult{AnswerResult: &scoutv1.AnswerResult{
		MatchId: matchID, RequestId: id, Status: status, Strikes: 1}}}
}

func TestLeanMatchWithoutAcceptedResultsOrEvents(t *testing.T) {
	// A referee that never sends ACCEPTED nor PublicEvent: the next request (or the round's
	// end) is what closes a request. A rejection keeps it open and gets the fallback once; a
	// stray verdict on a request the match has moved past gets nothing.
	bot := rotatingBot{asked: make(chan uint64, 16)}
	answers := make(chan answer, 16)
	illegal := scoutv1.AnswerStatus_ANSWER_STATUS_ILLEGAL
	runAgainst(t, bot, Config{}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		if err := handshake(stream, 4, false); err != nil {
			return err
		}
		in := collect(stream)
		script := [][]*scoutv1.RefereeMessage{
			{matchStart("L"), rotationRequestMsg("L", 1)},
			{decision("L", 2, 2000, 0)},
			{verdict("L", 1, illegal), verdict("L", 2, illegal)},
			{decision("L", 3, 2000, 0)},
			{{Body: &scoutv1.RefereeMessage_RoundEnded{RoundEnded: &scoutv1.RoundEnded{MatchId: "L"}}},
				verdict("L", 3, illegal), rotationRequestMsg("L", 4)},
			{{Body: &scoutv1.RefereeMessage_MatchEnded{MatchEnded: &scoutv1.MatchEnded{MatchId: "L"}}}},
		}
		for i, step := range script {
			for _, m := range step {
				if err := stream.Send(m); err != nil {
					return err
				}
			}
			if i < len(script)-1 {
				answers <- <-in
			}
		}
		for a := range in {
			answers <- a
		}
		return nil
	})
	fallback := ShowAction(&scoutv1.Show{Start: 0, Length: 1})
	mine := ShowAction(&scoutv1.Show{Start: 2, Length: 1})
	want := []struct {
		id     uint64
		rotate bool
		action *scoutv1.Action
	}{{1, true, nil}, {2, false, mine}, {2, false, fallback}, {3, false, mine}, {4, true, nil}}
	for i, w := range want {
		got := next(t, answers, 3*time.Second).msg
		if w.action == nil {
			if r := got.GetRotation(); r.GetRequestId() != w.id || r.GetRotate() != w.rotate {
				t.Errorf("answer %d: %v; want rotation %d rotate=%t", i, got, w.id, w.rotate)
			}
			continue
		}
		if a := got.GetAction(); a.GetRequestId() != w.id || !proto.Equal(a.GetAction(), w.action) {
			t.Errorf("answer %d: %v; want %v for request %d", i, got, w.action, w.id)
		}
	}
	select {
	case a := <-answers:
		t.Errorf("unexpected answer %v", a.msg)
	case <-time.After(300 * time.Millisecond):
	}
	if len(bot.asked) != 4 {
		t.Errorf("the bot was asked %d times; want 4 (requests 1-4, once each)", len(bot.asked))
	}
}

func TestUnauthenticatedStops(t *testing.T) {
	bot := ActFunc(func(context.Context, *scoutv1.DecisionRequest) (*scoutv1.Action, error) { return nil, nil })
	done, _ := runAgainst(t, bot, Config{Token: "wrong"}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		return handshake(stream, 4, false)
	})
	select {
	case err := <-done:
		var rejected *RejectedError
		if !errors.As(err, &rejected) || rejected.Code != codes.Unauthenticated {
			t.Errorf("Run = %v; want a RejectedError with UNAUTHENTICATED", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run kept going after UNAUTHENTICATED")
	}
}

func TestReconnectAndResend(t *testing.T) {
	// The first stream dies after the bot answered; the second one resends the same request,
	// and the client resends its answer without asking the bot again.
	calls := make(chan struct{}, 4)
	bot := ActFunc(func(_ context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		calls <- struct{}{}
		return ShowAction(req.GetLegalShows()[2]), nil
	})
	answers := make(chan answer, 4)
	sessions := 0
	runAgainst(t, bot, Config{}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		sessions++
		if err := handshake(stream, 4, sessions > 1); err != nil {
			return err
		}
		if err := stream.Send(decision("M", 8, 3000, 0)); err != nil {
			return err
		}
		a, err := stream.Recv()
		if err != nil {
			return err
		}
		answers <- answer{a, time.Now()}
		if sessions == 1 {
			return status.Error(codes.Unavailable, "referee restarting")
		}
		<-stream.Context().Done()
		return nil
	})
	for i := range 2 {
		got := next(t, answers, 5*time.Second).msg.GetAction()
		if got.GetRequestId() != 8 || !proto.Equal(got.GetAction(), ShowAction(&scoutv1.Show{Start: 2, Length: 1})) {
			t.Errorf("answer %d: %v; want show 2+1 for request 8", i, got)
		}
	}
	if len(calls) != 1 {
		t.Errorf("the bot was asked %d times; want once", len(calls))
	}
}

func goodbye(reason scoutv1.GoodbyeReason, reconnect bool, retryAfterMs uint32) *scoutv1.RefereeMessage {
	return &scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_Goodbye{Goodbye: &scoutv1.Goodbye{
		Reason: reason, Message: "test", Reconnect: reconnect, RetryAfterMs: retryAfterMs}}}
}

func TestGoodbyeWithoutReconnectEndsRun(t *testing.T) {
	bot := ActFunc(func(context.Context, *scoutv1.DecisionRequest) (*scoutv1.Action, error) { return nil, nil })
	sessions := make(chan struct{}, 4)
	done, _ := runAgainst(t, bot, Config{}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		sessions <- struct{}{}
		if err := handshake(stream, 4, false); err != nil {
			return err
		}
		return stream.Send(goodbye(scoutv1.GoodbyeReason_GOODBYE_REASON_FINISHED, false, 0))
	})
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v; want nil after Goodbye{reconnect: false}", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run kept going after Goodbye{reconnect: false}")
	}
	if len(sessions) != 1 {
		t.Errorf("%d Play calls; want 1", len(sessions))
	}
}

func TestGoodbyeWithReconnectWaitsRetryAfter(t *testing.T) {
	bot := ActFunc(func(context.Context, *scoutv1.DecisionRequest) (*scoutv1.Action, error) { return nil, nil })
	opened := make(chan time.Time, 4)
	byes := make(chan time.Time, 1)
	sessions := 0
	done, _ := runAgainst(t, bot, Config{}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		sessions++
		opened <- time.Now()
		if err := handshake(stream, 4, false); err != nil {
			return err
		}
		if sessions == 1 {
			if err := stream.Send(goodbye(scoutv1.GoodbyeReason_GOODBYE_REASON_SHUTDOWN, true, 400)); err != nil {
				return err
			}
			byes <- time.Now()
			// Going down: an UNAVAILABLE end does not turn the goodbye into a fault.
			return status.Error(codes.Unavailable, "shutting down")
		}
		return stream.Send(goodbye(scoutv1.GoodbyeReason_GOODBYE_REASON_FINISHED, false, 0))
	})
	<-opened
	byeAt := <-byes
	select {
	case second := <-opened:
		if gap := second.Sub(byeAt); gap < 390*time.Millisecond {
			t.Errorf("reconnected %v after the goodbye; want >= 400 ms", gap)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reconnect after Goodbye{reconnect: true}")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run kept going after the second goodbye")
	}
}

func TestDialTargetOfUnixAndTCPAddresses(t *testing.T) {
	for addr, want := range map[string][2]string{
		"unix:///run/scout/referee.sock": {"unix", "/run/scout/referee.sock"},
		"unix:/run/scout/referee.sock":   {"unix", "/run/scout/referee.sock"},
		"127.0.0.1:50051":                {"tcp", "127.0.0.1:50051"},
	} {
		if network, target := dialTarget(addr); network != want[0] || target != want[1] {
			t.Errorf("dialTarget(%q) = %q, %q; want %q, %q", addr, network, target, want[0], want[1])
		}
	}
}
