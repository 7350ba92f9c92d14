package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
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
	for _, it := range rep.Items {
		var show output.Show
		e.jsonOf(t, &show, "show", it.DLQID)
		d := show.State.Document
		if d == nil || wantIndex[d.SHA256] != d.Index || d.Stream != subjects.EventsStream || show.State.Publisher == "" {
			t.Errorf("chain %s: document %+v, publisher %q", it.DLQID, d, show.State.Publisher)
		}
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
}
