// Command scout-bot is the Go starter bot for Scout Arena.
//
// It follows the launch convention: SCOUT_ADDRESS, SCOUT_TOKEN, SCOUT_TLS, SCOUT_CA_CERT,
// SCOUT_BOT_NAME and SCOUT_CONCURRENCY configure it, command-line flags override them. It plays
// until SIGTERM/SIGINT or until the referee says Goodbye without asking it back (exit 0); when the referee refuses it for good (unknown token, protocol
// mismatch, superseded by a newer connection with the same token), or when a referee that said
// it was shutting down is not back within 15 minutes (--shutdown-give-up-ms), it prints one line
// and exits 1. The ladder's word on probation is logged. The strategy is chooseAction in strategy.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
	"github.com/scout-arena/scout-arena/clients/go/scout"
)

func main() {
	os.Exit(run())
}

func run() int {
	cfg, err := scout.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scout-bot: %v\n", err)
		return 2
	}
	fs := flag.NewFlagSet("scout-bot", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	slowMs := fs.Int("slow-ms", 0, "testing: delay every answer this many ms and send no fallback, "+
		"so deadlines are missed for real (TIMED_OUT, strikes)")
	thinkMs := fs.Int("think-ms", 0, "testing: think this many ms per answer, but give up at the "+
		"time limit, so the client's fallback goes out in time")
	verbose := fs.Bool("v", false, "log debug messages")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "scout-bot: %v\n", err)
		return 2
	}

	var bot scout.Bot = scout.ActFunc(chooseAction)
	switch {
	case *slowMs > 0:
		cfg.DisableDeadlineFallback = true
		bot = delayed{time.Duration(*slowMs) * time.Millisecond, bot}
		cfg.Logger.Warn("--slow-ms: every answer is delayed and the client sends no fallback when it is late",
			"delay_ms", *slowMs)
	case *thinkMs > 0:
		bot = delayed{time.Duration(*thinkMs) * time.Millisecond, bot}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal terminates at once
	}()

	err = scout.Run(ctx, cfg, bot)
	if rejected, ok := errors.AsType[*scout.RejectedError](err); ok {
		fmt.Fprintf(os.Stderr, "scout-bot: %v\n", rejected)
		return 1
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "scout-bot: %v\n", err)
		return 1
	}
	return 0
}

// delayed makes every answer (rotation and decision) take d longer, or until ctx is done: at
// the client's time limit (--think-ms; the client has sent the fallback), or when the referee
// timed the request out or the match ended (--slow-ms, where the client sets no time limit).
type delayed struct {
	d   time.Duration
	bot scout.Bot
}

func (b delayed) wait(ctx context.Context) error {
	select {
	case <-time.After(b.d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b delayed) ChooseRotation(ctx context.Context, req *scoutv1.RotationRequest) (bool, error) {
	if err := b.wait(ctx); err != nil {
		return false, err
	}
	return b.bot.ChooseRotation(ctx, req)
}

func (b delayed) Act(ctx context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.bot.Act(ctx, req)
}
