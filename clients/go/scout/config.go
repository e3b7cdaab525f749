package scout

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
)

// Defaults of the launch convention and of the client.
const (
	// ProtocolVersion is the Scout Arena protocol this client speaks.
	ProtocolVersion = 1
	// DefaultConcurrency is max_concurrent_matches when SCOUT_CONCURRENCY is not set.
	DefaultConcurrency = 8
	// DefaultSafetyMargin is how long before the referee's limit (deadline + time bank) the
	// client sends the fallback for a request the bot has not answered.
	DefaultSafetyMargin = 100 * time.Millisecond
)

// Environment variables of the launch convention (the tournament runner, the ladder and CI
// start a bot program with these).
const (
	EnvAddress     = "SCOUT_ADDRESS"
	EnvToken       = "SCOUT_TOKEN"
	EnvTLS         = "SCOUT_TLS"
	EnvCACert      = "SCOUT_CA_CERT"
	EnvBotName     = "SCOUT_BOT_NAME"
	EnvConcurrency = "SCOUT_CONCURRENCY"
	// EnvPublicEvents=1 asks for the full stream (Config.PublicEvents).
	EnvPublicEvents = "SCOUT_PUBLIC_EVENTS"
)

// Config says where and how a bot connects.
type Config struct {
	// Address is the referee's host:port, or unix:/absolute/path (also unix:///absolute/path)
	// for a Unix domain socket (a hosted bot's referee, PROTOCOL.md §11.4).
	Address string
	// Token is the bot's token, sent as `authorization: Bearer <token>`.
	Token string
	// TLS connects with TLS; implied by CACertFile or a client certificate.
	TLS bool
	// CACertFile is a PEM file of the CA to trust (default: the system roots).
	CACertFile string
	// ClientCertFile and ClientKeyFile are a PEM client certificate and its key, for referees
	// that require client certificates.
	ClientCertFile, ClientKeyFile string
	// BotName and BotVersion go into Hello; the name registered for the token is authoritative.
	BotName, BotVersion string
	// MaxConcurrentMatches is how many matches the referee may run at once for this bot.
	MaxConcurrentMatches int
	// SafetyMargin: the client sends the fallback this long before the referee's limit. A
	// negative margin sends it after the limit (only useful to provoke timeouts in tests).
	SafetyMargin time.Duration
	// NoTimeBank makes the limit the request's deadline alone, never drawing on the bank.
	NoTimeBank bool
	// PublicEvents asks the referee for the full stream (Hello.lean = false): every
	// PublicEvent and an AnswerResult for every answer, accepted ones included. By default the
	// client asks for a lean stream (PROTOCOL.md §3.6.1), where neither is sent: what happened
	// since the last request is in the next request's Observation.History. Set it when an
	// Observer needs the events as they happen.
	PublicEvents bool
	// DisableDeadlineFallback stops the client from answering for a bot that is late: the bot
	// gets all the time it takes, and the referee times the request out (a strike) and plays
	// its fallback. A testing aid; errors and illegal actions still get the fallback.
	DisableDeadlineFallback bool
	// ShutdownGiveUp is how long to keep reconnecting after a Goodbye{reconnect: true} before
	// Run gives up with a *GaveUpError (default, when not positive: ShutdownGiveUp, 15 min).
	ShutdownGiveUp time.Duration
	// Logger receives the client's logs (default slog.Default()).
	Logger *slog.Logger
	// DialOptions are appended to the client's own gRPC dial options.
	DialOptions []grpc.DialOption

	// nodeGoneAfter replaces NodeGoneAfter when positive; only the package's tests set it.
	nodeGoneAfter time.Duration
}

// DefaultConfig returns a Config with the defaults and no address or token.
func DefaultConfig() Config {
	return Config{
		BotName:              "go-starter",
		BotVersion:           "0.1.0",
		MaxConcurrentMatches: DefaultConcurrency,
		SafetyMargin:         DefaultSafetyMargin,
	}
}

// ConfigFromEnv returns DefaultConfig overridden by the launch convention's environment
// variables, read with getenv (pass os.Getenv).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	cfg.Address = strings.TrimSpace(getenv(EnvAddress))
	cfg.Token = strings.TrimSpace(getenv(EnvToken))
	cfg.CACertFile = getenv(EnvCACert)
	if v := getenv(EnvTLS); v != "" {
		tls, err := parseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("%s=%q: %w", EnvTLS, v, err)
		}
		cfg.TLS = tls
	}
	if v := strings.TrimSpace(getenv(EnvBotName)); v != "" {
		cfg.BotName = v
	}
	if v := strings.TrimSpace(getenv(EnvConcurrency)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("%s=%q: want a whole number of at least 1", EnvConcurrency, v)
		}
		cfg.MaxConcurrentMatches = n
	}
	if v := getenv(EnvPublicEvents); v != "" {
		full, err := parseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("%s=%q: %w", EnvPublicEvents, v, err)
		}
		cfg.PublicEvents = full
	}
	return cfg, nil
}

// RegisterFlags defines the command-line flags of the launch convention on fs, defaulting to
// cfg's current values (so flags override the environment). Go's flag package accepts both
// -address and --address.
func (cfg *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.Address, "address", cfg.Address, "referee host:port or unix:/path (also $"+EnvAddress+")")
	fs.Var(secret{&cfg.Token}, "token", "the bot's `token` (also $"+EnvToken+")")
	fs.BoolVar(&cfg.TLS, "tls", cfg.TLS, "connect with TLS (also "+EnvTLS+"=1)")
	fs.StringVar(&cfg.CACertFile, "ca-cert", cfg.CACertFile, "PEM file of the CA to trust (also $"+EnvCACert+")")
	fs.StringVar(&cfg.ClientCertFile, "client-cert", cfg.ClientCertFile, "PEM client certificate")
	fs.StringVar(&cfg.ClientKeyFile, "client-key", cfg.ClientKeyFile, "PEM key of the client certificate")
	fs.StringVar(&cfg.BotName, "name", cfg.BotName, "bot name sent in Hello (also $"+EnvBotName+")")
	fs.IntVar(&cfg.MaxConcurrentMatches, "concurrency", cfg.MaxConcurrentMatches,
		"matches to play at once (also $"+EnvConcurrency+")")
	fs.DurationVar(&cfg.SafetyMargin, "safety-margin", cfg.SafetyMargin,
		"send the fallback this long before the referee's limit (negative: after it, to test timeouts)")
	fs.BoolVar(&cfg.NoTimeBank, "no-time-bank", cfg.NoTimeBank,
		"never draw on the time bank: fall back at the decision deadline")
	fs.Func("shutdown-give-up-ms", "after a shutdown goodbye, give up reconnecting after this many ms "+
		"(default 900000: 15 min)", func(v string) error {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 1 {
			return errors.New("want a whole number of ms, at least 1")
		}
		cfg.ShutdownGiveUp = time.Duration(ms) * time.Millisecond
		return nil
	})
	fs.BoolVar(&cfg.PublicEvents, "public-events", cfg.PublicEvents,
		"ask for every PublicEvent and accepted AnswerResult instead of a lean stream (also "+EnvPublicEvents+"=1)")
}

// Validate reports a configuration the client cannot run with.
func (cfg *Config) Validate() error {
	var problems []string
	if cfg.Address == "" {
		problems = append(problems, "no referee address (set "+EnvAddress+" or --address)")
	}
	if cfg.Token == "" {
		problems = append(problems, "no bot token (set "+EnvToken+" or --token)")
	}
	if cfg.MaxConcurrentMatches < 1 {
		problems = append(problems, "the concurrency must be at least 1")
	}
	if (cfg.ClientCertFile == "") != (cfg.ClientKeyFile == "") {
		problems = append(problems, "--client-cert and --client-key go together")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func (cfg *Config) useTLS() bool {
	return cfg.TLS || cfg.CACertFile != "" || cfg.ClientCertFile != ""
}

// secret is a string flag whose value the usage text never shows (the token may come from the
// environment).
type secret struct{ p *string }

func (s secret) String() string { return "" }

func (s secret) Set(v string) error {
	*s.p = v
	return nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off", "":
		return false, nil
	}
	return false, errors.New("want 1 or 0")
}
