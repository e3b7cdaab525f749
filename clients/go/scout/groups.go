package scout

import (
	"fmt"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

// The few rules a bot needs beyond the referee's legal lists: what a group is and what beats
// it. They work on face values only, which is all a comparison needs.

// Strength orders groups: a group beats another exactly when its strength is greater. It is the
// engine's own formula, 32·length + 16 for a set + lowest face, so more cards beat fewer, at
// equal length a set beats a run, and at equal length and kind the higher lowest face wins.
type Strength int

// GroupStrength returns the strength of faces when they form a set (all equal; a single card
// is a set) or a run (adjacent faces step by exactly +1 or exactly -1), and ok=false otherwise.
func GroupStrength(faces []int32) (s Strength, ok bool) {
	if len(faces) == 0 {
		return 0, false
	}
	lowest := faces[0]
	for _, f := range faces[1:] {
		lowest = min(lowest, f)
	}
	if len(faces) == 1 {
		return Strength(32 + 16 + int(lowest)), true
	}
	step := faces[1] - faces[0]
	if step < -1 || step > 1 {
		return 0, false
	}
	for i := 1; i < len(faces); i++ {
		if faces[i]-faces[i-1] != step {
			return 0, false
		}
	}
	s = Strength(32*len(faces) + int(lowest))
	if step == 0 {
		s += 16
	}
	return s, true
}

// Beats reports whether showing faces beats the active set active: faces must be a group, and
// anything that is a group beats a clear table (an empty active set). Equal strength does not
// beat.
func Beats(faces, active []int32) bool {
	s, ok := GroupStrength(faces)
	if !ok {
		return false
	}
	if len(active) == 0 {
		return true
	}
	target, ok := GroupStrength(active)
	return !ok || s > target
}

// Faces returns the face values of cards, in order.
func Faces(cards []*scoutv1.Card) []int32 {
	faces := make([]int32, len(cards))
	for i, c := range cards {
		faces[i] = c.GetFace()
	}
	return faces
}

// ShowFaces returns the faces a Show would play from hand, or an error when its positions are
// not inside the hand.
func ShowFaces(hand []*scoutv1.Card, show *scoutv1.Show) ([]int32, error) {
	start, length := int(show.GetStart()), int(show.GetLength())
	if length < 1 || start < 0 || start+length > len(hand) {
		return nil, fmt.Errorf("show %d+%d is outside a hand of %d cards", start, length, len(hand))
	}
	return Faces(hand[start : start+length]), nil
}

// ShowStrength returns the strength of the group a Show would play from hand; ok is false when
// the positions are out of range or the cards are neither a set nor a run.
func ShowStrength(hand []*scoutv1.Card, show *scoutv1.Show) (s Strength, ok bool) {
	faces, err := ShowFaces(hand, show)
	if err != nil {
		return 0, false
	}
	return GroupStrength(faces)
}

// RotateHand returns hand rotated 180 degrees: the order reversed and every card turned.
func RotateHand(hand []*scoutv1.Card) []*scoutv1.Card {
	rotated := make([]*scoutv1.Card, len(hand))
	for i, c := range hand {
		rotated[len(hand)-1-i] = &scoutv1.Card{Face: c.GetOther(), Other: c.GetFace()}
	}
	return rotated
}

// ScoutedCard returns the card a Scout takes from active (turned when scout.Flip) and what
// remains of the active set, or an error when the Scout cannot be read against active.
func ScoutedCard(active []*scoutv1.Card, scout *scoutv1.Scout) (taken *scoutv1.Card, rest []*scoutv1.Card, err error) {
	if len(active) == 0 {
		return nil, nil, fmt.Errorf("there is no active set to scout from")
	}
	var c *scoutv1.Card
	switch scout.GetEnd() {
	case scoutv1.End_END_LEFT:
		c, rest = active[0], active[1:]
	case scoutv1.End_END_RIGHT:
		c, rest = active[len(active)-1], active[:len(active)-1]
	default:
		return nil, nil, fmt.Errorf("scout end %v is neither END_LEFT nor END_RIGHT", scout.GetEnd())
	}
	taken = &scoutv1.Card{Face: c.GetFace(), Other: c.GetOther()}
	if scout.GetFlip() {
		taken.Face, taken.Other = taken.Other, taken.Face
	}
	return taken, rest, nil
}

// HandAfterScout returns the hand after a Scout from active: the taken card inserted before
// position scout.InsertAt (len(hand) appends it), and what remains of the active set.
func HandAfterScout(hand, active []*scoutv1.Card, scout *scoutv1.Scout) (newHand, rest []*scoutv1.Card, err error) {
	taken, rest, err := ScoutedCard(active, scout)
	if err != nil {
		return nil, nil, err
	}
	at := int(scout.GetInsertAt())
	if at < 0 || at > len(hand) {
		return nil, nil, fmt.Errorf("insert_at %d is outside 0..%d", at, len(hand))
	}
	newHand = make([]*scoutv1.Card, 0, len(hand)+1)
	newHand = append(newHand, hand[:at]...)
	newHand = append(newHand, taken)
	newHand = append(newHand, hand[at:]...)
	return newHand, rest, nil
}
