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
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
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
	// Chain is what an identifier filter matches (its keys, party and
	// listed identifiers, the payload's among them: Merge); read through
	// chain, which a subject of a folded state fills on first use.
	Chain domain.Chain
	lazy  func() domain.Chain
}

// chain is the subject's domain.Chain.
func (s Subject) chain() domain.Chain {
	if s.lazy != nil {
		return s.lazy()
	}
	return s.Chain
}

// FromHead is the subject of a chain whose last record's head is h (a
// head carries the party, the latest error code and first_seen of its
// chain; its identifiers only on a first record).
func FromHead(h chain.Head) Subject {
	return Subject{DLQID: h.DLQID, Domain: h.Domain, PartyID: h.PartyID, ErrorCode: h.ErrorCode, FirstSeen: h.FirstSeen,
		Chain: domain.Chain{OrderingKey: h.OrderingKey, PartyID: h.PartyID, IdempotencyKey: h.IdempotencyKey, DLQID: h.DLQID,
			Listed: pairs(h.Identifiers)}}
}

// FromState is the subject of a folded chain: its identifiers are its
// keys and those its original payload names (PayloadIdentifiers), read
// only when an identifier filter asks.
func FromState(s record.State) Subject {
	c := domain.Chain{OrderingKey: s.OrderingKey, PartyID: s.PartyID, IdempotencyKey: s.IdempotencyKey, DLQID: s.DLQID}
	orig := s.OriginalPayload
	return Subject{DLQID: s.DLQID, Domain: s.Domain, PartyID: s.PartyID, ErrorCode: s.ErrorCode, FirstSeen: s.FirstSeen,
		Chain: c, lazy: sync.OnceValue(func() domain.Chain {
			if orig == nil {
				return c
			}
			b, err := orig.Bytes()
			if err != nil {
				return c
			}
			okey, party, ids := PayloadIdentifiers(s.Domain, b)
			return Merge(c, okey, party, ids)
		})}
}

// pairs is ids but event_type as name, value pairs sorted by name (nil
// for none).
func pairs(ids map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		if k != "event_type" && ids[k] != "" {
			out = append(out, k, ids[k])
		}
	}
	return out
}

// Matcher reports whether a hold's target holds a chain (Compile).
type Matcher func(Subject) bool

// Compile reads target t once (its identifier filters by the domains'
// searches, ParseIDs) into its Matcher. A filter whose identifiers do not
// read is a BAD_REQUEST *api.Error naming the field.
func Compile(t api.HoldTarget) (Matcher, error) {
	switch {
	case t.DLQID != "":
		id := t.DLQID
		return func(s Subject) bool { return s.DLQID == id }, nil
	case t.DLQIDs != nil:
		set := make(map[string]bool, len(t.DLQIDs))
		for _, id := range t.DLQIDs {
			set[id] = true
		}
		return func(s Subject) bool { return set[s.DLQID] }, nil
	case t.PartyID != "":
		p := t.PartyID
		return func(s Subject) bool { return s.PartyID == p }, nil
	case t.Filter != nil:
		f := *t.Filter
		ids, err := ParseIDs(f.Search())
		if err != nil {
			return nil, err
		}
		return func(s Subject) bool {
			switch {
			case f.Domain != "" && s.Domain != f.Domain,
				f.PartyID != "" && s.PartyID != f.PartyID,
				len(f.ErrorCodes) > 0 && !slices.Contains(f.ErrorCodes, string(s.ErrorCode)),
				f.Since != nil && s.FirstSeen.Before(*f.Since),
				f.Until != nil && !s.FirstSeen.Before(*f.Until):
				return false
			}
			return !ids.Set || ids.Match(s.Domain, s.chain())
		}, nil
	}
	return func(Subject) bool { return false }, nil
}

// Matches reports whether target t holds the chain s summarizes (a
// target that does not compile holds nothing: Place refuses it).
func Matches(t api.HoldTarget, s Subject) bool {
	m, err := Compile(t)
	return err == nil && m(s)
}

// Dynamic reports whether t also holds events quarantined after the hold
// was placed (a party or a filter).
func Dynamic(t api.HoldTarget) bool { return t.DLQID == "" && t.DLQIDs == nil }

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
