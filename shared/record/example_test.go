package record_test

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
)

// exampleFailure is a pharmacy event that failed validation, as the
// validator reports it to the quarantiner.
func exampleFailure() record.Failure {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	return record.Failure{
		Class:   record.ClassValidation,
		Code:    pharmacy.InvalidNDC,
		Detail:  "ndc matches no FDA layout",
		Domain:  "pharmacy",
		Subject: "events.pharmacy.receive", Stream: "EVENTS", Seq: 7, Deliveries: 1,
		Published: at,
		Payload:   []byte(`{"transaction_id":"INV-2026-0042","supplier":"Müller & Söhne <Großhandel>","ndc":"0409-48"}`),
		FailedAt:  at.Add(time.Second),
		// What the domain's rules could derive from a document that failed
		// them (gate.Identify): its chain is named by a hash of its bytes.
		Envelope: &envelope.Envelope{Domain: "pharmacy", EventType: "receive", PartyID: "BW4829137", Partial: true},
	}
}

// A quarantine record is sealed once, after its last change, and stored as
// the bytes SealMarshal returns. Anyone can check the stored bytes against
// their own seal, without deadletter's Go types; a changed byte breaks it.
func Example_sealAndVerify() {
	f := exampleFailure()
	r := record.FromFailure(f, f.FailedAt)
	stored, err := record.SealMarshal(&r)
	if err != nil {
		fmt.Println("seal:", err)
		return
	}
	// The same bytes published again land in the same chain:
	// domain.Key("pharmacy", "payload", subject, hex SHA-256 of the bytes).
	fmt.Println("chain:", r.DLQID)
	fmt.Println("verify:", record.VerifySeal(stored))

	// The payload is kept byte for byte, and the seal covers it.
	back, err := record.Parse(stored)
	if err != nil {
		fmt.Println("parse:", err)
		return
	}
	body, _ := back.Payload.Bytes()
	fmt.Println("payload intact:", bytes.Equal(body, f.Payload))

	tampered := bytes.Replace(stored, []byte("INV-2026-0042"), []byte("INV-2026-0043"), 1)
	fmt.Println("tampered:", errors.Is(record.VerifySeal(tampered), record.ErrSealMismatch))
	// Output:
	// chain: pharmacy_a5ccda55354c7f23a47796862ace93ed
	// verify: <nil>
	// payload intact: true
	// tampered: true
}

// A chain is the sealed records of one event, each linking the previous
// one's seal. VerifyChain checks seals and links; Fold folds the lifecycle
// into the event's current state.
func ExampleFold() {
	f := exampleFailure()
	first := record.FromFailure(f, f.FailedAt)
	if err := record.Seal(&first); err != nil {
		fmt.Println("seal:", err)
		return
	}
	// A person closes the chain for good: the next record links the first.
	second := record.Record{
		SchemaVersion: record.SchemaVersion,
		DLQID:         first.DLQID, Index: 1, Kind: record.KindDismissed,
		Domain: first.Domain, Class: first.Class,
		ErrorCode: first.ErrorCode, ErrorDetail: first.ErrorDetail,
		SourceSubject: first.SourceSubject, SourceStream: first.SourceStream, SourceSeq: first.SourceSeq,
		FirstSeen: first.FirstSeen, QuarantinedAt: first.QuarantinedAt.Add(time.Hour),
		Actor: "operator-anna", Reason: "test event of the onboarding",
		PrevHash: first.AuditHash,
	}
	if err := record.Seal(&second); err != nil {
		fmt.Println("seal:", err)
		return
	}
	var stored [][]byte
	for _, r := range []record.Record{first, second} {
		b, err := record.Marshal(r)
		if err != nil {
			fmt.Println("marshal:", err)
			return
		}
		stored = append(stored, b)
	}
	fmt.Println("problems:", len(record.VerifyChain(stored)))

	state, err := record.Fold([]record.Record{first, second})
	fmt.Println("state:", state.Status, state.Class, state.ErrorCode, err)

	// A record rewritten and sealed again still breaks the link after it.
	forged := first
	forged.ErrorDetail = "nothing wrong"
	forged.AuditHash = ""
	if err := record.Seal(&forged); err != nil {
		fmt.Println("seal:", err)
		return
	}
	b, _ := record.Marshal(forged)
	for _, p := range record.VerifyChain([][]byte{b, stored[1]}) {
		fmt.Println("problem:", p.Index, p.Kind)
	}
	// Output:
	// problems: 0
	// state: resolved validation INVALID_NDC <nil>
	// problem: 1 broken_prev_hash
}
