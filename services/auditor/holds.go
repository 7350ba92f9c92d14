package auditor

import (
	"github.com/deadletter/deadletter/services/auditor/legalhold"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/hold"
)

// Legal holds, the LEGALHOLD copy and QUARANTINE's retention are the
// legal-hold part's (package legalhold, legalhold.Holds): Run registers
// its endpoints (hold.place, hold.lift, hold.lift.approved, hold.get,
// hold.list), and the live view tells it of every record it applies.

// Provenance headers of a LEGALHOLD copy (package legalhold).
const (
	HeaderSourceStream  = legalhold.HeaderSourceStream
	HeaderSourceSeq     = legalhold.HeaderSourceSeq
	HeaderSourceSubject = legalhold.HeaderSourceSubject
)

// onHeldRecord adapts the live view's hook to the legal-hold part: the
// holds a chain carries, from its heldChain (nil: none).
func onHeldRecord(holds *legalhold.Holds) func(chain.Head, hold.Subject, *heldChain) {
	return func(r chain.Head, sub hold.Subject, hc *heldChain) {
		var carries func(string) bool
		if hc != nil {
			carries = func(id string) bool { return hc.holds[id] }
		}
		holds.OnRecord(r, sub, carries)
	}
}
