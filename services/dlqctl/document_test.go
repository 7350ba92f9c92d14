package main_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestPublishDocument: dlqctl publish sends EPCIS documents, detected by
// extension (.xml) or content (a .json EPCISDocument), on
// events.dscsa.document through the publisher's account: a 2,000-event
// document in parts and a manifest, a shipment in XML in one message.
// Each bad event of each is quarantined on its own, and audit.get shows
// its document provenance: the document, the event's position, its
// publisher.
func TestPublishDocument(t *testing.T) {
	natstest.Long(t, "a large document published end to end")
	e := startStack(t, stackOptions{})
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	big, err := set.Document("SHIP-CLI <Müller & Söhne>", 70_000, 2_000, map[int]bool{1_234: true})
	if err != nil {
		t.Fatal(err)
	}
	xml, err := os.ReadFile("../../shared/domain/dscsa/document/testdata/shipment-1.2.xml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := e.dlqctl(t, "", "-o", "json", "publish", writeFile(t, dir, "big.json", big), writeFile(t, dir, "shipment.xml", xml))
	if r.code != 0 {
		t.Fatalf("publish: %s", r)
	}
	res := publishResults(t, r.stdout)
	if len(res) != 2 {
		t.Fatalf("%d results: %s", len(res), r)
	}
	for i, p := range res {
		if p.Subject != subjects.Event(dscsa.Name, subjects.DocumentType) || p.Seq == 0 || p.Document == nil || p.Error != "" ||
			(i == 0) != (p.Document.Parts > 1) {
			t.Errorf("result %d: %+v (document %+v)", i, p, p.Document)
		}
	}
	rep := e.waitQuarantined(t, api.ListRequest{Domain: dscsa.Name}, 2)
	wantIndex := map[string]int{res[0].Document.SHA256: 1_234, res[1].Document.SHA256: 4}
	docOf := map[string]*envelope.Document{} // dlq id → provenance
	for _, it := range rep.Items {
		var show output.Show
		e.jsonOf(t, &show, "show", it.DLQID)
		d := show.State.Document
		docOf[it.DLQID] = d
		if d == nil || wantIndex[d.SHA256] != d.Index || d.Stream != subjects.EventsStream || show.State.Publisher == "" {
			t.Errorf("chain %s: document %+v, publisher %q", it.DLQID, d, show.State.Publisher)
			continue
		}
		// The text view says where in which document, escaped.
		text := e.dlqctl(t, "", "show", it.DLQID)
		want := map[string]string{res[0].Document.SHA256: "event 1,235 of 2,000 of document SHIP-CLI <Müller & Söhne> from ",
			res[1].Document.SHA256: "event 5 of "}[d.SHA256]
		if !strings.Contains(text.stdout, want) || !strings.Contains(text.stdout, "ORIGINAL BYTES") || !strings.Contains(text.stdout, "EVENT HASH ID") {
			t.Errorf("show %s does not say %q:\n%s", it.DLQID, want, text.stdout)
		}
	}

	// One shipment as one thing to look at: find --document lists its
	// quarantined events with their codes, --code narrows them.
	for id, d := range docOf {
		if d == nil {
			continue
		}
		var l api.ListReply
		e.jsonOf(t, &l, "find", "--document", strings.ToUpper(d.SHA256), "--all")
		if len(l.Items) != 1 || l.Items[0].DLQID != id || l.Total != 1 {
			t.Errorf("find --document %s: %+v, want %s alone", d.SHA256, l.Items, id)
			continue
		}
		// Every event of it with its outcome: the bad one quarantined
		// with its code, the others committed (polled: the last batches
		// of a 2,000-event document may still be pending).
		code := l.Items[0].ErrorCode
		natstest.CheckFor(t, time.Minute, 200*time.Millisecond, func() error {
			var l api.ListReply
			e.jsonOf(t, &l, "find", "--document", d.SHA256, "--all")
			if o := l.Document; o == nil || len(o.Events) != d.Count || o.Counts[api.ReconcileOpen] != 1 || o.Counts[api.ReconcileCommitted] != d.Count-1 ||
				o.Events[d.Index].DLQID != id || o.Events[d.Index].ErrorCode != code {
				if o == nil {
					return fmt.Errorf("find --document %s: no outcomes", d.SHA256)
				}
				return fmt.Errorf("find --document %s: %d events, counts %v; want %d events, the one at %d open", d.SHA256, len(o.Events), o.Counts, d.Count, d.Index)
			}
			return nil
		})
		if out := e.ok(t, "find", "--document", d.SHA256, "--code", code).stdout; !strings.Contains(out, id) || !strings.Contains(out, code) {
			t.Errorf("find --document --code %s:\n%s", code, out)
		}
		l = api.ListReply{}
		e.jsonOf(t, &l, "find", "--document", d.SHA256, "--code", "SUBJECT_MISMATCH")
		if code != "SUBJECT_MISMATCH" && len(l.Items) != 0 {
			t.Errorf("find --document --code SUBJECT_MISMATCH: %+v", l.Items)
		}
	}
	if r := e.dlqctl(t, "", "find", "--document", "not-a-sha <&>"); r.code == 0 || !strings.Contains(r.stderr, "BAD_REQUEST") {
		t.Errorf("find --document of no SHA-256: %s", r)
	}

	// Out again: the two quarantined events as one EPCIS 2.0 document.
	out := filepath.Join(dir, "back-to-partner.jsonld")
	e.okAs(t, access.DefaultPerson(access.RoleInspector), "export", "--domain", dscsa.Name, "--reason", "return to trading partner after review", "--out", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := document.Read(b)
	if err != nil || len(doc.Events) != 2 {
		t.Fatalf("export: %v, %d events\n%s", err, len(doc.Events), b)
	}
	// And beside it, each event's original bytes as the partner sent them:
	// the XML element of the XML shipment, the JSON object of the other.
	sent := map[string][]byte{res[0].Document.SHA256: big, res[1].Document.SHA256: xml}
	for id, d := range docOf {
		if d == nil {
			continue
		}
		ext := map[string]string{"json": ".json", "xml": ".xml"}[d.Format]
		got, err := os.ReadFile(filepath.Join(out+".originals", id+ext))
		if err != nil {
			t.Errorf("original of %s: %v", id, err)
			continue
		}
		if want := sent[d.SHA256][d.Offset : d.Offset+d.Length]; !bytes.Equal(got, want) {
			t.Errorf("original of %s (%s):\n%s\nwant the document's bytes %d+%d:\n%s", id, d.Format, got, d.Offset, d.Length, want)
		}
	}
}
