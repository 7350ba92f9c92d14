package validator

import (
	"encoding/json"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/natstest"
)

// TestCheckDocument: validator.check.dscsa.document answers, for a
// shipment document in JSON and in EPCIS 1.2 XML, every event in
// document order (one of seven bad), the same keys for the twins, and a
// malformed document with MALFORMED_DOCUMENT.
func TestCheckDocument(t *testing.T) {
	srv := natstest.Start(t)
	startValidator(t, srv, testConfig(), nil)
	nc := srv.Connect(t)
	var keys []string
	for _, f := range []struct{ file, format string }{{"shipment.json", "json"}, {"shipment-1.2.xml", "xml"}} {
		data, err := os.ReadFile("../../shared/domain/dscsa/document/testdata/" + f.file)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := nc.Request(documentCheckSubject, data, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var rep documentReply
		if err := json.Unmarshal(resp.Data, &rep); err != nil {
			t.Fatalf("%s: %v: %s", f.file, err, resp.Data)
		}
		if rep.OK || rep.Format != f.format || len(rep.Events) != 7 {
			t.Fatalf("%s: ok %v, format %q, %d events", f.file, rep.OK, rep.Format, len(rep.Events))
		}
		var got []string
		for i, ev := range rep.Events {
			if ev.Index != i || !strings.HasPrefix(ev.EventHashID, "ni:///sha-256;") {
				t.Errorf("%s: event %d: %+v", f.file, i, ev)
			}
			switch {
			case i == 4:
				if ev.OK || ev.Code != dscsa.InvalidParentID || ev.Error == "" || ev.Envelope != nil {
					t.Errorf("%s: event 4: %+v", f.file, ev)
				}
			case !ev.OK || ev.Envelope == nil || ev.Envelope.EventHashID != ev.EventHashID:
				t.Errorf("%s: event %d: %+v", f.file, i, ev)
			default:
				got = append(got, ev.Envelope.IdempotencyKey)
			}
		}
		if keys == nil {
			keys = got
		} else if strings.Join(got, ",") != strings.Join(keys, ",") {
			t.Errorf("XML keys %v, JSON keys %v", got, keys)
		}
	}
	resp, err := nc.Request(documentCheckSubject, []byte(`<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Nats-Service-Error-Code"); got != string(dscsa.MalformedDocument) {
		t.Fatalf("error code %q, want MALFORMED_DOCUMENT", got)
	}
}
