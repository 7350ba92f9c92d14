package validator

import (
	"encoding/json"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/natstest"
)

// TestCheckEndpointDSCSA: validator.check.dscsa.<bizStep> answers an
// AggregationEvent like an ObjectEvent, and names a refused event type.
func TestCheckEndpointDSCSA(t *testing.T) {
	srv := natstest.Start(t)
	startValidator(t, srv, testConfig(), nil)
	nc := srv.Connect(t)
	tests := []struct {
		name, subject, file, dir string
		wantCode                 codes.Code
		wantOrdering             string
	}{
		{name: "ObjectEvent", subject: "commissioning", dir: "valid", file: "commissioning-sgtin.json",
			wantOrdering: "00614141123452.10016550749981"},
		{name: "AggregationEvent packing", subject: "packing", dir: "valid", file: "packing-cases-into-sscc-pallet.json",
			wantOrdering: "006141411234567890"},
		{name: "AggregationEvent shipping", subject: "shipping", dir: "valid", file: "shipping-sscc-pallet-observe.json",
			wantOrdering: "006141411234567890"},
		{name: "TransformationEvent", subject: "packing", dir: "invalid", file: "UNSUPPORTED_EVENT_TYPE--transformation-event.json",
			wantCode: dscsa.UnsupportedEventType},
		{name: "bad SSCC", subject: "packing", dir: "invalid", file: "INVALID_PARENT_ID--sscc-digital-link-check-digit.json",
			wantCode: dscsa.InvalidParentID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, data := example(t, "dscsa", tt.dir, tt.file)
			resp, err := nc.Request("validator.check.dscsa."+tt.subject, data, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantCode != "" {
				if got := resp.Header.Get("Nats-Service-Error-Code"); got != string(tt.wantCode) {
					t.Fatalf("error code = %q, want %s", got, tt.wantCode)
				}
				return
			}
			var r checkReply
			if err := json.Unmarshal(resp.Data, &r); err != nil || !r.OK || r.Envelope == nil ||
				!strings.HasPrefix(r.Envelope.IdempotencyKey, "dscsa_") || r.Envelope.OrderingKey != tt.wantOrdering {
				t.Fatalf("reply %s (%v)", resp.Data, err)
			}
		})
	}
}
