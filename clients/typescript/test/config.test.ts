import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { DEFAULT_CONCURRENCY, resolveConfig, type Config } from "../src/lib/config";

function run(argv: string[], env: Record<string, string>): Config {
  const result = resolveConfig(argv, env);
  assert.equal(result.kind, "run", JSON.stringify(result));
  return (result as { config: Config }).config;
}

function error(argv: string[], env: Record<string, string>): string {
  const result = resolveConfig(argv, env);
  assert.equal(result.kind, "error");
  return (result as { message: string }).message;
}

const BASE = { SCOUT_ADDRESS: "127.0.0.1:50077", SCOUT_TOKEN: "t0k" };

describe("resolveConfig", () => {
  it("reads the launch convention from the environment", () => {
    const config = run([], {
      ...BASE,
      SCOUT_TLS: "1",
      SCOUT_CA_CERT: "/ca.pem",
      SCOUT_BOT_NAME: "ts",
      SCOUT_CONCURRENCY: "3",
    });
    assert.equal(config.address, "127.0.0.1:50077");
    assert.equal(config.token, "t0k");
    assert.equal(config.tls, true);
    assert.equal(config.caCert, "/ca.pem");
    assert.equal(config.botName, "ts");
    assert.equal(config.concurrency, 3);
  });
  it("takes a unix: socket address as it is", () => {
    for (const address of ["unix:/run/scout/referee.sock", "unix:///run/scout/referee.sock"]) {
      assert.equal(run([], { SCOUT_ADDRESS: address, SCOUT_TOKEN: "hosted" }).address, address);
    }
  });
  it("has defaults for the optional parts", () => {
    const config = run([], BASE);
    assert.equal(config.tls, false);
    assert.equal(config.caCert, undefined);
    assert.equal(config.concurrency, DEFAULT_CONCURRENCY);
    assert.equal(config.useTimeBank, true);
    assert.equal(config.slowMs, 0);
  });
  it("lets flags override the environment", () => {
    const config = run(
      ["--address", "h:1", "--token=x", "--concurrency", "2", "--name", "n", "--slow-ms", "5"],
      { ...BASE, SCOUT_CONCURRENCY: "9", SCOUT_BOT_NAME: "env" },
    );
    assert.deepEqual(
      [config.address, config.token, config.concurrency, config.botName, config.slowMs],
      ["h:1", "x", 2, "n", 5],
    );
  });
  it("treats SCOUT_TLS=0 as plaintext and a CA certificate as TLS", () => {
    assert.equal(run([], { ...BASE, SCOUT_TLS: "0" }).tls, false);
    assert.equal(run(["--ca-cert", "c.pem"], BASE).tls, true);
    assert.equal(run(["--tls"], BASE).tls, true);
  });
  it("reports a missing address or token and bad numbers", () => {
    assert.match(error([], { SCOUT_TOKEN: "t" }), /SCOUT_ADDRESS/);
    assert.match(error([], { SCOUT_ADDRESS: "a:1" }), /SCOUT_TOKEN/);
    assert.match(error([], { ...BASE, SCOUT_CONCURRENCY: "0" }), /concurrency/);
    assert.match(error(["--concurrency", "two"], BASE), /concurrency/);
    assert.match(error(["--client-cert", "c.pem"], BASE), /go together/);
    assert.match(error(["--bogus"], BASE), /bogus/);
  });
  it("asks for a lean stream unless --public-events or SCOUT_PUBLIC_EVENTS=1", () => {
    assert.equal(run([], BASE).publicEvents, false);
    assert.equal(run([], { ...BASE, SCOUT_PUBLIC_EVENTS: "0" }).publicEvents, false);
    assert.equal(run([], { ...BASE, SCOUT_PUBLIC_EVENTS: "1" }).publicEvents, true);
    assert.equal(run(["--public-events"], BASE).publicEvents, true);
  });
  it("answers --help", () => {
    assert.equal(resolveConfig(["-h"], {}).kind, "help");
  });
});
