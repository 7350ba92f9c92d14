package auditor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// findEvent is a quarantined event of the search tests: a payload from
// schemas/testdata with some fields replaced, identified by its domain's
// own rules (Identify, as the gate does for an event that failed
// validation) so the record carries the ordering key, party and key the
// quarantiner writes.
type findEvent struct {
	name, domain, file string
	set                map[string]any
	resolved           bool
	// legacy: the record is written as before records kept their listed
	// identifiers (none). exhausted: the event passed the gate (its
	// envelope is Check's, not a failed event's Identify).
	legacy, exhausted bool
}

// storeFindEvent quarantines ev (resolving it when asked) and returns its
// dlq id.
func (e *env) storeFindEvent(tb testing.TB, i int, ev findEvent) string {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "schemas", "testdata", ev.domain, "valid", ev.file))
	if err != nil {
		tb.Fatal(err)
	}
	var doc domain.Doc
	if err := json.Unmarshal(raw, &doc); err != nil {
		tb.Fatal(err)
	}
	for k, v := range ev.set {
		doc[k] = v
	}
	var env envelope.Envelope
	switch ev.domain {
	case pharmacy.Name:
		env = pharmacy.Checker{}.Identify(doc)
	case dscsa.Name:
		env = dscsa.Checker{}.Identify(doc)
	case fsma.Name:
		env = fsma.Checker{}.Identify(doc)
	}
	env.Partial = !ev.exhausted
	class, code := record.ClassValidation, codes.SchemaValidation
	if ev.exhausted {
		var err error
		if env, err = (dscsa.Checker{}).Check(env.EventType, doc); err != nil || ev.domain != dscsa.Name {
			tb.Fatalf("check: %v", err)
		}
		class, code = record.ClassExhausted, codes.DownstreamUnavailable
	}
	payload, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	at := t0.Add(time.Duration(i) * time.Minute)
	r := record.FromFailure(record.Failure{
		Class: class, Code: code, Detail: "rule failed", Domain: ev.domain,
		Subject: subjects.Event(ev.domain, "x"), Stream: subjects.EventsStream, Seq: uint64(i + 1), Deliveries: 1,
		Published: at, Payload: payload, Envelope: &env, FailedAt: at,
	}, at)
	if ev.legacy {
		r.Identifiers = nil
	}
	if err := record.Seal(&r); err != nil {
		tb.Fatal(err)
	}
	e.publish(tb, r)
	if ev.resolved {
		e.publish(tb, next(tb, r, record.KindResolved, at.Add(time.Second)))
	}
	return r.DLQID
}

// TestFindByIdentifiers: audit.list finds quarantined events by what a
// business knows (NDC + lot, registrant + transaction id, GTIN + serial,
// lot, TLC, supplier), each identifier pasted in every form the trade
// writes it, open and resolved events alike (from the live index and
// from a scan of QUARANTINE); it answers the identifiers the listing
// shows and never a payload value beyond them.
func TestFindByIdentifiers(t *testing.T) {
	e := newEnv(t)
	const (
		lot      = "A1&B<2>\"Ü\""
		supplier = "Müller & Söhne <Großhandel>"
		tlc      = "00860001000030-RL250312A.Pharmacie Saint-Étienne"
	)
	long := strings.Repeat("Lot-ß<&>", 30)
	const sscc = "106141412345678908" // urn:epc:id:sscc:0614141.1234567890
	events := []findEvent{
		{name: "ndc 4-4-2 lot", domain: pharmacy.Name, file: "receive-schedule-ii-ndc-4-4-2.json",
			set: map[string]any{"ndc": "0409-4888-20", "lot": lot, "transaction_id": "INV-2025-0182 <Müller>"}},
		{name: "same ndc, 11 digits, other lot, resolved", domain: pharmacy.Name, file: "receive-schedule-ii-ndc-4-4-2.json",
			set: map[string]any{"ndc": "00409488820", "lot": long, "transaction_id": "INV-2025-0183"}, resolved: true},
		{name: "other ndc, same lot", domain: pharmacy.Name, file: "receive-schedule-ii-ndc-4-4-2.json",
			set: map[string]any{"ndc": "55150-123-10", "lot": lot, "registrant_dea": "AB1234563", "transaction_id": "INV-2025-0182 <Müller>"}},
		{name: "sgtin with escapes", domain: dscsa.Name, file: "shipping-percent-encoded-serial.json"},
		{name: "fsma", domain: fsma.Name, file: "shipping-gln.json",
			set: map[string]any{"supplier_id": supplier, "traceability_lot_code": tlc}},
		{name: "fsma same tlc, resolved", domain: fsma.Name, file: "shipping-gln.json",
			set: map[string]any{"supplier_id": "SUP-00417", "traceability_lot_code": tlc}, resolved: true},
		{name: "dscsa container", domain: dscsa.Name, file: "packing-sscc-pallet-minimal.json"},
		{name: "dscsa commissioning with a lot", domain: dscsa.Name, file: "commissioning-sgtin.json", exhausted: true},
		{name: "pharmacy, a record without identifiers", domain: pharmacy.Name, file: "receive-schedule-ii-ndc-4-4-2.json", legacy: true,
			set: map[string]any{"ndc": "55150-123-10", "lot": "LEGACY-<1>", "registrant_dea": "AB1234563", "transaction_id": "INV-LEGACY-7"}},
	}
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = e.storeFindEvent(t, i, ev)
	}
	a := e.startAuditor(t, testConfig(), nil)
	_ = a

	for _, tc := range []struct {
		name string
		req  api.ListRequest
		want []int // indexes into events, newest first
	}{
		{"ndc 4-4-2 + lot", api.ListRequest{NDC: "0409-4888-20", Lot: lot}, []int{0}},
		{"ndc 11 digits + lot", api.ListRequest{NDC: "00409488820", Lot: lot}, []int{0}},
		{"ndc 5-4-2 with hyphens", api.ListRequest{NDC: "00409-4888-20"}, []int{1, 0}},
		{"ndc padded by spaces", api.ListRequest{NDC: "  0409-4888-20 "}, []int{1, 0}},
		{"ndc, open only (index)", api.ListRequest{NDC: "0409-4888-20", Status: "open"}, []int{0}},
		{"ndc, resolved only (scan)", api.ListRequest{NDC: "0409-4888-20", Status: "resolved"}, []int{1}},
		{"ndc + long lot", api.ListRequest{NDC: "0409-4888-20", Lot: long}, []int{1}},
		{"lot across ndcs", api.ListRequest{Lot: lot}, []int{2, 0}},
		{"lot is case-sensitive", api.ListRequest{Lot: strings.ToLower(lot)}, nil},
		{"registrant + transaction id", api.ListRequest{Registrant: "BW4829137", TransactionID: "INV-2025-0182 <Müller>"}, []int{0}},
		{"registrant lower case + transaction id", api.ListRequest{Registrant: "bw4829137", TransactionID: " INV-2025-0182 <Müller> "}, []int{0}},
		{"other registrant, same transaction id", api.ListRequest{Registrant: "AB1234563", TransactionID: "INV-2025-0182 <Müller>"}, []int{2}},
		{"registrant alone", api.ListRequest{Registrant: "BW4829137"}, []int{1, 0}},
		{"transaction id alone", api.ListRequest{TransactionID: "INV-2025-0182 <Müller>"}, []int{2, 0}},
		{"transaction id alone, resolved (scan)", api.ListRequest{TransactionID: "INV-2025-0183", Status: "resolved"}, []int{1}},
		{"transaction id prefix", api.ListRequest{TransactionID: "INV-2025-0182"}, nil},
		{"record without identifiers: registrant + transaction id", api.ListRequest{Registrant: "AB1234563", TransactionID: "INV-LEGACY-7"}, []int{8}},
		// Read from its verbatim payload (hold.PayloadIdentifiers).
		{"record without identifiers: transaction id alone", api.ListRequest{TransactionID: "INV-LEGACY-7"}, []int{8}},
		{"dscsa lot", api.ListRequest{Lot: "A24B017", Domain: dscsa.Name}, []int{7}},
		{"dscsa lot across domains", api.ListRequest{Lot: "A24B017"}, []int{7}},
		{"dscsa gtin + other lot", api.ListRequest{GTIN: "10614141073464", Lot: "A1"}, nil},
		{"gtin-14 + serial", api.ListRequest{GTIN: "10614141073464", Serial: "SN/0042?A"}, []int{3}},
		{"sgtin urn, percent-escaped", api.ListRequest{GTIN: "urn:epc:id:sgtin:0614141.107346.SN%2F0042%3FA"}, []int{3}},
		{"sgtin urn upper-case prefix as serial", api.ListRequest{Serial: "URN:EPC:ID:SGTIN:0614141.107346.SN%2F0042%3FA"}, []int{3}},
		{"digital link with query", api.ListRequest{GTIN: "https://id.gs1.org/01/10614141073464/21/SN%2F0042%3FA?17=270101&10=A1"}, []int{3}},
		{"gtin alone", api.ListRequest{GTIN: "10614141073464"}, []int{3}},
		{"sscc", api.ListRequest{SSCC: " " + sscc + " "}, []int{6}},
		{"sscc urn", api.ListRequest{SSCC: "urn:epc:id:sscc:0614141.1234567890"}, []int{6}},
		{"sscc digital link", api.ListRequest{SSCC: "https://id.gs1.org/00/" + sscc + "?x=1&y=<2>"}, []int{6}},
		// Every item the payload lists, not only the ordering key's.
		{"second epc of the event", api.ListRequest{GTIN: "https://id.gs1.org/01/10614141073464/21/SN%2F0043"}, []int{3}},
		{"tlc", api.ListRequest{TLC: tlc}, []int{5, 4}},
		{"tlc + supplier", api.ListRequest{TLC: tlc, Supplier: supplier}, []int{4}},
		{"lot finds a tlc", api.ListRequest{Lot: tlc}, []int{5, 4}},
		{"supplier", api.ListRequest{Supplier: supplier}, []int{4}},
		{"no match", api.ListRequest{NDC: "0409-4888-21"}, nil},
		{"generic identifiers field", api.ListRequest{Identifiers: map[string]string{"ndc": "0409-4888-20", "lot": lot}}, []int{0}},
		{"generic identifiers field, a shared field", api.ListRequest{Identifiers: map[string]string{"lot": tlc}}, []int{5, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l api.ListReply
			request(t, e.nc, api.AuditList, tc.req, &l)
			var got []string
			for _, it := range l.Items {
				got = append(got, it.DLQID)
			}
			var want []string
			for _, i := range tc.want {
				want = append(want, ids[i])
			}
			if !slices.Equal(got, want) || l.Total != len(want) {
				t.Fatalf("got %v (total %d), want %v", got, l.Total, want)
			}
			b, _ := json.Marshal(l)
			// The transaction id is listed (record.Record.Identifiers, or
			// read from the payload by the domain's allow-list); other
			// payload values never are.
			for _, secret := range []string{"Romaine", "RPH-0388", "0860001.23456", "2026-01-31"} {
				if strings.Contains(string(b), secret) {
					t.Errorf("the answer holds the payload value %q: %s", secret, b)
				}
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		for _, status := range []string{"", "open"} { // a scan, the index
			var got []string
			cursor := ""
			for range 3 {
				var l api.ListReply
				request(t, e.nc, api.AuditList, api.ListRequest{Lot: lot, Status: status, Limit: 1, Cursor: cursor}, &l)
				if l.Total != 2 {
					t.Fatalf("status %q: total %d, want 2", status, l.Total)
				}
				for _, it := range l.Items {
					got = append(got, it.DLQID)
				}
				if cursor = l.NextCursor; cursor == "" {
					break
				}
			}
			if want := []string{ids[2], ids[0]}; !slices.Equal(got, want) {
				t.Errorf("status %q: pages of 1 gave %v, want %v", status, got, want)
			}
		}
	})

	t.Run("identifiers shown", func(t *testing.T) {
		var l api.ListReply
		request(t, e.nc, api.AuditList, api.ListRequest{Lot: lot}, &l)
		want := map[string]string{"ndc11": "00409488820", "lot": lot, "transaction_id": "INV-2025-0182 <Müller>", "registrant_dea": "BW4829137"}
		if len(l.Items) != 2 || !mapsEqual(l.Items[1].Identifiers, want) {
			t.Fatalf("identifiers: %+v, want %v", l.Items, want)
		}
		l = api.ListReply{}
		request(t, e.nc, api.AuditList, api.ListRequest{GTIN: "10614141073464"}, &l)
		if want := map[string]string{"gtin": "10614141073464", "serial": "SN/0042?A"}; !mapsEqual(l.Items[0].Identifiers, want) {
			t.Fatalf("identifiers: %v, want %v", l.Items[0].Identifiers, want)
		}
		l = api.ListReply{}
		request(t, e.nc, api.AuditList, api.ListRequest{TLC: tlc, Supplier: supplier}, &l)
		if want := map[string]string{"tlc": tlc}; !mapsEqual(l.Items[0].Identifiers, want) || l.Items[0].PartyID != supplier {
			t.Fatalf("identifiers: %+v, want %v", l.Items[0], want)
		}
		l = api.ListReply{}
		request(t, e.nc, api.AuditList, api.ListRequest{Registrant: "BW4829137", TransactionID: "INV-2025-0182 <Müller>"}, &l)
		if want := map[string]string{"ndc11": "00409488820", "lot": lot, "transaction_id": "INV-2025-0182 <Müller>", "registrant_dea": "BW4829137"}; len(l.Items) != 1 ||
			!mapsEqual(l.Items[0].Identifiers, want) || l.Items[0].EventType != "x" {
			t.Fatalf("pharmacy identifiers: %+v, want %v and event type x (its subject's)", l.Items, want)
		}
		for _, status := range []string{"", "open"} { // a scan, the index
			l = api.ListReply{}
			request(t, e.nc, api.AuditList, api.ListRequest{Lot: "A24B017", Status: status}, &l)
			if len(l.Items) != 1 || l.Items[0].Identifiers["lot"] != "A24B017" || l.Items[0].EventType != "commissioning" || l.Items[0].Identifiers["gtin"] == "" {
				t.Fatalf("status %q: dscsa identifiers: %+v, want its lot, gtin and business step", status, l.Items)
			}
		}
		l = api.ListReply{}
		request(t, e.nc, api.AuditList, api.ListRequest{Registrant: "AB1234563", TransactionID: "INV-LEGACY-7"}, &l)
		if len(l.Items) != 1 || l.Items[0].Identifiers["transaction_id"] != "INV-LEGACY-7" || l.Items[0].Identifiers["lot"] != "LEGACY-<1>" {
			t.Fatalf("a record without identifiers: %+v", l.Items)
		}
		l = api.ListReply{}
		request(t, e.nc, api.AuditList, api.ListRequest{SSCC: sscc}, &l)
		// The pallet, and the first item packed onto it (read from its
		// payload's childEPCs).
		if want := map[string]string{"sscc": sscc, "gtin": "00614141123452", "serial": "10016550749981"}; len(l.Items) != 1 || !mapsEqual(l.Items[0].Identifiers, want) {
			t.Fatalf("identifiers: %+v, want %v", l.Items, want)
		}
	})

	for _, tc := range []struct {
		name  string
		req   api.ListRequest
		field string
	}{
		{"ndc ten plain digits", api.ListRequest{NDC: "0409488820"}, "ndc"},
		{"ndc with a letter", api.ListRequest{NDC: "0409-48B8-20"}, "ndc"},
		{"bad dea check digit", api.ListRequest{Registrant: "BW4829138"}, "registrant"},
		{"digital link without serial", api.ListRequest{GTIN: "https://id.gs1.org/01/10614141073464"}, "gtin"},
		{"urn serial differs", api.ListRequest{GTIN: "urn:epc:id:sgtin:0614141.107346.X1", Serial: "X2"}, "serial"},
		{"two domains", api.ListRequest{Registrant: "BW4829137", GTIN: "10614141073464"}, ""},
		{"a shared field beside another domain's own", api.ListRequest{NDC: "0409-4888-20", TLC: "RL-2026"}, ""},
		{"sscc check digit", api.ListRequest{SSCC: "106141412345678901"}, "sscc"},
		{"sscc of 17 digits", api.ListRequest{SSCC: "10614141234567890"}, "sscc"},
		{"identifiers: a field no domain searches by", api.ListRequest{Identifiers: map[string]string{"colour <Müller>": "red"}}, "identifiers"},
		{"identifiers: ndc given twice", api.ListRequest{NDC: "0409-4888-20", Identifiers: map[string]string{"ndc": "00409488820"}}, "ndc"},
		{"identifiers: two domains", api.ListRequest{Identifiers: map[string]string{"tlc": tlc, "sscc": sscc}}, ""},
		{"a field the domain does not search by", api.ListRequest{TLC: tlc, Domain: pharmacy.Name}, "tlc"},
		{"a value longer than a search reads", api.ListRequest{Lot: strings.Repeat("Lot-ß<&>", 200)}, "lot"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			b, _ := json.Marshal(tc.req)
			m, err := e.nc.Request(api.AuditList, b, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code := m.Header.Get("Nats-Service-Error-Code"); code != api.ErrBadRequest {
				t.Fatalf("code %q (%s), want %s", code, m.Data, api.ErrBadRequest)
			}
			var ae api.Error
			_ = json.Unmarshal(m.Data, &ae)
			if ae.Field != tc.field {
				t.Errorf("field %q, want %q (%s)", ae.Field, tc.field, m.Data)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
