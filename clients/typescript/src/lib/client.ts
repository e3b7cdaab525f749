// Connects a Bot to a referee and plays until stopped.
//
// One channel and one Arena.Play stream carry every match the bot is seated in (unless a match
// is assigned to another referee node, see below). Messages are dispatched by match_id; each
// request is answered on its own, so one slow (async) decision never holds up another match. Every request gets a timer that sends the fallback (taken from
// the legal lists) shortly before deadline_ms + time_bank_ms runs out, so a slow, throwing or
// confused bot loses a decision, not a strike. When the stream is lost the runner reconnects
// with exponential backoff and the referee resumes the running matches; requests it sends again
// (same request_id) are answered from memory rather than put to the bot twice. Rejections that
// retrying cannot fix end the run with a ConnectionRejected error. A stream the referee closes on
// purpose ends with a Goodbye (PROTOCOL.md §10.1): `reconnect: false` ends the run normally;
// `reconnect: true` reconnects after its `retry_after_ms` (plus jitter), not counted as a failure.
//
// The kit asks for a lean stream (Hello.lean, PROTOCOL.md §3.6.1) unless the bot wants public
// events: the referee then sends no PublicEvent and no AnswerResult for an accepted answer. So
// nothing here waits for ACCEPTED: an answered request stays open until a verdict closes it
// (TIMED_OUT, STALE) or the match moves on (its next request, its RoundEnded, its MatchEnded); a
// rejection (ILLEGAL, MALFORMED) keeps it open.
//
// The kit also always sets Hello.accepts_bundles (§3.6.2): the referee may then send what it has
// queued in one RefereeBundle, whose messages are handled one by one, in order, exactly as if
// each had come on its own (at the bundle's arrival time). Answers are still sent one by one.
//
// A ladder with referee nodes may send a MatchAssignment on the main stream (PROTOCOL.md §3.8):
// the match is played on a stream to the node, opened with the assignment's ticket unless one is
// open (or opening) there already, and handled exactly like the main stream; every request is
// answered on the stream that carried it. The tickets of unfinished matches are kept per node: a
// lost node stream is reopened with the newest one (after the usual backoff) and let go when
// none is left. A node no stream there has been welcomed by for NODE_UNREACHABLE_MS is gone: its
// tickets are dropped and it is let go the same way. A node stream never ends the run: only the
// main stream decides that.

import * as fs from "node:fs";
import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";

import {
  FALLBACK_ROTATION,
  actionMessage,
  checkAction,
  describeAction,
  fallbackAction,
  rotationMessage,
} from "./answers";
import { createLogger, type Logger } from "./log";
import {
  PROTOCOL_VERSION,
  newArenaClient,
  type Action,
  type AnswerResult,
  type ArenaClient,
  type BotMessage,
  type DecisionRequest,
  type Goodbye,
  type MatchAssignment,
  type MatchEnded,
  type Probation,
  type MatchStart,
  type ProtocolError,
  type RawDecisionRequest,
  type PublicEvent,
  type RefereeMessage,
  type RotationRequest,
  type RoundEnded,
  type Welcome,
} from "./proto";
import { backoffDelayMs, goodbyeDelayMs, isRejection, statusName } from "./retry";
import { NodeTickets } from "./tickets";

/** Given to the bot with every request. */
export interface RequestContext {
  /** Aborted once the kit stops waiting for this answer (fallback sent, request closed, exit). */
  readonly signal: AbortSignal;
  /** Milliseconds left before the kit answers with the fallback instead. */
  msLeft(): number;
}

/**
 * A bot. Only `chooseAction` is required. Answers may be returned directly or as a Promise; an
 * answer that is late, throws or is not in the legal lists is replaced by the fallback. The
 * `on…` hooks are called in the order the referee sent the messages of a match.
 */
export interface Bot {
  /** Your turn: return one of the request's legal moves (or a Scout & Show you built). */
  chooseAction(request: DecisionRequest, context: RequestContext): Action | Promise<Action>;
  /** Whether to rotate the dealt hand (default: never). */
  chooseRotation?(request: RotationRequest, context: RequestContext): boolean | Promise<boolean>;
  onMatchStart?(start: MatchStart): void;
  /**
   * Every action of every seat, as it happens. Defining it makes the kit ask for the full stream
   * (see RunOptions.publicEvents); otherwise the referee sends no PublicEvent, and each request's
   * `observation.history` tells what happened since the last one.
   */
  onPublicEvent?(event: PublicEvent): void;
  onRoundEnded?(round: RoundEnded): void;
  /**
   * Every ending of a match the bot was seated in. Only status FINISHED (see `endStatus`) has a
   * result (totals, ranks); ABORTED and VOIDED have none, and `end.reason` says why.
   */
  onMatchEnded?(end: MatchEnded): void;
  /**
   * The ladder put the bot on probation (`active`: no matches are scheduled for it, `reason`
   * says why) or lifted it (PROTOCOL.md §3.9). The kit logs it either way.
   */
  onProbation?(probation: Probation): void;
}

export interface RunOptions {
  /** host:port of the referee. */
  address: string;
  /** The bot's token, sent as `authorization: Bearer <token>`. */
  token: string;
  /** Connect with TLS (implied by any certificate). */
  tls?: boolean;
  /** PEM files: a CA to trust instead of the system roots; a client certificate and key. */
  caCert?: string;
  clientCert?: string;
  clientKey?: string;
  /** Hello.bot_name (informational; the referee's name for the token is authoritative). */
  botName?: string;
  botVersion?: string;
  /** Hello.max_concurrent_matches (default 8). */
  concurrency?: number;
  /** Send the fallback this long before the referee's limit (default 150 ms). */
  safetyMarginMs?: number;
  /** Count the time bank into the limit (default true); false falls back at deadline_ms. */
  useTimeBank?: boolean;
  /** Reconnect after a connection loss (default true). */
  reconnect?: boolean;
  /**
   * Ask for the full stream (Hello.lean = false): every PublicEvent and an AnswerResult for every
   * answer, accepted ones included. Default: only when the bot defines `onPublicEvent`; otherwise
   * a lean stream (PROTOCOL.md §3.6.1). `SCOUT_PUBLIC_EVENTS=1` / `--public-events` set it.
   */
  publicEvents?: boolean;
  /**
   * After a Goodbye with `reconnect: true` (the referee shutting down), give up reconnecting
   * (the run fails with ReconnectGaveUp) when the referee has not welcomed the bot back within
   * this long. Default SHUTDOWN_GIVE_UP_MS: 15 minutes.
   */
  shutdownGiveUpMs?: number;
  /** Aborting it ends the run gracefully. */
  signal?: AbortSignal;
  logger?: Logger;
  /**
   * @internal For the kit's own tests only: how long a node may stay unreachable before it is
   * given up (default NODE_UNREACHABLE_MS). Not a setting: the protocol fixes it at 60 s.
   */
  nodeUnreachableMs?: number;
}

export interface RunSummary {
  /** Matches that ended (MatchEnded received) during the run. */
  matchesFinished: number;
  /** The referee's Goodbye (`reconnect: false`) that ended the run, if that is how it ended. */
  goodbye?: Goodbye;
}

/** The referee refused the bot for a reason reconnecting cannot fix. */
export class ConnectionRejected extends Error {
  constructor(
    readonly code: grpc.status,
    readonly details: string,
    readonly protocolError?: ProtocolError,
  ) {
    let message = `the referee rejected the connection (${statusName(code)}): ${details || "no details"}`;
    if (protocolError !== undefined && !message.includes(protocolError.message)) {
      message += ` [${protocolError.code}: ${protocolError.message}]`;
    }
    super(message);
    this.name = "ConnectionRejected";
  }
}

/** The stream ended and `reconnect: false` was asked for. */
export class ConnectionLost extends Error {
  override name = "ConnectionLost";
}

/** The referee said Goodbye{reconnect: true} and was not back within `shutdownGiveUpMs`. */
export class ReconnectGaveUp extends Error {
  override name = "ReconnectGaveUp";
}

/** How long to keep reconnecting after a shutdown Goodbye before giving up: 15 minutes. */
export const SHUTDOWN_GIVE_UP_MS = 15 * 60 * 1000;

/** How a match ended: UNSPECIFIED (an older referee) reads as FINISHED. */
export function endStatus(end: MatchEnded): "FINISHED" | "ABORTED" | "VOIDED" {
  switch (end.status) {
    case "MATCH_END_STATUS_ABORTED":
      return "ABORTED";
    case "MATCH_END_STATUS_VOIDED":
      return "VOIDED";
    default:
      return "FINISHED";
  }
}

export const KIT_VERSION = "0.1.0";
const KEEPALIVE_MS = 25_000;
const MAX_SEND_BYTES = 64 * 1024;
const MAX_RECEIVE_BYTES = 16 * 1024 * 1024;
const CLOSE_GRACE_MS = 1_000;
const RESYNC_WINDOW_MS = 5_000;
const ENDED_REMEMBERED = 1_024;
/**
 * A referee node that cannot be reached for this long in a row (no stream there welcomed) is
 * gone (PROTOCOL.md §3.8 rule 4): the ladder has voided its matches, so the bot drops the
 * node's tickets and lets it go.
 */
export const NODE_UNREACHABLE_MS = 60_000;

/** Channel options: keepalive the referee permits (every >= 10 s, also without calls), its
 * message limit, and a channel backoff no slower than our own. */
export function channelOptions(): grpc.ChannelOptions {
  return {
    "grpc.keepalive_time_ms": KEEPALIVE_MS,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.max_send_message_length": MAX_SEND_BYTES,
    "grpc.max_receive_message_length": MAX_RECEIVE_BYTES,
    "grpc.initial_reconnect_backoff_ms": 200,
    "grpc.max_reconnect_backoff_ms": 5_000,
  };
}

/** Whether the main connection uses TLS (asked for, or implied by a certificate). */
function mainUsesTls(options: RunOptions): boolean {
  return Boolean(options.tls) || options.caCert !== undefined || options.clientCert !== undefined;
}

/** Plaintext, or TLS with the CA and client certificate of the options. */
function channelCredentials(options: RunOptions, tls: boolean): grpc.ChannelCredentials {
  if (!tls) {
    return grpc.credentials.createInsecure();
  }
  const read = (file: string | undefined): Buffer | null =>
    file === undefined ? null : fs.readFileSync(file);
  return grpc.credentials.createSsl(
    read(options.caCert),
    read(options.clientKey),
    read(options.clientCert),
  );
}

type RequestKind = "rotation" | "decision";

type PlayCall = grpc.ClientDuplexStream<BotMessage, RefereeMessage>;

/**
 * Where the bot plays: the main referee (options.address), or a referee node a MatchAssignment
 * sent it to. Each has its own channel and at most one Play stream at a time.
 */
class Link {
  readonly client: ArenaClient;
  call: PlayCall | undefined;
  /** Number of the current stream, unique across links (an answer remembers where it went). */
  connection = 0;
  welcomed = false;
  /** performance.now() when the referee there was last known reachable: a stream was welcomed
   * (or was still up after a Welcome); until then, when the link was created. */
  reachableAt = performance.now();
  lastProtocolError: ProtocolError | undefined;
  /** The current stream's Goodbye, if the referee sent one. */
  goodbye: Goodbye | undefined;
  resyncTimer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;

  constructor(
    readonly address: string,
    /** Starts the log lines about this link: empty for the main referee. */
    readonly tag: string,
    credentials: grpc.ChannelCredentials,
  ) {
    this.client = newArenaClient(address, credentials, channelOptions());
  }

  /** Waits `ms`, or until wakeUp(). */
  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    }).then(() => {
      this.wake = undefined;
    });
  }

  wakeUp(): void {
    this.wake?.();
  }

  /** Half-closes the stream, then hangs up if the referee has not ended it after a short grace. */
  hangUp(): void {
    const call = this.call;
    if (call !== undefined) {
      try {
        call.end();
      } catch {
        // already ended
      }
      setTimeout(() => call.cancel(), CLOSE_GRACE_MS).unref();
    }
  }

  /** Ends the stream at once and closes the channel. */
  close(): void {
    clearTimeout(this.resyncTimer);
    this.call?.cancel();
    this.client.close();
  }
}

/** One request, remembered until it is closed or its match ends. */
interface Pending {
  readonly key: string;
  readonly kind: RequestKind;
  readonly matchId: string;
  readonly requestId: string;
  /** The link whose stream carried the request: the answer goes back on it. */
  link: Link;
  /** performance.now() when the request arrived. */
  readonly receivedAt: number;
  /** performance.now() by which the kit answers with the fallback. */
  expiresAt: number;
  readonly fallback: BotMessage;
  /** What was sent (or is to be sent on reconnect). */
  answer?: BotMessage;
  /** Number of the connection the answer went out on. */
  sentOn?: number | undefined;
  fallbackSent: boolean;
  closed: boolean;
  timer?: NodeJS.Timeout;
  readonly abort: AbortController;
}

interface MatchState {
  readonly matchId: string;
  /** The link whose stream carries the match. */
  link: Link;
  seat: number;
  players: number;
  /** False after a resumed Welcome until the referee confirms the match with a MatchStart. */
  confirmed: boolean;
}

interface StreamEnd {
  code: grpc.status;
  details: string;
}

function describeEnd(end: StreamEnd): string {
  return `${statusName(end.code)}${end.details ? `: ${end.details}` : ""}`;
}

type Incoming =
  | { kind: "rotation"; request: RotationRequest }
  | { kind: "decision"; request: RawDecisionRequest };

/** The request with its observation, or undefined when the referee sent none. */
function asTurn(request: RawDecisionRequest): DecisionRequest | undefined {
  const observation = request.observation;
  return observation ? { ...request, observation } : undefined;
}

function sameMessage(a: BotMessage | undefined, b: BotMessage | undefined): boolean {
  return a !== undefined && b !== undefined && JSON.stringify(a) === JSON.stringify(b);
}

class Runner {
  private readonly log: Logger;
  private readonly marginMs: number;
  private readonly useBank: boolean;
  /** Asks for the full stream rather than a lean one. */
  private readonly publicEvents: boolean;
  /** The referee at options.address: only its stream decides when the run ends. */
  private readonly main: Link;
  /** Links to referee nodes whose stream is open or being (re)opened, by address. */
  private readonly nodes = new Map<string, Link>();
  /** Tickets of the assigned matches that have not ended, per node address. */
  private readonly tickets = new NodeTickets();
  private readonly matches = new Map<string, MatchState>();
  private readonly ended = new Set<string>();
  private readonly requests = new Map<string, Pending>();
  /** Each match's newest request: the only one that can still be open. */
  private readonly latest = new Map<string, Pending>();
  /** Streams opened so far, on every link. */
  private connections = 0;
  private stopping = false;
  /** How long a node may be unreachable before it is given up. */
  private readonly nodeUnreachableMs: number;
  matchesFinished = 0;
  /** Set when a Goodbye with `reconnect: false` ended the run. */
  finalGoodbye: Goodbye | undefined;

  constructor(
    private readonly bot: Bot,
    private readonly options: RunOptions,
  ) {
    this.log = options.logger ?? createLogger("scout-bot");
    this.marginMs = Math.max(0, options.safetyMarginMs ?? 150);
    this.useBank = options.useTimeBank ?? true;
    this.publicEvents = wantsPublicEvents(bot, options);
    this.nodeUnreachableMs = Math.max(0, options.nodeUnreachableMs ?? NODE_UNREACHABLE_MS);
    this.main = new Link(options.address, "", channelCredentials(options, mainUsesTls(options)));
  }

  // --- connection ------------------------------------------------------------------------------

  async run(): Promise<void> {
    const main = this.main;
    let attempt = 0;
    // performance.now() of a Goodbye{reconnect: true} not followed by a Welcome yet: the bot
    // gives up giveUpMs after it.
    let shutdownSince: number | undefined;
    const giveUpMs = Math.max(1, this.options.shutdownGiveUpMs ?? SHUTDOWN_GIVE_UP_MS);
    try {
      while (!this.stopping) {
        const end = await this.session(main, this.options.token);
        if (this.stopping) {
          break;
        }
        if (main.welcomed) {
          shutdownSince = undefined;
        }
        const goodbye = main.goodbye;
        if (goodbye !== undefined) {
          // A planned end of the stream (§10.1): it overrides whatever status the call ended with.
          if (!goodbye.reconnect) {
            this.log.info("the referee does not want the bot back; stopping");
            this.finalGoodbye = goodbye;
            break;
          }
          if (this.options.reconnect === false) {
            throw new ConnectionLost(
              `the referee closed the stream (${goodbye.reason}: ${goodbye.message || "no message"})`,
            );
          }
          attempt = 0; // not a failure: the backoff starts afresh
          shutdownSince ??= performance.now();
          const delay = goodbyeDelayMs(goodbye.retryAfterMs);
          this.log.info(`reconnecting in ${(delay / 1000).toFixed(2)} s, as the referee asked`);
          await main.sleep(delay);
          continue;
        }
        if (isRejection(end.code, end.details)) {
          throw new ConnectionRejected(end.code, end.details, main.lastProtocolError);
        }
        const problem = describeEnd(end);
        if (this.options.reconnect === false) {
          throw new ConnectionLost(`connection to the referee lost (${problem})`);
        }
        if (main.welcomed) {
          attempt = 0;
        }
        if (shutdownSince !== undefined && performance.now() - shutdownSince >= giveUpMs) {
          this.log.error(`connection lost (${problem})`);
          throw new ReconnectGaveUp(
            `the referee did not come back within ${giveUpMs / 1000} s of its shutdown ` +
              "goodbye; giving up",
          );
        }
        const delay = backoffDelayMs(attempt);
        attempt += 1;
        this.log.warn(
          `connection lost (${problem}); reconnecting in ${(delay / 1000).toFixed(2)} s`,
        );
        await main.sleep(delay);
      }
    } finally {
      this.shutdown();
    }
  }

  /** Ends the run: half-closes every stream, then hangs up after a short grace. */
  stop(): void {
    if (this.stopping) {
      return;
    }
    this.stopping = true;
    for (const link of [this.main, ...this.nodes.values()]) {
      link.wakeUp();
      link.hangUp();
    }
  }

  /** One Play stream on `link`, opened with `token`, until it ends; resolves with its status. */
  private session(link: Link, token: string): Promise<StreamEnd> {
    this.connections += 1;
    link.connection = this.connections;
    link.welcomed = false;
    link.lastProtocolError = undefined;
    link.goodbye = undefined;
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${token}`);
    this.log.debug(`connecting to ${link.address} (connection ${link.connection})`);
    const call = link.client.Play(metadata);
    link.call = call;
    return new Promise<StreamEnd>((resolve) => {
      let finished = false;
      const finish = (code: grpc.status, details: string): void => {
        if (finished) {
          return;
        }
        finished = true;
        if (link.call === call) {
          link.call = undefined;
        }
        resolve({ code, details });
      };
      call.on("data", (message: RefereeMessage) => this.receive(link, message, performance.now()));
      call.on("error", (error: Partial<grpc.ServiceError>) =>
        finish(error.code ?? grpc.status.UNKNOWN, error.details ?? error.message ?? ""),
      );
      call.on("status", (status: grpc.StatusObject) => finish(status.code, status.details));
      call.write({
        hello: {
          botName: this.options.botName ?? "typescript-bot",
          botVersion: this.options.botVersion ?? KIT_VERSION,
          protocolVersion: PROTOCOL_VERSION,
          maxConcurrentMatches: Math.max(1, this.options.concurrency ?? 8),
          lean: !this.publicEvents,
          // Always: receive() unpacks a RefereeBundle into its messages (§3.6.2).
          acceptsBundles: true,
        },
      });
    });
  }

  /** The run is over. Node streams are cut here; each node's loop then closes its channel. */
  private shutdown(): void {
    this.stopping = true;
    for (const pending of [...this.requests.values()]) {
      this.close(pending);
    }
    for (const node of this.nodes.values()) {
      node.wakeUp();
      node.call?.cancel();
    }
    this.main.close();
  }

  // --- referee nodes (PROTOCOL.md §3.8) --------------------------------------------------------

  private onAssignment(assignment: MatchAssignment): void {
    const { matchId, address, ticket, tls } = assignment;
    if (this.stopping || this.ended.has(matchId)) {
      return;
    }
    this.tickets.add(address, matchId, ticket);
    if (this.nodes.has(address)) {
      // Re-sent after every Welcome of the main stream for a match still running (§3.8): the
      // ticket is the one the node's stream reopens with, and the stream carries on.
      this.log.info(
        this.matches.has(matchId)
          ? `match ${matchId}: assigned again to node ${address}, where the bot follows it`
          : `match ${matchId}: assigned to node ${address}, where a stream is open`,
      );
      return;
    }
    this.log.info(`match ${matchId}: assigned to node ${address}`);
    const node = new Link(address, `node ${address}: `, channelCredentials(this.options, tls));
    this.nodes.set(address, node);
    this.followNode(node).catch((error: unknown) =>
      this.log.error(`the stream to node ${address} failed: ${describeError(error)}`),
    );
  }

  /**
   * Keeps a stream open to a node while the bot holds a ticket of an unfinished match there: after
   * a loss or a Goodbye it reopens it with the newest ticket (after the usual backoff, or the
   * Goodbye's retry_after_ms), drops a ticket the node refuses and tries the next, and lets the
   * stream go when none is left, or when no stream there has been welcomed for
   * NODE_UNREACHABLE_MS (then its tickets are dropped). Nothing here ends the run or touches the
   * main stream.
   */
  private async followNode(node: Link): Promise<void> {
    const address = node.address;
    let attempt = 0;
    try {
      for (;;) {
        const held = this.tickets.newest(address);
        if (held === undefined || this.stopping) {
          return;
        }
        this.log.info(`opening a stream to node ${address} (ticket of match ${held.matchId})`);
        const end = await this.session(node, held.ticket);
        if (this.stopping) {
          return;
        }
        if (node.welcomed) {
          node.reachableAt = performance.now(); // reachable until this stream ended
        }
        const problem = describeEnd(end);
        if (end.code === grpc.status.UNAUTHENTICATED) {
          this.log.warn(
            `node ${address} refused the ticket of match ${held.matchId} (${problem}); dropping it`,
          );
          this.tickets.refused(address, held.ticket);
          continue;
        }
        if (this.tickets.newest(address) === undefined) {
          this.log.info(
            `stream to node ${address} ended (${problem}); no match of ours left there`,
          );
          return;
        }
        if (!node.welcomed && performance.now() - node.reachableAt >= this.nodeUnreachableMs) {
          const dropped = this.tickets.dropAddress(address);
          this.log.warn(
            `node ${address} unreachable for ${this.nodeUnreachableMs / 1000} s (${problem}); ` +
              `dropping its ${dropped} ticket(s) and letting it go`,
          );
          return;
        }
        let delay: number;
        if (node.goodbye?.reconnect) {
          attempt = 0;
          delay = goodbyeDelayMs(node.goodbye.retryAfterMs);
        } else {
          if (node.welcomed) {
            attempt = 0;
          }
          delay = backoffDelayMs(attempt);
          attempt += 1;
        }
        this.log.warn(
          `stream to node ${address} ended (${problem}); reopening in ${(delay / 1000).toFixed(2)} s`,
        );
        await node.sleep(delay);
      }
    } finally {
      this.nodes.delete(address);
      node.close();
      this.log.info(`closed the stream to node ${address}`);
      if (!this.stopping) {
        // No ticket opens the node to them any more: they are over.
        for (const match of [...this.matches.values()]) {
          if (match.link === node) {
            this.log.info(`match ${match.matchId}: its node stream is gone; forgetting it`);
            this.endMatch(match.matchId);
          }
        }
      }
    }
  }

  // --- incoming messages -----------------------------------------------------------------------

  /**
   * One message read from the stream. A RefereeBundle (sent only because Hello set
   * accepts_bundles, §3.6.2) is unpacked: each inner message, in order, takes the same path as a
   * message that came on its own, with the bundle's arrival time as its own. The referee never
   * nests bundles; one nested anyway is ignored.
   */
  private receive(link: Link, message: RefereeMessage, receivedAt: number): void {
    if (message.body !== "bundle") {
      this.handle(link, message, receivedAt);
      return;
    }
    const inner = message.bundle?.messages ?? [];
    this.log.debug(`${link.tag}a bundle of ${inner.length} message(s)`);
    for (const item of inner) {
      if (item.body === "bundle") {
        this.log.warn(`${link.tag}ignoring a bundle nested in a bundle`);
        continue;
      }
      this.handle(link, item, receivedAt);
    }
  }

  /** One message (never a bundle); a failure to handle it is logged, not thrown. */
  private handle(link: Link, message: RefereeMessage, receivedAt: number): void {
    try {
      this.dispatch(link, message, receivedAt);
    } catch (error) {
      this.log.error(`failed to handle a ${message.body ?? "bodiless"} message: ${String(error)}`);
    }
  }

  private dispatch(link: Link, message: RefereeMessage, receivedAt: number): void {
    switch (message.body) {
      case "welcome":
        if (message.welcome) this.onWelcome(link, message.welcome);
        return;
      case "error":
        if (message.error) {
          link.lastProtocolError = message.error;
          this.log.warn(
            `${link.tag}protocol error from the referee: ${message.error.code}: ` +
              message.error.message,
          );
        }
        return;
      case "goodbye":
        if (message.goodbye) this.onGoodbye(link, message.goodbye);
        return;
      case "assignment":
        if (message.assignment) this.onAssignment(message.assignment);
        return;
      case "probation":
        if (message.probation) this.onProbation(message.probation);
        return;
      case "matchStart":
        if (message.matchStart) this.onMatchStart(link, message.matchStart);
        return;
      case "rotationRequest":
        if (message.rotationRequest && this.isLive(link, message.rotationRequest.matchId)) {
          this.openRequest(
            link,
            { kind: "rotation", request: message.rotationRequest },
            receivedAt,
          );
        }
        return;
      case "decisionRequest":
        if (message.decisionRequest && this.isLive(link, message.decisionRequest.matchId)) {
          this.openRequest(
            link,
            { kind: "decision", request: message.decisionRequest },
            receivedAt,
          );
        }
        return;
      case "answerResult":
        if (message.answerResult) this.onAnswerResult(message.answerResult);
        return;
      case "publicEvent":
        if (message.publicEvent && this.isLive(link, message.publicEvent.matchId)) {
          this.hook("onPublicEvent", () => this.bot.onPublicEvent?.(message.publicEvent!));
        }
        return;
      case "roundEnded":
        if (message.roundEnded && this.isLive(link, message.roundEnded.matchId)) {
          const round = message.roundEnded;
          this.log.debug(
            `match ${round.matchId}: round ${round.roundIndex} ended (${round.reason}), ` +
              `totals ${round.totals.join(" ")}`,
          );
          this.closeLatest(round.matchId);
          this.hook("onRoundEnded", () => this.bot.onRoundEnded?.(round));
        }
        return;
      case "matchEnded":
        if (message.matchEnded) this.onMatchEnded(message.matchEnded);
        return;
      default:
        // A newer referee may send bodies this kit does not know: ignore them (protocol §14).
        this.log.debug("ignoring a message whose body this kit does not know");
    }
  }

  private onWelcome(link: Link, welcome: Welcome): void {
    link.welcomed = true;
    link.reachableAt = performance.now();
    this.log.info(
      `${link.tag}connected as ${JSON.stringify(welcome.botName)} (session ${welcome.sessionId}` +
        `${welcome.resumed ? ", resumed" : ""})`,
    );
    if (welcome.protocolVersion !== PROTOCOL_VERSION) {
      this.log.warn(
        `${link.tag}the referee speaks protocol ${welcome.protocolVersion}, ` +
          `this kit ${PROTOCOL_VERSION}`,
      );
    }
    // Only the matches this link carries: a stream's Welcome says nothing about the others.
    const carried = [...this.matches.values()].filter((match) => match.link === link);
    if (carried.length === 0) {
      return;
    }
    if (!welcome.resumed) {
      // Back after the reconnect grace: the referee forfeited these seats and says no more.
      this.log.warn(`${link.tag}the referee did not resume ${carried.length} running match(es)`);
      for (const match of carried) {
        this.endMatch(match.matchId);
      }
      return;
    }
    // The referee resyncs every running match with MatchStart{resumed}; any match it does not
    // mention ended while we were away (its MatchEnded was lost with the old stream).
    for (const match of carried) {
      match.confirmed = false;
    }
    clearTimeout(link.resyncTimer);
    link.resyncTimer = setTimeout(() => {
      for (const match of [...this.matches.values()]) {
        if (match.link === link && !match.confirmed) {
          this.log.info(`match ${match.matchId}: not resumed by the referee; forgetting it`);
          this.endMatch(match.matchId);
        }
      }
    }, RESYNC_WINDOW_MS);
    link.resyncTimer.unref();
  }

  /**
   * The referee closes the stream on purpose (§10.1). The Goodbye decides what follows once the
   * call has ended (see run() and followNode()); meanwhile half-close, and hang up if the
   * referee does not.
   */
  private onGoodbye(link: Link, goodbye: Goodbye): void {
    link.goodbye = goodbye;
    const then = goodbye.reconnect ? `reconnect in ${goodbye.retryAfterMs} ms` : "do not reconnect";
    this.log.info(
      `${link.tag}goodbye from the referee (${goodbye.reason}, ${then}): ` +
        (goodbye.message || "no message"),
    );
    link.hangUp();
  }

  /** False for a match that already ended (late messages about it are ignored). */
  private isLive(link: Link, matchId: string): boolean {
    if (this.ended.has(matchId)) {
      return false;
    }
    if (!this.matches.has(matchId)) {
      // No MatchStart seen (e.g. this process restarted and took over): play it anyway.
      this.matches.set(matchId, { matchId, link, seat: -1, players: 0, confirmed: true });
    }
    return true;
  }

  private onMatchStart(link: Link, start: MatchStart): void {
    if (this.ended.has(start.matchId)) {
      return;
    }
    const known = this.matches.get(start.matchId);
    this.matches.set(start.matchId, {
      matchId: start.matchId,
      link,
      seat: start.seat,
      players: start.numPlayers,
      confirmed: true,
    });
    if (start.resumed) {
      this.log.info(
        `match ${start.matchId} resumed (seat ${start.seat}, bank ${start.timeBankMs} ms, ` +
          `${start.strikes} strike(s))${known ? "" : " — taken over without local state"}`,
      );
    } else {
      this.log.info(
        `match ${start.matchId} started: seat ${start.seat} of ${start.numPlayers} ` +
          `(${start.playerNames.join(", ")}), ${start.numRounds} round(s), ` +
          `${start.timeControl?.decisionMs ?? "?"} ms + ${start.timeBankMs} ms bank`,
      );
    }
    this.hook("onMatchStart", () => this.bot.onMatchStart?.(start));
  }

  private onMatchEnded(end: MatchEnded): void {
    if (this.ended.has(end.matchId)) {
      return;
    }
    const match = this.matches.get(end.matchId);
    const how = endStatus(end);
    if (how !== "FINISHED") {
      // Whichever stream says so (a ladder voids a node's match on the main stream), the match's
      // state and ticket go below; it has no result.
      this.log.warn(`match ${end.matchId} ended ${how} without a result: ${end.reason}`);
    } else {
      const seat = match?.seat ?? -1;
      const rank = seat >= 0 ? end.ranks[seat] : undefined;
      const forfeited = end.forfeitedSeats.includes(seat) ? ", FORFEITED" : "";
      this.log.info(
        `match ${end.matchId} ended ${how}: totals ${end.totals.join(" ")}, ` +
          `ranks ${end.ranks.join(" ")}` +
          (rank === undefined ? "" : ` (seat ${seat}: rank ${rank}${forfeited})`),
      );
    }
    this.hook("onMatchEnded", () => this.bot.onMatchEnded?.(end));
    this.matchesFinished += 1;
    this.endMatch(end.matchId);
  }

  /** The ladder's word on probation (PROTOCOL.md §3.9): logged, and the bot's hook told. */
  private onProbation(probation: Probation): void {
    if (probation.active) {
      this.log.warn(
        `on probation: no matches are scheduled for the bot (${probation.reason}); ` +
          (probation.liftedByReconnect
            ? "a new connection lifts it (restart the bot once it is fixed)"
            : "only the bot's owner or the operator can lift it"),
      );
    } else {
      this.log.info("probation lifted: matches will be scheduled again");
    }
    this.hook("onProbation", () => this.bot.onProbation?.(probation));
  }

  private endMatch(matchId: string): void {
    this.matches.delete(matchId);
    this.ended.add(matchId);
    this.tickets.matchEnded(matchId);
    if (this.ended.size > ENDED_REMEMBERED) {
      const oldest = this.ended.values().next();
      if (!oldest.done) this.ended.delete(oldest.value);
    }
    for (const pending of [...this.requests.values()]) {
      if (pending.matchId === matchId) {
        this.close(pending);
      }
    }
  }

  private hook(name: string, call: () => void): void {
    try {
      call();
    } catch (error) {
      this.log.error(`the bot's ${name} threw: ${describeError(error)}`);
    }
  }

  // --- requests --------------------------------------------------------------------------------

  /** Time the kit allows from receipt to the fallback, in ms. */
  private allowanceMs(deadlineMs: number, timeBankMs: number): number {
    const total = deadlineMs + (this.useBank ? timeBankMs : 0);
    return total - Math.min(this.marginMs, total / 2);
  }

  private openRequest(link: Link, incoming: Incoming, receivedAt: number): void {
    const { kind, request } = incoming;
    const { matchId, requestId } = request;
    const key = `${matchId}\u0000${requestId}`;
    const where = `match ${matchId}, request ${requestId}`;
    const expiresAt = receivedAt + this.allowanceMs(request.deadlineMs, request.timeBankMs);
    const existing = this.requests.get(key);
    if (existing !== undefined) {
      // Sent again after a reconnect (same request_id): never ask the bot twice.
      existing.link = link;
      if (existing.answer !== undefined) {
        if (existing.sentOn !== link.connection) {
          this.log.info(`${where}: asked again after a reconnect; resending the answer`);
          this.send(existing, existing.answer);
        }
      } else {
        existing.expiresAt = Math.min(existing.expiresAt, expiresAt);
        this.arm(existing);
      }
      return;
    }
    const fallback =
      incoming.kind === "rotation"
        ? rotationMessage(matchId, requestId, FALLBACK_ROTATION)
        : actionMessage(matchId, requestId, fallbackAction(incoming.request));
    const pending: Pending = {
      key,
      kind,
      matchId,
      requestId,
      link,
      receivedAt,
      expiresAt,
      fallback,
      fallbackSent: false,
      closed: false,
      abort: new AbortController(),
    };
    // A new request means the match moved on: the previous one was accepted (a lean stream does
    // not say so), timed out or superseded.
    this.closeLatest(matchId);
    this.requests.set(key, pending);
    this.latest.set(matchId, pending);
    this.log.debug(
      `${where}: ${kind} request (deadline ${request.deadlineMs} ms, bank ${request.timeBankMs} ms)`,
    );
    if (expiresAt <= performance.now()) {
      this.log.warn(`${where}: no time left to ask the bot; sending the fallback`);
      this.sendFallback(pending);
      return;
    }
    this.arm(pending);
    const context: RequestContext = {
      signal: pending.abort.signal,
      msLeft: () => Math.max(0, pending.expiresAt - performance.now()),
    };
    let answer: Promise<unknown>;
    try {
      let value: unknown;
      if (incoming.kind === "rotation") {
        value = this.bot.chooseRotation?.(incoming.request, context) ?? FALLBACK_ROTATION;
      } else {
        const turn = asTurn(incoming.request);
        if (turn === undefined) {
          this.log.warn(`${where}: decision request without an observation; sending the fallback`);
          this.sendFallback(pending);
          return;
        }
        value = this.bot.chooseAction(turn, context);
      }
      answer = Promise.resolve(value);
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.then(
      (value) => this.onBotAnswer(pending, incoming, value),
      (error: unknown) => {
        if (pending.answer !== undefined || pending.closed) {
          return;
        }
        const what = kind === "rotation" ? "chooseRotation" : "chooseAction";
        this.log.error(
          `${where}: the bot's ${what} threw; sending the fallback: ${describeError(error)}`,
        );
        this.sendFallback(pending);
      },
    );
  }

  private arm(pending: Pending): void {
    clearTimeout(pending.timer);
    const delay = Math.max(0, pending.expiresAt - performance.now());
    pending.timer = setTimeout(() => {
      if (pending.answer === undefined && !pending.closed) {
        this.log.warn(
          `match ${pending.matchId}, request ${pending.requestId}: the bot did not answer ` +
            `within ${Math.round(pending.expiresAt - pending.receivedAt)} ms; sending the fallback`,
        );
        this.sendFallback(pending);
      }
    }, delay);
  }

  private onBotAnswer(pending: Pending, incoming: Incoming, value: unknown): void {
    const where = `match ${pending.matchId}, request ${pending.requestId}`;
    if (pending.closed || pending.answer !== undefined) {
      this.log.debug(`${where}: the bot answered after the kit had answered; answer dropped`);
      return;
    }
    if (incoming.kind === "rotation") {
      if (typeof value !== "boolean") {
        this.log.warn(`${where}: chooseRotation returned ${String(value)}, not a boolean`);
      }
      this.send(pending, rotationMessage(pending.matchId, pending.requestId, Boolean(value)));
      return;
    }
    const turn = asTurn(incoming.request);
    const checked =
      turn === undefined
        ? { ok: false as const, problem: "the request has no observation" }
        : checkAction(turn, value);
    if (!checked.ok) {
      this.log.warn(`${where}: ${checked.problem}; sending the fallback instead`);
      this.sendFallback(pending);
      return;
    }
    this.log.debug(`${where}: ${describeAction(checked.value)}`);
    this.send(pending, actionMessage(pending.matchId, pending.requestId, checked.value));
  }

  private sendFallback(pending: Pending): void {
    pending.fallbackSent = true;
    this.send(pending, pending.fallback);
    pending.abort.abort(); // the kit no longer waits for the bot
  }

  private send(pending: Pending, answer: BotMessage): void {
    pending.answer = answer;
    clearTimeout(pending.timer);
    const link = pending.link;
    const call = link.call;
    // After a Goodbye the stream is half-closed: nothing more can be written on it.
    if (call === undefined || this.stopping || link.goodbye !== undefined) {
      pending.sentOn = undefined;
      this.log.info(
        `match ${pending.matchId}: not connected; request ${pending.requestId} is answered when ` +
          "the referee asks again",
      );
      return;
    }
    try {
      call.write(answer);
      pending.sentOn = link.connection;
    } catch (error) {
      pending.sentOn = undefined;
      this.log.warn(`could not send an answer: ${describeError(error)}`);
    }
  }

  private close(pending: Pending): void {
    pending.closed = true;
    clearTimeout(pending.timer);
    pending.abort.abort();
    this.requests.delete(pending.key);
    if (this.latest.get(pending.matchId) === pending) {
      this.latest.delete(pending.matchId);
    }
  }

  /** Closes the match's newest request, answered or not: the match has moved on. */
  private closeLatest(matchId: string): void {
    const latest = this.latest.get(matchId);
    if (latest !== undefined && !latest.closed) {
      this.close(latest);
    }
  }

  private onAnswerResult(result: AnswerResult): void {
    const key = `${result.matchId}\u0000${result.requestId}`;
    const pending = this.requests.get(key);
    const where = `match ${result.matchId}, request ${result.requestId}`;
    switch (result.status) {
      case "ANSWER_STATUS_ACCEPTED": // full streams only; nothing waits for it
        if (pending !== undefined) this.close(pending);
        return;
      case "ANSWER_STATUS_ILLEGAL":
      case "ANSWER_STATUS_MALFORMED": {
        this.log.warn(
          `${where}: answer ${result.status.slice(14)}: ${result.reason} (strikes ${result.strikes})`,
        );
        // The request stays open; the fallback is always legal. Send it once, in time.
        if (
          pending !== undefined &&
          !pending.closed &&
          !pending.fallbackSent &&
          !sameMessage(pending.answer, pending.fallback) &&
          performance.now() < pending.expiresAt
        ) {
          this.log.warn(`${where}: sending the fallback`);
          this.sendFallback(pending);
        }
        return;
      }
      case "ANSWER_STATUS_TIMED_OUT":
        this.log.warn(
          `${where}: TIMED OUT — the referee played the fallback (strikes ${result.strikes}, ` +
            `bank ${result.timeBankMs} ms)`,
        );
        if (pending !== undefined) this.close(pending);
        return;
      case "ANSWER_STATUS_STALE":
        this.log.info(`${where}: answer STALE: ${result.reason}`);
        if (pending !== undefined) this.close(pending);
        return;
      case "ANSWER_STATUS_UNKNOWN_MATCH":
        this.log.info(`${where}: answer UNKNOWN_MATCH: ${result.reason}`);
        return;
      default:
        this.log.debug(`${where}: answer status ${String(result.status)}`);
    }
  }
}

/**
 * Whether the kit asks for the full stream (every PublicEvent and ACCEPTED AnswerResult) rather
 * than a lean one: `options.publicEvents` if given, else whether the bot defines `onPublicEvent`.
 */
export function wantsPublicEvents(bot: Bot, options: Pick<RunOptions, "publicEvents">): boolean {
  return options.publicEvents ?? typeof bot.onPublicEvent === "function";
}

function describeError(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}

/**
 * Plays `bot` on the referee until `options.signal` is aborted or the referee says Goodbye with
 * `reconnect: false` (resolves), or the referee rejects the bot (rejects with ConnectionRejected).
 * Connection losses are retried with backoff; a Goodbye with `reconnect: true` is followed by a
 * reconnect after its `retry_after_ms`.
 */
export async function runBot(bot: Bot, options: RunOptions): Promise<RunSummary> {
  const runner = new Runner(bot, options);
  const signal = options.signal;
  const onAbort = (): void => runner.stop();
  if (signal?.aborted) {
    runner.stop();
  }
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    await runner.run();
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
  const summary: RunSummary = { matchesFinished: runner.matchesFinished };
  if (runner.finalGoodbye !== undefined) {
    summary.goodbye = runner.finalGoodbye;
  }
  return summary;
}
