// The client library against an in-process fake referee (no network beyond localhost).

import assert from "node:assert/strict";
import * as net from "node:net";
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
  type Logger,
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

  /** Listens on 127.0.0.1:`port` (0: any free port). */
  async start(port = 0): Promise<void> {
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
      this.server.bindAsync(
        `127.0.0.1:${port}`,
        grpc.ServerCredentials.createInsecure(),
        (e, port) => (e ? reject(e) : resolve(port)),
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

/** Every message of a call, in order, none lost between reads. */
function inbox(call: Call): { next(ms?: number): Promise<BotMessage__Output | undefined> } {
  const queued: BotMessage__Output[] = [];
  const waiting: ((message: BotMessage__Output) => void)[] = [];
  call.on("data", (message: BotMessage__Output) => {
    const waiter = waiting.shift();
    if (waiter) waiter(message);
    else queued.push(message);
  });
  return {
    next(ms = 3000) {
      const message = queued.shift();
      if (message !== undefined) return Promise.resolve(message);
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(waiter), 1);
          resolve(undefined);
        }, ms);
        const waiter = (m: BotMessage__Output): void => {
          clearTimeout(timer);
          resolve(m);
        };
        waiting.push(waiter);
      });
    },
  };
}

/** A localhost port that nothing listens on (until a test binds it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/** A logger that keeps every line. */
function recorder(lines: string[]): Logger {
  const keep = (message: string): void => void lines.push(message);
  return { debug: keep, info: keep, warn: keep, error: keep };
}

/** Polls `condition` until it holds; fails after `ms`. */
async function until(condition: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const WELCOME = { welcome: { protocolVersion: 1, botName: "kit", sessionId: "s" } };

function illegal(requestId: string): RefereeMessage {
  return {
    answerResult: {
      matchId: "m-1",
      requestId,
      status: "ANSWER_STATUS_ILLEGAL",
      reason: "does not beat",
      strikes: 1,
    },
  };
}

function rotationRequest(requestId: string): RefereeMessage {
  return {
    rotationRequest: {
      matchId: "m-1",
      requestId,
      hand: [],
      deadlineMs: 2000,
      timeBankMs: 0,
    },
  };
}

/** A turn on hand 9 2 3 4 where the bot shows 1+3 and the fallback is 0+1. */
function turn(requestId: string, matchId = "m-1"): RefereeMessage {
  const request = decision({
    hand: [9, 2, 3, 4],
    legalShows: [
      { start: 0, length: 1 },
      { start: 1, length: 3 },
    ],
  });
  return {
    decisionRequest: {
      ...request,
      matchId,
      observation: { ...request.observation, matchId },
      requestId,
      deadlineMs: 2000,
      timeBankMs: 0,
    },
  };
}

function matchStart(matchId: string): RefereeMessage {
  return { matchStart: { matchId, seat: 0, numPlayers: 2, numRounds: 2 } };
}

const MINE = { kind: "show", show: { start: 1, length: 3 } };
const FALLBACK = { kind: "show", show: { start: 0, length: 1 } };

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
        assert.equal(hello.hello?.lean, true, "a lean stream by default");
        assert.equal(hello.hello?.acceptsBundles, true, "the kit reads bundles");
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

  for (const [name, bot, options, lean] of [
    ["no onPublicEvent", { chooseAction }, {}, true],
    ["onPublicEvent defined", { chooseAction, onPublicEvent: () => undefined }, {}, false],
    ["publicEvents: true", { chooseAction }, { publicEvents: true }, false],
    [
      "publicEvents: false",
      { chooseAction, onPublicEvent: () => undefined },
      { publicEvents: false },
      true,
    ],
  ] as const) {
    it(`sets Hello.lean = ${lean} (${name})`, async () => {
      const stop = new AbortController();
      const hello = new Promise<BotMessage__Output>((resolve) => {
        referee.script = async (call) => resolve(await next(call));
      });
      const run = runBot(bot, referee.options(stop, options));
      assert.equal((await hello).hello?.lean, lean);
      stop.abort();
      await run;
    });
  }

  it("plays a lean match: no ACCEPTED, no PublicEvent, a rejection re-answered", async () => {
    const stop = new AbortController();
    let asked = 0;
    const bot: Bot = {
      chooseAction: (request) => {
        asked += 1;
        return chooseAction(request);
      },
      chooseRotation: () => true,
    };
    const seen: (BotMessage__Output | undefined)[] = [];
    const done = new Promise<void>((resolve) => {
      referee.script = async (call) => {
        const bot = inbox(call);
        seen.push(await bot.next()); // Hello
        call.write(WELCOME);
        call.write({ matchStart: { matchId: "m-1", seat: 0, numPlayers: 2, numRounds: 2 } });
        call.write(rotationRequest("1"));
        seen.push(await bot.next());
        call.write(turn("2")); // the rotation was accepted: nothing says so
        seen.push(await bot.next());
        call.write(illegal("1")); // stray: request 1 was closed by request 2
        call.write(illegal("2"));
        seen.push(await bot.next());
        call.write(turn("3"));
        seen.push(await bot.next());
        call.write({ roundEnded: { matchId: "m-1", roundIndex: 0 } });
        call.write(illegal("3")); // stray: the round's end closed request 3
        call.write(rotationRequest("4"));
        seen.push(await bot.next());
        call.write({ matchEnded: { matchId: "m-1", totals: [1, 0], ranks: [1, 2] } });
        seen.push(await bot.next(300)); // nothing more
        resolve();
      };
    });
    const run = runBot(bot, referee.options(stop));
    await done;
    stop.abort();
    await run;
    assert.equal(seen[0]?.hello?.lean, true);
    assert.deepEqual(seen[1]?.rotation, { matchId: "m-1", requestId: "1", rotate: true });
    assert.deepEqual(seen[2]?.action, { matchId: "m-1", requestId: "2", action: MINE });
    assert.deepEqual(seen[3]?.action, { matchId: "m-1", requestId: "2", action: FALLBACK });
    assert.deepEqual(seen[4]?.action, { matchId: "m-1", requestId: "3", action: MINE });
    assert.deepEqual(seen[5]?.rotation, { matchId: "m-1", requestId: "4", rotate: true });
    assert.equal(seen[6], undefined, `unexpected ${JSON.stringify(seen[6])}`);
    assert.equal(asked, 2);
  });

  for (const [name, bot, options] of [
    ["lean", { chooseAction }, {}],
    ["full stream", { chooseAction, onPublicEvent: () => undefined }, {}],
  ] as const) {
    it(`sets Hello.accepts_bundles = true (${name})`, async () => {
      const stop = new AbortController();
      const hello = new Promise<BotMessage__Output>((resolve) => {
        referee.script = async (call) => resolve(await next(call));
      });
      const run = runBot(bot, referee.options(stop, options));
      assert.equal((await hello).hello?.acceptsBundles, true);
      stop.abort();
      await run;
    });
  }

  it("handles a bundle's messages in order, as if each had come alone", async () => {
    // The same messages, once one by one and once in bundles (with a nested bundle, which the
    // kit ignores): the bot is asked the same things in the same order, and answers the same.
    const groups: RefereeMessage[][] = [
      [matchStart("m-1"), rotationRequest("1")],
      [matchStart("m-2"), turn("2", "m-1"), turn("5", "m-2")],
      [{ roundEnded: { matchId: "m-1", roundIndex: 0 } }, rotationRequest("3"), turn("6", "m-2")],
    ];
    async function play(bundled: boolean): Promise<{
      seen: (BotMessage__Output | undefined)[];
      asked: string[];
      lines: string[];
    }> {
      const stop = new AbortController();
      const asked: string[] = [];
      const lines: string[] = [];
      const bot: Bot = {
        chooseAction: (request) => {
          asked.push(`${request.matchId}/${request.requestId}`);
          return chooseAction(request);
        },
        chooseRotation: (request) => {
          asked.push(`${request.matchId}/${request.requestId}`);
          return true;
        },
      };
      const seen: (BotMessage__Output | undefined)[] = [];
      const done = new Promise<void>((resolve) => {
        referee.script = async (call) => {
          const bot = inbox(call);
          seen.push(await bot.next()); // Hello
          call.write(WELCOME);
          for (const group of groups) {
            if (bundled) {
              const nested: RefereeMessage = { bundle: { messages: [turn("9", "m-1")] } };
              call.write({ bundle: { messages: [nested, ...group] } });
            } else {
              for (const message of group) call.write(message);
            }
            // Every request of the group that stays open is answered.
            const open = group.filter((m) => m.rotationRequest || m.decisionRequest).length;
            for (let i = 0; i < open; i++) seen.push(await bot.next());
          }
          seen.push(await bot.next(300)); // nothing more (the nested turn 9 is not answered)
          resolve();
        };
      });
      const run = runBot(bot, referee.options(stop, { logger: recorder(lines) }));
      await done;
      stop.abort();
      await run;
      return { seen, asked, lines };
    }
    const alone = await play(false);
    const bundled = await play(true);
    const expected = [
      { rotation: { matchId: "m-1", requestId: "1", rotate: true } },
      { action: { matchId: "m-1", requestId: "2", action: MINE } },
      { action: { matchId: "m-2", requestId: "5", action: MINE } },
      { rotation: { matchId: "m-1", requestId: "3", rotate: true } },
      { action: { matchId: "m-2", requestId: "6", action: MINE } },
    ];
    for (const { seen } of [alone, bundled]) {
      assert.equal(seen[0]?.hello?.acceptsBundles, true);
      assert.deepEqual(
        seen
          .slice(1, -1)
          .map((m) => (m?.rotation ? { rotation: m.rotation } : { action: m?.action })),
        expected,
      );
      assert.equal(seen.at(-1), undefined, `unexpected ${JSON.stringify(seen.at(-1))}`);
    }
    assert.deepEqual(bundled.seen, alone.seen, "bundled or alone, the same answers");
    const order = ["m-1/1", "m-1/2", "m-2/5", "m-1/3", "m-2/6"];
    assert.deepEqual(alone.asked, order);
    assert.deepEqual(bundled.asked, order);
    const nested = bundled.lines.filter((line) => line.includes("nested in a bundle"));
    assert.equal(nested.length, groups.length, "each nested bundle is logged and ignored");
    assert.equal(alone.lines.filter((line) => line.includes("nested")).length, 0);
  });

  it("resyncs a lean stream after a reconnect, resending the lost answer", async () => {
    const stop = new AbortController();
    const start = referee.connections;
    let asked = 0;
    const bot: Bot = {
      chooseAction: (request) => {
        asked += 1;
        return chooseAction(request);
      },
    };
    const seen: (BotMessage__Output | undefined)[] = [];
    const done = new Promise<void>((resolve) => {
      referee.script = async (call, connection) => {
        const bot = inbox(call);
        seen.push(await bot.next()); // Hello
        if (connection === start + 1) {
          call.write(WELCOME);
          call.write({ matchStart: { matchId: "m-1", seat: 0, numPlayers: 2, numRounds: 2 } });
          call.write(turn("1"));
          seen.push(await bot.next());
          call.write(turn("2"));
          seen.push(await bot.next());
          call.emit("error", { code: grpc.status.UNAVAILABLE, details: "referee restarting" });
          return;
        }
        call.write({ welcome: { ...WELCOME.welcome, resumed: true } });
        call.write({
          matchStart: { matchId: "m-1", seat: 0, numPlayers: 2, numRounds: 2, resumed: true },
        });
        call.write(turn("2")); // still open: its answer was lost
        seen.push(await bot.next());
        call.write(turn("3"));
        seen.push(await bot.next());
        seen.push(await bot.next(300)); // nothing more
        resolve();
      };
    });
    const run = runBot(bot, referee.options(stop));
    await done;
    stop.abort();
    await run;
    assert.equal(referee.connections, start + 2);
    assert.equal(seen[0]?.hello?.lean, true);
    assert.deepEqual(seen[1]?.action?.requestId, "1");
    assert.deepEqual(seen[2]?.action?.requestId, "2");
    assert.equal(seen[3]?.hello?.lean, true);
    assert.deepEqual(seen[4]?.action, { matchId: "m-1", requestId: "2", action: MINE });
    assert.deepEqual(seen[5]?.action, { matchId: "m-1", requestId: "3", action: MINE });
    assert.equal(seen[6], undefined, `unexpected ${JSON.stringify(seen[6])}`);
    assert.equal(asked, 3, "the bot is asked once per request");
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

describe("runBot with match assignments (PROTOCOL.md §3.8)", () => {
  const main = new FakeReferee();
  const node = new FakeReferee();
  before(() => Promise.all([main.start(), node.start()]));
  after(() => {
    main.stop();
    node.stop();
  });

  function assignment(matchId: string, ticket: string): RefereeMessage {
    return { assignment: { matchId, address: `127.0.0.1:${node.port}`, ticket, tls: false } };
  }

  const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  it("plays the match on the node with its ticket, reopens a cut node stream, then lets it go", async () => {
    const stop = new AbortController();
    const mainStart = main.connections;
    const nodeStart = node.connections;
    const hellos: (BotMessage__Output | undefined)[] = [];
    const seen: (BotMessage__Output | undefined)[] = [];
    main.script = async (call) => {
      hellos.push(await next(call));
      call.write(WELCOME);
      call.write(assignment("m-1", "t-1"));
    };
    const done = new Promise<void>((resolve) => {
      node.script = async (call, connection) => {
        const bot = inbox(call);
        hellos.push(await bot.next());
        if (connection === nodeStart + 1) {
          call.write(WELCOME);
          call.write({ matchStart: { matchId: "m-1", seat: 0, numPlayers: 2, numRounds: 1 } });
          call.write(turn("1"));
          seen.push(await bot.next());
          call.emit("error", { code: grpc.status.UNAVAILABLE, details: "connection dropped" });
          return;
        }
        call.write({ welcome: { ...WELCOME.welcome, resumed: true } });
        call.write({
          matchStart: { matchId: "m-1", seat: 0, numPlayers: 2, numRounds: 1, resumed: true },
        });
        call.write(turn("2"));
        seen.push(await bot.next());
        call.write({ matchEnded: { matchId: "m-1", totals: [1, 0], ranks: [1, 2] } });
        call.write({ goodbye: { reason: "GOODBYE_REASON_FINISHED", message: "node done" } });
        call.end();
        resolve();
      };
    });
    let finished = false;
    const run = runBot({ chooseAction }, main.options(stop)).finally(() => (finished = true));
    await done;
    await pause(500); // no ticket left: the node stream is not reopened
    assert.equal(finished, false, "a node's Goodbye must not end the run");
    stop.abort();
    const summary = await run;
    assert.equal(summary.matchesFinished, 1);
    assert.equal(summary.goodbye, undefined);
    assert.equal(main.connections, mainStart + 1, "the main stream is untouched");
    assert.equal(node.connections, nodeStart + 2);
    assert.deepEqual(node.tokens.slice(nodeStart), ["Bearer t-1", "Bearer t-1"]);
    assert.deepEqual(hellos[1]?.hello, hellos[0]?.hello, "the same Hello on the node");
    assert.deepEqual(seen[0]?.action, { matchId: "m-1", requestId: "1", action: MINE });
    assert.deepEqual(seen[1]?.action, { matchId: "m-1", requestId: "2", action: MINE });
  });

  it("drops a ticket the node refuses and reopens with the next one", async () => {
    const stop = new AbortController();
    const mainStart = main.connections;
    const nodeStart = node.connections;
    main.script = async (call) => {
      await next(call);
      call.write(WELCOME);
      call.write(assignment("m-1", "t-1"));
      call.write(assignment("m-2", "t-2"));
    };
    const done = new Promise<void>((resolve) => {
      node.script = async (call, connection) => {
        const token = node.tokens.at(-1);
        if (token === "Bearer t-2") {
          call.emit("error", { code: grpc.status.UNAUTHENTICATED, details: "unknown ticket" });
          return;
        }
        await next(call);
        call.write(WELCOME);
        if (connection === nodeStart + 1) {
          // Both matches are assigned by now: the stream comes back with the newest ticket.
          call.write({
            goodbye: { reason: "GOODBYE_REASON_SHUTDOWN", reconnect: true, retryAfterMs: 50 },
          });
          call.end();
          return;
        }
        call.write({ matchEnded: { matchId: "m-1", totals: [1, 0], ranks: [1, 2] } });
        call.emit("error", { code: grpc.status.UNAVAILABLE, details: "gone" });
        resolve();
      };
    });
    let finished = false;
    const run = runBot({ chooseAction }, main.options(stop)).finally(() => (finished = true));
    await done;
    await pause(500);
    assert.equal(finished, false, "a refused ticket or a lost node stream must not end the run");
    stop.abort();
    await run;
    assert.equal(main.connections, mainStart + 1);
    assert.deepEqual(node.tokens.slice(nodeStart), ["Bearer t-1", "Bearer t-2", "Bearer t-1"]);
  });

  it("gives up a node unreachable for the give-up time, and starts afresh on a later assignment", async () => {
    const stop = new AbortController();
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const lines: string[] = [];
    const GIVE_UP_MS = 400;
    let mainCall: Call | undefined;
    main.script = async (call) => {
      await next(call);
      call.write(WELCOME);
      call.write({ assignment: { matchId: "m-1", address, ticket: "t-1", tls: false } });
      mainCall = call;
    };
    const openings = (): number =>
      lines.filter((line) => line.startsWith(`opening a stream to node ${address}`)).length;
    const gaveUp = (): string | undefined =>
      lines.find((line) => line.startsWith(`node ${address} unreachable`));
    let finished = false;
    const startedAt = performance.now();
    const run = runBot(
      { chooseAction },
      main.options(stop, { logger: recorder(lines), nodeUnreachableMs: GIVE_UP_MS }),
    ).finally(() => (finished = true));
    await until(() => gaveUp() !== undefined, "the give-up");
    const elapsed = performance.now() - startedAt;
    assert.ok(elapsed >= GIVE_UP_MS, `gave up after ${elapsed} ms`);
    assert.match(
      gaveUp()!,
      /unreachable for 0\.4 s .*dropping its 1 ticket\(s\) and letting it go/,
    );
    assert.ok(openings() >= 2, `${openings()} attempt(s) before giving up`);
    await until(
      () => lines.includes(`closed the stream to node ${address}`),
      "the node link to close",
    );
    const attempts = openings();
    await pause(600);
    assert.equal(openings(), attempts, "a node given up is not retried");
    assert.equal(finished, false, "giving up a node must not end the run");

    // A later assignment to that address starts afresh (and the node is up by now).
    const late = new FakeReferee();
    await late.start(port);
    try {
      const welcomed = new Promise<void>((resolve) => {
        late.script = async (call) => {
          await next(call);
          call.write(WELCOME);
          resolve();
        };
      });
      mainCall!.write({ assignment: { matchId: "m-2", address, ticket: "t-2", tls: false } });
      await welcomed;
      assert.deepEqual(late.tokens, ["Bearer t-2"], "only the new ticket: t-1 was dropped");
      stop.abort();
      await run;
    } finally {
      late.stop();
    }
  });

  it("counts the unreachable time from the last welcomed stream, not from its Welcome", async () => {
    const stop = new AbortController();
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const lines: string[] = [];
    const GIVE_UP_MS = 400;
    const gone = new FakeReferee();
    await gone.start(port);
    main.script = async (call) => {
      await next(call);
      call.write(WELCOME);
      call.write({ assignment: { matchId: "m-1", address, ticket: "t-1", tls: false } });
    };
    const welcomed = new Promise<void>((resolve) => {
      gone.script = async (call) => {
        await next(call);
        call.write(WELCOME);
        resolve();
      };
    });
    const run = runBot(
      { chooseAction },
      main.options(stop, { logger: recorder(lines), nodeUnreachableMs: GIVE_UP_MS }),
    );
    await welcomed;
    await pause(2 * GIVE_UP_MS); // welcomed long ago, but up all along
    const lostAt = performance.now();
    gone.stop();
    await until(
      () => lines.some((line) => line.startsWith(`node ${address} unreachable`)),
      "the give-up",
    );
    const elapsed = performance.now() - lostAt;
    assert.ok(elapsed >= GIVE_UP_MS - 20, `gave up ${elapsed} ms after the node went down`);
    const attempts = lines.filter((line) => line.startsWith(`opening a stream to node ${address}`));
    assert.ok(attempts.length >= 3, `${attempts.length} opening(s): retried before giving up`);
    stop.abort();
    await run;
  });
});
