package org.scoutarena.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ClientConfigTest {

  static final Map<String, String> ENV = Map.of("SCOUT_ADDRESS", "referee:50051",
      "SCOUT_TOKEN", "secret");

  @Test
  void readsTheLaunchConventionEnvironment() throws Exception {
    ClientConfig config = ClientConfig.parse(List.of(), Map.of(
        "SCOUT_ADDRESS", "referee:50051", "SCOUT_TOKEN", "secret", "SCOUT_TLS", "1",
        "SCOUT_CA_CERT", "/etc/ca.pem", "SCOUT_BOT_NAME", "alice", "SCOUT_CONCURRENCY", "3"));
    assertEquals("referee:50051", config.address());
    assertEquals("secret", config.token());
    assertTrue(config.tls());
    assertEquals(Path.of("/etc/ca.pem"), config.caCert());
    assertEquals("alice", config.botName());
    assertEquals(3, config.concurrency());
  }

  @Test
  void takesAUnixSocketAddressAsItIs() throws Exception {
    for (String address : List.of("unix:/run/scout/referee.sock",
        "unix:///run/scout/referee.sock")) {
      ClientConfig config = ClientConfig.parse(List.of(), Map.of(
          "SCOUT_ADDRESS", address, "SCOUT_TOKEN", "hosted"));
      assertEquals(address, config.address());
    }
  }

  @Test
  void defaults() throws Exception {
    ClientConfig config = ClientConfig.parse(List.of(), ENV);
    assertFalse(config.tls());
    assertNull(config.caCert());
    assertNull(config.botName());
    assertEquals(ClientConfig.DEFAULT_CONCURRENCY, config.concurrency());
    assertEquals(0, config.maxMatches());
    assertEquals(ClientConfig.DEFAULT_SAFETY_MARGIN_MS, config.safetyMarginMs());
    assertTrue(config.useTimeBank());
    assertEquals(0, config.slowMs());
    assertFalse(config.help());
  }

  @Test
  void publicEventsFromTheEnvironmentOrAFlag() throws Exception {
    assertFalse(ClientConfig.parse(List.of(), ENV).publicEvents(), "a lean stream by default");
    assertTrue(ClientConfig.parse(List.of(), Map.of("SCOUT_ADDRESS", "a:1", "SCOUT_TOKEN", "t",
        "SCOUT_PUBLIC_EVENTS", "1")).publicEvents());
    assertFalse(ClientConfig.parse(List.of(), Map.of("SCOUT_ADDRESS", "a:1", "SCOUT_TOKEN", "t",
        "SCOUT_PUBLIC_EVENTS", "0")).publicEvents());
    assertTrue(ClientConfig.parse(List.of("--public-events"), ENV).publicEvents());
  }

  @Test
  void flagsOverrideTheEnvironment() throws Exception {
    ClientConfig config = ClientConfig.parse(List.of("--address", "localhost:1",
        "--token=other", "--concurrency", "2", "--bot-name=bob", "--max-matches", "5",
        "--slow-ms", "1500", "--safety-margin-ms=-300", "--no-time-bank", "-v"),
        Map.of("SCOUT_ADDRESS", "referee:50051", "SCOUT_TOKEN", "secret",
            "SCOUT_CONCURRENCY", "9", "SCOUT_BOT_NAME", "alice"));
    assertEquals("localhost:1", config.address());
    assertEquals("other", config.token());
    assertEquals(2, config.concurrency());
    assertEquals("bob", config.botName());
    assertEquals(5, config.maxMatches());
    assertEquals(1500, config.slowMs());
    assertEquals(-300, config.safetyMarginMs());
    assertFalse(config.useTimeBank());
    assertTrue(config.verbose());
  }

  @Test
  void certificatesImplyTls() throws Exception {
    assertTrue(ClientConfig.parse(List.of("--ca-cert", "ca.pem"), ENV).tls());
    ClientConfig mutual = ClientConfig.parse(
        List.of("--client-cert", "c.pem", "--client-key", "k.pem"), ENV);
    assertTrue(mutual.tls());
    assertEquals(Path.of("k.pem"), mutual.clientKey());
    assertTrue(ClientConfig.parse(List.of("--tls"), ENV).tls());
  }

  @Test
  void scoutTlsAcceptsTheUsualTruthyWords() throws Exception {
    for (String yes : List.of("1", "true", "YES", "on")) {
      assertTrue(ClientConfig.parse(List.of(), Map.of("SCOUT_ADDRESS", "a:1", "SCOUT_TOKEN", "t",
          "SCOUT_TLS", yes)).tls(), yes);
    }
    for (String no : List.of("0", "", "false", "no")) {
      assertFalse(ClientConfig.parse(List.of(), Map.of("SCOUT_ADDRESS", "a:1", "SCOUT_TOKEN", "t",
          "SCOUT_TLS", no)).tls(), no);
    }
  }

  @Test
  void usageErrors() {
    assertThrows(ClientConfig.UsageException.class,
        () -> ClientConfig.parse(List.of(), Map.of("SCOUT_TOKEN", "t")));
    assertThrows(ClientConfig.UsageException.class,
        () -> ClientConfig.parse(List.of(), Map.of("SCOUT_ADDRESS", "a:1")));
    assertThrows(ClientConfig.UsageException.class,
        () -> ClientConfig.parse(List.of("--concurrency", "0"), ENV));
    assertThrows(ClientConfig.UsageException.class,
        () -> ClientConfig.parse(List.of("--concurrency", "many"), ENV));
    assertThrows(ClientConfig.UsageException.class,
        () -> ClientConfig.parse(List.of(), Map.of("SCOUT_ADDRESS", "a:1", "SCOUT_TOKEN", "t",
            "SCOUT_CONCURRENCY", "x")));
    assertThrows(ClientConfig.UsageException.class,
        () -> ClientConfig.parse(List.of("--client-cert", "c.pem"), ENV));
    assertThrows(ClientConfig.UsageException.class,
        () -> ClientConfig.parse(List.of("--token"), ENV));
    assertThrows(ClientConfig.UsageException.class,
        () -> ClientConfig.parse(List.of("--frobnicate"), ENV));
  }

  @Test
  void helpNeedsNoAddress() throws Exception {
    assertTrue(ClientConfig.parse(List.of("--help"), Map.of()).help());
  }

  @Test
  void toStringHidesTheToken() throws Exception {
    assertFalse(ClientConfig.parse(List.of(), ENV).toString().contains("secret"));
  }
}
