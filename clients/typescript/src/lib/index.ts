// The kit's client library: everything a bot needs, in one import.

export * from "./answers";
export * from "./client";
export * from "./groups";
export { createLogger, silentLogger, type Level, type Logger } from "./log";
export {
  PROTOCOL_VERSION,
  findProtoDir,
  loadScoutProto,
  type Action,
  type AnswerResult,
  type Card,
  type DecisionRequest,
  type End,
  type Goodbye,
  type MatchAssignment,
  type MatchEnded,
  type MatchStart,
  type Observation,
  type Probation,
  type ProtocolError,
  type PublicAction,
  type PublicEvent,
  type RotationRequest,
  type RoundEnded,
  type Scout,
  type Show,
  type Welcome,
} from "./proto";
export { backoffDelayMs, goodbyeDelayMs, isRejection } from "./retry";
