// The tickets of assigned matches, per referee node (PROTOCOL.md §3.8). Pure, so that it can be
// unit-tested.
//
// A MatchAssignment names a node's address and a ticket that opens a Play stream there for that
// match only, until it ends. The kit keeps the tickets of the matches that have not ended: a
// node stream that is lost is reopened with the newest of them, a ticket the node refuses is
// dropped and the next one tried, and with none left the node stream is let go. A node that
// cannot be reached for too long is given up: all its tickets are dropped at once.

/** A ticket and the match it was issued for. */
export interface Ticket {
  readonly matchId: string;
  readonly ticket: string;
}

export class NodeTickets {
  /** Per address, oldest first. */
  private readonly byAddress = new Map<string, Ticket[]>();

  /** Remembers the ticket of a match assigned to the node at `address` (a newer one replaces
   * an earlier ticket of the same match). */
  add(address: string, matchId: string, ticket: string): void {
    const held = (this.byAddress.get(address) ?? []).filter((t) => t.matchId !== matchId);
    held.push({ matchId, ticket });
    this.byAddress.set(address, held);
  }

  /** The newest ticket held for `address`, or undefined when none is left. */
  newest(address: string): Ticket | undefined {
    return this.byAddress.get(address)?.at(-1);
  }

  /** The match ended (or is given up): its ticket opens nothing any more. */
  matchEnded(matchId: string): void {
    for (const address of [...this.byAddress.keys()]) {
      this.keep(address, (t) => t.matchId !== matchId);
    }
  }

  /** The node at `address` refused `ticket` (UNAUTHENTICATED): drop it. */
  refused(address: string, ticket: string): void {
    this.keep(address, (t) => t.ticket !== ticket);
  }

  /** The node at `address` is gone (unreachable for too long): drop all its tickets. Returns
   * how many there were. */
  dropAddress(address: string): number {
    const count = this.byAddress.get(address)?.length ?? 0;
    this.byAddress.delete(address);
    return count;
  }

  private keep(address: string, wanted: (ticket: Ticket) => boolean): void {
    const held = this.byAddress.get(address)?.filter(wanted) ?? [];
    if (held.length > 0) {
      this.byAddress.set(address, held);
    } else {
      this.byAddress.delete(address);
    }
  }
}
