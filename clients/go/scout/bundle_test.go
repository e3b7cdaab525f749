package scout

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

func bundle(msgs ...*scoutv1.RefereeMessage) *scoutv1.RefereeMessage {
	return &scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_Bundle{Bundle: &scoutv1.RefereeBundle{Messages: msgs}}}
}

// bundleHandshake answers the Hello with a Welcome, and says whether the Hello set
// accepts_bundles (a referee may bundle only then). It checks the Hello like handshake does.
func bundleHandshake(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) (bool, error) {
	first, err := stream.Recv()
	if err != nil {
		return false, err
	}
	hello := first.GetHello()
	if hello == nil || hello.GetProtocolVersion() != 1 || hello.GetMaxConcurrentMatches() != 4 {
		return false, status.Errorf(codes.InvalidArgument, "bad hello %v", first)
	}
	return hello.GetAcceptsBundles(), stream.Send(&scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_Welcome{
		Welcome: &scoutv1.Welcome{ProtocolVersion: 1, BotName: "bot", SessionId: "s"}}})
}

// journalBot rotates every hand, shows LegalShows[2], and notes, per match, every request it
// is asked and every message it observes, in order.
type journalBot struct {
	mu      sync.Mutex
	journal map[string][]string
}

func (b *journalBot) note(matchID, entry string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.journal[matchID] = append(b.journal[matchID], entry)
}

func (b *journalBot) ChooseRotation(_ context.Context, req *scoutv1.RotationRequest) (bool, error) {
	b.note(req.GetMatchId(), fmt.Sprintf("rotation %d", req.GetRequestId()))
	return true, nil
}

func (b *journalBot) Act(_ context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
	b.note(req.GetMatchId(), fmt.Sprintf("decision %d", req.GetRequestId()))
	return ShowAction(req.GetLegalShows()[2]), nil
}

func (b *journalBot) Observe(_ context.Context, msg *scoutv1.RefereeMessage) {
	var matchID, kind string
	switch body := msg.GetBody().(type) {
	case *scoutv1.RefereeMessage_MatchStart:
		matchID, kind = body.MatchStart.GetMatchId(), "MatchStart"
	case *scoutv1.RefereeMessage_MatchEnded:
		matchID, kind = body.MatchEnded.GetMatchId(), "MatchEnded"
	default:
		matchID, kind = "?", fmt.Sprintf("%T", body)
	}
	b.note(matchID, "observed "+kind)
}

// answerLine is how the bundle test writes down an answer.
func answerLine(msg *scoutv1.BotMessage) string {
	if r := msg.GetRotation(); r != nil {
		return fmt.Sprintf("%s rotation %d rotate=%t", r.GetMatchId(), r.GetRequestId(), r.GetRotate())
	}
	if a := msg.GetAction(); a != nil {
		show := a.GetAction().GetShow()
		return fmt.Sprintf("%s decision %d show %d+%d", a.GetMatchId(), a.GetRequestId(), show.GetStart(), show.GetLength())
	}
	return fmt.Sprintf("unexpected %v", msg)
}

// playScript plays two matches, A and B, against a fake referee that sends each step's
// messages either one by one or, when bundled, as one RefereeBundle (a step of the bundled
// script also carries a bundle nested in the bundle, which the client must ignore). It returns
// the answers of each step (sorted: the two matches are played at once) and the bot's journal.
func playScript(t *testing.T, bundled bool) ([][]string, map[string][]string) {
	t.Helper()
	step2 := []*scoutv1.RefereeMessage{decision("A", 2, 3000, 0), decision("B", 2, 3000, 0)}
	if bundled {
		// Forbidden by the protocol: a bundle inside a bundle, here with a request of a match
		// the bot would otherwise answer.
		step2 = slices.Insert(step2, 1, bundle(matchStart("C"), decision("C", 1, 3000, 0)))
	}
	script := []struct {
		msgs    []*scoutv1.RefereeMessage
		answers int
	}{
		{[]*scoutv1.RefereeMessage{matchStart("A"), rotationRequestMsg("A", 1), matchStart("B"), rotationRequestMsg("B", 1)}, 2},
		{step2, 2},
		{[]*scoutv1.RefereeMessage{matchEnded("A"), matchEnded("B")}, 0},
	}
	bot := &journalBot{journal: make(map[string][]string)}
	steps := make(chan []string, len(script))
	problems := make(chan error, 1)
	runAgainst(t, bot, Config{}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		accepts, err := bundleHandshake(stream)
		if err != nil {
			return err
		}
		if bundled && !accepts {
			problems <- fmt.Errorf("the Hello does not set accepts_bundles")
			return status.Error(codes.FailedPrecondition, "no bundles")
		}
		in := collect(stream)
		for _, step := range script {
			if bundled {
				err = stream.Send(bundle(step.msgs...))
			} else {
				err = sendAll(stream, step.msgs...)
			}
			if err != nil {
				return err
			}
			var got []string
			for range step.answers {
				a, ok := <-in
				if !ok {
					return nil
				}
				got = append(got, answerLine(a.msg))
			}
			slices.Sort(got)
			steps <- got
		}
		// Nothing more may come (no answer to C's request in the nested bundle).
		select {
		case a, ok := <-in:
			if ok {
				problems <- fmt.Errorf("unexpected answer %v", a.msg)
			}
		case <-time.After(300 * time.Millisecond):
		}
		close(problems)
		<-stream.Context().Done()
		return nil
	})
	var answers [][]string
	for range script {
		select {
		case got := <-steps:
			answers = append(answers, got)
		case err := <-problems:
			t.Fatal(err)
		case <-time.After(5 * time.Second):
			t.Fatalf("the script stalled after %d steps (answers %v)", len(answers), answers)
		}
	}
	select {
	case err := <-problems:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the script did not finish")
	}
	// MatchEnded is observed on the match's goroutine; give it a moment.
	deadline := time.Now().Add(2 * time.Second)
	for {
		bot.mu.Lock()
		journal := make(map[string][]string, len(bot.journal))
		for id, entries := range bot.journal {
			journal[id] = slices.Clone(entries)
		}
		bot.mu.Unlock()
		ended := 0
		for _, entries := range journal {
			if len(entries) > 0 && entries[len(entries)-1] == "observed MatchEnded" {
				ended++
			}
		}
		if ended == 2 || time.Now().After(deadline) {
			return answers, journal
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBundleIsHandledLikeTheMessagesSentAlone(t *testing.T) {
	singleAnswers, singleJournal := playScript(t, false)
	bundledAnswers, bundledJournal := playScript(t, true)

	wantAnswers := [][]string{
		{"A rotation 1 rotate=true", "B rotation 1 rotate=true"},
		{"A decision 2 show 2+1", "B decision 2 show 2+1"},
		nil,
	}
	wantJournal := map[string][]string{
		"A": {"observed MatchStart", "rotation 1", "decision 2", "observed MatchEnded"},
		"B": {"observed MatchStart", "rotation 1", "decision 2", "observed MatchEnded"},
	}
	for _, run := range []struct {
		name    string
		answers [][]string
		journal map[string][]string
	}{{"alone", singleAnswers, singleJournal}, {"bundled", bundledAnswers, bundledJournal}} {
		if fmt.Sprint(run.answers) != fmt.Sprint(wantAnswers) {
			t.Errorf("%s: answers %q; want %q", run.name, run.answers, wantAnswers)
		}
		if fmt.Sprint(run.journal) != fmt.Sprint(wantJournal) {
			t.Errorf("%s: the bot saw %q; want %q", run.name, run.journal, wantJournal)
		}
	}
}

func TestBundledRequestsTimeFromTheBundlesArrival(t *testing.T) {
	// A bot that never answers: the fallback of a request that came in a bundle goes out
	// shortly before deadline + bank, counted from when the bundle arrived.
	bot := ActFunc(func(ctx context.Context, _ *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	sent := make(chan time.Time, 1)
	answers := make(chan answer, 4)
	runAgainst(t, bot, Config{SafetyMargin: 100 * time.Millisecond}, func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
		if _, err := bundleHandshake(stream); err != nil {
			return err
		}
		sent <- time.Now()
		if err := stream.Send(bundle(matchStart("M"), decision("M", 3, 200, 300))); err != nil {
			return err
		}
		for a := range collect(stream) {
			answers <- a
		}
		return nil
	})
	start := <-sent
	a := next(t, answers, 3*time.Second)
	if elapsed := a.at.Sub(start); elapsed < 300*time.Millisecond || elapsed > 500*time.Millisecond {
		t.Errorf("fallback after %v; want about 400 ms (deadline 200 + bank 300 - margin 100)", elapsed)
	}
	if got := a.msg.GetAction(); got.GetMatchId() != "M" || got.GetRequestId() != 3 {
		t.Errorf("answer %v; want the fallback for M's request 3", got)
	}
}
