package org.scoutarena.client;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * How to reach the referee and how to play, from the launch convention's environment
 * ({@code SCOUT_ADDRESS}, {@code SCOUT_TOKEN}, {@code SCOUT_TLS}, {@code SCOUT_CA_CERT},
 * {@code SCOUT_BOT_NAME}, {@code SCOUT_CONCURRENCY}, {@code SCOUT_PUBLIC_EVENTS}) with
 * command-line flags overriding it.
 *
 * @param address referee {@code host:port}, or {@code unix:/absolute/path} (also
 *     {@code unix:///absolute/path}) for a Unix domain socket
 * @param token bot token, sent as {@code authorization: Bearer <token>}
 * @param tls connect with TLS (implied by any certificate)
 * @param caCert PEM of the CA to trust instead of the system roots, or null
 * @param clientCert PEM client certificate for mutual TLS, or null
 * @param clientKey PEM key of {@code clientCert}, or null
 * @param botName display name for Hello, or null for the bot's own name
 * @param concurrency {@code max_concurrent_matches} declared in Hello (at least 1)
 * @param maxMatches stop after this many matches ended; 0 plays until stopped
 * @param safetyMarginMs send the fallback this long before the referee's limit
 * @param useTimeBank let the bot think into the time bank (limit = deadline + bank)
 * @param slowMs testing aid: delay every bot answer this long
 * @param publicEvents ask for the full stream (every {@code PublicEvent} and an
 *     {@code AnswerResult} for accepted answers too) instead of a lean one (PROTOCOL.md §3.6.1)
 * @param shutdownGiveUpMs after a {@code Goodbye} with {@code reconnect: true}, give up
 *     reconnecting after this long (default 15 minutes)
 * @param verbose debug logging
 * @param help print the usage and exit
 */
public record ClientConfig(
    String address,
    String token,
    boolean tls,
    Path caCert,
    Path clientCert,
    Path clientKey,
    String botName,
    int concurrency,
    int maxMatches,
    int safetyMarginMs,
    boolean useTimeBank,
    int slowMs,
    boolean publicEvents,
    int shutdownGiveUpMs,
    boolean verbose,
    boolean help) {

  /** Matches declared in Hello when SCOUT_CONCURRENCY and --concurrency are absent. */
  public static final int DEFAULT_CONCURRENCY = 8;
  /** Default head start of the fallback before the referee's limit, for latency and GC pauses. */
  public static final int DEFAULT_SAFETY_MARGIN_MS = 150;
  /** How long to keep reconnecting after a shutdown Goodbye before giving up: 15 minutes. */
  public static final int DEFAULT_SHUTDOWN_GIVE_UP_MS = 15 * 60 * 1000;

  /** The command-line usage. */
  public static final String USAGE = """
      usage: java -jar scout-bot.jar [options]

      Connects a SCOUT bot to a Scout Arena referee and plays until stopped (SIGTERM/SIGINT).
      Flags override the environment variables in brackets.

        --address HOST:PORT      referee address, or unix:/PATH [SCOUT_ADDRESS] (required)
        --token TOKEN            bot token [SCOUT_TOKEN] (required)
        --tls                    connect with TLS [SCOUT_TLS=1]
        --ca-cert FILE           PEM of the CA to trust, implies --tls [SCOUT_CA_CERT]
        --client-cert FILE       PEM client certificate for mutual TLS (with --client-key)
        --client-key FILE        PEM key of the client certificate
        --bot-name NAME          display name sent in Hello [SCOUT_BOT_NAME]
        --concurrency N          matches to play at once (default 8) [SCOUT_CONCURRENCY]
        --max-matches N          stop after N matches have ended (default: never)
        --safety-margin-ms MS    send the fallback this long before the referee's limit
                                 (default 150)
        --no-time-bank           never think into the time bank: fall back at the deadline
        --slow-ms MS             testing aid: delay every answer of the bot by MS
        --public-events          ask for every public event and accepted result instead of
                                 a lean stream [SCOUT_PUBLIC_EVENTS=1]
        --shutdown-give-up-ms MS after a shutdown goodbye, give up reconnecting after MS
                                 (default 900000: 15 minutes)
        -v, --verbose            debug logging
        -h, --help               this text

      Exit status: 0 when stopped by a signal, after --max-matches, or on a goodbye that
      does not ask the bot back; 1 when the referee refuses the bot (bad token, protocol,
      superseded) or is not back within --shutdown-give-up-ms of a shutdown goodbye; 2 for a
      usage error.
      """;

  /** A bad command line or environment. */
  public static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    /** @param message what is wrong, one line */
    public UsageException(String message) {
      super(message);
    }
  }

  /** The configuration for {@code args} over {@code env} (usually {@code System.getenv()}). */
  public static ClientConfig parse(List<String> args, Map<String, String> env)
      throws UsageException {
    String address = env.get("SCOUT_ADDRESS");
    String token = env.get("SCOUT_TOKEN");
    boolean tls = truthy(env.get("SCOUT_TLS"));
    String caCert = env.get("SCOUT_CA_CERT");
    String clientCert = null;
    String clientKey = null;
    String botName = env.get("SCOUT_BOT_NAME");
    int concurrency = DEFAULT_CONCURRENCY;
    String envConcurrency = env.get("SCOUT_CONCURRENCY");
    if (envConcurrency != null && !envConcurrency.isBlank()) {
      concurrency = parseInt("SCOUT_CONCURRENCY", envConcurrency.trim());
    }
    int maxMatches = 0;
    int safetyMarginMs = DEFAULT_SAFETY_MARGIN_MS;
    boolean useTimeBank = true;
    int slowMs = 0;
    boolean publicEvents = truthy(env.get("SCOUT_PUBLIC_EVENTS"));
    int shutdownGiveUpMs = DEFAULT_SHUTDOWN_GIVE_UP_MS;
    boolean verbose = false;
    boolean help = false;

    for (int i = 0; i < args.size(); i++) {
      String arg = args.get(i);
      String name = arg;
      String inline = null;
      int equals = arg.indexOf('=');
      if (arg.startsWith("--") && equals > 0) {
        name = arg.substring(0, equals);
        inline = arg.substring(equals + 1);
      }
      switch (name) {
        case "--tls" -> tls = true;
        case "--no-time-bank" -> useTimeBank = false;
        case "--public-events" -> publicEvents = true;
        case "-v", "--verbose" -> verbose = true;
        case "-h", "--help" -> help = true;
        case "--address", "--token", "--ca-cert", "--client-cert", "--client-key", "--bot-name",
            "--concurrency", "--max-concurrent", "--max-matches", "--safety-margin-ms",
            "--slow-ms", "--shutdown-give-up-ms" -> {
          String value = inline;
          if (value == null) {
            if (i + 1 >= args.size()) {
              throw new UsageException(name + " needs a value");
            }
            value = args.get(++i);
          }
          switch (name) {
            case "--address" -> address = value;
            case "--token" -> token = value;
            case "--ca-cert" -> caCert = value;
            case "--client-cert" -> clientCert = value;
            case "--client-key" -> clientKey = value;
            case "--bot-name" -> botName = value;
            case "--concurrency", "--max-concurrent" -> concurrency = parseInt(name, value);
            case "--max-matches" -> maxMatches = parseInt(name, value);
            case "--safety-margin-ms" -> safetyMarginMs = parseInt(name, value);
            case "--slow-ms" -> slowMs = parseInt(name, value);
            case "--shutdown-give-up-ms" -> shutdownGiveUpMs = Math.max(1, parseInt(name, value));
            default -> throw new IllegalStateException(name);
          }
        }
        default -> throw new UsageException("unknown argument " + arg + " (see --help)");
      }
    }

    if (help) {
      return new ClientConfig(address, token, tls, null, null, null, botName, 1, 0,
          safetyMarginMs, useTimeBank, slowMs, publicEvents, shutdownGiveUpMs, verbose, true);
    }
    if (address == null || address.isBlank()) {
      throw new UsageException("no referee address: pass --address HOST:PORT or set SCOUT_ADDRESS");
    }
    if (token == null || token.isBlank()) {
      throw new UsageException("no bot token: pass --token TOKEN or set SCOUT_TOKEN");
    }
    if (concurrency < 1) {
      throw new UsageException("the concurrency must be at least 1, not " + concurrency);
    }
    if (maxMatches < 0 || slowMs < 0) {
      throw new UsageException("--max-matches and --slow-ms cannot be negative");
    }
    if ((clientCert == null) != (clientKey == null)) {
      throw new UsageException("--client-cert and --client-key go together");
    }
    Path ca = blankToNull(caCert) == null ? null : Path.of(caCert);
    Path cert = clientCert == null ? null : Path.of(clientCert);
    Path key = clientKey == null ? null : Path.of(clientKey);
    tls = tls || ca != null || cert != null;
    return new ClientConfig(address.trim(), token.trim(), tls, ca, cert, key,
        blankToNull(botName), concurrency, maxMatches, safetyMarginMs, useTimeBank, slowMs,
        publicEvents, shutdownGiveUpMs, verbose, false);
  }

  /** True for "1", "true", "yes", "on" (any case). */
  static boolean truthy(String value) {
    if (value == null) {
      return false;
    }
    return switch (value.trim().toLowerCase(Locale.ROOT)) {
      case "1", "true", "yes", "on" -> true;
      default -> false;
    };
  }

  private static int parseInt(String name, String value) throws UsageException {
    try {
      return Integer.parseInt(value);
    } catch (NumberFormatException e) {
      throw new UsageException(name + " needs a whole number, not '" + value + "'");
    }
  }

  private static String blankToNull(String value) {
    return value == null || value.isBlank() ? null : value;
  }

  /** The configuration without the token, for logs. */
  @Override
  public String toString() {
    return "ClientConfig[address=" + address + ", tls=" + tls + ", caCert=" + caCert
        + ", botName=" + botName + ", concurrency=" + concurrency + ", maxMatches=" + maxMatches
        + ", safetyMarginMs=" + safetyMarginMs + ", useTimeBank=" + useTimeBank + ", slowMs="
        + slowMs + ", publicEvents=" + publicEvents + "]";
  }
}
