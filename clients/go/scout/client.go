package scout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

const (
	// The referee refuses bot messages above 64 KiB; failing locally gives a clearer error.
	maxSendBytes = 64 << 10
	// Observations carry a round's history; 16 MiB leaves ample room.
	maxReceiveBytes = 16 << 20
	// Ping every 25 s: the referee permits one every >= 10 s, and NATs drop idle streams.
	keepaliveTime    = 25 * time.Second
	keepaliveTimeout = 10 * time.Second
	// On stop, how long to wait for the referee to end the call after the half-close.
	closeGrace = time.Second
	// How many finished match ids to remember, to ignore late messages about them.
	endedRemembered = 1024
	// Answers queued for the stream writer; more than a few per match never happen.
	outboxSize = 1024
	// How often to say so while the referee cannot be reached.
	waitWarning = 15 * time.Second
)

// ShutdownGiveUp is how long the bot keeps trying to reconnect after a Goodbye{reconnect: true}
// (a referee or ladder shutting down) before it gives up: a referee that is not back by then
// was stopped for good (PROTOCOL.md §10.1).
const ShutdownGiveUp = 15 * time.Minute

// GaveUpError is returned by Run when the referee did not take the bot back within
// Config.ShutdownGiveUp of its Goodbye{reconnect: true}.
type GaveUpError struct {
	After time.Duration
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("the referee did not come back within %s of its shutdown goodbye; giving up", e.After)
}

// Run connects to the referee described by cfg and plays every match the referee seats the bot
// in, answering with bot, until ctx is cancelled (then it closes the stream and returns nil).
//
// When the stream is lost it reconnects with exponential backoff (0.2 s doubling to 5 s, with
// jitter) and the referee resumes the running matches. When the referee ends the stream on
// purpose with a Goodbye (PROTOCOL.md §10.1), the Goodbye decides: reconnect: false makes Run
// return nil (the bot is done); reconnect: true reconnects after its retry_after_ms plus a
// little jitter, which is not counted as a failure. It returns a *RejectedError when the
// referee refuses the bot for a reason reconnecting cannot fix (unknown token, protocol
// mismatch, another process took over the token), and another error when cfg is unusable.
//
// A MatchAssignment on the stream (a ladder with referee nodes, PROTOCOL.md §3.8) makes Run
// play that match on a stream to the node, opened with the assignment's ticket; only the main
// stream (to cfg.Address) decides when Run returns.
func Run(ctx context.Context, cfg Config, bot Bot) error {
	if bot == nil {
		return errors.New("scout: Run needs a Bot")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	tlsCreds, err := tlsCredentials(&cfg, logger)
	if err != nil {
		return err
	}
	debug := logger.Enabled(ctx, slog.LevelDebug)
	c := newClient(cfg, bot)
	c.dial = func(address string, useTLS bool) (*grpc.ClientConn, error) {
		creds := insecure.NewCredentials()
		if useTLS {
			creds = tlsCreds
		}
		opts := dialOptions(&cfg, creds)
		if debug {
			// Log every TCP connect, which shows the channel's reconnect backoff at work.
			// Options given in cfg.DialOptions come later and win.
			opts = append([]grpc.DialOption{grpc.WithContextDialer(loggingDialer(logger))}, opts...)
		}
		conn, err := grpc.NewClient(address, opts...)
		if err != nil {
			return nil, fmt.Errorf("scout: cannot use address %q: %w", address, err)
		}
		if debug {
			go logConnectivity(ctx, conn, logger.With("address", address))
		}
		return conn, nil
	}
	conn, err := c.dial(cfg.Address, cfg.useTLS())
	if err != nil {
		return err
	}
	defer conn.Close()
	c.main = newLink(cfg.Address, cfg.useTLS(), conn, c.log)
	return c.run(ctx)
}

// loggingCreds logs failed TLS handshakes, which the channel otherwise only retries: a wrong
// CA or server name would leave the bot waiting without a word.
type loggingCreds struct {
	credentials.TransportCredentials
	log *slog.Logger
}

func (l loggingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := l.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil && ctx.Err() == nil {
		l.log.Warn("TLS handshake with the referee failed", "authority", authority, "err", err)
	}
	return conn, info, err
}

func (l loggingCreds) Clone() credentials.TransportCredentials {
	return loggingCreds{l.TransportCredentials.Clone(), l.log}
}

func loggingDialer(log *slog.Logger) func(context.Context, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) {
		network, target := dialTarget(addr)
		conn, err := d.DialContext(ctx, network, target)
		if err != nil {
			log.Debug("connect failed; the channel retries with backoff", "address", addr, "err", err)
		} else {
			log.Debug("connected", "address", addr)
		}
		return conn, err
	}
}

// dialTarget is the network and address a context dialer dials for addr: grpc-go hands a
// custom dialer the target of a unix: address as it was written ("unix://PATH" or
// "unix:PATH"), and host:port otherwise.
func dialTarget(addr string) (network, target string) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		return "unix", path
	}
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return "unix", path
	}
	return "tcp", addr
}

// logConnectivity logs the channel's state changes (connecting, transient failure with its
// backoff, ready) at debug level, until the channel is closed.
func logConnectivity(ctx context.Context, conn *grpc.ClientConn, log *slog.Logger) {
	state := conn.GetState()
	for state != connectivity.Shutdown && conn.WaitForStateChange(ctx, state) {
		state = conn.GetState()
		log.Debug("channel state", "state", state.String())
	}
}

// tlsCredentials are the TLS settings of cfg (its CA and client certificate), for the main
// referee when cfg asks for TLS and for every referee node reached over TLS.
func tlsCredentials(cfg *Config, log *slog.Logger) (credentials.TransportCredentials, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CACertFile != "" {
		pem, err := os.ReadFile(cfg.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("scout: CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("scout: no PEM certificate in %s", cfg.CACertFile)
		}
		tc.RootCAs = pool
	}
	if cfg.ClientCertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.ClientCertFile, cfg.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("scout: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return loggingCreds{credentials.NewTLS(tc), log}, nil
}

func dialOptions(cfg *Config, creds credentials.TransportCredentials) []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true,
		}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallSendMsgSize(maxSendBytes),
			grpc.MaxCallRecvMsgSize(maxReceiveBytes),
		),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: BackoffInitial, Multiplier: 2, Jitter: 0.2, MaxDelay: BackoffMax,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithUserAgent("scout-arena-go/" + cfg.BotVersion),
	}
	return append(opts, cfg.DialOptions...)
}

type reqKey struct {
	match string
	id    uint64
}

// pending is what the client remembers of one request until its match ends, so that a
// request resent after a reconnect is answered without asking the bot twice. An answered
// request stays open until a verdict closes it (TIMED_OUT, STALE, ...; ACCEPTED only in a full
// stream) or the match moves on: its next request, its RoundEnded or its MatchEnded. A lean
// stream never says ACCEPTED, and nothing waits for it.
type pending struct {
	key          reqKey
	expires      time.Time // when the client must have answered
	fallback     *scoutv1.BotMessage
	link         *link               // the referee the request came from: answers go there
	answer       *scoutv1.BotMessage // the last answer sent (or to send)
	sentOn       int                 // number of the session the answer went out on; 0: none
	fallbackSent bool
	closed       bool
	cancel       context.CancelFunc
}

type inbound struct {
	msg  *scoutv1.RefereeMessage
	at   time.Time
	link *link // the referee whose stream carried msg
}

type match struct {
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	inbox  queue
	link   *link // the referee whose stream carried the match's latest message; guarded by client.mu
}

// link is a referee the bot plays on, over at most one Play stream at a time: the main referee
// (Config.Address, with the bot's token), or a referee node the bot was assigned matches on
// (PROTOCOL.md §3.8), with the ticket of one of them.
type link struct {
	address string
	tls     bool
	arena   scoutv1.ArenaClient
	log     *slog.Logger
	// resetBackoff makes the channel try to connect now rather than at the end of its own
	// backoff step (our reconnect loop already waited).
	resetBackoff func()

	// reached is, for a referee node, when a stream there was last welcomed (the end of the
	// last welcomed stream: the node was reachable until then), or, if none was, when the link
	// was created. Used by followNode alone.
	reached time.Time

	// Guarded by client.mu.
	sess          *session // the live stream, if any
	protocolError string   // the current stream's last ProtocolError
}

func newLink(address string, useTLS bool, conn *grpc.ClientConn, log *slog.Logger) *link {
	return &link{
		address:      address,
		tls:          useTLS,
		arena:        scoutv1.NewArenaClient(conn),
		log:          log,
		resetBackoff: conn.ResetConnectBackoff,
	}
}

// session is one Play stream.
type session struct {
	no       int
	link     *link
	out      chan *scoutv1.BotMessage
	closing  chan struct{} // closed to half-close the stream after the queued answers
	done     chan struct{} // closed when the session is over
	welcomed atomic.Bool
	goodbye  atomic.Pointer[scoutv1.Goodbye] // the referee's Goodbye, if it sent one
	bye      chan struct{}                   // closed when the Goodbye arrives
	byeOnce  sync.Once
}

type client struct {
	cfg   Config
	bot   Bot
	obs   Observer
	log   *slog.Logger
	hello *scoutv1.BotMessage
	main  *link // the referee of Config.Address: its stream decides when run returns
	// dial makes the channel to a referee, with TLS or without.
	dial func(address string, useTLS bool) (*grpc.ClientConn, error)
	// nodeGoneAfter is how long a node may be unreachable before the bot lets it go
	// (NodeGoneAfter; shorter in tests).
	nodeGoneAfter time.Duration
	// giveUp is Config.ShutdownGiveUp, or ShutdownGiveUp when that is not positive.
	giveUp time.Duration
	// prob is the bot's OnProbation hook, if it has one.
	prob ProbationObserver

	root context.Context // parent of every match and node stream; cancelled when run returns
	wg   sync.WaitGroup  // match workers, request goroutines and node streams

	mu         sync.Mutex
	sessions   int
	nodes      map[string]*link // by address: the nodes with a stream open, opening or to reopen
	tickets    ticketBook
	matches    map[string]*match
	ended      map[string]struct{}
	endedOrder []string
	requests   map[reqKey]*pending
	latest     map[string]*pending // each match's newest request: the only one still open
}

func newClient(cfg Config, bot Bot) *client {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	obs, _ := bot.(Observer)
	prob, _ := bot.(ProbationObserver)
	giveUp := ShutdownGiveUp
	if cfg.ShutdownGiveUp > 0 {
		giveUp = cfg.ShutdownGiveUp
	}
	nodeGoneAfter := NodeGoneAfter
	if cfg.nodeGoneAfter > 0 {
		nodeGoneAfter = cfg.nodeGoneAfter
	}
	return &client{
		cfg:           cfg,
		bot:           bot,
		obs:           obs,
		log:           logger,
		nodeGoneAfter: nodeGoneAfter,
		giveUp:        giveUp,
		prob:          prob,
		hello: &scoutv1.BotMessage{Body: &scoutv1.BotMessage_Hello{Hello: &scoutv1.Hello{
			BotName:              cfg.BotName,
			BotVersion:           cfg.BotVersion,
			ProtocolVersion:      ProtocolVersion,
			MaxConcurrentMatches: uint32(cfg.MaxConcurrentMatches),
			Lean:                 !cfg.PublicEvents,
			// The reader unpacks RefereeMessage.bundle (dispatch), so the referee may bundle.
			AcceptsBundles: true,
		}}},
		nodes:    make(map[string]*link),
		tickets:  make(ticketBook),
		matches:  make(map[string]*match),
		ended:    make(map[string]struct{}),
		requests: make(map[reqKey]*pending),
		latest:   make(map[string]*pending),
	}
}

// --- connection ------------------------------------------------------------------------------

func (c *client) run(ctx context.Context) error {
	root, stop := context.WithCancel(ctx)
	c.root = root
	defer func() {
		stop()
		c.wg.Wait()
	}()
	attempt := 0
	// When the referee said Goodbye{reconnect: true} and has not welcomed the bot since: the
	// bot gives up at shutdownSince + c.giveUp (zero: no such Goodbye pending).
	var shutdownSince time.Time
	for {
		var welcomeBy time.Time
		if !shutdownSince.IsZero() {
			welcomeBy = shutdownSince.Add(c.giveUp)
		}
		welcomed, goodbye, err := c.session(ctx, c.main, c.cfg.Token, welcomeBy)
		if ctx.Err() != nil {
			c.log.Info("stopped")
			return nil
		}
		if welcomed {
			shutdownSince = time.Time{}
		}
		if goodbye != nil {
			// A planned end of the stream: it overrides whatever status the call ended with.
			if !goodbye.GetReconnect() {
				c.log.Info("the referee does not want the bot back; stopping")
				return nil
			}
			if shutdownSince.IsZero() {
				shutdownSince = time.Now()
			}
			attempt = 0 // not a failure: the backoff starts afresh
			delay := GoodbyeDelay(goodbye.GetRetryAfterMs(), rand.Float64)
			c.log.Info("reconnecting as the referee asked", "in", delay.Round(time.Millisecond))
			if !sleepCtx(ctx, delay) {
				c.log.Info("stopped")
				return nil
			}
			continue
		}
		if rejected, ok := errors.AsType[*RejectedError](err); ok {
			return rejected
		}
		if welcomed {
			attempt = 0
		}
		if !shutdownSince.IsZero() && time.Since(shutdownSince) >= c.giveUp {
			gaveUp := &GaveUpError{After: c.giveUp}
			c.log.Error(gaveUp.Error(), "problem", err)
			return gaveUp
		}
		delay := BackoffDelay(attempt, rand.Float64)
		attempt++
		c.log.Warn("connection to the referee lost; reconnecting",
			"problem", err, "in", delay.Round(time.Millisecond), "attempt", attempt)
		if !sleepCtx(ctx, delay) {
			c.log.Info("stopped")
			return nil
		}
	}
}

// sleepCtx waits for d; false when ctx was cancelled first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// session runs one Play stream to l's referee, authorised with bearer (the bot's token or a
// ticket), until the referee ends it (its status, as an error, and its Goodbye if it sent one)
// or ctx is cancelled (the stream is half-closed, then cancelled, and the error is nil). After a
// Goodbye the stream is half-closed too, and cancelled if the referee does not end it within
// the close grace. A non-zero welcomeBy abandons the attempt (the stream is cancelled, and the
// error says so) when the referee has not welcomed the bot by then.
func (c *client) session(ctx context.Context, l *link, bearer string, welcomeBy time.Time) (welcomed bool, goodbye *scoutv1.Goodbye, err error) {
	c.mu.Lock()
	c.sessions++
	s := &session{
		no:      c.sessions,
		link:    l,
		out:     make(chan *scoutv1.BotMessage, outboxSize),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		bye:     make(chan struct{}),
	}
	l.protocolError = ""
	c.mu.Unlock()

	// The stream outlives ctx by the close grace, so it is not derived from ctx's cancellation.
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	streamCtx = metadata.AppendToOutgoingContext(streamCtx, "authorization", "Bearer "+bearer)
	if !welcomeBy.IsZero() {
		var abandoned atomic.Bool
		abandon := time.AfterFunc(time.Until(welcomeBy), func() {
			if !s.welcomed.Load() {
				l.log.Debug("not welcomed in time; abandoning the attempt", "session", s.no)
				abandoned.Store(true)
				cancel()
			}
		})
		defer func() {
			abandon.Stop()
			if err != nil && abandoned.Load() {
				err = fmt.Errorf("not welcomed in time (%w)", err)
			}
		}()
	}
	l.log.Debug("connecting", "address", l.address, "session", s.no)
	l.resetBackoff()
	// WaitForReady: while the referee is unreachable, the call waits for the channel, which
	// retries on its own backoff (0.2 s doubling to 5 s, with jitter) and connects as soon as
	// the referee is back, instead of failing fast with the last connection error.
	opened := make(chan struct{})
	go func() {
		waiting := time.NewTicker(waitWarning)
		defer waiting.Stop()
		for {
			select {
			case <-ctx.Done():
				cancel()
				return
			case <-opened:
				return
			case <-waiting.C:
				l.log.Warn("still waiting to reach the referee (is it up? check the address and TLS settings)",
					"address", l.address, "tls", l.tls)
			}
		}
	}()
	stream, err := l.arena.Play(streamCtx, grpc.WaitForReady(true))
	close(opened)
	if err != nil {
		return false, nil, c.classify(l, err)
	}
	s.out <- c.hello // first, before any answer can be queued
	c.mu.Lock()
	l.sess = s
	c.mu.Unlock()

	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.write(stream, s)
	}()
	readerDone := make(chan error, 1)
	go func() { readerDone <- c.read(stream, s) }()

	var readErr error
	readerEnded := false
	select {
	case readErr = <-readerDone:
		readerEnded = true
	case <-ctx.Done():
		close(s.closing)
		select {
		case readErr = <-readerDone:
			readerEnded = true
		case <-time.After(closeGrace):
		}
	case <-s.bye:
		// The referee ends the call next; half-close and give it the close grace to do so.
		close(s.closing)
		select {
		case readErr = <-readerDone:
			readerEnded = true
		case <-time.After(closeGrace):
		case <-ctx.Done():
		}
	}
	c.mu.Lock()
	if l.sess == s {
		l.sess = nil
	}
	c.mu.Unlock()
	close(s.done)
	cancel()
	<-writerDone
	if !readerEnded {
		<-readerDone
	}
	if ctx.Err() != nil {
		return s.welcomed.Load(), nil, nil
	}
	if bye := s.goodbye.Load(); bye != nil {
		return s.welcomed.Load(), bye, nil
	}
	return s.welcomed.Load(), nil, c.classify(l, readErr)
}

// classify turns how a stream to l ended into a *RejectedError or a plain error to reconnect
// after.
func (c *client) classify(l *link, err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return errors.New("the referee ended the stream")
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if IsRejection(st.Code(), st.Message()) {
		c.mu.Lock()
		pe := l.protocolError
		c.mu.Unlock()
		return &RejectedError{Code: st.Code(), Details: st.Message(), ProtocolError: pe}
	}
	return fmt.Errorf("%s: %s", st.Code(), st.Message())
}

// write is the stream's only sender: gRPC streams allow one sending goroutine at a time.
func (c *client) write(stream grpc.BidiStreamingClient[scoutv1.BotMessage, scoutv1.RefereeMessage], s *session) {
	for {
		select {
		case msg := <-s.out:
			if err := stream.Send(msg); err != nil {
				c.log.Debug("send failed; the reader reports why", "err", err)
				return
			}
		case <-s.closing:
			for {
				select {
				case msg := <-s.out:
					if err := stream.Send(msg); err != nil {
						return
					}
				default:
					_ = stream.CloseSend()
					return
				}
			}
		case <-s.done:
			return
		}
	}
}

func (c *client) read(stream grpc.BidiStreamingClient[scoutv1.BotMessage, scoutv1.RefereeMessage], s *session) error {
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		c.dispatch(s, msg, time.Now())
	}
}

// dispatch handles one message from s's stream, which arrived at at. A bundle (PROTOCOL.md
// §3.6.2, sent because Hello says accepts_bundles) is unpacked: each inner message, in order,
// goes through dispatch as if it had come on its own, with the bundle's arrival time.
func (c *client) dispatch(s *session, msg *scoutv1.RefereeMessage, at time.Time) {
	var matchID string
	switch body := msg.GetBody().(type) {
	case *scoutv1.RefereeMessage_Bundle:
		for _, inner := range body.Bundle.GetMessages() {
			if _, nested := inner.GetBody().(*scoutv1.RefereeMessage_Bundle); nested {
				s.link.log.Warn("ignoring a bundle inside a bundle (the protocol forbids it)")
				continue
			}
			c.dispatch(s, inner, at)
		}
		return
	case *scoutv1.RefereeMessage_Welcome:
		c.onWelcome(s, body.Welcome)
		return
	case *scoutv1.RefereeMessage_Goodbye:
		c.onGoodbye(s, body.Goodbye)
		return
	case *scoutv1.RefereeMessage_Assignment:
		c.onAssignment(body.Assignment)
		return
	case *scoutv1.RefereeMessage_Probation:
		c.onProbation(s, body.Probation)
		return
	case *scoutv1.RefereeMessage_Error:
		text := fmt.Sprintf("%s: %s", body.Error.GetCode(), body.Error.GetMessage())
		c.mu.Lock()
		s.link.protocolError = text
		c.mu.Unlock()
		s.link.log.Warn("protocol error from the referee", "error", text)
		return
	case *scoutv1.RefereeMessage_MatchStart:
		matchID = body.MatchStart.GetMatchId()
	case *scoutv1.RefereeMessage_RotationRequest:
		matchID = body.RotationRequest.GetMatchId()
	case *scoutv1.RefereeMessage_DecisionRequest:
		matchID = body.DecisionRequest.GetMatchId()
	case *scoutv1.RefereeMessage_AnswerResult:
		matchID = body.AnswerResult.GetMatchId()
	case *scoutv1.RefereeMessage_PublicEvent:
		matchID = body.PublicEvent.GetMatchId()
	case *scoutv1.RefereeMessage_RoundEnded:
		matchID = body.RoundEnded.GetMatchId()
	case *scoutv1.RefereeMessage_MatchEnded:
		matchID = body.MatchEnded.GetMatchId()
	default: // a body this client does not know (a newer protocol minor): ignore it
		c.log.Debug("ignoring a message with a body this client does not know")
		return
	}
	c.mu.Lock()
	if msg.GetMatchEnded() != nil {
		// Here rather than in playMatch: the stream's end is handled only after the reader has
		// dispatched everything before it, so a node stream is not reopened for this match.
		c.tickets.ended(matchID)
	}
	if _, done := c.ended[matchID]; done {
		c.mu.Unlock()
		c.log.Debug("ignoring a message about a finished match", "match", matchID)
		return
	}
	m := c.matches[matchID]
	if m == nil {
		if me := msg.GetMatchEnded(); me != nil {
			// A match this client holds no state for (voided before it began here, or begun
			// before a restart): nothing to free but its ticket, dropped above.
			c.rememberEndedLocked(matchID)
			c.mu.Unlock()
			logMatchEnded(c.log, me)
			return
		}
		if res := msg.GetAnswerResult(); res != nil {
			c.mu.Unlock()
			c.log.Warn("answer result for a match this client does not track", "match", matchID,
				"request", res.GetRequestId(), "status", res.GetStatus(), "reason", res.GetReason())
			return
		}
		m = c.openMatchLocked(matchID)
	}
	m.link = s.link
	c.mu.Unlock()
	m.inbox.push(inbound{msg: msg, at: at, link: s.link})
}

// onGoodbye notes the referee's planned end of the stream (PROTOCOL.md §10.1); run (for the main
// stream) or followNode (for a node's) decides what follows once the call has ended.
func (c *client) onGoodbye(s *session, g *scoutv1.Goodbye) {
	s.goodbye.Store(g)
	then := "do not reconnect"
	switch {
	case s.link != c.main:
		then = "reopen while a match of the bot is unfinished there"
	case g.GetReconnect():
		then = fmt.Sprintf("reconnect in %d ms", g.GetRetryAfterMs())
	}
	s.link.log.Info("goodbye from the referee", "reason", g.GetReason(), "then", then,
		"message", g.GetMessage())
	s.byeOnce.Do(func() { close(s.bye) })
}

func (c *client) onWelcome(s *session, w *scoutv1.Welcome) {
	s.welcomed.Store(true)
	s.link.log.Info("connected to the referee", "as", w.GetBotName(), "session", w.GetSessionId(),
		"resumed", w.GetResumed())
	if w.GetProtocolVersion() != ProtocolVersion {
		s.link.log.Warn("the referee speaks another protocol version",
			"referee", w.GetProtocolVersion(), "client", ProtocolVersion)
	}
	if w.GetResumed() {
		return
	}
	// Not resumed: the reconnect came after the grace, the referee forfeited the seats and will
	// say nothing more about the matches it was playing with the bot.
	c.mu.Lock()
	var lost []string
	for id, m := range c.matches {
		if m.link == s.link {
			lost = append(lost, id)
		}
	}
	for _, id := range lost {
		c.endMatchLocked(id)
		c.tickets.ended(id)
	}
	c.mu.Unlock()
	if len(lost) > 0 {
		sort.Strings(lost)
		s.link.log.Warn("the referee did not resume running matches", "matches", lost)
	}
}

// --- referee nodes (PROTOCOL.md §3.8) --------------------------------------------------------

// onAssignment follows a MatchAssignment: the match is played on a stream to its node, which is
// opened with the assignment's ticket unless the bot has one open (or opening) there already.
func (c *client) onAssignment(a *scoutv1.MatchAssignment) {
	log := c.log.With("match", a.GetMatchId(), "node", a.GetAddress())
	if a.GetAddress() == "" || a.GetTicket() == "" {
		log.Warn("ignoring a match assignment without a node address or ticket")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, done := c.ended[a.GetMatchId()]; done || c.root.Err() != nil {
		log.Debug("ignoring an assignment to a finished match, or while stopping")
		return
	}
	_, following := c.matches[a.GetMatchId()]
	c.tickets.add(a.GetAddress(), a.GetMatchId(), a.GetTicket())
	if c.nodes[a.GetAddress()] != nil {
		if following {
			// Re-sent after the main stream's Welcome (PROTOCOL.md §3.8): its ticket is the
			// one the node stream reopens with.
			log.Info("assignment again for a match the bot follows on its node stream")
		} else {
			log.Info("assigned to a match on a referee node; it comes on the node's stream")
		}
		return
	}
	conn, err := c.dial(a.GetAddress(), a.GetTls())
	if err != nil {
		log.Error("cannot follow the assignment", "err", err)
		c.tickets.drop(a.GetAddress(), a.GetTicket())
		return
	}
	log.Info("assigned to a match on a referee node; opening a stream there", "tls", a.GetTls())
	l := newLink(a.GetAddress(), a.GetTls(), conn, c.log.With("node", a.GetAddress()))
	l.reached = time.Now()
	c.nodes[l.address] = l
	c.wg.Add(1)
	go c.followNode(l, conn)
}

// followNode keeps a stream to a referee node while the bot holds a ticket of an unfinished
// match there: it opens the stream with the newest ticket, reopens a lost one (whatever ended
// it, a Goodbye too) after the reconnect backoff, drops a ticket the node refuses and tries the
// next, and with no ticket left lets the stream go. A node that cannot be reached for
// c.nodeGoneAfter in a row (no stream there welcomed for that long) is gone: its tickets are
// dropped and the stream let go the same way. Nothing here ends Run or touches the main stream.
func (c *client) followNode(l *link, conn *grpc.ClientConn) {
	defer c.wg.Done()
	defer conn.Close()
	attempt := 0
	for {
		t, ok := c.nodeTicket(l)
		if !ok {
			l.log.Info("letting the node stream go: the bot holds no ticket of an unfinished match there")
			return
		}
		l.log.Info("opening a node stream", "ticket_of", t.match)
		// The attempt may wait (for the channel to connect) until the node has been unreachable
		// for c.nodeGoneAfter, and at least nodeLastTry.
		welcomeBy := l.reached.Add(c.nodeGoneAfter)
		if least := time.Now().Add(min(nodeLastTry, c.nodeGoneAfter)); welcomeBy.Before(least) {
			welcomeBy = least
		}
		welcomed, goodbye, err := c.session(c.root, l, t.value, welcomeBy)
		if c.root.Err() != nil {
			l.log.Info("node stream closed: the bot stops")
			return
		}
		if rejected, ok := errors.AsType[*RejectedError](err); ok {
			l.log.Warn("the node refused the ticket; dropping it", "ticket_of", t.match,
				"problem", rejected)
			c.mu.Lock()
			c.tickets.drop(l.address, t.value)
			c.mu.Unlock()
			continue
		}
		if welcomed {
			attempt = 0
			l.reached = time.Now() // the node was reachable until this stream ended
		}
		problem := "goodbye"
		if goodbye == nil {
			problem = err.Error()
		}
		if _, ok := c.nodeTicket(l); !ok {
			l.log.Info("node stream closed; no unfinished match of the bot there, so it stays closed",
				"problem", problem)
			return
		}
		if !welcomed && time.Since(l.reached) >= c.nodeGoneAfter {
			c.letNodeGo(l, problem)
			return
		}
		delay := BackoffDelay(attempt, rand.Float64)
		attempt++
		l.log.Warn("node stream lost; reopening it", "problem", problem,
			"in", delay.Round(time.Millisecond), "attempt", attempt)
		if !sleepCtx(c.root, delay) {
			l.log.Info("node stream closed: the bot stops")
			return
		}
	}
}

// letNodeGo gives up on a node that has been unreachable for c.nodeGoneAfter: it drops the
// bot's tickets for that address and forgets l, exactly as when no ticket is left there (so a
// later assignment there opens a new stream). The ladder has voided the node's matches, so the
// bot forgets those too.
func (c *client) letNodeGo(l *link, problem string) {
	c.mu.Lock()
	dropped := c.tickets.forget(l.address)
	if c.nodes[l.address] == l {
		delete(c.nodes, l.address)
	}
	var lost []string
	for id, m := range c.matches {
		if m.link == l {
			lost = append(lost, id)
		}
	}
	for _, id := range lost {
		c.endMatchLocked(id)
	}
	c.mu.Unlock()
	sort.Strings(lost)
	l.log.Warn(fmt.Sprintf("node %s unreachable for %g s; dropping its %d ticket(s) and letting it go",
		l.address, c.nodeGoneAfter.Seconds(), dropped), "problem", problem, "matches", lost)
}

// nodeTicket is the ticket to open a stream to l with. With none left it forgets l, so that the
// next assignment there opens a new stream.
func (c *client) nodeTicket(l *link) (ticket, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tickets.newest(l.address)
	if !ok {
		delete(c.nodes, l.address)
	}
	return t, ok
}

// --- matches ---------------------------------------------------------------------------------

func (c *client) openMatchLocked(id string) *match {
	ctx, cancel := context.WithCancel(c.root)
	m := &match{id: id, ctx: ctx, cancel: cancel}
	c.matches[id] = m
	c.wg.Add(1)
	go c.playMatch(m)
	return m
}

func (c *client) endMatchLocked(id string) {
	m := c.matches[id]
	if m == nil {
		return
	}
	delete(c.matches, id)
	m.cancel()
	c.rememberEndedLocked(id)
	for key, p := range c.requests {
		if key.match == id {
			p.closed = true
			p.cancel()
			delete(c.requests, key)
		}
	}
	delete(c.latest, id)
}

// rememberEndedLocked notes that match id ended, so that late messages about it are ignored.
func (c *client) rememberEndedLocked(id string) {
	if _, done := c.ended[id]; done {
		return
	}
	c.ended[id] = struct{}{}
	c.endedOrder = append(c.endedOrder, id)
	if len(c.endedOrder) > endedRemembered {
		delete(c.ended, c.endedOrder[0])
		c.endedOrder = c.endedOrder[1:]
	}
}

// closeLatestLocked closes the match's newest request: the match has moved on (a new request
// or the round's end), so it was accepted, timed out or superseded, whether or not the referee
// said so.
func (c *client) closeLatestLocked(matchID string) {
	if p := c.latest[matchID]; p != nil && !p.closed {
		p.closed = true
		p.cancel()
	}
}

// playMatch handles one match's messages in the order the referee sent them. Requests get a
// goroutine of their own, so a slow bot never delays reading.
func (c *client) playMatch(m *match) {
	defer c.wg.Done()
	for {
		in, ok := m.inbox.pop(m.ctx)
		if !ok {
			return
		}
		switch body := in.msg.GetBody().(type) {
		case *scoutv1.RefereeMessage_MatchStart:
			ms := body.MatchStart
			if ms.GetResumed() {
				c.log.Info("match resumed", "match", m.id, "seat", ms.GetSeat(),
					"bank_ms", ms.GetTimeBankMs(), "strikes", ms.GetStrikes())
			} else {
				c.log.Info("match started", "match", m.id, "seat", ms.GetSeat(),
					"players", ms.GetPlayerNames(), "decision_ms", ms.GetTimeControl().GetDecisionMs(),
					"bank_ms", ms.GetTimeBankMs())
			}
			c.observe(m, in.msg)
		case *scoutv1.RefereeMessage_RotationRequest:
			c.openRequest(m, in, rotationRequest(c.bot, body.RotationRequest))
		case *scoutv1.RefereeMessage_DecisionRequest:
			c.openRequest(m, in, decisionRequest(c.bot, body.DecisionRequest))
		case *scoutv1.RefereeMessage_AnswerResult:
			c.onAnswerResult(body.AnswerResult)
			c.observe(m, in.msg)
		case *scoutv1.RefereeMessage_RoundEnded:
			c.mu.Lock()
			c.closeLatestLocked(m.id)
			c.mu.Unlock()
			c.observe(m, in.msg)
		case *scoutv1.RefereeMessage_MatchEnded:
			logMatchEnded(c.log, body.MatchEnded)
			c.observe(m, in.msg)
			c.mu.Lock()
			c.endMatchLocked(m.id)
			c.mu.Unlock()
			return
		default:
			c.observe(m, in.msg)
		}
	}
}

// EndStatus is how a match ended, UNSPECIFIED (an older referee) read as FINISHED.
func EndStatus(me *scoutv1.MatchEnded) scoutv1.MatchEndStatus {
	if me.GetStatus() == scoutv1.MatchEndStatus_MATCH_END_STATUS_UNSPECIFIED {
		return scoutv1.MatchEndStatus_MATCH_END_STATUS_FINISHED
	}
	return me.GetStatus()
}

// logMatchEnded logs a MatchEnded: a finished match with its result, an aborted or voided one
// (no result, no rating change) with the reason.
func logMatchEnded(log *slog.Logger, me *scoutv1.MatchEnded) {
	status := strings.TrimPrefix(EndStatus(me).String(), "MATCH_END_STATUS_")
	if EndStatus(me) == scoutv1.MatchEndStatus_MATCH_END_STATUS_FINISHED {
		log.Info("match ended", "match", me.GetMatchId(), "status", status, "totals", me.GetTotals(),
			"ranks", me.GetRanks(), "forfeited", me.GetForfeitedSeats())
		return
	}
	log.Warn("match ended without a result", "match", me.GetMatchId(), "status", status,
		"reason", me.GetReason())
}

// onProbation logs the ladder's word on probation (PROTOCOL.md §3.9) and tells the bot's hook.
func (c *client) onProbation(s *session, p *scoutv1.Probation) {
	if p.GetActive() {
		lifts := "only the bot's owner or the operator can lift it"
		if p.GetLiftedByReconnect() {
			lifts = "a new connection lifts it (restart the bot once it is fixed)"
		}
		s.link.log.Warn("on probation: no matches are scheduled for the bot", "reason", p.GetReason(),
			"lifted_by", lifts)
	} else {
		s.link.log.Info("probation lifted: matches will be scheduled again", "reason", p.GetReason())
	}
	if c.prob == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("the bot's OnProbation panicked", "panic", r)
		}
	}()
	c.prob.OnProbation(p)
}

func (c *client) observe(m *match, msg *scoutv1.RefereeMessage) {
	if c.obs == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("the bot's Observe panicked", "match", m.id, "panic", r)
		}
	}()
	c.obs.Observe(m.ctx, msg)
}

// --- requests --------------------------------------------------------------------------------

// request is a RotationRequest or DecisionRequest, reduced to what answering it needs.
type request struct {
	key        reqKey
	kind       string
	deadlineMs uint32
	bankMs     uint32
	fallback   *scoutv1.BotMessage
	ask        func(ctx context.Context) (*scoutv1.BotMessage, error)
}

func rotationRequest(bot Bot, req *scoutv1.RotationRequest) request {
	choice := func(rotate bool) *scoutv1.BotMessage {
		return &scoutv1.BotMessage{Body: &scoutv1.BotMessage_Rotation{Rotation: &scoutv1.RotationChoice{
			MatchId: req.GetMatchId(), RequestId: req.GetRequestId(), Rotate: rotate,
		}}}
	}
	return request{
		key:        reqKey{req.GetMatchId(), req.GetRequestId()},
		kind:       "rotation",
		deadlineMs: req.GetDeadlineMs(),
		bankMs:     req.GetTimeBankMs(),
		fallback:   choice(false),
		ask: func(ctx context.Context) (*scoutv1.BotMessage, error) {
			rotate, err := bot.ChooseRotation(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("ChooseRotation: %w", err)
			}
			return choice(rotate), nil
		},
	}
}

func decisionRequest(bot Bot, req *scoutv1.DecisionRequest) request {
	choice := func(action *scoutv1.Action) *scoutv1.BotMessage {
		return &scoutv1.BotMessage{Body: &scoutv1.BotMessage_Action{Action: &scoutv1.ActionChoice{
			MatchId: req.GetMatchId(), RequestId: req.GetRequestId(), Action: action,
		}}}
	}
	return request{
		key:        reqKey{req.GetMatchId(), req.GetRequestId()},
		kind:       "decision",
		deadlineMs: req.GetDeadlineMs(),
		bankMs:     req.GetTimeBankMs(),
		fallback:   choice(FallbackAction(req)),
		ask: func(ctx context.Context) (*scoutv1.BotMessage, error) {
			action, err := bot.Act(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("Act: %w", err)
			}
			if err := CheckAction(req, action); err != nil {
				return nil, fmt.Errorf("Act returned an action the referee would reject: %w", err)
			}
			return choice(action), nil
		},
	}
}

// timeLimit is how long after receiving a request the client answers with the fallback.
func (c *client) timeLimit(deadlineMs, bankMs uint32) time.Duration {
	limit := time.Duration(deadlineMs) * time.Millisecond
	if !c.cfg.NoTimeBank {
		limit += time.Duration(bankMs) * time.Millisecond
	}
	return limit - c.cfg.SafetyMargin
}

// openRequest asks the bot to answer the request in, which goes back on the stream that
// carried it.
func (c *client) openRequest(m *match, in inbound, r request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.requests[r.key]; p != nil {
		// The referee asks again after a reconnect: the answer was lost with the old stream
		// (or never sent). Resend it rather than ask the bot twice.
		p.link = in.link
		if p.answer != nil && !p.closed && (p.link.sess == nil || p.sentOn != p.link.sess.no) {
			c.log.Info("resending an answer after the reconnect", "match", r.key.match,
				"request", r.key.id)
			c.sendLocked(p, p.answer)
		}
		return
	}
	p := &pending{
		key:      r.key,
		expires:  in.at.Add(c.timeLimit(r.deadlineMs, r.bankMs)),
		fallback: r.fallback,
		link:     in.link,
	}
	var ctx context.Context
	if c.cfg.DisableDeadlineFallback {
		ctx, p.cancel = context.WithCancel(m.ctx)
	} else {
		ctx, p.cancel = context.WithDeadline(m.ctx, p.expires)
	}
	c.closeLatestLocked(r.key.match)
	c.requests[r.key] = p
	c.latest[r.key.match] = p
	c.wg.Add(1)
	go c.answer(ctx, p, r)
}

type outcome struct {
	msg *scoutv1.BotMessage
	err error
}

func (c *client) answer(ctx context.Context, p *pending, r request) {
	defer c.wg.Done()
	defer p.cancel()
	log := c.log.With("match", r.key.match, "request", r.key.id)
	if time.Until(p.expires) <= 0 && !c.cfg.DisableDeadlineFallback {
		log.Warn("no time left to ask the bot; sending the fallback", "kind", r.kind,
			"deadline_ms", r.deadlineMs, "bank_ms", r.bankMs)
		c.send(p, p.fallback)
		return
	}
	results := make(chan outcome, 1) // buffered: a late bot never blocks
	go func() {
		defer func() {
			if v := recover(); v != nil {
				results <- outcome{err: fmt.Errorf("the bot panicked: %v", v)}
			}
		}()
		msg, err := r.ask(ctx)
		results <- outcome{msg: msg, err: err}
	}()
	select {
	case res := <-results:
		if res.err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return // the match ended, the request closed, or the client stops
			}
			log.Error("sending the fallback", "kind", r.kind, "err", res.err)
			c.send(p, p.fallback)
			return
		}
		c.send(p, res.msg)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			log.Warn("the bot did not answer in time; sending the fallback", "kind", r.kind,
				"limit", c.timeLimit(r.deadlineMs, r.bankMs).Round(time.Millisecond))
			c.send(p, p.fallback)
		}
	}
}

func (c *client) send(p *pending, msg *scoutv1.BotMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sendLocked(p, msg)
}

func (c *client) sendLocked(p *pending, msg *scoutv1.BotMessage) {
	if p.closed {
		return
	}
	p.answer = msg
	p.sentOn = 0
	s := p.link.sess
	if s == nil {
		c.log.Info("not connected; the answer goes out when the referee asks again",
			"match", p.key.match, "request", p.key.id)
		return
	}
	select {
	case s.out <- msg:
		p.sentOn = s.no
	default:
		c.log.Warn("the stream is not taking messages; the answer goes out after a reconnect",
			"match", p.key.match, "request", p.key.id)
	}
}

func (c *client) onAnswerResult(res *scoutv1.AnswerResult) {
	key := reqKey{res.GetMatchId(), res.GetRequestId()}
	log := c.log.With("match", key.match, "request", key.id)
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.requests[key]
	switch res.GetStatus() {
	case scoutv1.AnswerStatus_ANSWER_STATUS_ACCEPTED: // full streams only
		if p != nil {
			p.closed = true
			p.cancel()
		}
	case scoutv1.AnswerStatus_ANSWER_STATUS_ILLEGAL, scoutv1.AnswerStatus_ANSWER_STATUS_MALFORMED:
		log.Warn("answer rejected", "status", res.GetStatus(), "reason", res.GetReason(),
			"strikes", res.GetStrikes())
		// The request stays open after a rejection, and the fallback is always legal.
		if p != nil && !p.closed && !p.fallbackSent && !proto.Equal(p.answer, p.fallback) &&
			time.Now().Before(p.expires) {
			p.fallbackSent = true
			log.Warn("sending the fallback")
			c.sendLocked(p, p.fallback)
		}
	case scoutv1.AnswerStatus_ANSWER_STATUS_TIMED_OUT:
		log.Warn("timed out: the referee played the fallback", "strikes", res.GetStrikes(),
			"bank_ms", res.GetTimeBankMs())
		if p != nil {
			p.closed = true
			p.cancel()
		}
	default: // STALE, UNKNOWN_MATCH, or a status this client does not know: nothing to do
		log.Info("answer ignored by the referee", "status", res.GetStatus(), "reason", res.GetReason())
		if p != nil {
			p.closed = true
			p.cancel()
		}
	}
}

// queue is an unbounded FIFO: the reader never blocks on a busy match.
type queue struct {
	mu     sync.Mutex
	items  []inbound
	notify chan struct{}
	once   sync.Once
}

func (q *queue) init() { q.once.Do(func() { q.notify = make(chan struct{}, 1) }) }

func (q *queue) push(x inbound) {
	q.init()
	q.mu.Lock()
	q.items = append(q.items, x)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// pop returns the oldest item, waiting for one; ok is false once ctx is done.
func (q *queue) pop(ctx context.Context) (x inbound, ok bool) {
	q.init()
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			x = q.items[0]
			q.items[0] = inbound{}
			q.items = q.items[1:]
			q.mu.Unlock()
			return x, true
		}
		q.mu.Unlock()
		select {
		case <-q.notify:
		case <-ctx.Done():
			return inbound{}, false
		}
	}
}
