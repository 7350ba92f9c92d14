package auditor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// TestReconcileEmptyAndBadRanges: a range that holds no events answers at
// once, a bad range is a BAD_REQUEST naming the field, and a normal
// reconciliation still answers after them (issue 15, bug 1: each of these
// hung, and every later reconciliation with it).
func TestReconcileEmptyAndBadRanges(t *testing.T) {
	e := newEnv(t)
	if _, err := e.js.Publish(context.Background(), "events.pharmacy.dispense", []byte(`{"not":"an event"}`)); err != nil {
		t.Fatal(err)
	}
	a := e.startAuditor(t, testConfig(), nil)
	_ = a
	now := time.Now().UTC()
	for _, tc := range []struct {
		name  string
		body  string
		code  string
		field string
	}{
		{"from now", `{"from":"` + now.Add(time.Second).Format(time.RFC3339Nano) + `"}`, "", ""},
		{"unknown domain", `{"domain":"nosuch"}`, api.ErrBadRequest, "domain"},
		{"from after to", `{"from":"` + now.Format(time.RFC3339Nano) + `","to":"` + now.Add(-time.Hour).Format(time.RFC3339Nano) + `"}`, api.ErrBadRequest, "to"},
		{"normal", `{"grace":"0s"}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			data, err := endpoint.CallRaw(ctx, e.nc, api.AuditReconcile, []byte(tc.body))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("reconcile %s: %v", tc.body, err)
				}
				var rep api.ReconcileReply
				if err := json.Unmarshal(data, &rep); err != nil {
					t.Fatal(err)
				}
				if tc.name == "normal" && rep.Events != 1 {
					t.Errorf("events = %d, want 1", rep.Events)
				}
				return
			}
			if got := api.CodeOf(err); got != tc.code || api.FieldOf(err) != tc.field {
				t.Fatalf("reconcile %s: %v, want %s naming %q", tc.body, err, tc.code, tc.field)
			}
		})
	}
}

// TestBadRequestsNameTheField: each bad request to an auditor endpoint is a
// BAD_REQUEST naming the member at fault (issue 15, bug 8: unknown members
// and bad enum values were ignored, or answered "not valid JSON").
func TestBadRequestsNameTheField(t *testing.T) {
	e := newEnv(t)
	e.startAuditor(t, testConfig(), nil)
	for _, tc := range []struct {
		name, subject, body, field string
	}{
		{"list unknown member", api.AuditList, `{"domian":"fsma"}`, "domian"},
		{"list bad status", api.AuditList, `{"status":"bogus"}`, "status"},
		{"list bad time", api.AuditList, `{"from":"notatime"}`, "from"},
		{"list unknown domain", api.AuditList, `{"domain":"nosuch"}`, "domain"},
		{"list unknown class", api.AuditList, `{"class":"nosuch"}`, "class"},
		{"list unknown code", api.AuditList, `{"code":"NOSUCH"}`, "code"},
		{"list limit", api.AuditList, `{"limit":5000}`, "limit"},
		{"list type", api.AuditList, `{"limit":"ten"}`, "limit"},
		{"reconcile bad time", api.AuditReconcile, `{"to":"notatime"}`, "to"},
		{"reconcile grace", api.AuditReconcile, `{"grace":"soon"}`, "grace"},
		{"reconcile unknown member", api.AuditReconcile, `{"form":"2025-01-01T00:00:00Z"}`, "form"},
		{"groups unknown domain", api.AuditGroups, `{"domain":"nosuch"}`, "domain"},
		{"groups samples", api.AuditGroups, `{"samples":-1}`, "samples"},
		{"groups by an unknown grouping", api.AuditGroups, `{"by":"party<&>"}`, "by"},
		{"get unknown member", api.AuditGet, `{"dlq_id":"x","payload":true}`, "payload"},
		{"get payload without reason", api.AuditGet, `{"dlq_id":"x","include_payload":true}`, "reason"},
		{"get payload blank reason", api.AuditGet, `{"dlq_id":"x","include_payload":true,"reason":"  "}`, "reason"},
		{"export without reason", api.AuditExport, `{"filter":{}}`, "reason"},
		{"export unknown member", api.AuditExport, `{"filter":{"lots":"x"},"reason":"r"}`, "filter.lots"},
		{"export field of another domain", api.AuditExport, `{"filter":{"domain":"pharmacy","tlc":"TLC-1"},"reason":"r"}`, "tlc"},
		{"export bad range", api.AuditExport, `{"filter":{"from":"2025-02-01T00:00:00Z","to":"2025-01-01T00:00:00Z"},"reason":"r"}`, "filter.to"},
		{"export bad time", api.AuditExport, `{"filter":{"from":"notatime"},"reason":"r"}`, "filter.from"},
		{"export bad status", api.AuditExport, `{"filter":{"status":"bogus"},"reason":"r"}`, "filter.status"},
		{"export unknown domain", api.AuditExport, `{"filter":{"domain":"nosuch"},"reason":"r"}`, "filter.domain"},
		{"export limit", api.AuditExport, `{"reason":"r","limit":5000}`, "limit"},
		{"export bad cursor", api.AuditExport, `{"reason":"r","cursor":"zzz"}`, "cursor"},
		{"access bad range", api.AuditAccess, `{"since":"2025-02-01T00:00:00Z","until":"2025-01-01T00:00:00Z"}`, "until"},
		{"access unknown member", api.AuditAccess, `{"who":"bob"}`, "who"},
		{"access bad cursor", api.AuditAccess, `{"cursor":"zzz"}`, "cursor"},
		{"verify max problems", api.AuditVerify, `{"max_problems":-1}`, "max_problems"},
		{"verify anchor without key", api.AuditVerify, `{"anchor":"{}"}`, "pubkey"},
		{"checkpoint unknown member", api.AuditCheckpoint, `{"now":true}`, "now"},
		{"not JSON", api.AuditList, `{"domain":`, ""},
		{"two values", api.AuditList, `{} {}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := endpoint.CallRaw(ctx, e.nc, tc.subject, []byte(tc.body))
			if api.CodeOf(err) != api.ErrBadRequest || api.FieldOf(err) != tc.field {
				t.Fatalf("%s %s: %v, want BAD_REQUEST naming %q", tc.subject, tc.body, err, tc.field)
			}
			if e := api.AsError(err); e != nil && (strings.Contains(e.Message, "notatime") || strings.Contains(e.Message, "bogus")) {
				t.Errorf("message echoes a value: %q", e.Message)
			}
		})
	}
}
