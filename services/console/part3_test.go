package console

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
)

// TestRecordsListHeldBulkAndWords: the Records list has human headers,
// keeps each id whole (full value in its title, a copy button), marks a
// held record, and acts on the selected records: "drain" opens the plan
// of exactly those ids, "hold" places one hold on all of them; the Groups page
// links each group to its prefilled drain plan.
func TestRecordsListHeldBulkAndWords(t *testing.T) {
	e := startEnv(t)
	js, err := jetstream.New(e.srv.ConnectAs(t, access.Admin))
	if err != nil {
		t.Fatal(err)
	}
	lot := fmt.Sprintf("BULK-%d-Müller&<x>", time.Now().UnixNano())
	a := quarantineDoc(t, js, pharmacy.Name, "receive-schedule-ii-ndc-4-4-2.json", map[string]any{"lot": lot, "transaction_id": "TX-BULK-A"})
	b := quarantineDoc(t, js, pharmacy.Name, "receive-schedule-ii-ndc-4-4-2.json", map[string]any{"lot": lot, "transaction_id": "TX-BULK-B"})
	c := e.newConsole(t, nil)
	op := newClient(t, c, "127.0.0.97")
	token := op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	list := "/records?" + url.Values{"lot": {lot}}.Encode()
	var page string
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		page = op.do(http.MethodGet, list, nil).Body.String()
		if !strings.Contains(page, "/records/"+a) || !strings.Contains(page, "/records/"+b) {
			return fmt.Errorf("not listed yet")
		}
		return nil
	})
	for _, want := range []string{">Record</a>", ">Error code</a>", ">Quarantined</a>", `title="` + a + `"`, `data-copy="` + a + `"`,
		`name="dlq_id" value="` + a + `"`, `id="bulk-drain"`, `id="bulk-hold"`, `<time class="ts"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the Records list lacks %q", want)
		}
	}
	for _, raw := range []string{">dlq_id</a>", ">error_code</a>", ">quarantined_at</a>"} {
		if strings.Contains(page, raw) {
			t.Errorf("a raw field name as a header: %s", raw)
		}
	}

	t.Run("bulk drain opens the plan of the selected ids", func(t *testing.T) {
		w := op.do(http.MethodPost, "/records/bulk", url.Values{"csrf": {token}, "action": {"drain"}, "dlq_id": {a, b}, "back": {list}})
		loc, _ := url.Parse(w.Header().Get("Location"))
		if w.Code != http.StatusSeeOther || loc == nil || loc.Path != "/drains/plan" || strings.Join(loc.Query()["dlq_id"], ",") != a+","+b {
			t.Fatalf("%d %q", w.Code, w.Header().Get("Location"))
		}
		f := parseDrainForm(httptestGet(loc.String()))
		req, err := f.request(true)
		if err != nil || strings.Join(req.Filter.DLQIDs, ",") != a+","+b {
			t.Errorf("the plan's filter %+v (%v)", req.Filter, err)
		}
	})
	t.Run("bulk hold holds the selected records in one hold and the list marks them", func(t *testing.T) {
		w := op.do(http.MethodPost, "/records/bulk", url.Values{"csrf": {token}, "action": {"hold"}, "dlq_id": {a, b}, "back": {list},
			"case_id": {"CASE-BULK-Ü"}, "reason": {"recall of lot " + lot}})
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != list {
			t.Fatalf("%d %q", w.Code, w.Header().Get("Location"))
		}
		page := op.do(http.MethodGet, list, nil).Body.String()
		if !strings.Contains(page, "2 of 2 selected records held, in one hold") {
			t.Errorf("no outcome:\n%s", page)
		}
		natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			page = op.do(http.MethodGet, list, nil).Body.String()
			if n := strings.Count(page, `<tr class="held">`); n != 2 {
				return fmt.Errorf("%d held rows", n)
			}
			return nil
		})
	})
	t.Run("the Overview counts the held records", func(t *testing.T) {
		page := op.do(http.MethodGet, "/", nil).Body.String()
		if !strings.Contains(page, `id="held-records"`) || !strings.Contains(page, "held records (") {
			t.Errorf("the Overview does not mark held records:\n%s", page)
		}
	})
	t.Run("bulk without a selection", func(t *testing.T) {
		w := op.doFollow(http.MethodPost, "/records/bulk", url.Values{"csrf": {token}, "action": {"drain"}, "back": {list}})
		if !strings.Contains(w.Body.String(), "Nothing selected") {
			t.Errorf("%d", w.Code)
		}
	})
	t.Run("drain this group", func(t *testing.T) {
		page := op.do(http.MethodGet, "/groups?domain=pharmacy", nil).Body.String()
		if !strings.Contains(page, `class="drain-group"`) || !strings.Contains(page, "validation=on") || !strings.Contains(page, "domain=pharmacy") {
			t.Errorf("no drain link for the group:\n%s", page)
		}
	})
}

// httptestGet is a GET request of path (for the form parsers).
func httptestGet(path string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, path, nil)
	return r
}

// TestDrainURL: "drain this group" prefills the group's domain, code,
// class and party; poison is never drained.
func TestDrainURL(t *testing.T) {
	for _, tc := range []struct{ name, domain, code, class, party, want string }{
		{"exhausted", "pharmacy", "DOWNSTREAM_UNAVAILABLE", "exhausted", "", "/drains/plan?codes=DOWNSTREAM_UNAVAILABLE&domain=pharmacy&exhausted=on"},
		{"validation of a party", "fsma", "SCHEMA_VALIDATION", "validation", "Müller & Söhne", "/drains/plan?codes=SCHEMA_VALIDATION&domain=fsma&party=M%C3%BCller+%26+S%C3%B6hne&validation=on"},
		{"poison", "dscsa", "X", "poison", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := drainURL(tc.domain, tc.code, tc.class, tc.party); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

// TestDrainStatusInWords: a finished drain says what it committed and why
// the rest was not, never a bare "completed" over nothing; a running one
// shows what is in flight; the rate line goes once the drain is done.
func TestDrainStatusInWords(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   api.DrainState
		want string
	}{
		{"nothing committed: held", api.DrainState{Status: api.DrainCompleted, DrainCounts: api.DrainCounts{Selected: 5, Held: 5, HeldByHold: 3}},
			"completed: nothing committed — 3 held by a legal hold, 2 held behind an earlier event of their key"},
		{"nothing committed: failed and skipped", api.DrainState{Status: api.DrainCompleted, DrainCounts: api.DrainCounts{Selected: 3, Replayed: 2, ReplayFailed: 2, Skipped: 1}},
			"completed: nothing committed — 2 failed again, 1 skipped (no longer redrivable)"},
		{"nothing selected", api.DrainState{Status: api.DrainCompleted}, "completed: nothing was selected"},
		{"all committed", api.DrainState{Status: api.DrainCompleted, DrainCounts: api.DrainCounts{Selected: 4, Replayed: 4, Committed: 4}}, "completed: 4 committed"},
		{"some", api.DrainState{Status: api.DrainCancelled, DrainCounts: api.DrainCounts{Selected: 9, Replayed: 3, Committed: 2, SkippedDuplicate: 1}},
			"cancelled: 2 committed; 1 already committed (duplicates)"},
		{"running with replays in flight", api.DrainState{Status: api.DrainRunning, DrainCounts: api.DrainCounts{Selected: 79, Replayed: 5}}, "running, 5 in flight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := drainStatus(tc.st); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	rn := &renderer{pages: p}
	running, err := rn.fragment("drain", "progress", &drainData{State: api.DrainState{Status: api.DrainRunning, CurrentRate: 0, DrainCounts: api.DrainCounts{Selected: 79, Replayed: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(running, `<span id="drain-inflight">5</span> in flight`) || !strings.Contains(running, "0 of 79, 5 in flight") {
		t.Errorf("a running canary does not show its replays in flight:\n%s", running)
	}
	done, err := rn.fragment("drain", "progress", &drainData{Done: true, State: api.DrainState{Status: api.DrainCompleted, CurrentRate: 3.5, DrainCounts: api.DrainCounts{Selected: 2, Held: 2, HeldByHold: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(done, `id="drain-rate"`) || !strings.Contains(done, "nothing committed — 2 held by a legal hold") {
		t.Errorf("a finished drain:\n%s", done)
	}
}

// TestRecordPageProvenanceAndEditor: a record from a document shows its
// provenance, every partner-given text escaped; the correction editor is
// on the page before any reveal (its check asks the reason of the
// original's read).
func TestRecordPageProvenanceAndEditor(t *testing.T) {
	raw := []byte(`{"state":{"dlq_id":"dscsa_x"},"records":[],"document":{"id":"urn:uuid:doc-<1>","sha256":"ab12","format":"xml","index":4811,"count":10000,
		"sender":"urn:epc:id:sgln:0614141.00001.0 <script>alert(1)</script>","receiver":"Pharmacie Saint-Étienne & Fils","created":"2026-03-14T15:42:10Z","stream":"EVENTS","seq":77,"offset":1024,"length":512}}`)
	doc := documentOf(raw, nil)
	if doc == nil || doc.Position() != "event 4,812 of 10,000" {
		t.Fatalf("document %+v", doc)
	}
	if fromRecord := documentOf([]byte(`{"state":{}}`), []byte(`{"document":{"id":"d-1","index":0,"count":0}}`)); fromRecord == nil || fromRecord.Position() != "event 1 (of a document whose size is not known)" {
		t.Errorf("from the record: %+v", fromRecord)
	}
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	d := &recordData{ID: "dscsa_x", State: record.State{DLQID: "dscsa_x", Domain: "dscsa", Status: record.StatusOpen, Class: record.ClassValidation}, Document: doc}
	v := &view{Title: "Record", User: "amara.okafor", Role: "operator", CSRF: "t", ReadsPayloads: true,
		Allowed: map[string]bool{api.Redrive: true}, Data: d}
	var b bytes.Buffer
	if err := p.byName["record"].ExecuteTemplate(&b, "layout", v); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, `id="provenance"`) || !strings.Contains(page, "event 4,812 of 10,000 of document") ||
		!strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(page, "<script>alert") ||
		!strings.Contains(page, "Pharmacie Saint-Étienne &amp; Fils") {
		t.Errorf("provenance:\n%s", page)
	}
	if !strings.Contains(page, `id="correction"`) || !strings.Contains(page, `id="check-reveal-reason"`) {
		t.Errorf("the correction editor is hidden until a reveal:\n%s", page)
	}
}

// TestHoldListCounts: the hold list says how many records a hold holds
// and folds a long list away, instead of a wall of ids.
func TestHoldListCounts(t *testing.T) {
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("pharmacy_%032d", i))
	}
	for _, tc := range []struct {
		name    string
		ids     []string
		want    string
		details bool
	}{
		{"none", nil, "none yet", false},
		{"a few", ids[:2], "2: ", false},
		{"many", ids, "<strong>40</strong> records", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &holdsData{Holds: []api.HeldHold{{Hold: api.Hold{ID: "hold-1", CaseID: "CASE-Ü", Status: api.HoldActive, Target: api.HoldTarget{PartyID: "Müller & Söhne"}}, DLQIDs: tc.ids}}}
			var b bytes.Buffer
			if err := p.byName["holds"].ExecuteTemplate(&b, "layout", &view{Title: "Holds", User: "ines.duarte", Role: "inspector", Allowed: map[string]bool{}, Data: d}); err != nil {
				t.Fatal(err)
			}
			page := b.String()
			if !strings.Contains(page, tc.want) || strings.Contains(page, "<details>") != tc.details {
				t.Errorf("the held records cell:\n%s", page[strings.Index(page, "<tbody>"):])
			}
		})
	}
}
