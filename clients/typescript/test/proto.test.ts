// The generated types and the runtime descriptor agree: what the kit writes is what the referee
// reads, and ids/enums decode the way the types say.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as protoLoader from "@grpc/proto-loader";

import { LOADER_OPTIONS, findProtoDir } from "../src/lib/proto";
import { actionMessage } from "../src/lib";

describe("scout.v1 descriptor", () => {
  const definition = protoLoader.loadSync("scout/v1/arena.proto", {
    ...LOADER_OPTIONS,
    includeDirs: [findProtoDir()],
  });
  const play = (definition["scout.v1.Arena"] as protoLoader.ServiceDefinition)["Play"]!;

  it("encodes a Scout & Show answer as the proto expects", () => {
    const message = actionMessage("m-1", "18446744073709551615", {
      scoutAndShow: {
        scout: { end: "END_RIGHT", flip: true, insertAt: 2 },
        show: { start: 0, length: 2 },
      },
    });
    const decoded = play.requestDeserialize(play.requestSerialize(message)) as Record<
      string,
      unknown
    >;
    assert.equal(decoded["body"], "action");
    assert.deepEqual(decoded["action"], {
      matchId: "m-1",
      requestId: "18446744073709551615",
      action: {
        kind: "scoutAndShow",
        scoutAndShow: {
          scout: { end: "END_RIGHT", flip: true, insertAt: 2 },
          show: { start: 0, length: 2 },
        },
      },
    });
  });
});

describe("decoding", () => {
  const definition = protoLoader.loadSync("scout/v1/arena.proto", {
    ...LOADER_OPTIONS,
    includeDirs: [findProtoDir()],
  });
  const play = (definition["scout.v1.Arena"] as protoLoader.ServiceDefinition)["Play"]!;
  const roundTrip = (message: object): Record<string, any> =>
    play.responseDeserialize(play.responseSerialize(message)) as Record<string, any>;

  it("fills proto3 defaults (start 0 is sent as absent)", () => {
    const decoded = roundTrip({ decisionRequest: { matchId: "m", legalShows: [{ length: 2 }] } });
    assert.equal(decoded["body"], "decisionRequest");
    assert.deepEqual(decoded["decisionRequest"].legalShows, [{ start: 0, length: 2 }]);
    assert.equal(decoded["decisionRequest"].requestId, "0");
  });
  it("keeps the presence of optional fields: absent stays absent, 0 stays 0", () => {
    const clear = roundTrip({ decisionRequest: { observation: { seat: 1 } } });
    assert.equal("activeOwner" in clear["decisionRequest"].observation, false);
    const owned = roundTrip({
      decisionRequest: { observation: { activeOwner: 0, activeSet: [{ face: 3, other: 4 }] } },
    });
    assert.equal(owned["decisionRequest"].observation.activeOwner, 0);
  });
});
