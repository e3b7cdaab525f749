package scout

import (
	"flag"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestConfigFromEnv(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{
		EnvAddress: "referee:50051", EnvToken: "tok", EnvTLS: "1", EnvCACert: "/ca.pem",
		EnvBotName: "gopher", EnvConcurrency: "3",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Address != "referee:50051" || cfg.Token != "tok" || !cfg.TLS || cfg.CACertFile != "/ca.pem" ||
		cfg.BotName != "gopher" || cfg.MaxConcurrentMatches != 3 {
		t.Errorf("ConfigFromEnv = %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	cfg, err = ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConcurrentMatches != DefaultConcurrency || cfg.TLS || cfg.SafetyMargin != DefaultSafetyMargin {
		t.Errorf("defaults = %+v", cfg)
	}
	if err := cfg.Validate(); err == nil {
		t.Error("a config without address and token must not validate")
	}

	for _, bad := range []map[string]string{{EnvConcurrency: "0"}, {EnvConcurrency: "x"}, {EnvTLS: "maybe"}} {
		if _, err := ConfigFromEnv(env(bad)); err == nil {
			t.Errorf("ConfigFromEnv(%v) must fail", bad)
		}
	}
}

func TestFlagsOverrideEnv(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{EnvAddress: "a:1", EnvToken: "env-token"}))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--token", "flag-token", "--concurrency=2", "--safety-margin", "-250ms"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Address != "a:1" || cfg.Token != "flag-token" || cfg.MaxConcurrentMatches != 2 ||
		cfg.SafetyMargin != -250*time.Millisecond {
		t.Errorf("after flags: %+v", cfg)
	}
}

func TestPublicEventsFromEnvAndFlag(t *testing.T) {
	cfg, err := ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PublicEvents {
		t.Error("the default must be a lean stream (PublicEvents false)")
	}
	cfg, err = ConfigFromEnv(env(map[string]string{EnvPublicEvents: "1"}))
	if err != nil || !cfg.PublicEvents {
		t.Errorf("%s=1: PublicEvents = %t, err %v; want true", EnvPublicEvents, cfg.PublicEvents, err)
	}
	if _, err := ConfigFromEnv(env(map[string]string{EnvPublicEvents: "maybe"})); err == nil {
		t.Errorf("%s=maybe must fail", EnvPublicEvents)
	}
	cfg = DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--public-events"}); err != nil {
		t.Fatal(err)
	}
	if !cfg.PublicEvents {
		t.Error("--public-events must set PublicEvents")
	}
}

func TestBackoffDelay(t *testing.T) {
	low, high := func() float64 { return 0 }, func() float64 { return 0.999999 }
	prev := time.Duration(0)
	for attempt := range 12 {
		lo, hi := BackoffDelay(attempt, low), BackoffDelay(attempt, high)
		step := min(BackoffMax, BackoffInitial<<attempt)
		if lo != step/2 || hi > step || hi < step*99/100 {
			t.Errorf("attempt %d: delay in [%v, %v]; want [%v, %v]", attempt, lo, hi, step/2, step)
		}
		if hi < prev {
			t.Errorf("attempt %d: the delay shrank", attempt)
		}
		prev = hi
	}
	if got := BackoffDelay(1000, high); got > BackoffMax {
		t.Errorf("BackoffDelay(1000) = %v; want at most %v", got, BackoffMax)
	}
}

func TestIsRejection(t *testing.T) {
	tests := []struct {
		code    codes.Code
		details string
		want    bool
	}{
		{codes.Unauthenticated, "unknown bot token", true},
		{codes.InvalidArgument, "the first message of a stream must be Hello", true},
		{codes.FailedPrecondition, "protocol version 2 is not supported", true},
		{codes.Aborted, "superseded by a newer connection with the same token", true},
		{codes.Aborted, "something else", false},
		{codes.Unavailable, "connection refused", false},
		{codes.DeadlineExceeded, "no Hello within 10 s", false},
		{codes.Internal, "", false},
	}
	for _, tt := range tests {
		if got := IsRejection(tt.code, tt.details); got != tt.want {
			t.Errorf("IsRejection(%v, %q) = %t; want %t", tt.code, tt.details, got, tt.want)
		}
	}
}
