package recall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestShipmentIsOneThing: one EPCIS document of 40 events, 3 of them
// bad: audit.list of the document answers every event of it by position
// with its outcome (committed, or quarantined with its dlq id and code)
// and its quarantined events; a code narrows both.
func TestShipmentIsOneThing(t *testing.T) {
	e := start(t)
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	bad := map[int]bool{3: true, 17: true, 38: true}
	doc, err := set.Document("SHIP-2026-0042 <Müller & Söhne → 陈伟>", 90_000, 40, bad)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	sha := hex.EncodeToString(sum[:])
	if _, err := e.pub.Publish(context.Background(), subjects.Event(dscsa.Name, subjects.DocumentType), doc); err != nil {
		t.Fatal(err)
	}
	var l api.ListReply
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		l = api.ListReply{}
		mustCall(t, e.viewer, api.AuditList, api.ListRequest{Document: sha}, &l)
		if d := l.Document; len(l.Items) != len(bad) || d == nil || d.Counts[api.ReconcileCommitted] != 40-len(bad) || d.Counts[api.ReconcileOpen] != len(bad) {
			return fmt.Errorf("%d quarantined events listed, outcomes %+v", len(l.Items), d)
		}
		return nil
	})
	d := l.Document
	if d.Document.SHA256 != sha || len(d.Events) != 40 || d.Truncated {
		t.Fatalf("document %+v with %d events (truncated %v)", d.Document, len(d.Events), d.Truncated)
	}
	codeOf := map[string]string{}
	for _, it := range l.Items {
		codeOf[it.DLQID] = it.ErrorCode
	}
	for i, ev := range d.Events {
		switch {
		case ev.Index != i:
			t.Errorf("event %d at position %d", ev.Index, i)
		case bad[i] && (ev.Outcome != api.ReconcileOpen || ev.DLQID == "" || ev.ErrorCode == "" || codeOf[ev.DLQID] != ev.ErrorCode):
			t.Errorf("bad event %d: %+v, want open with its dlq id and code", i, ev)
		case !bad[i] && (ev.Outcome != api.ReconcileCommitted || ev.DLQID != "" || ev.ErrorCode != ""):
			t.Errorf("good event %d: %+v, want committed", i, ev)
		}
	}
	t.Run("a code narrows it", func(t *testing.T) {
		code := l.Items[0].ErrorCode
		want := 0
		for _, c := range codeOf {
			if c == code {
				want++
			}
		}
		var n api.ListReply
		mustCall(t, e.viewer, api.AuditList, api.ListRequest{Document: sha, Code: code}, &n)
		if len(n.Items) != want || n.Document == nil || len(n.Document.Events) != want {
			t.Fatalf("code %s: %d items, %+v; want %d", code, len(n.Items), n.Document, want)
		}
		for _, ev := range n.Document.Events {
			if ev.ErrorCode != code {
				t.Errorf("event %+v under code %s", ev, code)
			}
		}
	})
	t.Run("not a SHA-256", func(t *testing.T) {
		if ae := call(t, e.viewer, api.AuditList, api.ListRequest{Document: "SHIP-2026-0042 <x>"}, nil); ae == nil || ae.Field != "document" {
			t.Fatalf("%v, want BAD_REQUEST naming document", ae)
		}
	})
}
