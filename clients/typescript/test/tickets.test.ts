import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { NodeTickets } from "../src/lib/tickets";

const NODE = "10.0.0.2:50051";
const OTHER = "10.0.0.3:50051";

describe("NodeTickets", () => {
  it("holds nothing for an address it was given no assignment for", () => {
    assert.equal(new NodeTickets().newest(NODE), undefined);
  });

  it("gives the newest ticket of an address, per address", () => {
    const tickets = new NodeTickets();
    tickets.add(NODE, "m-1", "t-1");
    tickets.add(OTHER, "m-2", "t-2");
    tickets.add(NODE, "m-3", "t-3");
    assert.deepEqual(tickets.newest(NODE), { matchId: "m-3", ticket: "t-3" });
    assert.deepEqual(tickets.newest(OTHER), { matchId: "m-2", ticket: "t-2" });
  });

  it("forgets the ticket of a match that ended, and falls back to the next newest", () => {
    const tickets = new NodeTickets();
    tickets.add(NODE, "m-1", "t-1");
    tickets.add(NODE, "m-2", "t-2");
    tickets.matchEnded("m-2");
    assert.deepEqual(tickets.newest(NODE), { matchId: "m-1", ticket: "t-1" });
    tickets.matchEnded("m-1");
    assert.equal(tickets.newest(NODE), undefined);
    tickets.matchEnded("m-unknown"); // harmless
  });

  it("drops a refused ticket and offers the next one", () => {
    const tickets = new NodeTickets();
    tickets.add(NODE, "m-1", "t-1");
    tickets.add(NODE, "m-2", "t-2");
    tickets.add(OTHER, "m-3", "t-3");
    tickets.refused(NODE, "t-2");
    assert.deepEqual(tickets.newest(NODE), { matchId: "m-1", ticket: "t-1" });
    tickets.refused(NODE, "t-1");
    assert.equal(tickets.newest(NODE), undefined);
    assert.deepEqual(tickets.newest(OTHER), { matchId: "m-3", ticket: "t-3" });
  });

  it("keeps one ticket per match: a newer assignment of it replaces the old ticket", () => {
    const tickets = new NodeTickets();
    tickets.add(NODE, "m-1", "t-old");
    tickets.add(NODE, "m-2", "t-2");
    tickets.add(NODE, "m-1", "t-new");
    assert.deepEqual(tickets.newest(NODE), { matchId: "m-1", ticket: "t-new" });
    tickets.matchEnded("m-1");
    assert.deepEqual(tickets.newest(NODE), { matchId: "m-2", ticket: "t-2" });
  });

  it("drops every ticket of a node that is gone, and says how many", () => {
    const tickets = new NodeTickets();
    tickets.add(NODE, "m-1", "t-1");
    tickets.add(NODE, "m-2", "t-2");
    tickets.add(OTHER, "m-3", "t-3");
    assert.equal(tickets.dropAddress(NODE), 2);
    assert.equal(tickets.newest(NODE), undefined);
    assert.deepEqual(tickets.newest(OTHER), { matchId: "m-3", ticket: "t-3" });
    assert.equal(tickets.dropAddress(NODE), 0); // harmless
    tickets.add(NODE, "m-4", "t-4"); // a later assignment starts afresh
    assert.deepEqual(tickets.newest(NODE), { matchId: "m-4", ticket: "t-4" });
  });
});
