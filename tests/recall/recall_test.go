// Package recall holds the recall walk across services: the real
// validator, quarantiner, redriver and auditor on one embedded server; a
// lot's events quarantined for many failure kinds in two domains are
// found by the lot, held in one hold (the later ones too) and exported
// whole per domain.
package recall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// lot is the recalled lot: a pharmacy lot (at most 20 characters) and
// an FSMA traceability lot code, as the trade writes them.
const lot = `A1&B<2>"Ü" 陈伟`

// env is the stack and its people's connections.
type env struct {
	stack                       *stack.Stack
	pub                         jetstream.JetStream
	inspector, operator, viewer *nats.Conn
}

// conn connects user to the stack until tb's cleanup.
func (e *env) conn(tb testing.TB, user string) *nats.Conn {
	tb.Helper()
	nc, err := e.stack.ConnectAs(user)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

func start(t *testing.T) *env { return startB(t) }

// startB starts the stack until tb's cleanup and connects its people.
func startB(t testing.TB) *env {
	t.Helper()
	cfg := stack.DefaultConfig()
	cfg.DataDir, cfg.AnchorDir = t.TempDir(), t.TempDir()
	cfg.Port, cfg.PasswordCost, cfg.SyncAlways, cfg.MetricsAddr = -1, access.MinBcryptCost, false, ""
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	s, err := stack.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stack: %v", err)
		}
	})
	select {
	case <-s.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("stack exited at start-up: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("stack not ready after 60 s")
	}
	e := &env{stack: s}
	conn := func(user string) *nats.Conn { return e.conn(t, user) }
	e.inspector = conn(access.DefaultPerson(access.RoleInspector))
	e.operator, e.viewer = conn(access.DefaultPerson(access.RoleOperator)), conn(access.DefaultPerson(access.RoleViewer))
	if e.pub, err = jetstream.New(conn(string(access.RolePublisher))); err != nil {
		t.Fatal(err)
	}
	return e
}

// call sends req as nc and decodes the reply into out; a coded refusal is
// returned.
func call(t testing.TB, nc *nats.Conn, subject string, req, out any) *api.Error {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	body, err := endpoint.CallRaw(ctx, nc, subject, b)
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s reply: %v", subject, err)
		}
	}
	return nil
}

// mustCall is call that fails the test on a refusal.
func mustCall(t testing.TB, nc *nats.Conn, subject string, req, out any) {
	t.Helper()
	if ae := call(t, nc, subject, req, out); ae != nil {
		t.Fatalf("%s: %v", subject, ae)
	}
}

// bad is an event of the lot that fails the gate: an invalid example of
// the domain (its file names the code it fails with) given the lot.
type bad struct {
	domain, file string
	code         string
}

// publish publishes the example file of b with the lot and a distinct
// identity n, on the subject its event type names.
func (e *env) publish(t *testing.T, b bad, n int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "schemas", "testdata", b.domain, "invalid", b.file))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	typ := ""
	switch b.domain {
	case "pharmacy":
		doc["lot"], doc["transaction_id"] = lot, fmt.Sprintf("INV-2026-%04d <Müller>", n)
		typ, _ = doc["event_type"].(string)
	case "fsma":
		doc["traceability_lot_code"] = lot
		doc["product_description"] = fmt.Sprintf("Romaine hearts & kale <case %d>", n)
		typ, _ = doc["cte_type"].(string)
	}
	payload, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.pub.Publish(context.Background(), subjects.Event(b.domain, typ), payload); err != nil {
		t.Fatal(err)
	}
}

// lotEvents are the 27 events of the lot: pharmacy and FSMA events, each
// quarantined for its own failure kind (schema, domain rules, time).
var lotEvents = func() []bad {
	ph := []bad{
		{"pharmacy", "INVALID_DEA_SCHEDULE--c-prefix.json", "INVALID_DEA_SCHEDULE"},
		{"pharmacy", "INVALID_QUANTITY--exponent.json", "INVALID_QUANTITY"},
		{"pharmacy", "QUANTITY_SIGN_MISMATCH--dispense-positive.json", "QUANTITY_SIGN_MISMATCH"},
		{"pharmacy", "MISSING_COUNTERPARTY--schedule-ii-transfer-without-counterparty.json", "MISSING_COUNTERPARTY"},
		{"pharmacy", "SCHEMA_VALIDATION_ERROR--lowercase-unit.json", "SCHEMA_VALIDATION_ERROR"},
		{"pharmacy", "SCHEMA_VALIDATION_ERROR--missing-actor.json", "SCHEMA_VALIDATION_ERROR"},
		{"pharmacy", "UNPARSEABLE_EVENT_TIME--no-offset.json", "UNPARSEABLE_EVENT_TIME"},
		{"pharmacy", "INVALID_DEA_NUMBER--counterparty-bad.json", "INVALID_DEA_NUMBER"},
		{"pharmacy", "UNPARSEABLE_EVENT_TIME--date-only.json", "UNPARSEABLE_EVENT_TIME"},
	}
	fs := []bad{
		{"fsma", "INVALID_GLN--bad-check-digit.json", "INVALID_GLN"},
		{"fsma", "INVALID_GLN--non-digits.json", "INVALID_GLN"},
		{"fsma", "INVALID_QUANTITY--zero.json", "INVALID_QUANTITY"},
		{"fsma", "INVALID_QUANTITY--negative-number.json", "INVALID_QUANTITY"},
		{"fsma", "MISSING_KDE--shipping-without-ship-to.json", "MISSING_KDE"},
		{"fsma", "MISSING_KDE--event-time-absent.json", "MISSING_KDE"},
		{"fsma", "MISSING_KDE--receiving-without-ship-from.json", "MISSING_KDE"},
		{"fsma", "MISSING_KDE--reference-document-without-number.json", "MISSING_KDE"},
		{"fsma", "SCHEMA_VALIDATION_ERROR--gln-as-number.json", "SCHEMA_VALIDATION_ERROR"},
	}
	return slices.Concat(ph, ph, fs) // 18 pharmacy, 9 FSMA
}()

// found lists the lot's events (audit.list, every page).
func (e *env) found(t *testing.T, req api.ListRequest) []api.Summary {
	t.Helper()
	var out []api.Summary
	req.Limit = 1000
	for {
		var l api.ListReply
		mustCall(t, e.viewer, api.AuditList, req, &l)
		out = append(out, l.Items...)
		if l.NextCursor == "" {
			return out
		}
		req.Cursor = l.NextCursor
	}
}

// TestRecallIsOneAction: a recalled lot's 27 events, quarantined for 12
// failure kinds in two domains, are found by the lot; one hold on the
// lot holds them all (one placement, however many), and an event of
// the lot quarantined after it too; each domain's export of the lot holds
// every one of its events, and a field a domain does not search by is a
// BAD_REQUEST naming it, never an empty answer.
func TestRecallIsOneAction(t *testing.T) {
	e := start(t)
	for i, b := range lotEvents {
		e.publish(t, b, i)
	}
	var items []api.Summary
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if items = e.found(t, api.ListRequest{Lot: lot}); len(items) != len(lotEvents) {
			return fmt.Errorf("%d of the lot's %d events found", len(items), len(lotEvents))
		}
		return nil
	})
	t.Run("found whatever it failed on", func(t *testing.T) {
		want := map[string]int{}
		for _, b := range lotEvents {
			want[b.domain+":"+b.code]++
		}
		got := map[string]int{}
		for _, it := range items {
			got[it.Domain+":"+it.ErrorCode]++
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s: %d found, want %d (found: %v)", k, got[k], n, got)
			}
		}
	})

	var placed api.HoldReply
	mustCall(t, e.inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: "RECALL-2026-3 <Müller & Söhne>", Reason: "FDA Class II recall of the lot",
		Target: api.HoldTarget{Filter: &api.HoldFilter{Lot: lot}}}, &placed)
	if n := placed.Count + placed.PendingCount + len(placed.Failed); n != len(lotEvents) {
		t.Fatalf("the hold holds %d events at once (%d pending, %d failed), want %d", placed.Count, placed.PendingCount, len(placed.Failed), len(lotEvents))
	}
	holds := func(want int) {
		t.Helper()
		natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			var g api.HoldReply
			mustCall(t, e.viewer, api.HoldGet, api.HoldGetRequest{ID: placed.Hold.ID}, &g)
			if g.Count != want {
				return fmt.Errorf("the hold's records sealed in %d chains (%d pending), want %d", g.Count, g.PendingCount, want)
			}
			return nil
		})
	}
	holds(len(lotEvents))

	t.Run("one hold", func(t *testing.T) {
		var l api.HoldListReply
		mustCall(t, e.viewer, api.HoldList, api.HoldListRequest{}, &l)
		if len(l.Holds) != 1 || l.Holds[0].Count != len(lotEvents) {
			t.Fatalf("%d holds (%+v), want one holding %d", len(l.Holds), l.Holds, len(lotEvents))
		}
		for _, it := range e.found(t, api.ListRequest{Lot: lot}) {
			if !slices.Contains(it.HoldIDs, placed.Hold.ID) {
				t.Errorf("%s (%s) is not marked held", it.DLQID, it.ErrorCode)
			}
		}
	})

	t.Run("a later event of the lot is held too", func(t *testing.T) {
		e.publish(t, bad{"pharmacy", "QUANTITY_SIGN_MISMATCH--receive-negative.json", "QUANTITY_SIGN_MISMATCH"}, 999)
		holds(len(lotEvents) + 1)
	})

	t.Run("exported whole per domain", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			filter api.ExportFilter
			want   int
		}{
			{"pharmacy lot", api.ExportFilter{Domain: "pharmacy", Lot: lot}, 19},
			{"fsma lot", api.ExportFilter{Domain: "fsma", Lot: lot}, 9},
			{"fsma tlc", api.ExportFilter{Domain: "fsma", TLC: lot}, 9},
			{"dscsa lot: none of its events", api.ExportFilter{Domain: "dscsa", Lot: lot}, 0},
			{"every domain", api.ExportFilter{Lot: lot}, 28},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := api.ExportRequest{Filter: tc.filter, Reason: "DEA and FDA recall request 2026-117", Limit: 7}
				chains := map[string]bool{}
				for pages := 0; ; pages++ {
					var rep api.ExportReply
					mustCall(t, e.inspector, api.AuditExport, req, &rep)
					for _, c := range rep.Chains {
						if tc.filter.Domain != "" && c.Domain != tc.filter.Domain || chains[c.DLQID] || len(c.Records) == 0 {
							t.Errorf("chain %s of %s (%d records) in the export", c.DLQID, c.Domain, len(c.Records))
						}
						chains[c.DLQID] = true
					}
					if rep.NextCursor == "" {
						break
					}
					req.Cursor = rep.NextCursor
				}
				if len(chains) != tc.want {
					t.Errorf("%d chains exported, want %d", len(chains), tc.want)
				}
			})
		}
	})

	t.Run("one second person lifts it", func(t *testing.T) {
		// The operator signs the lift with a key of her own (issue #38).
		js, err := jetstream.New(e.conn(t, access.Admin))
		if err != nil {
			t.Fatal(err)
		}
		op := approvaltest.Register(t, js, access.DefaultPerson(access.RoleOperator), access.RoleOperator)
		lift := op.SignLift(t, js, api.HoldLiftRequest{ID: placed.Hold.ID, CaseID: placed.Hold.CaseID, Reason: "recall closed"}, access.RoleOperator, time.Now())
		ae := call(t, e.operator, api.HoldLift, lift, nil)
		if ae == nil || ae.Code != api.ErrApprovalRequired || ae.Approval == nil || ae.Approval.HoldID != placed.Hold.ID {
			t.Fatalf("lift: %v, want one pending approval of the hold", ae)
		}
		var g api.HoldReply
		mustCall(t, e.viewer, api.HoldGet, api.HoldGetRequest{ID: placed.Hold.ID}, &g)
		if g.Hold.Status != api.HoldActive || g.Count != len(lotEvents)+1 {
			t.Errorf("after the lift request: %s holding %d", g.Hold.Status, g.Count)
		}
	})

	t.Run("a field the domain does not search by", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			subject string
			req     any
			field   string
		}{
			{"export", api.AuditExport, api.ExportRequest{Filter: api.ExportFilter{Domain: "pharmacy", TLC: lot}, Reason: "recall"}, "tlc"},
			{"search", api.AuditList, api.ListRequest{Domain: "fsma", NDC: "0409-4888-20"}, "ndc"},
			{"hold", api.HoldPlace, api.HoldPlaceRequest{CaseID: "RECALL-2026-4", Reason: "recall",
				Target: api.HoldTarget{Filter: &api.HoldFilter{Domain: "dscsa", TLC: lot}}}, "tlc"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ae := call(t, e.inspector, tc.subject, tc.req, nil)
				if ae == nil || ae.Code != api.ErrBadRequest || ae.Field != tc.field {
					t.Fatalf("%v, want BAD_REQUEST naming %q", ae, tc.field)
				}
			})
		}
	})
}
