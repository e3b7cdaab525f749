package org.scoutarena.bot;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.time.LocalTime;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.logging.ConsoleHandler;
import java.util.logging.Formatter;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.scoutarena.client.ArenaClient;
import org.scoutarena.client.ClientConfig;
import org.scoutarena.client.ConnectionRejectedException;
import org.scoutarena.client.ReconnectGaveUpException;
import org.scoutarena.client.ScoutBot;

/**
 * {@code java -jar scout-bot.jar}: reads the launch convention (SCOUT_ADDRESS, SCOUT_TOKEN, ...;
 * flags override), plays {@link ExampleBot} until SIGTERM/SIGINT or the referee's Goodbye without
 * reconnect (exit 0), and exits 1 with a one-line message when the referee refuses the bot. Logs
 * go to stderr.
 */
public final class Main {

  private static final Logger log = Logger.getLogger("org.scoutarena");
  private static volatile boolean exiting;

  private Main() {}

  /** Your bot: change this line if you rename ExampleBot. */
  static ScoutBot newBot() {
    return new ExampleBot();
  }

  public static void main(String[] args) {
    ClientConfig config;
    try {
      config = ClientConfig.parse(List.of(args), System.getenv());
    } catch (ClientConfig.UsageException e) {
      exit(fail(e.getMessage(), 2));
      return;
    }
    if (config.help()) {
      System.out.print(ClientConfig.USAGE);
      exit(0);
      return;
    }
    configureLogging(config.verbose());
    exit(run(config));
  }

  private static int run(ClientConfig config) {
    ScoutBot bot = newBot();
    if (config.slowMs() > 0) {
      log.warning("--slow-ms " + config.slowMs() + ": every answer is delayed (testing aid)");
      bot = new SlowBot(bot, config.slowMs());
    }
    ArenaClient client;
    try {
      client = new ArenaClient(config, bot);
    } catch (IOException | IllegalArgumentException e) {
      return fail("cannot set up the connection: " + e.getMessage(), 2);
    }
    installSignalHandler(client);
    log.info("playing on " + config.address() + (config.tls() ? " (TLS)" : "") + " as "
        + (config.botName() != null ? config.botName() : bot.name()) + ", up to "
        + config.concurrency() + " match(es) at once");
    try {
      int played = client.run();
      log.info("stopped after " + played + " match(es)");
      return 0;
    } catch (ConnectionRejectedException | ReconnectGaveUpException e) {
      return fail(e.getMessage(), 1);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return 0;
    }
  }

  /**
   * SIGTERM/SIGINT start the JVM's shutdown: close the stream politely, then halt with status 0
   * (the JVM would otherwise report 143/130).
   */
  private static void installSignalHandler(ArenaClient client) {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      if (exiting) {
        return; // our own System.exit: keep its status
      }
      System.err.println(timestamp() + " INFO stopping (signal)");
      client.stop();
      try {
        client.awaitTermination(Duration.ofSeconds(3));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      System.err.flush();
      Runtime.getRuntime().halt(0);
    }, "scout-bot-shutdown"));
  }

  private static void exit(int status) {
    exiting = true;
    System.err.flush();
    System.exit(status);
  }

  private static int fail(String message, int status) {
    System.err.println("scout-bot: error: " + message.replaceAll("\\s+", " ").trim());
    return status;
  }

  private static void configureLogging(boolean verbose) {
    Logger root = Logger.getLogger("");
    for (Handler handler : root.getHandlers()) {
      root.removeHandler(handler);
    }
    ConsoleHandler handler = new ConsoleHandler(); // writes to stderr
    handler.setLevel(Level.ALL);
    handler.setFormatter(new OneLineFormatter());
    root.addHandler(handler);
    root.setLevel(Level.INFO);
    log.setLevel(verbose ? Level.FINE : Level.INFO);
  }

  private static String timestamp() {
    return LocalTime.now().format(DateTimeFormatter.ofPattern("HH:mm:ss.SSS"));
  }

  /** {@code 12:34:56.789 WARNING message}, plus the stack trace of a logged exception. */
  private static final class OneLineFormatter extends Formatter {
    @Override
    public String format(LogRecord record) {
      StringBuilder line = new StringBuilder()
          .append(timestamp()).append(' ')
          .append(record.getLevel().getName()).append(' ')
          .append(formatMessage(record)).append(System.lineSeparator());
      if (record.getThrown() != null) {
        StringWriter trace = new StringWriter();
        record.getThrown().printStackTrace(new PrintWriter(trace));
        line.append(trace);
      }
      return line.toString();
    }
  }
}
