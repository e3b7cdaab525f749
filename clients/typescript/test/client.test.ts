// The client library against an in-process fake referee (no network beyond localhost).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";

import { chooseAction } from "../src/bot";
import {
  ConnectionRejected,
  loadScoutProto,
  runBot,
  silentLogger,
  type Bot,
  type RunOptions,
} from "../src/lib";
import type { BotMessage__Output } from "../src/generated/scout/v1/BotMessage";
import type { RefereeMessage } from "../src/generated/scout/v1/RefereeMessage";
import { allScouts, decision } from "./helpers";

type Call = grpc.ServerDuplexStream<BotMessage__Output, RefereeMessage>;
type Script = (call: Call, connection: number) => void;

/** A fake referee whose Play handler runs the current script. */
class FakeReferee {
  private readonly server = new grpc.Server();
  script: Script = () => undefined;
  connections = 0;
  tokens: string[] = [];
  port = 0;

  async start(): Promise<void> {
    const Arena = loadScoutProto().scout.v1.Arena;
    this.server.addService(Arena.service, {
      Play: (call: Call) => {
        this.connections += 1;
        this.tokens.push(String(call.metadata.get("authorization")[0] ?? ""));
        call.on("error", () => undefined);
        call.on("end", () => call.end()); // the bot half-closed: end the call, as the referee does
        this.script(call, this.connections);
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, port) =>
        e ? reject(e) : resolve(port),
      ),
    );
  }

  stop(): void {
    this.server.forceShutdown();
  }

  options(stop: AbortController, extra: Partial<RunOptions> = {}): RunOptions {
    return {
      address: `127.0.0.1:${this.port}`,
      token: "secret",
      logger: silentLogger,
      signal: stop.signal,
      ...extra,
    };
  }
}

/** Reads the next message of a call. */
function next(call: Call): Promise<BotMessage__Output> {
  return new Promise((resolve) => call.once("data", resolve));
}

describe("runBot against a fake referee", () => {
  const referee = new FakeReferee();
  before(() => referee.start());
  after(() => referee.stop());

  it("says Hello with the token, then answers a decision with the bot's move", async () => {
    const stop = new AbortController();
    const turn = decision({
      hand: [9, 2, 3, 4],
      legalShows: [
        { start: 0, length: 1 },
        { start: 1, length: 3 },
      ],
    });
    const answered = new Promise<BotMessage__Output>((resolve) => {
      referee.script = async (call) => {
        const hello = await next(call);
        assert.equal(hello.body, "hello");
        assert.equal(hello.hello?.protocolVersion, 1);
        assert.equal(hello.hello?.maxConcurrentMatches, 3);
        call.write({ welcome: { protocolVersion: 1, botName: "kit", sessionId: "s" } });
        call.write({ decisionRequest: turn });
        resolve(await next(call));
      };
    });
    const run = runBot({ chooseAction }, referee.options(stop, { concurrency: 3 }));
    const answer = await answered;
    stop.abort();
    await run;
    assert.equal(referee.tokens.at(-1), "Bearer secret");
    assert.deepEqual(answer.action, {
      matchId: "m-1",
      requestId: "7",
      action: { kind: "show", show: { start: 1, length: 3 } },
    });
  });

  it("sends the fallback before the deadline when the bot does not answer", async () => {
    const stop = new AbortController();
    const stalling: Bot = { chooseAction: () => new Promise(() => undefined) };
    const turn = {
      ...decision({ hand: [1, 9], active: [5, 5], legalScouts: allScouts(2) }),
      deadlineMs: 300,
      timeBankMs: 0,
    };
    const answered = new Promise<[BotMessage__Output, number]>((resolve) => {
      referee.script = async (call) => {
        await next(call);
        call.write({ welcome: { protocolVersion: 1, botName: "kit", sessionId: "s" } });
        const sent = Date.now();
        call.write({ decisionRequest: turn });
        const answer = await next(call);
        resolve([answer, Date.now() - sent]);
      };
    });
    const run = runBot(stalling, referee.options(stop));
    const [answer, elapsed] = await answered;
    stop.abort();
    await run;
    assert.deepEqual(answer.action?.action?.scout, { end: "END_LEFT", flip: false, insertAt: 0 });
    assert.ok(elapsed >= 100 && elapsed < 300, `fallback after ${elapsed} ms`);
  });

  it("reconnects after the stream is lost", async () => {
    const stop = new AbortController();
    const start = referee.connections;
    const reconnected = new Promise<void>((resolve) => {
      referee.script = (call, connection) => {
        if (connection === start + 1) {
          call.emit("error", { code: grpc.status.UNAVAILABLE, details: "going away" });
          return;
        }
        call.resume(); // read (and drop) the Hello so that the bot's half-close is seen
        resolve();
      };
    });
    const run = runBot({ chooseAction }, referee.options(stop));
    await reconnected;
    stop.abort();
    await run;
    assert.equal(referee.connections, start + 2);
  });

  it("ends the run on Goodbye{reconnect: false}, without reconnecting", async () => {
    const stop = new AbortController();
    const start = referee.connections;
    referee.script = async (call) => {
      await next(call);
      call.write({ welcome: { protocolVersion: 1, botName: "kit", sessionId: "s" } });
      call.write({ goodbye: { reason: "GOODBYE_REASON_FINISHED", message: "event over" } });
      call.end();
    };
    const summary = await runBot({ chooseAction }, referee.options(stop));
    assert.equal(summary.goodbye?.reason, "GOODBYE_REASON_FINISHED");
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(referee.connections, start + 1);
  });

  it("reconnects after retry_after_ms on Goodbye{reconnect: true}", async () => {
    const stop = new AbortController();
    const start = referee.connections;
    let goodbyeAt = 0;
    let secondAt = 0;
    referee.script = async (call, connection) => {
      await next(call);
      call.write({ welcome: { protocolVersion: 1, botName: "kit", sessionId: "s" } });
      if (connection === start + 1) {
        call.write({
          goodbye: { reason: "GOODBYE_REASON_SHUTDOWN", reconnect: true, retryAfterMs: 400 },
        });
        goodbyeAt = performance.now();
        // An UNAVAILABLE end (a referee going down) does not turn the goodbye into a fault.
        call.emit("error", { code: grpc.status.UNAVAILABLE, details: "shutting down" });
        return;
      }
      secondAt = performance.now();
      call.write({ goodbye: { reason: "GOODBYE_REASON_FINISHED" } });
      call.end();
    };
    const summary = await runBot({ chooseAction }, referee.options(stop));
    assert.equal(referee.connections, start + 2);
    assert.ok(summary.goodbye !== undefined);
    assert.ok(secondAt - goodbyeAt >= 390, `reconnected after ${secondAt - goodbyeAt} ms`);
  });

  it("stops with ConnectionRejected on UNAUTHENTICATED, without retrying", async () => {
    const stop = new AbortController();
    const start = referee.connections;
    referee.script = (call) =>
      call.emit("error", { code: grpc.status.UNAUTHENTICATED, details: "unknown bot token" });
    await assert.rejects(runBot({ chooseAction }, referee.options(stop)), (error) => {
      assert.ok(error instanceof ConnectionRejected);
      assert.equal(error.code, grpc.status.UNAUTHENTICATED);
      return true;
    });
    assert.equal(referee.connections, start + 1);
  });
});
