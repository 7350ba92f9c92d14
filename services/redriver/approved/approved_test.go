package approved

import (
	"errors"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
)

// signature at the index it was requested at.
func TestCheckSigned(t *testing.T) {
	a := &api.Approval{ID: "appr-1", ChainRecords: 1, Requester: "Pharmacie Saint-Étienne"}
	signed := record.Record{Kind: record.KindApproved, Signature: &record.Signature{ApprovalID: "appr-1"}}
	other := record.Record{Kind: record.KindApproved, Signature: &record.Signature{ApprovalID: "appr-2"}}
	first := record.Record{Kind: record.KindQuarantined}
	for _, tc := range []struct {
		name    string
		a       *api.Approval
		records []record.Record
		ok      bool
	}{
		{"no approval", nil, []record.Record{first}, true},
		{"signed at its index", a, []record.Record{first, signed}, true},
		{"another approval's signature", a, []record.Record{first, other}, false},
		{"signed at another index", a, []record.Record{signed, first}, false},
		{"no record at its index", a, []record.Record{first}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSigned(chain.Chain{Records: tc.records}, tc.a)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrChainMoved)) {
				t.Errorf("CheckSigned = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestStepAt: a step is done when the record at its index is its kind by
// the requester.
func TestStepAt(t *testing.T) {
	a := &api.Approval{ID: "appr-1", Requester: "Müller & Söhne <Großhandel>"}
	ch := chain.Chain{Records: []record.Record{{Kind: record.KindQuarantined}, {Kind: record.KindCorrected, Actor: a.Requester},
		{Kind: record.KindCorrected, Actor: "someone else"}}}
	for _, tc := range []struct {
		name string
		a    *api.Approval
		i    int
		want bool
	}{
		{"the requester's correction", a, 1, true},
		{"another person's", a, 2, false},
		{"another kind", a, 0, false},
		{"past the chain", a, 3, false},
		{"no approval", nil, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StepAt(ch, tc.i, record.KindCorrected, tc.a); got != tc.want {
				t.Errorf("StepAt = %v, want %v", got, tc.want)
			}
		})
	}
	if got := DrainID("appr-42"); got != "drain-42" {
		t.Errorf("DrainID = %q", got)
	}
}
