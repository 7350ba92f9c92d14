package console

import (
	"bytes"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
)

// renderPage renders page name's layout with data for an operator who
// may start drains, and an optional coded refusal.
func renderPage(t *testing.T, name string, data any, refusal *api.Error) string {
	t.Helper()
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	v := &view{Title: name, User: "amara.okafor", Role: "operator", CSRF: "t", Allowed: map[string]bool{api.DrainStart: true, api.DrainCancel: true}, Data: data, APIError: refusal}
	var b bytes.Buffer
	if err := p.byName[name].ExecuteTemplate(&b, "layout", v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestPlanShowsGuardHoldsOverlaps: the plan page shows the guard in force
// (the default, one of the operator's, or off with its risk in words), a
// "no guard" checkbox, the holds that hold selected records (hold, case,
// count) and the other drains that select the same records; a
// DRAIN_OVERLAP refusal lists those drains with links, not a bare code.
func TestPlanShowsGuardHoldsOverlaps(t *testing.T) {
	rate := 0.25
	overlap := []api.DrainOverlap{{DrainID: "drain-<other>", Status: api.DrainRunning, StartedBy: "jonas.müller", Records: 7}}
	for _, tc := range []struct {
		name    string
		plan    api.DrainPlan
		refusal *api.Error
		want    []string
		not     []string
	}{
		{"default guard", api.DrainPlan{Selected: 3, Guard: &api.DrainGuard{Default: true, Canary: 10, MaxFailureRate: 0.1, PauseWindow: 100}},
			nil, []string{"a canary of 10 replayed first; auto-pause above 10% re-failures over the last 100 outcomes (the default guard)", `name="no_guard"`, `id="d-noguard-risk"`},
			[]string{`id="plan-guard-off"`, `id="plan-holds"`, `id="h-plan-overlaps"`}},
		{"own guard", api.DrainPlan{Selected: 3, Guard: &api.DrainGuard{MaxFailureRate: rate, PauseWindow: 40}},
			nil, []string{"auto-pause above 25% re-failures over the last 40 outcomes."}, []string{"default guard", "canary of"}},
		{"no guard", api.DrainPlan{Selected: 3, Guard: &api.DrainGuard{Off: true}},
			nil, []string{"off: the drain never pauses itself", `id="plan-guard-off"`, "become poison"}, nil},
		{"holds", api.DrainPlan{Selected: 5, HeldByHold: 4, Guard: &api.DrainGuard{Off: true},
			Holds: []api.HoldCount{{HoldID: "hold-1", CaseID: "CASE Müller & Söhne <1>", Records: 3}, {HoldID: "hold-2", Records: 1}}},
			nil, []string{`id="plan-holds"`, "4 selected events are under a legal hold", `href="/holds#hold-hold-1"`, "CASE Müller &amp; Söhne &lt;1&gt;", "<td>3</td>", "<td>1</td>"},
			[]string{"CASE Müller & Söhne <1>"}},
		{"overlaps", api.DrainPlan{Selected: 9, Guard: &api.DrainGuard{Off: true}, Overlaps: overlap},
			nil, []string{`id="h-plan-overlaps"`, `href="/drains/drain-%3cother%3e"`, "jonas.müller", "<td>running</td>", "<td>7</td>"}, []string{`id="overlap-refusal"`}},
		{"overlap refusal", api.DrainPlan{Selected: 9, Guard: &api.DrainGuard{Off: true}, Overlaps: overlap},
			&api.Error{Code: api.ErrDrainOverlap, Message: "another drain already selects records of this drain", Overlaps: overlap},
			[]string{`id="overlap-refusal"`, "Not started", `class="id whole overlap-drain" href="/drains/drain-%3cother%3e"`, "jonas.müller"},
			[]string{`id="h-plan-overlaps"`}}, // listed once, in the refusal
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := tc.plan
			page := renderPage(t, "plan", &planData{Form: drainForm{Exhausted: true, PlanToken: "tok"}, Plan: &plan}, tc.refusal)
			for _, want := range tc.want {
				if !strings.Contains(page, want) {
					t.Errorf("the plan lacks %q", want)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(page, not) {
					t.Errorf("the plan shows %q", not)
				}
			}
		})
	}
	t.Run("refusal without a fresh plan", func(t *testing.T) {
		page := renderPage(t, "plan", &planData{Form: drainForm{Exhausted: true}},
			&api.Error{Code: api.ErrDrainOverlap, Message: "another drain", Overlaps: overlap})
		if !strings.Contains(page, `id="overlap-refusal"`) || !strings.Contains(page, `href="/drains/drain-%3cother%3e"`) {
			t.Errorf("the refusal's drains are not listed:\n%s", page)
		}
	})
}

// TestNoGuardSent: the "no guard" checkbox sends no_guard, kept across
// "dry run again" (the plan's URL).
func TestNoGuardSent(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		want        bool
	}{
		{"checked", "/drains/plan?exhausted=on&no_guard=on", true},
		{"unchecked", "/drains/plan?exhausted=on", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := parseDrainForm(httptestGet(tc.query))
			req, err := f.request(true)
			if err != nil || req.NoGuard != tc.want {
				t.Errorf("no_guard %t (%v), want %t", req.NoGuard, err, tc.want)
			}
			if again := parseDrainForm(httptestGet("/drains/plan?" + f.Query())); again.NoGuard != tc.want {
				t.Errorf("the plan's URL loses no_guard: %s", f.Query())
			}
		})
	}
}

// TestDrainOutcomeShown: a completed drain's status says the redriver's
// outcome in words with its reason, in the list and on its page, and
// both list the records each legal hold held.
func TestDrainOutcomeShown(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   api.DrainState
		want string
	}{
		{"nothing committed", api.DrainState{Status: api.DrainCompleted, DrainCounts: api.DrainCounts{Selected: 3, Held: 3, HeldByHold: 3}}.WithOutcome(),
			"completed: nothing committed — 3 held by a legal hold"},
		{"partial", api.DrainState{Status: api.DrainCompleted, DrainCounts: api.DrainCounts{Selected: 5, Replayed: 4, Committed: 3, ReplayFailed: 1, Held: 1, HeldByHold: 1}}.WithOutcome(),
			"completed: partly resolved — 3 committed; 1 held by a legal hold, 1 failed again"},
		{"all", api.DrainState{Status: api.DrainCompleted, DrainCounts: api.DrainCounts{Selected: 5, Replayed: 4, Committed: 4, SkippedDuplicate: 1}}.WithOutcome(),
			"completed: all resolved — 4 committed, 1 already committed (duplicates)"},
		{"nothing selected", api.DrainState{Status: api.DrainCompleted}.WithOutcome(), "completed: nothing committed — nothing selected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := drainStatus(tc.st); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
	st := api.DrainState{DrainID: "drain-7", Status: api.DrainCompleted, StartedBy: "amara.okafor",
		DrainCounts: api.DrainCounts{Selected: 3, Held: 3, HeldByHold: 3},
		Holds:       []api.HoldCount{{HoldID: "hold-9", CaseID: "CASE <Étienne> & 2", Records: 3}}}.WithOutcome()
	list := renderPage(t, "drains", &drainsData{Drains: []api.DrainState{st}}, nil)
	for _, want := range []string{"nothing committed — 3 held by a legal hold", `href="/holds#hold-hold-9"`, "case CASE &lt;Étienne&gt; &amp; 2"} {
		if !strings.Contains(list, want) {
			t.Errorf("the drain list lacks %q", want)
		}
	}
	page := renderPage(t, "drain", &drainData{ID: "drain-7", State: st, Done: true}, nil)
	for _, want := range []string{"nothing committed — 3 held by a legal hold", `id="drain-holds"`, `href="/holds#hold-hold-9"`, "CASE &lt;Étienne&gt; &amp; 2"} {
		if !strings.Contains(page, want) {
			t.Errorf("the drain page lacks %q", want)
		}
	}
}

// TestRecordsListIdentifiersByDomain: each row of the Records list shows
// its domain's identifiers (pharmacy transaction id, event type, NDC and
// lot; DSCSA GTIN and serial or SSCC, lot and event type; FSMA TLC and
// event type), escaped, each kept whole; a record without listed
// identifiers (written before) still lists.
func TestRecordsListIdentifiersByDomain(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    api.Summary
		want []string
		not  []string
	}{
		{"pharmacy", api.Summary{DLQID: "pharmacy_1", Domain: "pharmacy", PartyID: "BW4829137", EventType: "receive",
			Identifiers: map[string]string{"transaction_id": "INV-0182 <Müller & Söhne>", "registrant_dea": "BW4829137", "ndc11": "00409488820", "lot": "A1&B"}},
			[]string{">Transaction</span>", `title="INV-0182 &lt;Müller &amp; Söhne&gt;"`, ">Event</span>", `title="receive"`, ">NDC</span>", `title="00409488820"`, ">Lot</span>", `title="A1&amp;B"`},
			[]string{">Registrant</span>"}},
		{"dscsa item", api.Summary{DLQID: "dscsa_1", Domain: "dscsa", EventType: "shipping",
			Identifiers: map[string]string{"gtin": "10614141073464", "serial": "SN/0042?A", "lot": "LOT-Ü1"}},
			[]string{">GTIN</span>", ">Serial</span>", `title="SN/0042?A"`, ">Lot</span>", `title="LOT-Ü1"`, ">Event</span>", `title="shipping"`}, nil},
		{"dscsa container", api.Summary{DLQID: "dscsa_2", Domain: "dscsa", EventType: "packing", Identifiers: map[string]string{"sscc": "106141412345678908"}},
			[]string{">SSCC</span>", `title="106141412345678908"`, `title="packing"`}, []string{">GTIN</span>"}},
		{"fsma", api.Summary{DLQID: "fsma_1", Domain: "fsma", EventType: "receiving", PartyID: "Pharmacie Saint-Étienne",
			Identifiers: map[string]string{"tlc": "00860001000030-RL250312A", "supplier_id": "Pharmacie Saint-Étienne"}},
			[]string{">TLC</span>", `title="00860001000030-RL250312A"`, `title="receiving"`}, []string{"supplier_id"}},
		{"a record without identifiers", api.Summary{DLQID: "pharmacy_old", Domain: "pharmacy", Identifiers: map[string]string{"ndc11": "00409488820"}},
			[]string{`title="pharmacy_old"`, ">NDC</span>"}, []string{">Transaction</span>", ">Event</span>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := renderPage(t, "records", &recordsData{Items: []listItem{{Summary: tc.s}}, Total: 1, Columns: recordColumns}, nil)
			cell := page[strings.Index(page, `<td class="idents">`):]
			cell = cell[:strings.Index(cell, "</td>")]
			for _, want := range tc.want {
				if !strings.Contains(page, want) {
					t.Errorf("the row lacks %q:\n%s", want, cell)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(cell, not) {
					t.Errorf("the row shows %q:\n%s", not, cell)
				}
			}
		})
	}
}

// TestGroupsByDocument: the Groups page links its "by document" view,
// which says per document "shipment document <id> from <sender>: N
// events quarantined" with its events by code, every partner-given text
// escaped.
func TestGroupsByDocumentPage(t *testing.T) {
	g := api.Group{Fingerprint: "document:ab", Domain: "dscsa", Total: 3, Open: 2, ByCode: map[string]int{"INVALID_GTIN": 2, "SCHEMA_VALIDATION_ERROR": 1},
		Samples: []string{"dscsa_1"}, Document: &api.GroupDocument{ID: "SHIP-4812 <script>x</script>", SHA256: "ab", Events: 10000,
			Sender: "urn:epc:id:sgln:4012345.00000.0", Receiver: "Pharmacie Saint-Étienne & Fils"}}
	page := renderPage(t, "groups", &groupsData{ByDocument: true, Groups: []api.Group{g}}, nil)
	for _, want := range []string{`id="doc-groups"`, "Shipment document", `title="SHIP-4812 &lt;script&gt;x&lt;/script&gt;"`,
		` from <span class="ident-w"><span class="whole" title="urn:epc:id:sgln:4012345.00000.0">`, "Pharmacie Saint-Étienne &amp; Fils",
		"<strong>3</strong> events quarantined of 10,000", "<code>INVALID_GTIN</code></a> ×2", "<code>SCHEMA_VALIDATION_ERROR</code></a> ×1",
		`href="/records/dscsa_1"`, `aria-current="page">By document`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>x") {
		t.Error("a document id unescaped")
	}
	page = renderPage(t, "groups", &groupsData{}, nil)
	if !strings.Contains(page, `id="by-document" href="/groups?by=document"`) {
		t.Errorf("no link to the view by document:\n%s", page)
	}
}
