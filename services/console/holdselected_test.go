package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
)

// TestHoldTheSelectedAllOrNone: "hold the selected" of the Records list
// places one hold on every record selected, more than the placement
// burst of one person (27 records, burst 10), or none at all when one of
// them cannot be held; the hold lists them all.
func TestHoldTheSelectedAllOrNone(t *testing.T) {
	e := startEnv(t)
	js, err := jetstream.New(e.srv.ConnectAs(t, access.Admin))
	if err != nil {
		t.Fatal(err)
	}
	lot := fmt.Sprintf("RECALL-%d-Müller & Söhne <\"Ü\">", time.Now().UnixNano())
	var ids []string
	for i := range 27 {
		ids = append(ids, quarantineDoc(t, js, pharmacy.Name, "receive-schedule-ii-ndc-4-4-2.json",
			map[string]any{"lot": lot, "transaction_id": fmt.Sprintf("TX-陈伟-%02d", i)}))
	}
	c := e.newConsole(t, nil)
	in := newClient(t, c, "127.0.0.96")
	person := access.DefaultPerson(access.RoleInspector)
	token := in.mustLogin(person, e.password(person))
	list := "/records?" + url.Values{"lot": {lot}}.Encode()
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		page := in.do(http.MethodGet, list, nil).Body.String()
		for _, id := range ids {
			if !strings.Contains(page, "/records/"+id) {
				return fmt.Errorf("%s not listed yet", id)
			}
		}
		return nil
	})
	holds := func() []api.HeldHold {
		t.Helper()
		nc := e.srv.ConnectAs(t, access.DefaultPerson(access.RoleViewer))
		rep, err := endpoint.Call[api.HoldListRequest, api.HoldListReply](context.Background(), nc, api.HoldList, api.HoldListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []api.HeldHold
		for _, h := range rep.Holds {
			if strings.HasPrefix(h.Hold.CaseID, "CASE-SEL-") {
				out = append(out, h)
			}
		}
		return out
	}
	bulk := func(caseID string, sel []string) string {
		t.Helper()
		w := in.do(http.MethodPost, "/records/bulk", url.Values{"csrf": {token}, "action": {"hold"}, "dlq_id": sel, "back": {list},
			"case_id": {caseID}, "reason": {"recall of lot " + lot}})
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != list {
			t.Fatalf("%d %q", w.Code, w.Header().Get("Location"))
		}
		return in.do(http.MethodGet, list, nil).Body.String()
	}

	for _, tc := range []struct {
		name, caseID string
		sel          []string
		notice       string
		held         int // events of the case's hold; -1: no hold
	}{
		{"one selected record unknown: none held", "CASE-SEL-NONE", append(slices.Clone(ids), "pharmacy_00000000000000000000000000000000"),
			"0 of 28 selected records held: none is held unless all are", -1},
		{"all 27 selected: one hold", "CASE-SEL-ALL", ids, "27 of 27 selected records held, in one hold", 27},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := bulk(tc.caseID, tc.sel)
			if !strings.Contains(page, tc.notice) {
				t.Fatalf("no %q on the page:\n%s", tc.notice, page)
			}
			natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				var mine []api.HeldHold
				for _, h := range holds() {
					if h.Hold.CaseID == tc.caseID {
						mine = append(mine, h)
					}
				}
				switch {
				case tc.held < 0 && len(mine) != 0:
					return fmt.Errorf("%d holds placed, want none", len(mine))
				case tc.held >= 0 && len(mine) != 1:
					return fmt.Errorf("%d holds, want one", len(mine))
				case tc.held >= 0 && mine[0].Count+mine[0].PendingCount != tc.held:
					// No quarantiner runs here: the records stay pending,
					// the events held all the same (hold.Refuse).
					return fmt.Errorf("the hold holds %d events (%d pending), want %d", mine[0].Count, mine[0].PendingCount, tc.held)
				}
				return nil
			})
		})
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		page := in.do(http.MethodGet, list, nil).Body.String()
		if n := strings.Count(page, `<tr class="held">`); n != 27 {
			return fmt.Errorf("%d held rows", n)
		}
		return nil
	})

	t.Run("a lot hold from the Holds page", func(t *testing.T) {
		w := in.do(http.MethodPost, "/holds", url.Values{"csrf": {token}, "domain": {"pharmacy"}, "lot": {lot}, "ndc": {"0409-48B8-20"},
			"case_id": {"CASE-SEL-BADNDC"}, "reason": {"recall"}})
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "ndc") {
			t.Errorf("a bad NDC: %d", w.Code)
		}
		w = in.do(http.MethodPost, "/holds", url.Values{"csrf": {token}, "domain": {"pharmacy"}, "lot": {lot},
			"case_id": {"CASE-SEL-LOT"}, "reason": {"FDA recall of the lot"}})
		if w.Code != http.StatusSeeOther {
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
		var mine *api.HeldHold
		for _, h := range holds() {
			if h.Hold.CaseID == "CASE-SEL-LOT" {
				mine = &h
			}
		}
		if mine == nil || mine.Hold.Target.Filter == nil || mine.Hold.Target.Filter.Lot != lot {
			t.Fatalf("the lot hold: %+v", mine)
		}
		// No quarantiner runs here (the records stay pending): the
		// auditor names the hold on every record of the lot all the same.
		nc := e.srv.ConnectAs(t, access.DefaultPerson(access.RoleViewer))
		l, err := endpoint.Call[api.ListRequest, api.ListReply](context.Background(), nc, api.AuditList, api.ListRequest{Lot: lot})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, it := range l.Items {
			if slices.Contains(it.HoldIDs, mine.Hold.ID) {
				n++
			}
		}
		if n != 27 || len(l.Items) != 27 {
			t.Errorf("%d of %d records of the lot held by the lot hold, want 27", n, len(l.Items))
		}
		if page := in.do(http.MethodGet, "/holds", nil).Body.String(); !strings.Contains(page, "filter domain pharmacy lot") {
			t.Errorf("the Holds page does not show the lot hold")
		}
	})
}
