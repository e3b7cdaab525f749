package scout

import (
	"testing"

	"google.golang.org/protobuf/proto"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

// step14 is request 7 of the worked transcript in PROTOCOL.md §15: no legal Show, 44 Scouts,
// Scout & Show available.
func step14() *scoutv1.DecisionRequest {
	req := &scoutv1.DecisionRequest{
		MatchId:   "m-0011",
		RequestId: 7,
		Observation: &scoutv1.Observation{
			Hand:      cards(9, 5, 2, 9, 6, 7, 2, 8, 7, 4, 5, 8, 3, 4, 4, 2, 6, 8, 1, 3),
			ActiveSet: cards(5, 3, 5, 7, 5, 6),
		},
		ScoutAndShowAvailable: true,
	}
	for _, end := range []scoutv1.End{scoutv1.End_END_LEFT, scoutv1.End_END_RIGHT} {
		for _, flip := range []bool{false, true} {
			for at := int32(0); at <= 10; at++ {
				req.LegalScouts = append(req.LegalScouts, &scoutv1.Scout{End: end, Flip: flip, InsertAt: at})
			}
		}
	}
	return req
}

func TestFallbackAction(t *testing.T) {
	req := step14()
	want := ScoutAction(&scoutv1.Scout{End: scoutv1.End_END_LEFT})
	if got := FallbackAction(req); !proto.Equal(got, want) {
		t.Errorf("fallback without shows = %v; want %v", got, want)
	}
	req.LegalShows = []*scoutv1.Show{{Start: 2, Length: 1}, {Start: 2, Length: 2}}
	if got := FallbackAction(req); !proto.Equal(got, ShowAction(&scoutv1.Show{Start: 2, Length: 1})) {
		t.Errorf("fallback with shows = %v; want the first legal show", got)
	}
	if err := CheckAction(req, FallbackAction(req)); err != nil {
		t.Errorf("the fallback must pass CheckAction: %v", err)
	}
}

func TestCheckAction(t *testing.T) {
	req := step14()
	req.LegalShows = []*scoutv1.Show{{Start: 0, Length: 1}}
	ok := []*scoutv1.Action{
		ShowAction(&scoutv1.Show{Start: 0, Length: 1}),
		ScoutAction(&scoutv1.Scout{End: scoutv1.End_END_RIGHT, Flip: true, InsertAt: 10}),
		// §5.4: take the left 5, insert before position 8, show 3-4-5-6 at 6+4.
		ScoutAndShowAction(&scoutv1.Scout{End: scoutv1.End_END_LEFT, InsertAt: 8},
			&scoutv1.Show{Start: 6, Length: 4}),
		// §5.4 variant: turn the right 5 into a 6 at position 2, show 6-6 (86 > 85).
		ScoutAndShowAction(&scoutv1.Scout{End: scoutv1.End_END_RIGHT, Flip: true, InsertAt: 2},
			&scoutv1.Show{Start: 2, Length: 2}),
	}
	for _, a := range ok {
		if err := CheckAction(req, a); err != nil {
			t.Errorf("CheckAction(%v) = %v; want nil", a, err)
		}
	}
	bad := []*scoutv1.Action{
		nil,
		{},
		ShowAction(&scoutv1.Show{Start: 6, Length: 2}),
		ScoutAction(&scoutv1.Scout{End: scoutv1.End_END_LEFT, InsertAt: 11}),
		ScoutAction(&scoutv1.Scout{InsertAt: 0}),
		// The Show part indexed in the hand before the Scout: 3 4 6 1 is no group.
		ScoutAndShowAction(&scoutv1.Scout{End: scoutv1.End_END_LEFT, InsertAt: 0},
			&scoutv1.Show{Start: 6, Length: 4}),
		// A group, but it does not beat the remaining 5-5.
		ScoutAndShowAction(&scoutv1.Scout{End: scoutv1.End_END_LEFT, InsertAt: 0},
			&scoutv1.Show{Start: 0, Length: 1}),
		ScoutAndShowAction(&scoutv1.Scout{End: scoutv1.End_END_LEFT, InsertAt: 8}, nil),
		ScoutAndShowAction(&scoutv1.Scout{End: scoutv1.End_END_LEFT, InsertAt: 8},
			&scoutv1.Show{Start: 9, Length: 3}),
	}
	for _, a := range bad {
		if err := CheckAction(req, a); err == nil {
			t.Errorf("CheckAction(%v) = nil; want an error", a)
		}
	}
	req.ScoutAndShowAvailable = false
	if err := CheckAction(req, ok[2]); err == nil {
		t.Error("a Scout & Show must be refused when it is not available")
	}
}
