package dscsa_test

import (
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/gate"
)

// TestEventHashIDEveryEvent: every DSCSA event that parses carries its
// CBV 2.0 event hash ID as the reference implementation computes it
// (eventhash.ReferenceID), accepted or not; with an eventID the key stays
// the eventID's and the hash is still recorded; without one the key is of
// the normalized ID (eventhash.KeyID), whatever the envelope shows.
func TestEventHashIDEveryEvent(t *testing.T) {
	g := newGate(t)
	for _, f := range readTestdata(t) {
		t.Run(f.name, func(t *testing.T) {
			doc, derr := gate.Decode(f.data)
			want := ""
			if derr == nil {
				want = eventhash.ReferenceID(doc, nil, eventhash.FromJSON)
			}
			env, err := g.Check(subjectFor(f.data), f.data)
			if err != nil {
				env = g.Identify(subjectFor(f.data), f.data)
			}
			if env.EventHashID != want {
				t.Fatalf("EventHashID = %q, want %q", env.EventHashID, want)
			}
			if err != nil {
				return
			}
			eventID, _ := domain.String(doc, "eventID")
			switch {
			case eventID != "" && !strings.HasPrefix(env.KeySource, "eventID"):
				t.Errorf("KeySource = %q with an eventID", env.KeySource)
			case eventID == "" && !strings.HasPrefix(env.KeySource, "eventHashID"):
				t.Errorf("KeySource = %q without an eventID", env.KeySource)
			case env.KeySource == "eventHashID" && env.IdempotencyKey != domain.Key(dscsa.Name, "eventHashID", eventhash.KeyID(doc, nil)):
				t.Errorf("key %q is not of the normalized event hash ID %s", env.IdempotencyKey, eventhash.KeyID(doc, nil))
			}
		})
	}
}

// TestCorrectionKeepsHash: an errorDeclaration does not change the event
// hash ID (it identifies the event it retracts) but does change the key.
func TestCorrectionKeepsHash(t *testing.T) {
	g := newGate(t)
	original, err := g.Check(subjectFor([]byte(baseIdentity)), []byte(baseIdentity))
	if err != nil {
		t.Fatal(err)
	}
	retraction := strings.Replace(baseIdentity, `"action"`, `"errorDeclaration": {"declarationTime": "2024-03-13T00:00:00Z", "reason": "incorrect_data"}, "action"`, 1)
	env, err := g.Check(subjectFor([]byte(retraction)), []byte(retraction))
	if err != nil {
		t.Fatal(err)
	}
	if env.EventHashID != original.EventHashID || env.IdempotencyKey == original.IdempotencyKey ||
		env.KeySource != "eventHashID+errorDeclaration" {
		t.Fatalf("retraction %+v\noriginal %+v", env, original)
	}
}

// TestUnsupportedTypeHasHash: a refused event type is still fingerprinted.
func TestUnsupportedTypeHasHash(t *testing.T) {
	g := newGate(t)
	doc := []byte(`{"type": "TransformationEvent", "action": "ADD", "bizStep": "commissioning", "eventTime": "2024-01-01T00:00:00Z",
	  "inputEPCList": ["urn:epc:id:sgtin:0614141.012345.1"], "outputEPCList": ["urn:epc:id:sgtin:0614141.012345.2"]}`)
	_, err := g.Check("events.dscsa.commissioning", doc)
	if codes.Of(err) != dscsa.UnsupportedEventType {
		t.Fatalf("code %v", err)
	}
	id := g.Identify("events.dscsa.commissioning", doc)
	if !strings.HasPrefix(id.EventHashID, eventhash.Prefix) || id.IdempotencyKey != "" {
		t.Fatalf("Identify = %+v", id)
	}
}
