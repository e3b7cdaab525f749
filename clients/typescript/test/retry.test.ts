import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { status } from "@grpc/grpc-js";

import { backoffDelayMs, goodbyeDelayMs, isRejection } from "../src/lib";

describe("backoffDelayMs", () => {
  it("doubles from 0.2 s up to 5 s", () => {
    const top = () => 0.999999;
    const steps = [0, 1, 2, 3, 4, 5, 6, 50].map((attempt) =>
      Math.round(backoffDelayMs(attempt, top)),
    );
    assert.deepEqual(steps, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
  });
  it("jitters between half and all of the step", () => {
    assert.equal(
      backoffDelayMs(0, () => 0),
      100,
    );
    assert.equal(
      backoffDelayMs(10, () => 0),
      2500,
    );
    for (let i = 0; i < 100; i++) {
      const delay = backoffDelayMs(3);
      assert.ok(delay >= 800 && delay <= 1600, String(delay));
    }
  });
});

describe("goodbyeDelayMs", () => {
  it("waits retry_after_ms plus a little jitter", () => {
    assert.equal(
      goodbyeDelayMs(800, () => 0),
      800,
    );
    assert.equal(
      goodbyeDelayMs(800, () => 0.5),
      890,
    );
    assert.equal(
      goodbyeDelayMs(0, () => 0.5),
      50,
    );
  });
});

describe("isRejection", () => {
  it("never retries what configuration must fix", () => {
    for (const code of [
      status.UNAUTHENTICATED,
      status.INVALID_ARGUMENT,
      status.FAILED_PRECONDITION,
      status.PERMISSION_DENIED,
      status.UNIMPLEMENTED,
    ]) {
      assert.equal(isRejection(code, ""), true, status[code]);
    }
  });
  it("stops when superseded, but retries other ABORTED ends", () => {
    assert.equal(
      isRejection(status.ABORTED, "superseded by a newer connection with the same token"),
      true,
    );
    assert.equal(isRejection(status.ABORTED, "transaction aborted"), false);
  });
  it("retries connection losses", () => {
    for (const code of [
      status.UNAVAILABLE,
      status.CANCELLED,
      status.INTERNAL,
      status.OK,
      status.DEADLINE_EXCEEDED,
    ]) {
      assert.equal(isRejection(code, "x"), false, status[code]);
    }
  });
});
