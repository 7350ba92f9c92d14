package gate_test

import (
	"bytes"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
)

func TestGateEnvelopeCodes(t *testing.T) {
	g, err := gate.New(64)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		subject string
		data    string
		want    codes.Code
	}{
		{"too large", "events.fsma.shipping", `{"pad":"` + strings.Repeat("x", 64) + `"}`, codes.PayloadTooLarge},
		{"no domain", "events", `{}`, codes.UnknownSubject},
		{"unknown domain", "events.widgets.created", `{}`, codes.UnknownSubject},
		{"extra token", "events.fsma.shipping.extra", `{}`, codes.UnknownSubject},
		{"not events", "orders.fsma.shipping", `{}`, codes.UnknownSubject},
		{"invalid utf-8", "events.fsma.shipping", "{\"a\":\"\xff\"}", codes.InvalidUTF8},
		{"empty", "events.fsma.shipping", ``, codes.MalformedJSON},
		{"truncated", "events.fsma.shipping", `{"a":`, codes.MalformedJSON},
		{"garbage", "events.fsma.shipping", `nope`, codes.MalformedJSON},
		{"two values", "events.fsma.shipping", `{"a":1} {"b":2}`, codes.MalformedJSON},
		{"array", "events.fsma.shipping", `[{"a":1}]`, codes.NotAnObject},
		{"string", "events.fsma.shipping", `"hello"`, codes.NotAnObject},
		{"null", "events.fsma.shipping", `null`, codes.NotAnObject},
		{"duplicate key", "events.fsma.shipping", `{"a":1,"a":2}`, codes.DuplicateKey},
		{"nested duplicate", "events.fsma.shipping", `{"a":{"b":1,"b":1}}`, codes.DuplicateKey},
		{"lone surrogate", "events.fsma.shipping", `{"a":"\ud800"}`, codes.MalformedJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.Check(tt.subject, []byte(tt.data))
			if got := codes.Of(err); got != tt.want {
				t.Fatalf("code = %s, want %s (%v)", got, tt.want, err)
			}
			if d := codes.DetailOf(err); strings.Contains(d, "hello") || strings.Contains(d, "nope") {
				t.Fatalf("detail quotes the payload: %q", d)
			}
		})
	}
}

func TestDecodeKeepsValues(t *testing.T) {
	doc, err := gate.Decode([]byte(`{"gtin":"00614141123452","n":12.50,"esc":"a\"b\u00e9","t":true,"f":false,"z":null,"arr":[1,"x",{}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if doc["gtin"] != "00614141123452" || doc["esc"] != "a\"bé" || doc["t"] != true || doc["f"] != false || doc["z"] != nil {
		t.Fatalf("decoded %#v", doc)
	}
	if n, ok := doc["n"].(interface{ String() string }); !ok || n.String() != "12.50" {
		t.Fatalf("number not kept verbatim: %#v", doc["n"])
	}
	if arr, ok := doc["arr"].([]any); !ok || len(arr) != 3 {
		t.Fatalf("array %#v", doc["arr"])
	}
}

// TestSchemaDetailsNameNoValues: a schema violation's detail names the
// location and rule, never the offending value.
func TestSchemaDetailsNameNoValues(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(schemas.FS, "testdata/pharmacy/valid/dispense-schedule-ii.json")
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(b, []byte(`"event_type": "dispense"`), []byte(`"event_type": "SECRET-MARKER"`), 1)
	if bytes.Equal(bad, b) {
		t.Fatal("fixture changed shape")
	}
	_, err = g.Check("events.pharmacy.dispense", bad)
	if codes.Of(err) != codes.SchemaValidation {
		t.Fatalf("code %s", codes.Of(err))
	}
	if strings.Contains(err.Error(), "SECRET-MARKER") {
		t.Fatalf("detail quotes the payload: %v", err)
	}
}

func BenchmarkDecode(b *testing.B) {
	data, err := fs.ReadFile(schemas.FS, "testdata/dscsa/valid/shipping-offset-0500.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := gate.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSchemaDetailsNameTheMember: an unexpected member is named by its JSON
// pointer and the keyword, never by its value (issue 15, bug 9: the detail
// said "/: violates additionalProperties" for an unexpected patient_name).
func TestSchemaDetailsNameTheMember(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "SECRET-VALUE"
	tests := []struct {
		name    string
		file    string
		subject string
		// edit inserts members after the document's opening brace (or
		// replaces old with new).
		old, new string
		want     []string
	}{
		{name: "top-level member", file: "pharmacy/valid/dispense-schedule-ii.json", subject: "events.pharmacy.dispense",
			old: "{", new: `{"patient_name": "` + secret + `",`,
			want: []string{"/patient_name: violates additionalProperties"}},
		{name: "two members sorted", file: "pharmacy/valid/dispense-schedule-ii.json", subject: "events.pharmacy.dispense",
			old: "{", new: `{"zz_b": "` + secret + `", "patient_dob": "` + secret + `",`,
			want: []string{"/patient_dob: violates additionalProperties", "/zz_b: violates additionalProperties"}},
		{name: "nested member", file: "fsma/valid/shipping-gln.json", subject: "events.fsma.shipping",
			old: `"ship_to": {`, new: `"ship_to": {"contact": "` + secret + `",`,
			want: []string{"/ship_to/contact: violates additionalProperties"}},
		{name: "pointer escaping", file: "pharmacy/valid/dispense-schedule-ii.json", subject: "events.pharmacy.dispense",
			old: "{", new: `{"a/b~c": "` + secret + `",`,
			want: []string{"/a~1b~0c: violates additionalProperties"}},
		{name: "control characters quoted", file: "pharmacy/valid/dispense-schedule-ii.json", subject: "events.pharmacy.dispense",
			old: "{", new: `{"bad\nname": "` + secret + `",`,
			want: []string{`/"bad\nname": violates additionalProperties`}},
		{name: "long name cut", file: "pharmacy/valid/dispense-schedule-ii.json", subject: "events.pharmacy.dispense",
			old: "{", new: `{"` + strings.Repeat("n", 100) + `": "` + secret + `",`,
			want: []string{"/" + strings.Repeat("n", 64) + "...: violates additionalProperties"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := fs.ReadFile(schemas.FS, "testdata/"+tt.file)
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Replace(b, []byte(tt.old), []byte(tt.new), 1)
			if bytes.Equal(bad, b) {
				t.Fatal("fixture changed shape")
			}
			_, err = g.Check(tt.subject, bad)
			if codes.Of(err) != codes.SchemaValidation {
				t.Fatalf("code %s (%v)", codes.Of(err), err)
			}
			d := codes.DetailOf(err)
			if strings.Contains(d, secret) {
				t.Fatalf("detail quotes the payload: %q", d)
			}
			if got := strings.Split(d, "; "); !slices.Equal(got, tt.want) {
				t.Fatalf("detail %q, want %q", got, tt.want)
			}
		})
	}
	// An extension member the schema allows by pattern is not refused.
	b, _ := fs.ReadFile(schemas.FS, "testdata/pharmacy/valid/dispense-schedule-ii.json")
	if _, err := g.Check("events.pharmacy.dispense", bytes.Replace(b, []byte("{"), []byte(`{"x_note": 1,`), 1)); err != nil {
		t.Fatalf("x_ extension refused: %v", err)
	}
}

// TestCheckEventIsCheck: the gate's decoded entry point (Read, then
// CheckEvent, as the validator runs every event, single or of a
// document) answers exactly what Check answers, envelope or code, for
// every example event of every domain, valid and invalid, and for an
// event handed over without its decoded form (CheckEvent decodes it).
func TestCheckEventIsCheck(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = fs.WalkDir(schemas.FS, "testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		parts := strings.Split(path, "/") // testdata/<domain>/<valid|invalid>/<name>.json
		if len(parts) != 4 {
			return nil
		}
		data, err := fs.ReadFile(schemas.FS, path)
		if err != nil {
			return err
		}
		for _, typ := range []string{"dispense", "shipping", "commissioning", "receiving"} {
			subject := "events." + parts[1] + "." + typ
			want, wantErr := g.Check(subject, data)
			ev, err := g.Read(subject, data)
			var got = want
			if err == nil {
				got, err = g.CheckEvent(ev)
			}
			if codes.Of(err) != codes.Of(wantErr) || codes.DetailOf(err) != codes.DetailOf(wantErr) || !sameEnvelope(got, want) {
				t.Errorf("%s on %s: Read+CheckEvent %+v (%v), Check %+v (%v)", path, subject, got, err, want, wantErr)
			}
			if err == nil {
				ev.Doc = nil
				if again, err := g.CheckEvent(ev); err != nil || !sameEnvelope(again, want) {
					t.Errorf("%s on %s without its decoded form: %+v (%v)", path, subject, again, err)
				}
				if id := g.IdentifyEvent(ev); id.IdempotencyKey != g.Identify(subject, data).IdempotencyKey {
					t.Errorf("%s on %s: IdentifyEvent and Identify name other keys", path, subject)
				}
			}
			n++
		}
		return nil
	})
	if err != nil || n < 20 {
		t.Fatalf("%d events checked (%v)", n, err)
	}
}

// sameEnvelope compares the identity an envelope carries.
func sameEnvelope(a, b envelope.Envelope) bool {
	return a.Domain == b.Domain && a.EventType == b.EventType && a.IdempotencyKey == b.IdempotencyKey &&
		a.PartyID == b.PartyID && a.OrderingKey == b.OrderingKey && a.EventHashID == b.EventHashID && a.KeySource == b.KeySource
}
