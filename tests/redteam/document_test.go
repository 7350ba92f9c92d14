package redteam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestForgedDocumentManifest (D1): a publisher's manifest that names
// another publisher's document parts (EVENTS sequences anyone can guess)
// would have the victim's document ingested under the forger's name. The
// validator takes a document's parts only from the manifest's own subject
// (the server writes the publisher into it), so the forged manifest is
// quarantined whole as MALFORMED_DOCUMENT under the forger, nothing is
// committed, and the victim's own manifest then commits every event once,
// as the victim's.
func TestForgedDocumentManifest(t *testing.T) {
	e := startEnv(t)
	victim := "publisher-0614141"          // the DSCSA example publisher (parties 0614141*)
	forger := string(access.RolePublisher) // the all-parties publisher: its own events would pass the party rule
	data, err := os.ReadFile("../../shared/domain/dscsa/document/testdata/shipment.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	half := len(data) / 2
	docSubject := subjects.Event(dscsa.Name, subjects.DocumentType)

	// publishPart publishes part i of an upload as person and returns its
	// EVENTS sequence.
	publishPart := func(person, upload string, i int, b []byte) uint64 {
		js, err := jetstream.New(e.conn(t, person))
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(docSubject)
		m.Data = b
		m.Header.Set(envelope.DocumentUpload, upload)
		m.Header.Set(envelope.DocumentPart, document.PartHeader(i))
		ack, err := js.PublishMsg(context.Background(), m)
		if err != nil {
			t.Fatalf("part as %s: %v", person, err)
		}
		e.settled(t, ack.Sequence)
		return ack.Sequence
	}
	// publishManifest publishes man as person and waits until the
	// validator settled it.
	publishManifest := func(person string, man document.Manifest) {
		js, err := jetstream.New(e.conn(t, person))
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(docSubject)
		m.Data, _ = json.Marshal(man)
		m.Header.Set(envelope.DocumentManifest, "1")
		ack, err := js.PublishMsg(context.Background(), m)
		if err != nil {
			t.Fatalf("manifest as %s: %v", person, err)
		}
		e.settled(t, ack.Sequence)
	}
	malformed := func(publisher string) int {
		var page api.ListReply
		if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditList,
			api.ListRequest{Domain: dscsa.Name, Code: string(dscsa.MalformedDocument), Publisher: publisher, Limit: 1000}, &page); code != "" {
			t.Fatalf("audit.list: %s", code)
		}
		return len(page.Items)
	}
	ledgerLast := func() uint64 {
		s, err := e.admin.Stream(context.Background(), subjects.LedgerStream)
		if err != nil {
			t.Fatal(err)
		}
		in, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return in.State.LastSeq
	}

	v1, v2 := publishPart(victim, "victim-up", 1, data[:half]), publishPart(victim, "victim-up", 2, data[half:])
	tests := []struct {
		name string
		man  func() document.Manifest
	}{
		{"the victim's parts under the victim's upload", func() document.Manifest {
			return document.Manifest{Upload: "victim-up", SHA256: sha, Size: int64(len(data)), Parts: []uint64{v1, v2}}
		}},
		{"the victim's parts under the forger's upload", func() document.Manifest {
			return document.Manifest{Upload: "forged-up", SHA256: sha, Size: int64(len(data)), Parts: []uint64{v1, v2}}
		}},
		{"one own part and one of the victim's", func() document.Manifest {
			own := publishPart(forger, "mixed-up", 1, data[:half])
			return document.Manifest{Upload: "mixed-up", SHA256: sha, Size: int64(len(data)), Parts: []uint64{own, v2}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, ledger := malformed(forger), ledgerLast()
			publishManifest(forger, tc.man())
			natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
				if n := malformed(forger); n != before+1 {
					return fmt.Errorf("%d MALFORMED_DOCUMENT chains of the forger, want %d", n, before+1)
				}
				return nil
			})
			if got := ledgerLast(); got != ledger {
				t.Errorf("LEDGER grew from %d to %d on a forged manifest", ledger, got)
			}
		})
	}

	// The victim's own manifest still ingests its document: every event
	// committed once, as the victim's.
	ledger := ledgerLast()
	publishManifest(victim, document.Manifest{Upload: "victim-up", SHA256: sha, Size: int64(len(data)), Parts: []uint64{v1, v2}})
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if ledgerLast() == ledger {
			return fmt.Errorf("nothing of the victim's document committed")
		}
		return nil
	})
	if n := malformed(victim); n != 0 {
		t.Errorf("%d MALFORMED_DOCUMENT chains of the victim", n)
	}
	s, err := e.admin.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := ledger + 1; seq <= ledgerLast(); seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if p := m.Header.Get(envelope.Publisher); p != victim {
			t.Errorf("LEDGER %d committed as publisher %q, want %q", seq, p, victim)
		}
	}
}
