// Package hold is the one owner of legal holds: a hold (api.Hold) is
// placed with a case id and a reason on one event, a party's events or
// the events a filter selects, and lifted the same way. A held event is
// never drained, redriven, released or resolved, and its chain is kept (a
// LEGALHOLD copy) past QUARANTINE's MaxAge.
//
// The holds are kept in the HOLDS bucket, one key per hold: a placing is a
// create, a lift a compare-and-set on the entry's revision (Store). Each
// placing and lifting is also written to AUDIT (Store.Audit) and sealed,
// as a hold_placed or hold_lifted record, into every chain the hold holds
// (the auditor appends them, package auditor). A party or filter hold is
// dynamic: a chain quarantined after it that matches it gets the record
// too.
//
// Who refuses held events: the redriver, before any drain, redrive,
// release or resolve, with Refuse on the chain's folded state (the hold
// records it carries) and the active holds (Store.Active), so a chain
// that matches a dynamic hold whose record is not written yet is refused
// too.
//
// Services may not create consumers: the store reads the bucket with
// direct gets on its stream (a multi-last get), never kv.Keys or Watch.
package hold

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
)

// Subject is what a hold's target is matched against: the summary of one
// chain (the auditor's index entry, the redriver's chain head, a folded
// state all give it).
type Subject struct {
	DLQID     string
	Domain    string
	PartyID   string
	ErrorCode codes.Code // of the latest failure
	FirstSeen time.Time  // when the original event was first stored
}

// FromHead is the subject of a chain whose last record's head is h (a
// head carries the party, the latest error code and first_seen of its
// chain).
func FromHead(h chain.Head) Subject {
	return Subject{DLQID: h.DLQID, Domain: h.Domain, PartyID: h.PartyID, ErrorCode: h.ErrorCode, FirstSeen: h.FirstSeen}
}

// FromState is the subject of a folded chain.
func FromState(s record.State) Subject {
	return Subject{DLQID: s.DLQID, Domain: s.Domain, PartyID: s.PartyID, ErrorCode: s.ErrorCode, FirstSeen: s.FirstSeen}
}

// Matches reports whether target t holds the chain s summarizes.
func Matches(t api.HoldTarget, s Subject) bool {
	switch {
	case t.DLQID != "":
		return s.DLQID == t.DLQID
	case t.PartyID != "":
		return s.PartyID == t.PartyID
	case t.Filter != nil:
		f := t.Filter
		switch {
		case f.Domain != "" && s.Domain != f.Domain,
			f.PartyID != "" && s.PartyID != f.PartyID,
			len(f.ErrorCodes) > 0 && !slices.Contains(f.ErrorCodes, string(s.ErrorCode)),
			f.Since != nil && s.FirstSeen.Before(*f.Since),
			f.Until != nil && !s.FirstSeen.Before(*f.Until):
			return false
		}
		return true
	}
	return false
}

// Dynamic reports whether t also holds events quarantined after the hold
// was placed (a party or a filter).
func Dynamic(t api.HoldTarget) bool { return t.DLQID == "" }

// Holding returns the ids of the holds that hold the chain s summarizes,
// whose folded state is st: those its chain carries (hold_placed, not
// lifted) and the active ones among holds that match it (a dynamic hold
// whose record may not be written yet). Empty: not held.
func Holding(st record.State, s Subject, holds []api.Hold) []string {
	var out []string
	for _, h := range st.Holds {
		out = append(out, h.HoldID)
	}
	for _, h := range holds {
		if h.Status == api.HoldActive && Matches(h.Target, s) && !slices.Contains(out, h.ID) {
			out = append(out, h.ID)
		}
	}
	return out
}

// Refuse returns an api.Error with code api.ErrHeld when the chain whose
// folded state is st is held (Holding), naming the holds and their case
// ids; nil when it is not. Call it with the chain's state before any
// drain, redrive, release or resolve of it.
func Refuse(st record.State, holds []api.Hold) error {
	ids := Holding(st, FromState(st), holds)
	if len(ids) == 0 {
		return nil
	}
	return api.Errorf(api.ErrHeld, "the event is under legal hold %v: it may not be drained, redriven, released or resolved until lifted", ids)
}

// NewID returns a new hold id, time-ordered.
func NewID(now time.Time) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("hold: id: %w", err)
	}
	return "hold-" + now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b), nil
}
