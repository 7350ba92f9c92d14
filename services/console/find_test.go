package console

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// quarantineDoc stores, as the admin, the first record of an event of
// dom that failed validation: file of schemas/testdata/<dom>/valid with
// fields set, identified by its domain's rules as the gate does. It
// returns the dlq id.
func quarantineDoc(t *testing.T, js jetstream.JetStream, dom, file string, set map[string]any) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "schemas", "testdata", dom, "valid", file))
	if err != nil {
		t.Fatal(err)
	}
	var doc domain.Doc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		doc[k] = v
	}
	var env envelope.Envelope
	switch dom {
	case pharmacy.Name:
		env = pharmacy.Checker{}.Identify(doc)
	case dscsa.Name:
		env = dscsa.Checker{}.Identify(doc)
	case fsma.Name:
		env = fsma.Checker{}.Identify(doc)
	}
	env.Partial = true
	payload, _ := json.Marshal(doc)
	now := time.Now().UTC()
	r := record.FromFailure(record.Failure{
		Class: record.ClassValidation, Code: codes.SchemaValidation, Detail: "rule failed", Domain: dom,
		Subject: subjects.Event(dom, "receive"), Stream: subjects.EventsStream, Seq: 1, Deliveries: 1,
		Published: now, Payload: payload, Envelope: &env, FailedAt: now,
	}, now)
	if err := record.Seal(&r); err != nil {
		t.Fatal(err)
	}
	b, err := record.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), subjects.Quarantine(dom, r.DLQID), b); err != nil {
		t.Fatal(err)
	}
	return r.DLQID
}

// TestRecordsFind: the Records page's identifier search finds events by
// NDC and lot, registrant and transaction id, GTIN (an SGTIN URN or a
// Digital Link pasted whole) and serial, and TLC; it shows the
// identifiers escaped (a lot with & < > and non-ASCII text) and no other
// payload value, keeps the search in the form, and says why a bad
// identifier is refused.
func TestRecordsFind(t *testing.T) {
	e := startEnv(t)
	js, err := jetstream.New(e.srv.ConnectAs(t, access.Admin))
	if err != nil {
		t.Fatal(err)
	}
	const (
		lot = `Ü7&B<2>"x"`
		tlc = "00860001000030-RL250312A Pharmacie Saint-Étienne"
	)
	rx := quarantineDoc(t, js, pharmacy.Name, "receive-schedule-ii-ndc-4-4-2.json",
		map[string]any{"ndc": "0409-4888-20", "lot": lot, "transaction_id": "INV-SECRET-7"})
	other := quarantineDoc(t, js, pharmacy.Name, "receive-schedule-ii-ndc-4-4-2.json",
		map[string]any{"ndc": "0409-4888-20", "lot": "OTHER-LOT", "transaction_id": "INV-SECRET-8"})
	item := quarantineDoc(t, js, dscsa.Name, "shipping-percent-encoded-serial.json", nil)
	food := quarantineDoc(t, js, fsma.Name, "shipping-gln.json",
		map[string]any{"supplier_id": "Müller & Söhne <Großhandel>", "traceability_lot_code": tlc})

	c := e.newConsole(t, nil)
	viewer := access.DefaultPerson(access.RoleViewer)
	cl := newClient(t, c, "127.0.0.61")
	cl.mustLogin(viewer, e.password(viewer))
	for _, tc := range []struct {
		name   string
		query  url.Values
		want   []string
		absent []string
	}{
		{"ndc + lot", url.Values{"ndc": {"0409-4888-20"}, "lot": {lot}}, []string{rx}, []string{other, item, food}},
		{"ndc-11", url.Values{"ndc": {"00409488820"}}, []string{rx, other}, []string{item, food}},
		{"registrant + transaction id", url.Values{"registrant": {"bw4829137"}, "txid": {"INV-SECRET-8"}}, []string{other}, []string{rx}},
		{"transaction id alone", url.Values{"txid": {"INV-SECRET-8"}}, []string{other}, []string{rx, item, food}},
		{"sgtin urn", url.Values{"gtin": {"urn:epc:id:sgtin:0614141.107346.SN%2F0042%3FA"}}, []string{item}, []string{rx, food}},
		{"digital link", url.Values{"gtin": {"https://id.gs1.org/01/10614141073464/21/SN%2F0042%3FA?17=270101&10=A1"}}, []string{item}, []string{rx}},
		{"gtin + serial", url.Values{"gtin": {"10614141073464"}, "serial": {"SN/0042?A"}}, []string{item}, []string{food}},
		{"tlc", url.Values{"tlc": {tlc}}, []string{food}, []string{rx, item}},
		{"identifier lot", url.Values{"identifier": {"lot=" + lot}}, []string{rx}, []string{other, item, food}},
		{"identifier tlc", url.Values{"identifier": {"tlc = " + tlc}}, []string{food}, []string{rx, other, item}},
		{"identifier + ndc", url.Values{"identifier": {"transaction_id=INV-SECRET-8"}, "ndc": {"0409-4888-20"}}, []string{other}, []string{rx, item, food}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body string
			natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error { // the auditor's view follows QUARANTINE
				w := cl.do(http.MethodGet, "/records?"+tc.query.Encode(), nil)
				body = w.Body.String()
				if w.Code != http.StatusOK {
					return &pageError{w.Code, body}
				}
				for _, id := range tc.want {
					if !strings.Contains(body, "/records/"+id) {
						return &pageError{w.Code, "no " + id}
					}
				}
				return nil
			})
			for _, id := range tc.absent {
				if strings.Contains(body, "/records/"+id) {
					t.Errorf("the page lists %s", id)
				}
			}
			page := body
			for _, v := range tc.query { // what the person typed stays in the form
				page = strings.ReplaceAll(page, html.EscapeString(v[0]), "")
			}
			// The transaction id is listed (the first record names it);
			// no other payload value is.
			for _, secret := range []string{"RPH-0388", "Romaine", "PO-778120"} {
				if strings.Contains(page, secret) {
					t.Errorf("the page shows the payload value %q", secret)
				}
			}
			for k, v := range tc.query { // the search stays in the form
				if !strings.Contains(body, `name="`+k+`" value="`+html.EscapeString(v[0])+`"`) {
					t.Errorf("the form lost %s=%q", k, v[0])
				}
			}
		})
	}

	w := cl.do(http.MethodGet, "/records?"+url.Values{"ndc": {"0409-4888-20"}, "lot": {lot}}.Encode(), nil)
	body := w.Body.String()
	if !strings.Contains(body, "<code>00409488820</code>") || !strings.Contains(body, "<code>"+html.EscapeString(lot)+"</code>") {
		t.Errorf("the identifiers are not shown escaped:\n%s", body)
	}
	if strings.Contains(body, lot) {
		t.Errorf("the lot is shown raw")
	}
	if !strings.Contains(body, `>Transaction</span> <span class="ident-w"><span class="whole" title="INV-SECRET-7">`) || !strings.Contains(body, `title="receive"`) {
		t.Errorf("the transaction id and event type are not listed:\n%s", body)
	}

	for _, tc := range []struct {
		name  string
		query url.Values
		msg   string
	}{
		{"ten plain digits", url.Values{"ndc": {"0409488820"}}, "ambiguous"},
		{"two domains", url.Values{"registrant": {"BW4829137"}, "gtin": {"10614141073464"}}, "two domains"},
		{"identifier without =", url.Values{"identifier": {"A24B017"}}, "takes name=value"},
		{"identifier without a name", url.Values{"identifier": {"=A24B017"}}, "takes name=value"},
		{"identifier without a value", url.Values{"identifier": {"lot="}}, "takes name=value"},
		{"identifier markup", url.Values{"identifier": {`<script>alert("Müller & Söhne")</script>`}}, "takes name=value"},
		{"identifier of no domain", url.Values{"identifier": {`batch=<b>Pharmacie Saint-Étienne</b>`}}, "no domain searches by"},
		{"identifier of two domains", url.Values{"identifier": {"gtin=10614141073464"}, "registrant": {"BW4829137"}}, "two domains"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			w := cl.do(http.MethodGet, "/records?"+tc.query.Encode(), nil)
			body := w.Body.String()
			if w.Code != http.StatusBadRequest || !strings.Contains(body, tc.msg) {
				t.Errorf("%d, want 400 saying %q:\n%s", w.Code, tc.msg, body)
			}
			for k, v := range tc.query { // kept in the form, escaped
				if !strings.Contains(body, `name="`+k+`" value="`+html.EscapeString(v[0])+`"`) {
					t.Errorf("the form lost %s=%q", k, v[0])
				}
				if strings.ContainsAny(v[0], "<>&") && strings.Contains(body, v[0]) {
					t.Errorf("the page shows %q unescaped", v[0])
				}
			}
		})
	}
}

// TestParseIdentifier: the Records form's identifier filter is
// name=value (spaces around either trimmed); anything else is a
// BAD_REQUEST naming the form field and the fields a domain searches by,
// never the value typed.
func TestParseIdentifier(t *testing.T) {
	for _, tc := range []struct {
		name, in    string
		field, want string
	}{
		{"lot", "lot=A24B017", "lot", "A24B017"},
		{"spaces trimmed", "  tlc = 00860001000030-RL250312A Pharmacie Saint-Étienne ", "tlc", "00860001000030-RL250312A Pharmacie Saint-Étienne"},
		{"value with =", "serial=SN=0042&<A>", "serial", "SN=0042&<A>"},
		{"unknown name passed on (the auditor refuses it)", "batch=Müller & Söhne <Großhandel>", "batch", "Müller & Söhne <Großhandel>"},
		{"no =", "A24B017", "", ""},
		{"no name", "=A24B017", "", ""},
		{"no value", "lot= ", "", ""},
		{"markup", `<script>alert("x")</script>`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field, v, err := parseIdentifier(tc.in)
			if tc.field == "" {
				e := api.AsError(err)
				if e == nil || e.Code != api.ErrBadRequest || e.Field != "identifier" || !strings.Contains(e.Message, "name=value") || !strings.Contains(e.Message, "ndc") {
					t.Fatalf("%v, want a BAD_REQUEST on identifier naming the fields", err)
				}
				if strings.Contains(e.Message, strings.TrimSpace(tc.in)) {
					t.Errorf("the message echoes the value: %q", e.Message)
				}
				return
			}
			if err != nil || field != tc.field || v != tc.want {
				t.Errorf("%q %q %v, want %q %q", field, v, err, tc.field, tc.want)
			}
		})
	}
}

// pageError is a page that does not show what a poll waits for.
type pageError struct {
	code int
	body string
}

func (p *pageError) Error() string { return http.StatusText(p.code) + ": " + p.body }
