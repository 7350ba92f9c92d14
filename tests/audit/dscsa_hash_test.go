package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

// TestEventHashIDInAudit: a DSCSA aggregation that fails validation is
// quarantined with its CBV 2.0 event hash ID in its first record and in
// the chain's state, as audit.get answers them.
func TestEventHashIDInAudit(t *testing.T) {
	e := startHoldEnv(t, streams.DefaultOptions())
	data, err := fs.ReadFile(schemas.FS, "testdata/dscsa/invalid/INVALID_PARENT_ID--sscc-digital-link-check-digit.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := gate.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := eventhash.ID(doc, nil)
	if _, err := e.pub.Publish(context.Background(), "events.dscsa.packing", data); err != nil {
		t.Fatal(err)
	}
	var id string
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		var l api.ListReply
		request(t, e.inspector, api.AuditList, api.ListRequest{}, &l)
		i := slices.IndexFunc(l.Items, func(s api.Summary) bool { return s.Domain == "dscsa" })
		if i < 0 {
			return fmt.Errorf("not quarantined yet (%d items)", len(l.Items))
		}
		id = l.Items[i].DLQID
		return nil
	})
	g, recs := chainOf(t, e.inspector, id)
	if g.State.EventHashID != want || len(recs) == 0 || recs[0].EventHashID != want {
		t.Fatalf("event_hash_id: state %q, record 0 %+v; want %q", g.State.EventHashID, recs, want)
	}
	if recs[0].ErrorCode != "INVALID_PARENT_ID" {
		t.Errorf("error code %s", recs[0].ErrorCode)
	}
}

// TestDocumentEventHashIDsAreTheReferences: the validator's dry run of an
// EPCIS document (validator.check.dscsa.document) names, for every event,
// the event hash ID the reference implementation computes for it: over
// the documents of the eventhash package's differential test (a
// distributor's JSON shipment, a wholesaler's EPCIS 2.0 XML sensor data,
// a pharmacy's EPCIS 1.2 XML with a bare DOCTYPE, a query result), whatever
// each event's outcome at the gate.
func TestDocumentEventHashIDsAreTheReferences(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	nc := srv.Connect(t)
	v, err := validator.New(srv.Connect(t), validator.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "validator", v.Run)
	natstest.WaitServing(t, nc, access.Validator)
	const dir = "../../shared/domain/dscsa/eventhash/testdata/differential/"
	tests := []struct{ name, file string }{
		{"JSON shipment", "distributor-shipment.jsonld"},
		{"EPCIS 2.0 XML with sensor data", "wholesaler-sensor-2.0.xml"},
		{"EPCIS 1.2 XML with a bare DOCTYPE", "pharmacy-receipt-1.2.xml"},
		{"query document", "query-result.jsonld"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(dir + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(dir + strings.TrimSuffix(tt.file, filepath.Ext(tt.file)) + ".hashes")
			if err != nil {
				t.Fatal(err)
			}
			msg, err := nc.Request("validator.check."+dscsa.Name+".document", data, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
				t.Fatalf("refused: %s %s", code, msg.Header.Get("Nats-Service-Error"))
			}
			var rep struct {
				Events []struct {
					Index       int    `json:"index"`
					EventHashID string `json:"event_hash_id"`
					Code        string `json:"code"`
				} `json:"events"`
			}
			if err := json.Unmarshal(msg.Data, &rep); err != nil {
				t.Fatal(err)
			}
			wantIDs := strings.Fields(string(want))
			if len(rep.Events) != len(wantIDs) {
				t.Fatalf("%d events, want %d", len(rep.Events), len(wantIDs))
			}
			for i, ev := range rep.Events {
				if ev.EventHashID != wantIDs[i] {
					t.Errorf("event %d (code %q): event_hash_id %s, want the reference's %s", i, ev.Code, ev.EventHashID, wantIDs[i])
				}
			}
		})
	}
}
