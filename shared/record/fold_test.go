package record

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
)

// reach lists the records that bring a fresh chain to each status.
var reach = map[Status][]Kind{
	StatusOpen:      nil,
	StatusRedriving: {KindRedriveRequested},
	StatusPoison:    {KindRedriveRequested, KindPoisoned},
	StatusResolved:  {KindRedriveRequested, KindReplayed},
}

// allowed is the lifecycle (but KindHoldLifted, which needs its hold
// placed first: TestFoldHolds), written out independently of fold.go:
// status → kind → resulting status.
var allowed = map[Status]map[Kind]Status{
	StatusOpen: {
		KindCorrected: StatusOpen, KindRedriveRequested: StatusRedriving, KindSkippedDuplicate: StatusResolved,
		KindReplayFailed: StatusOpen, KindPoisoned: StatusPoison, KindResolved: StatusResolved,
		KindApproved: StatusOpen, KindHoldPlaced: StatusOpen,
	},
	StatusRedriving: {
		KindReplayed: StatusResolved, KindSkippedDuplicate: StatusResolved, KindReplayFailed: StatusOpen,
		KindPoisoned: StatusPoison, KindResolved: StatusResolved, KindApproved: StatusRedriving,
		KindHoldPlaced: StatusRedriving,
	},
	StatusPoison: {
		KindCorrected: StatusPoison, KindReleased: StatusOpen, KindResolved: StatusResolved,
		KindApproved: StatusPoison, KindHoldPlaced: StatusPoison,
	},
	StatusResolved: {KindHoldPlaced: StatusResolved},
}

var allKinds = []Kind{
	KindQuarantined, KindCorrected, KindRedriveRequested, KindReplayed, KindSkippedDuplicate,
	KindReplayFailed, KindPoisoned, KindReleased, KindResolved, KindApproved, KindHoldPlaced, "archived",
}

func TestFoldAllowedTransitions(t *testing.T) {
	for from, to := range allowed {
		for kind, status := range to {
			t.Run(string(from)+"/"+string(kind), func(t *testing.T) {
				recs, _ := chain(t, ClassExhausted, plain(append(reach[from], kind)...)...)
				s, err := Fold(recs)
				if err != nil {
					t.Fatalf("Fold: %v", err)
				}
				if s.Status != status {
					t.Errorf("Status = %s, want %s", s.Status, status)
				}
				last := recs[len(recs)-1]
				if s.Records != len(recs) || s.LastKind != kind || s.LastHash != last.AuditHash || !s.LastChange.Equal(last.QuarantinedAt) {
					t.Errorf("Records %d LastKind %s LastHash %s LastChange %v", s.Records, s.LastKind, s.LastHash, s.LastChange)
				}
				wantResolution := Kind("")
				if status == StatusResolved {
					wantResolution = kind
				}
				if s.Resolution != wantResolution {
					t.Errorf("Resolution = %q, want %q", s.Resolution, wantResolution)
				}
				wantClass := map[Status]Class{StatusPoison: ClassPoison}[status]
				if wantClass == "" {
					wantClass = ClassExhausted
				}
				if status != StatusResolved && s.Class != wantClass {
					t.Errorf("Class = %s, want %s", s.Class, wantClass)
				}
			})
		}
	}
}

func TestFoldForbiddenTransitions(t *testing.T) {
	for from := range allowed {
		for _, kind := range allKinds {
			if _, ok := allowed[from][kind]; ok {
				continue
			}
			t.Run(string(from)+"/"+string(kind), func(t *testing.T) {
				recs, _ := chain(t, ClassExhausted, plain(reach[from]...)...)
				prev := recs[len(recs)-1]
				bad, _ := sealOnly(t, follow(prev, kind))
				want, err := Fold(recs)
				if err != nil {
					t.Fatalf("Fold of the valid prefix: %v", err)
				}
				s, err := Fold(append(recs, bad))
				wantErr := ErrInvalidTransition
				if kind == "archived" {
					wantErr = ErrUnknownKind
				}
				if !errors.Is(err, wantErr) {
					t.Fatalf("Fold error = %v, want %v", err, wantErr)
				}
				want.Status = StatusInvalid
				if !reflect.DeepEqual(s, want) {
					t.Errorf("state = %+v\nwant the valid prefix %+v", s, want)
				}
			})
		}
	}
}

// TestFoldInvalidChains covers the link and record rules.
func TestFoldInvalidChains(t *testing.T) {
	recs, _ := chain(t, ClassValidation, plain(KindRedriveRequested)...)
	first, second := recs[0], recs[1]
	tests := []struct {
		name    string
		chain   func() []Record
		want    error
		records int // records in the returned state
	}{
		{"empty chain", func() []Record { return nil }, ErrEmptyChain, 0},
		{"first record not quarantined", func() []Record {
			r := first
			r.Kind = KindCorrected
			return []Record{r}
		}, ErrInvalidTransition, 0},
		{"first record with index 1", func() []Record { r := first; r.Index = 1; return []Record{r} }, ErrBrokenLink, 0},
		{"first record with a prev_hash", func() []Record { r := first; r.PrevHash = second.AuditHash; return []Record{r} }, ErrBrokenLink, 0},
		{"first record of class poison", func() []Record { r := first; r.Class = ClassPoison; return []Record{r} }, ErrInvalidClass, 0},
		{"first record without class", func() []Record { r := first; r.Class = ""; return []Record{r} }, ErrInvalidClass, 0},
		{"index gap", func() []Record { r := second; r.Index = 2; return []Record{first, r} }, ErrBrokenLink, 1},
		{"broken prev_hash", func() []Record { r := second; r.PrevHash = second.AuditHash; return []Record{first, r} }, ErrBrokenLink, 1},
		{"other dlq id", func() []Record { r := second; r.DLQID = "fsma_x"; return []Record{first, r} }, ErrBrokenLink, 1},
		{"record repeated", func() []Record { return []Record{first, second, second} }, ErrBrokenLink, 2},
		{"corrected without payload", func() []Record {
			r := follow(first, KindCorrected)
			r.Payload = nil
			return []Record{first, r}
		}, ErrMissingPayload, 1},
		{"corrected to class poison while open", func() []Record {
			r := follow(first, KindCorrected)
			r.Class = ClassPoison
			return []Record{first, r}
		}, ErrInvalidClass, 1},
		{"resolved without actor", func() []Record {
			r := follow(first, KindResolved)
			r.Actor = ""
			return []Record{first, r}
		}, ErrMissingDecision, 1},
		{"resolved without reason", func() []Record {
			r := follow(first, KindResolved)
			r.Reason = ""
			return []Record{first, r}
		}, ErrMissingDecision, 1},
		{"replay_failed to class poison", func() []Record {
			r := follow(first, KindReplayFailed)
			r.Class = ClassPoison
			return []Record{first, r}
		}, ErrInvalidClass, 1},
		{"approved without signature", func() []Record {
			r := follow(first, KindApproved)
			r.Signature = nil
			return []Record{first, r}
		}, ErrMissingSignature, 1},
		{"approved without meaning", func() []Record {
			r := follow(first, KindApproved)
			r.Signature.Meaning = ""
			return []Record{first, r}
		}, ErrMissingSignature, 1},
		{"approved without signing time", func() []Record {
			r := follow(first, KindApproved)
			r.Signature.SignedAt = time.Time{}
			return []Record{first, r}
		}, ErrMissingSignature, 1},
		{"approved by the requester", func() []Record {
			r := follow(first, KindApproved)
			r.Signature.Approver = r.Signature.Requester
			return []Record{first, r}
		}, ErrMissingSignature, 1},
		{"approved by the requester's second login", func() []Record {
			r := follow(first, KindApproved)
			r.Signature.Requester, r.Signature.RequesterPerson = "amara.okafor", "amara.okafor"
			r.Signature.Approver, r.Signature.ApproverPerson = "amara.okafor+approver", "amara.okafor"
			return []Record{first, r}
		}, ErrMissingSignature, 1},
		{"approver's person not the approver's", func() []Record {
			r := follow(first, KindApproved)
			r.Signature.Requester, r.Signature.RequesterPerson = "amara.okafor", "amara.okafor"
			r.Signature.Approver, r.Signature.ApproverPerson = "amara.okafor+approver", "陈伟"
			return []Record{first, r}
		}, ErrMissingSignature, 1},
		{"hold without its hold", func() []Record {
			r := follow(first, KindHoldPlaced)
			r.Hold = nil
			return []Record{first, r}
		}, ErrMissingHold, 1},
		{"hold without case id", func() []Record {
			r := follow(first, KindHoldPlaced)
			r.Hold.CaseID = ""
			return []Record{first, r}
		}, ErrMissingHold, 1},
		{"hold without reason", func() []Record {
			r := follow(first, KindHoldPlaced)
			r.Reason = ""
			return []Record{first, r}
		}, ErrMissingHold, 1},
		{"hold without actor", func() []Record {
			r := follow(first, KindHoldPlaced)
			r.Actor = ""
			return []Record{first, r}
		}, ErrMissingHold, 1},
		{"hold stating another status", func() []Record {
			r := follow(first, KindHoldPlaced)
			r.Hold.Status = StatusResolved
			return []Record{first, r}
		}, ErrMissingHold, 1},
		{"lift of a hold not placed", func() []Record {
			return []Record{first, follow(first, KindHoldLifted)}
		}, ErrMissingHold, 1},
		{"hold placed twice", func() []Record {
			p, _ := sealOnly(t, follow(first, KindHoldPlaced))
			return []Record{first, p, follow(p, KindHoldPlaced)}
		}, ErrMissingHold, 2},
		{"released to class poison", func() []Record {
			p := follow(first, KindPoisoned)
			p, _ = sealOnly(t, p)
			r := follow(p, KindReleased)
			r.Class = ClassPoison
			return []Record{first, p, r}
		}, ErrInvalidClass, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Fold(tt.chain())
			if !errors.Is(err, tt.want) {
				t.Fatalf("Fold error = %v, want %v", err, tt.want)
			}
			if s.Status != StatusInvalid || s.Records != tt.records {
				t.Errorf("Status %s Records %d, want invalid and %d", s.Status, s.Records, tt.records)
			}
		})
	}
}

// TestFoldSignatures: the state lists the signatures of the approved
// records in chain order, and an approval keeps the status it found.
func TestFoldSignatures(t *testing.T) {
	recs, _ := chain(t, ClassValidation,
		step{kind: KindApproved},
		step{kind: KindCorrected},
		step{kind: KindApproved, mod: func(r *Record) { r.Signature.ApprovalID, r.Signature.Action = "appr-2", "release" }},
	)
	s, err := Fold(recs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != StatusOpen || len(s.Signatures) != 2 || s.Signatures[0].ApprovalID != "appr-1" || s.Signatures[1].ApprovalID != "appr-2" {
		t.Errorf("Status %s Signatures %+v", s.Status, s.Signatures)
	}
	if !reflect.DeepEqual(*recs[1].Signature, s.Signatures[0]) {
		t.Errorf("signature %+v, record's %+v", s.Signatures[0], *recs[1].Signature)
	}
}

// TestFoldHolds: the state lists the holds placed and not lifted, in
// every status (resolved included), and a hold record keeps the status.
func TestFoldHolds(t *testing.T) {
	second := func(r *Record) { r.Hold.HoldID, r.Hold.CaseID = "hold-2", "case-2" }
	for from, kinds := range reach {
		t.Run(string(from), func(t *testing.T) {
			steps := append(plain(kinds...), step{kind: KindHoldPlaced}, step{kind: KindHoldPlaced, mod: second})
			recs, _ := chain(t, ClassExhausted, steps...)
			s, err := Fold(recs)
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != from || !s.Held() || len(s.Holds) != 2 || s.Holds[0].HoldID != "hold-1" || s.Holds[1].HoldID != "hold-2" {
				t.Fatalf("Status %s Holds %+v", s.Status, s.Holds)
			}
			if h := s.Holds[0]; h.CaseID != "case-2026-001" || h.PlacedBy != "erin" || h.Reason != "subpoena duces tecum" || !h.PlacedAt.Equal(recs[len(recs)-2].Hold.At) {
				t.Errorf("hold %+v", h)
			}
			recs, _ = chain(t, ClassExhausted, append(steps, step{kind: KindHoldLifted})...)
			s, err = Fold(recs)
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != from || len(s.Holds) != 1 || s.Holds[0].HoldID != "hold-2" || !s.HeldBy("hold-2") || s.HeldBy("hold-1") {
				t.Errorf("after the lift: Status %s Holds %+v", s.Status, s.Holds)
			}
		})
	}
}

func TestFoldState(t *testing.T) {
	f := testFailure()
	recs, _ := chain(t, ClassValidation,
		step{kind: KindCorrected, mod: func(r *Record) { r.Payload = NewPayload([]byte(`{"v":1}`)) }},
		step{kind: KindRedriveRequested},
		step{kind: KindReplayFailed},
		step{kind: KindCorrected, mod: func(r *Record) {
			r.Payload = NewPayload([]byte("not json \xff"))
			r.Class = ClassExhausted
		}},
		step{kind: KindRedriveRequested},
		step{kind: KindPoisoned, mod: func(r *Record) {
			r.ErrorCode, r.ErrorDetail = codes.DownstreamUnavailable, "cap reached"
			r.Attempts = []Attempt{{At: r.QuarantinedAt, Stage: StageRedrive, Code: codes.DownstreamUnavailable, Reason: "503"}}
		}},
		step{kind: KindReleased, mod: func(r *Record) { r.Class = ClassValidation }},
	)
	attempts0 := append([]Attempt(nil), recs[0].Attempts...)
	s, err := Fold(recs)
	if err != nil {
		t.Fatalf("Fold: %v", err)
	}
	first, last := recs[0], recs[len(recs)-1]
	et := *first.EventTime
	want := State{
		DLQID: first.DLQID, Domain: "pharmacy", Class: ClassValidation, Status: StatusOpen,
		ErrorCode: codes.DownstreamUnavailable, ErrorDetail: "cap reached", RedriveCount: 2,
		Records: 8, FirstSeen: f.Published, QuarantinedAt: t0, LastChange: last.QuarantinedAt,
		LastKind: KindReleased, LastHash: last.AuditHash,
		IdempotencyKey: first.IdempotencyKey, OrderingKey: first.OrderingKey, PartyID: first.PartyID, EventTime: &et, EventHashID: first.EventHashID,
		Payload: recs[4].Payload, Corrected: true, OriginalPayload: first.Payload,
		Headers:       first.Headers,
		SourceSubject: "events.pharmacy.dispense", SourceStream: "EVENTS", SourceSeq: 42,
		Attempts: append(append(append([]Attempt(nil), first.Attempts...), recs[3].Attempts...), recs[6].Attempts...),
		TraceID:  first.TraceID, SpanID: first.SpanID,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Fold\n got %+v\nwant %+v", s, want)
	}
	if len(s.Attempts) != 4 {
		t.Errorf("%d attempts accumulated, want 4", len(s.Attempts))
	}
	if b, err := s.Payload.Bytes(); err != nil || !bytes.Equal(b, []byte("not json \xff")) {
		t.Errorf("effective payload = %q, %v", b, err)
	}
	if b, err := s.OriginalPayload.Bytes(); err != nil || !bytes.Equal(b, f.Payload) {
		t.Errorf("original payload = %q, %v", b, err)
	}
	if !s.Redrivable(false) {
		t.Error("a corrected validation record is not redrivable")
	}
	// Fold does not write into its input.
	s.Attempts[0].Reason = "changed"
	s.Payload.Data = "changed"
	if !reflect.DeepEqual(recs[0].Attempts, attempts0) || recs[4].Payload.Data == "changed" {
		t.Error("Fold shares attempts or payload with its input")
	}
}

func TestFoldSkippedAndResolved(t *testing.T) {
	recs, _ := chain(t, ClassValidation, plain(KindSkippedDuplicate)...)
	if s, err := Fold(recs); err != nil || s.Status != StatusResolved || s.Resolution != KindSkippedDuplicate || s.Corrected {
		t.Errorf("Fold = %+v, %v", s, err)
	}
	recs, _ = chain(t, ClassExhausted, plain(KindRedriveRequested, KindPoisoned, KindResolved)...)
	if s, err := Fold(recs); err != nil || s.Status != StatusResolved || s.Resolution != KindResolved || s.Class != ClassPoison {
		t.Errorf("Fold = %+v, %v", s, err)
	}
}

func TestRedrivable(t *testing.T) {
	statuses := []Status{StatusOpen, StatusRedriving, StatusResolved, StatusPoison, StatusInvalid, ""}
	classes := []Class{ClassValidation, ClassExhausted, ClassPoison, ""}
	for _, status := range statuses {
		for _, class := range classes {
			for _, corrected := range []bool{false, true} {
				for _, includeValidation := range []bool{false, true} {
					want := status == StatusOpen &&
						(class == ClassExhausted || (class == ClassValidation && (includeValidation || corrected)))
					name := fmt.Sprintf("%s/%s/corrected=%v/validation=%v", status, class, corrected, includeValidation)
					t.Run(name, func(t *testing.T) {
						s := State{Status: status, Class: class, Corrected: corrected}
						if got := s.Redrivable(includeValidation); got != want {
							t.Errorf("Redrivable = %v, want %v", got, want)
						}
					})
				}
			}
		}
	}
	// Spot checks of the rule in words.
	spot := []struct {
		name string
		s    State
		incl bool
		want bool
	}{
		{"open exhausted", State{Status: StatusOpen, Class: ClassExhausted}, false, true},
		{"open validation, not corrected", State{Status: StatusOpen, Class: ClassValidation}, false, false},
		{"open validation, drained with validation", State{Status: StatusOpen, Class: ClassValidation}, true, true},
		{"open validation, corrected", State{Status: StatusOpen, Class: ClassValidation, Corrected: true}, false, true},
		{"poison is never redrivable", State{Status: StatusPoison, Class: ClassPoison, Corrected: true}, true, false},
		{"invalid is never redrivable", State{Status: StatusInvalid, Class: ClassExhausted}, true, false},
		{"redriving is not again", State{Status: StatusRedriving, Class: ClassExhausted}, true, false},
	}
	for _, tt := range spot {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Redrivable(tt.incl); got != tt.want {
				t.Errorf("Redrivable = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNextMatchesFold folds chains one record at a time with Next and
// compares with Fold of the whole chain: for every status and every kind
// after it, an allowed record gives Fold's state, a forbidden one is
// refused by both and leaves the state unchanged.
func TestNextMatchesFold(t *testing.T) {
	for from, to := range allowed {
		for _, kind := range allKinds {
			t.Run(string(from)+"/"+string(kind), func(t *testing.T) {
				recs, _ := chain(t, ClassExhausted, plain(reach[from]...)...)
				last, _ := sealOnly(t, follow(recs[len(recs)-1], kind))
				recs = append(recs, last)
				var s State
				for i, r := range recs {
					next, err := s.Next(r)
					want, foldErr := Fold(recs[:i+1])
					if (err == nil) != (foldErr == nil) {
						t.Fatalf("record %d: Next error %v, Fold error %v", i, err, foldErr)
					}
					if err != nil {
						if _, ok := to[kind]; ok || i != len(recs)-1 {
							t.Fatalf("record %d refused: %v", i, err)
						}
						if !reflect.DeepEqual(next, s) {
							t.Fatalf("record %d: a refused Next changed the state", i)
						}
						return
					}
					if !reflect.DeepEqual(next, want) {
						t.Fatalf("record %d: Next gives %+v, Fold %+v", i, next, want)
					}
					s = next
				}
				if _, ok := to[kind]; !ok {
					t.Errorf("forbidden %s from %s was accepted", kind, from)
				}
			})
		}
	}
}
