package scout

import "slices"

// ticketBook holds, per referee node address, the tickets of the bot's assigned matches that
// have not ended (PROTOCOL.md §3.8), oldest first. The client guards it with its mutex.
type ticketBook map[string][]ticket

// ticket is the bearer token of one assigned match, good for a Play stream to its node until
// that match ends.
type ticket struct {
	match string
	value string
}

// add notes the ticket of match, hosted by the node at address. A newer ticket of the same
// match replaces the older one.
func (b ticketBook) add(address, match, value string) {
	b.ended(match)
	b[address] = append(b[address], ticket{match: match, value: value})
}

// newest is the ticket to open a stream to address with; false when none is held there.
func (b ticketBook) newest(address string) (ticket, bool) {
	held := b[address]
	if len(held) == 0 {
		return ticket{}, false
	}
	return held[len(held)-1], true
}

// drop forgets a ticket the node at address refused.
func (b ticketBook) drop(address, value string) {
	b.remove(address, func(t ticket) bool { return t.value == value })
}

// forget drops every ticket held for address (a node that is gone) and returns how many there
// were.
func (b ticketBook) forget(address string) int {
	n := len(b[address])
	delete(b, address)
	return n
}

// ended forgets the ticket of a match that ended.
func (b ticketBook) ended(match string) {
	for address := range b {
		b.remove(address, func(t ticket) bool { return t.match == match })
	}
}

func (b ticketBook) remove(address string, gone func(ticket) bool) {
	kept := slices.DeleteFunc(b[address], gone)
	if len(kept) == 0 {
		delete(b, address)
		return
	}
	b[address] = kept
}
