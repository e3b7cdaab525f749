package scout

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

func assignment(matchID, host, ticket string) *scoutv1.RefereeMessage {
	return &scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_Assignment{Assignment: &scoutv1.MatchAssignment{
		MatchId: matchID, Address: "passthrough:///" + host, Ticket: ticket}}}
}

func matchEnded(matchID string) *scoutv1.RefereeMessage {
	return &scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_MatchEnded{MatchEnded: &scoutv1.MatchEnded{MatchId: matchID}}}
}

// bearer is the token or ticket a stream was opened with.
func bearer(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) string {
	md, _ := metadata.FromIncomingContext(stream.Context())
	got := md.Get("authorization")
	if len(got) != 1 {
		return ""
	}
	return strings.TrimPrefix(got[0], "Bearer ")
}

// nodeHandshake checks that a node stream brings the main stream's Hello and answers Welcome.
func nodeHandshake(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage], resumed bool) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello.GetProtocolVersion() != 1 || hello.GetMaxConcurrentMatches() != 4 || hello.GetBotName() != "kit" {
		return status.Errorf(codes.InvalidArgument, "bad hello %v", first)
	}
	return stream.Send(&scoutv1.RefereeMessage{Body: &scoutv1.RefereeMessage_Welcome{
		Welcome: &scoutv1.Welcome{ProtocolVersion: 1, BotName: "kit", SessionId: "n", Resumed: resumed}}})
}

func sendAll(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage], msgs ...*scoutv1.RefereeMessage) error {
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

func TestAssignedMatchIsPlayedOnTheNodeStream(t *testing.T) {
	// The main stream assigns match N to a node. The bot plays it there, answering on the node
	// stream; the node cuts the stream mid-match and the bot reopens it with the ticket; once
	// N has ended a cut stream stays closed, and the main stream is never touched.
	calls := make(chan struct{}, 4)
	bot := ActFunc(func(_ context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		calls <- struct{}{}
		return ShowAction(req.GetLegalShows()[2]), nil
	})
	var mainSessions, nodeSessions atomic.Int32
	mainAnswers := make(chan answer, 4)
	nodeAnswers := make(chan answer, 4)
	done, _ := runAgainstReferees(t, bot, Config{BotName: "kit"}, map[string]playFunc{
		"bufnet": func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
			mainSessions.Add(1)
			if err := handshake(stream, 4, false); err != nil {
				return err
			}
			if err := stream.Send(assignment("N", "node", "t-n")); err != nil {
				return err
			}
			for a := range collect(stream) {
				mainAnswers <- a
			}
			return nil
		},
		"node": func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
			n := nodeSessions.Add(1)
			if got := bearer(stream); got != "t-n" {
				return status.Errorf(codes.Unauthenticated, "unknown ticket %q", got)
			}
			if err := nodeHandshake(stream, n > 1); err != nil {
				return err
			}
			start := matchStart("N")
			start.GetMatchStart().Resumed = n > 1
			if err := sendAll(stream, start, decision("N", 1, 3000, 0)); err != nil {
				return err
			}
			a, err := stream.Recv()
			if err != nil {
				return err
			}
			nodeAnswers <- answer{a, time.Now()}
			if n > 1 {
				if err := stream.Send(matchEnded("N")); err != nil {
					return err
				}
			}
			return status.Error(codes.Unavailable, "node restarting")
		},
	})
	for i := range 2 {
		got := next(t, nodeAnswers, 5*time.Second).msg.GetAction()
		if got.GetMatchId() != "N" || got.GetRequestId() != 1 ||
			!proto.Equal(got.GetAction(), ShowAction(&scoutv1.Show{Start: 2, Length: 1})) {
			t.Errorf("node answer %d: %v; want show 2+1 for N's request 1", i, got)
		}
	}
	time.Sleep(time.Second) // longer than the reconnect backoff: a reopened stream would show
	if n := nodeSessions.Load(); n != 2 {
		t.Errorf("%d node streams; want 2 (the first, reopened once while N was unfinished)", n)
	}
	if len(calls) != 1 {
		t.Errorf("the bot was asked %d times; want once", len(calls))
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v: a node stream's end must not stop the bot", err)
	case a := <-mainAnswers:
		t.Errorf("answer %v on the main stream; want every answer on the node stream", a.msg)
	default:
	}
	if n := mainSessions.Load(); n != 1 {
		t.Errorf("%d main streams; want 1", n)
	}
}

func TestRefusedTicketIsDroppedAndNodeGoodbyeEndsOnlyTheNodeStream(t *testing.T) {
	// The main stream plays match M itself and assigns A, then B, to a node. The node's first
	// stream (A's ticket) is cut; the bot reopens it with the newest ticket (B's), which the
	// node refuses, so the bot drops it and reopens with A's. A ends and the node says Goodbye
	// {reconnect: false}: the node stream goes, Run and the main stream go on.
	bot := ActFunc(func(_ context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		return ShowAction(req.GetLegalShows()[2]), nil
	})
	var mainSessions atomic.Int32
	var mu sync.Mutex
	var tickets []string // the tickets of the node streams, in order
	nodeOpened, bAssigned, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	mainAnswers := make(chan answer, 4)
	nodeAnswers := make(chan answer, 4)
	done, _ := runAgainstReferees(t, bot, Config{BotName: "kit"}, map[string]playFunc{
		"bufnet": func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
			mainSessions.Add(1)
			if err := handshake(stream, 4, false); err != nil {
				return err
			}
			if err := sendAll(stream, matchStart("M"), assignment("A", "node", "t-a")); err != nil {
				return err
			}
			<-nodeOpened
			// M's request comes after B's assignment: its answer shows the bot has read both.
			if err := sendAll(stream, assignment("B", "node", "t-b"), decision("M", 7, 3000, 0)); err != nil {
				return err
			}
			in := collect(stream)
			mainAnswers <- <-in
			close(bAssigned)
			for a := range in {
				mainAnswers <- a
			}
			return nil
		},
		"node": func(stream grpc.BidiStreamingServer[scoutv1.BotMessage, scoutv1.RefereeMessage]) error {
			mu.Lock()
			tickets = append(tickets, bearer(stream))
			n := len(tickets)
			mu.Unlock()
			switch n {
			case 1:
				if err := nodeHandshake(stream, false); err != nil {
					return err
				}
				if err := sendAll(stream, matchStart("A"), decision("A", 1, 3000, 0)); err != nil {
					return err
				}
				a, err := stream.Recv()
				if err != nil {
					return err
				}
				nodeAnswers <- answer{a, time.Now()}
				close(nodeOpened)
				<-bAssigned
				return status.Error(codes.Unavailable, "connection lost")
			case 2:
				return status.Error(codes.Unauthenticated, "unknown ticket")
			case 3:
				defer close(finished)
				if err := nodeHandshake(stream, true); err != nil {
					return err
				}
				return sendAll(stream, matchEnded("A"),
					goodbye(scoutv1.GoodbyeReason_GOODBYE_REASON_FINISHED, false, 0))
			}
			return status.Error(codes.Unauthenticated, "no more streams expected")
		},
	})
	if got := next(t, nodeAnswers, 5*time.Second).msg.GetAction(); got.GetMatchId() != "A" || got.GetRequestId() != 1 {
		t.Errorf("node answer %v; want one for A's request 1", got)
	}
	if got := next(t, mainAnswers, 5*time.Second).msg.GetAction(); got.GetMatchId() != "M" || got.GetRequestId() != 7 {
		t.Errorf("main answer %v; want one for M's request 7 (the node's Welcome must not end M)", got)
	}
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		t.Fatal("the bot did not reopen its node stream")
	}
	time.Sleep(time.Second) // longer than the reconnect backoff: a reopened stream would show
	mu.Lock()
	if want := []string{"t-a", "t-b", "t-a"}; !slices.Equal(tickets, want) {
		t.Errorf("node streams opened with %v; want %v", tickets, want)
	}
	mu.Unlock()
	select {
	case err := <-done:
		t.Fatalf("Run returned %v: a node's Goodbye must not stop the bot", err)
	case a := <-mainAnswers:
		t.Errorf("unexpected answer %v on the main stream", a.msg)
	default:
	}
	if n := mainSessions.Load(); n != 1 {
		t.Errorf("%d main streams; want 1", n)
	}
}

// lockedBuffer collects the logs of several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestUnreachableNodeIsLetGo(t *testing.T) {
	// Matches A and B are assigned to a node on a port nothing listens on. The bot keeps
	// trying to reach it until it has been unreachable for nodeGoneAfter (no stream there ever
	// welcomed), then drops both tickets and lets the node go, as when no ticket is left; a
	// later assignment there starts afresh with a new node stream.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := lis.Addr().String()
	_ = lis.Close()

	const goneAfter = 400 * time.Millisecond
	var logs lockedBuffer
	cfg := Config{BotName: "kit", MaxConcurrentMatches: 4, nodeGoneAfter: goneAfter,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}),
			&slog.HandlerOptions{Level: slog.LevelDebug}))}
	c := newClient(cfg, ActFunc(func(_ context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
		return ShowAction(req.GetLegalShows()[0]), nil
	}))
	if c.nodeGoneAfter != goneAfter {
		t.Fatalf("nodeGoneAfter %v; want %v", c.nodeGoneAfter, goneAfter)
	}
	if got := newClient(Config{}, nil).nodeGoneAfter; got != NodeGoneAfter || NodeGoneAfter != 60*time.Second {
		t.Errorf("default nodeGoneAfter %v (NodeGoneAfter %v); want 60 s", got, NodeGoneAfter)
	}
	c.dial = func(address string, _ bool) (*grpc.ClientConn, error) {
		return grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	root, stop := context.WithCancel(context.Background())
	c.root = root
	t.Cleanup(func() {
		stop()
		stopped := make(chan struct{})
		go func() { c.wg.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			t.Error("the node loop did not end after the stop")
		}
	})
	node := func() *link {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.nodes[address]
	}

	start := time.Now()
	c.onAssignment(&scoutv1.MatchAssignment{MatchId: "A", Address: address, Ticket: "t-a"})
	c.onAssignment(&scoutv1.MatchAssignment{MatchId: "B", Address: address, Ticket: "t-b"})
	first := node()
	if first == nil {
		t.Fatal("no node stream opened for the assignments")
	}
	ended := make(chan struct{})
	go func() { c.wg.Wait(); close(ended) }()
	time.Sleep(goneAfter / 2)
	if node() != first {
		t.Error("the bot let the node go before it was unreachable for nodeGoneAfter")
	}
	select {
	case <-ended:
	case <-time.After(goneAfter + 5*time.Second):
		t.Fatal("the bot did not let the unreachable node go")
	}
	if took := time.Since(start); took < goneAfter {
		t.Errorf("gave up after %v; want at least %v", took, goneAfter)
	}
	c.mu.Lock()
	held, nodes := len(c.tickets), len(c.nodes)
	c.mu.Unlock()
	if held != 0 || nodes != 0 {
		t.Errorf("after giving up: tickets for %d addresses, %d nodes; want none", held, nodes)
	}
	if want := "node " + address + " unreachable for 0.4 s; dropping its 2 ticket(s) and letting it go"; !strings.Contains(logs.String(), want) {
		t.Errorf("no log %q", want)
	}

	// A later assignment to the same address starts afresh.
	c.onAssignment(&scoutv1.MatchAssignment{MatchId: "C", Address: address, Ticket: "t-c"})
	if again := node(); again == nil || again == first {
		t.Errorf("node link after a new assignment: %p (first %p); want a new one", again, first)
	}
	c.mu.Lock()
	newest, ok := c.tickets.newest(address)
	c.mu.Unlock()
	if !ok || newest.value != "t-c" {
		t.Errorf("tickets for the node: %v, %t; want only C's", newest, ok)
	}
}
