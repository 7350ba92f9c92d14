package audit

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/api"
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
