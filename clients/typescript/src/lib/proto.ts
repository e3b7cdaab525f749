// The scout.v1 wire types and the Arena client stub.
//
// Types come from `src/generated/` (made at build time by proto-loader-gen-types from
// ../../proto); the runtime descriptor is loaded by @grpc/proto-loader from the same .proto files,
// with the same options, so the types describe exactly the objects grpc-js hands us.

import * as fs from "node:fs";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import type { ProtoGrpcType } from "../generated/arena";
import type { ArenaClient } from "../generated/scout/v1/Arena";
import type { BotMessage } from "../generated/scout/v1/BotMessage";
import type { Card__Output } from "../generated/scout/v1/Card";
import type { DecisionRequest__Output } from "../generated/scout/v1/DecisionRequest";
import type { End__Output } from "../generated/scout/v1/End";
import type { MatchEnded__Output } from "../generated/scout/v1/MatchEnded";
import type { MatchStart__Output } from "../generated/scout/v1/MatchStart";
import type { Observation__Output } from "../generated/scout/v1/Observation";
import type { PublicEvent__Output } from "../generated/scout/v1/PublicEvent";
import type { RefereeMessage__Output } from "../generated/scout/v1/RefereeMessage";
import type { RotationRequest__Output } from "../generated/scout/v1/RotationRequest";
import type { RoundEnded__Output } from "../generated/scout/v1/RoundEnded";
import type { Scout__Output } from "../generated/scout/v1/Scout";
import type { Show__Output } from "../generated/scout/v1/Show";

export type { ArenaClient, BotMessage, RefereeMessage__Output as RefereeMessage };
export type { AnswerResult__Output as AnswerResult } from "../generated/scout/v1/AnswerResult";
export type { Goodbye__Output as Goodbye } from "../generated/scout/v1/Goodbye";
export type { MatchAssignment__Output as MatchAssignment } from "../generated/scout/v1/MatchAssignment";
export type { Probation__Output as Probation } from "../generated/scout/v1/Probation";
export type { ProtocolError__Output as ProtocolError } from "../generated/scout/v1/ProtocolError";
export type { Welcome__Output as Welcome } from "../generated/scout/v1/Welcome";
export type { PublicAction__Output as PublicAction } from "../generated/scout/v1/PublicAction";

/** The protocol version this kit speaks (Hello.protocol_version). */
export const PROTOCOL_VERSION = 1;

/** A card: `face` is in play, `other` is on the turned-away end. */
export type Card = Card__Output;
/** Which end of the active set a Scout takes. */
export type End = End__Output;
/** Play `hand[start .. start+length-1]`. */
export type Show = Show__Output;
/** Take an end card of the active set (optionally turned) and insert it before `insertAt`. */
export type Scout = Scout__Output;
/** Everything the seat may know. */
export type Observation = Observation__Output;
/** A round's dealt hand, before the bot decides whether to rotate it. */
export type RotationRequest = RotationRequest__Output;
/** A DecisionRequest as decoded (the observation could in theory be missing). */
export type RawDecisionRequest = DecisionRequest__Output;
/** The bot's turn: the observation and every legal Show and Scout. */
export type DecisionRequest = DecisionRequest__Output & { observation: Observation };
export type MatchStart = MatchStart__Output;
export type PublicEvent = PublicEvent__Output;
export type RoundEnded = RoundEnded__Output;
export type MatchEnded = MatchEnded__Output;

/**
 * What a bot answers to a DecisionRequest: exactly one of the three kinds. Any entry of
 * `legalShows` / `legalScouts` can be returned as it is: `{ show: request.legalShows[i] }`.
 * A Scout & Show's `show` indexes the hand *after* the scouted card is inserted.
 */
export type Action =
  | { show: Show; scout?: never; scoutAndShow?: never }
  | { scout: Scout; show?: never; scoutAndShow?: never }
  | { scoutAndShow: { scout: Scout; show: Show }; show?: never; scout?: never };

/**
 * Loader options. They must match the flags of `npm run gen` (see package.json), which produce
 * the types above: camelCase names, 64-bit ids as strings, enums by name, defaults filled in,
 * and a virtual field naming the member set in each oneof.
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

const ARENA_PROTO = path.join("scout", "v1", "arena.proto");

/**
 * The directory holding `scout/v1/*.proto`: $SCOUT_PROTO_DIR, else the first `proto/` found
 * walking up from this file (the repository's single source of the protocol).
 */
export function findProtoDir(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env["SCOUT_PROTO_DIR"];
  if (fromEnv) {
    return path.resolve(fromEnv);
  }
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "proto");
    if (fs.existsSync(path.join(candidate, ARENA_PROTO))) {
      return candidate;
    }
    if (path.dirname(dir) === dir) {
      throw new Error(
        `cannot find proto/${ARENA_PROTO.split(path.sep).join("/")} above ${__dirname}; ` +
          "set SCOUT_PROTO_DIR to the directory that holds scout/v1/*.proto",
      );
    }
  }
}

let loaded: ProtoGrpcType | undefined;

/** The scout.v1 package definition (loaded once). */
export function loadScoutProto(protoDir: string = findProtoDir()): ProtoGrpcType {
  if (loaded === undefined) {
    const definition = protoLoader.loadSync(ARENA_PROTO, {
      ...LOADER_OPTIONS,
      includeDirs: [protoDir],
    });
    loaded = grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType;
  }
  return loaded;
}

/** A new Arena client (one channel) for `address`. */
export function newArenaClient(
  address: string,
  credentials: grpc.ChannelCredentials,
  options: grpc.ChannelOptions,
): ArenaClient {
  const Arena = loadScoutProto().scout.v1.Arena;
  return new Arena(address, credentials, options);
}
