package pharmacy_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
)

// fallbackToken is the subject token used when a document has no usable
// event_type.
const fallbackToken = "dispense"

const testdataDir = "testdata/pharmacy"

// newGate returns a gate with the built-in checkers.
func newGate(tb testing.TB) *gate.Gate {
	tb.Helper()
	g, err := gate.New(0)
	if err != nil {
		tb.Fatalf("gate.New: %v", err)
	}
	return g
}

// subjectFor returns the subject a publisher would use for data.
func subjectFor(data []byte) string {
	token := fallbackToken
	if doc, err := gate.Decode(data); err == nil {
		if t, err := (pharmacy.Checker{}).EventType(doc); err == nil {
			token = t
		}
	}
	return "events.pharmacy." + token
}

// testFile is one example event from schemas/testdata/pharmacy.
type testFile struct {
	name string // file name
	code string // expected code, "" for valid files
	data []byte
}

func testFiles(tb testing.TB) []testFile {
	tb.Helper()
	examples, err := schemas.Examples("pharmacy")
	if err != nil {
		tb.Fatal(err)
	}
	files := make([]testFile, 0, len(examples))
	for _, ex := range examples {
		files = append(files, testFile{name: ex.Name, code: ex.Code, data: ex.Data})
	}
	return files
}

// checkEnvelope reports what is missing from an envelope of a valid event.
func checkEnvelope(t *testing.T, env envelope.Envelope) {
	t.Helper()
	if !strings.HasPrefix(env.IdempotencyKey, "pharmacy_") || len(env.IdempotencyKey) != len("pharmacy_")+32 {
		t.Errorf("IdempotencyKey = %q, want pharmacy_<32 hex>", env.IdempotencyKey)
	}
	if env.EventTime.IsZero() || env.EventTime.Location() != time.UTC {
		t.Errorf("EventTime = %v, want a UTC time", env.EventTime)
	}
	if env.OrderingKey == "" {
		t.Error("OrderingKey is empty")
	}
	if env.Domain != "pharmacy" || env.KeySource != pharmacy.KeySource || env.PartyID == "" {
		t.Errorf("Domain/KeySource/PartyID = %q/%q/%q", env.Domain, env.KeySource, env.PartyID)
	}
}

func TestTestdata(t *testing.T) {
	g := newGate(t)
	files := testFiles(t)
	var valid, invalid int
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			env, err := g.Check(subjectFor(f.data), f.data)
			if f.code == "" {
				if err != nil {
					t.Fatalf("valid file rejected: %v", err)
				}
				checkEnvelope(t, env)
				return
			}
			if got := codes.Of(err); string(got) != f.code {
				t.Fatalf("code = %q (%v), want %q", got, err, f.code)
			}
		})
		if f.code == "" {
			valid++
		} else {
			invalid++
		}
	}
	if valid < 15 || invalid < 25 {
		t.Errorf("testdata has %d valid and %d invalid files, want at least 15 and 25", valid, invalid)
	}
}

// TestDetailsHideValues checks that no error detail quotes an identifier
// value of its event (dea_schedule is a closed set that rules name).
func TestDetailsHideValues(t *testing.T) {
	g := newGate(t)
	for _, f := range testFiles(t) {
		if f.code == "" {
			continue
		}
		_, err := g.Check(subjectFor(f.data), f.data)
		detail := codes.DetailOf(err)
		doc, derr := gate.Decode(f.data)
		if derr != nil {
			continue
		}
		for _, key := range []string{"transaction_id", "registrant_dea", "ndc", "lot", "counterparty_dea", "occurred_at", "quantity_delta", "expiry", "actor_id"} {
			if v, ok := doc[key].(string); ok && len(strings.TrimSpace(v)) > 2 && strings.Contains(detail, v) {
				t.Errorf("%s: detail %q quotes %s", f.name, detail, key)
			}
		}
	}
}

// event is a valid Schedule II dispense, as a map to vary.
func event() map[string]any {
	return map[string]any{
		"transaction_id": "INV-2025-7001",
		"registrant_dea": "BW4829137",
		"ndc":            "0591-2345-01",
		"lot":            "L24A0917",
		"expiry":         "2026-09-30",
		"quantity_delta": "-30",
		"unit":           "EA",
		"event_type":     "dispense",
		"dea_schedule":   "II",
		"occurred_at":    "2025-03-14T15:42:10Z",
		"actor_id":       "RPH-0412",
	}
}

// with returns event() changed by the given key/value pairs (nil deletes).
func with(kv ...any) map[string]any {
	e := event()
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(e, k)
		} else {
			e[k] = kv[i+1]
		}
	}
	return e
}

func check(t *testing.T, g *gate.Gate, token string, doc map[string]any) (envelope.Envelope, error) {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return g.Check("events.pharmacy."+token, data)
}

func TestEnvelope(t *testing.T) {
	g := newGate(t)
	env, err := check(t, g, "dispense", event())
	if err != nil {
		t.Fatal(err)
	}
	checkEnvelope(t, env)
	want := envelope.Envelope{
		Domain:         "pharmacy",
		EventType:      "dispense",
		KeySource:      "registrant_dea+transaction_id",
		OrderingKey:    "BW4829137.00591234501.L24A0917",
		EventTime:      time.Date(2025, 3, 14, 15, 42, 10, 0, time.UTC),
		PartyID:        "BW4829137",
		IdempotencyKey: "x", // compared separately
	}
	if env.Domain != want.Domain || env.EventType != want.EventType || env.KeySource != want.KeySource ||
		env.OrderingKey != want.OrderingKey || !env.EventTime.Equal(want.EventTime) || env.PartyID != want.PartyID {
		t.Errorf("envelope = %+v, want %+v", env, want)
	}
	wantIDs := map[string]string{
		"transaction_id": "INV-2025-7001", "registrant_dea": "BW4829137", "ndc": "0591-2345-01",
		"ndc11": "00591234501", "lot": "L24A0917", "dea_schedule": "II",
	}
	if len(env.Identifiers) != len(wantIDs) {
		t.Errorf("Identifiers = %v, want %v", env.Identifiers, wantIDs)
	}
	for k, v := range wantIDs {
		if env.Identifiers[k] != v {
			t.Errorf("Identifiers[%s] = %q, want %q", k, env.Identifiers[k], v)
		}
	}
}

func TestEnvelopeOptionalParts(t *testing.T) {
	g := newGate(t)
	tests := []struct {
		name         string
		token        string
		doc          map[string]any
		ordering     string
		counterparty string
	}{
		{"no lot below schedule II", "dispense", with("dea_schedule", "IV", "lot", nil), "BW4829137.00591234501.", ""},
		{"empty lot below schedule II", "dispense", with("dea_schedule", "V", "lot", ""), "BW4829137.00591234501.", ""},
		{"counterparty upper-cased", "transfer_out", with("event_type", "transfer_out", "counterparty_dea", "rk5612088"), "BW4829137.00591234501.L24A0917", "RK5612088"},
		{"counterparty on a schedule III transfer", "transfer_in", with("event_type", "transfer_in", "quantity_delta", "5", "dea_schedule", "III", "counterparty_dea", "FM7301548"), "BW4829137.00591234501.L24A0917", "FM7301548"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := check(t, g, tt.token, tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			if env.OrderingKey != tt.ordering {
				t.Errorf("OrderingKey = %q, want %q", env.OrderingKey, tt.ordering)
			}
			got, ok := env.Identifiers["counterparty_dea"]
			if got != tt.counterparty || ok != (tt.counterparty != "") {
				t.Errorf("counterparty_dea = %q (present %v), want %q", got, ok, tt.counterparty)
			}
			if _, ok := env.Identifiers["lot"]; ok != strings.HasSuffix(tt.ordering, "L24A0917") {
				t.Errorf("lot identifier presence wrong: %v", env.Identifiers)
			}
		})
	}
}

func TestKeyStability(t *testing.T) {
	g := newGate(t)
	base, err := check(t, g, "dispense", event())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
		doc   map[string]any
		raw   string // used instead of doc when set
		same  bool
	}{
		{"same instant with another offset", "dispense", with("occurred_at", "2025-03-14T10:42:10-05:00"), "", true},
		{"registrant in lower case", "dispense", with("registrant_dea", "bw4829137"), "", true},
		{"transaction id with surrounding spaces", "dispense", with("transaction_id", "  INV-2025-7001 "), "", true},
		{"ndc in 11-digit form", "dispense", with("ndc", "00591234501"), "", true},
		{"subject token in upper case", "DISPENSE", event(), "", true},
		{"other field order and whitespace", "dispense", nil, `{"actor_id":"RPH-0412", "occurred_at":"2025-03-14T15:42:10Z",
			"dea_schedule":"II","event_type":"dispense","unit":"EA","quantity_delta":"-30","expiry":"2026-09-30",
			"lot":"L24A0917","ndc":"0591-2345-01","registrant_dea":"BW4829137","transaction_id":"INV-2025-7001"}`, true},
		{"other transaction id", "dispense", with("transaction_id", "INV-2025-7002"), "", false},
		{"same transaction id at another registrant", "dispense", with("registrant_dea", "FM7301548"), "", false},
		{"transaction id differing in case", "dispense", with("transaction_id", "inv-2025-7001"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var env envelope.Envelope
			var err error
			if tt.raw != "" {
				env, err = g.Check("events.pharmacy."+tt.token, []byte(tt.raw))
			} else {
				env, err = check(t, g, tt.token, tt.doc)
			}
			if err != nil {
				t.Fatal(err)
			}
			if same := env.IdempotencyKey == base.IdempotencyKey; same != tt.same {
				t.Errorf("key %s vs base %s: same = %v, want %v", env.IdempotencyKey, base.IdempotencyKey, same, tt.same)
			}
			if tt.same && !env.EventTime.Equal(base.EventTime) {
				t.Errorf("EventTime = %v, want %v", env.EventTime, base.EventTime)
			}
		})
	}
}

func TestCheckCodes(t *testing.T) {
	g := newGate(t)
	tests := []struct {
		name  string
		token string
		doc   map[string]any
		want  codes.Code
	}{
		{"subject token disagrees", "receive", event(), codes.SubjectMismatch},
		{"subject token unknown", "sell", event(), codes.SubjectMismatch},
		{"registrant letter N", "dispense", with("registrant_dea", "NW4829137"), pharmacy.InvalidDEANumber},
		{"registrant not a string", "dispense", with("registrant_dea", 4829137), pharmacy.InvalidDEANumber},
		{"counterparty not a string", "dispense", with("counterparty_dea", true), pharmacy.InvalidDEANumber},
		{"counterparty bad on a dispense", "dispense", with("counterparty_dea", "RK5612080"), pharmacy.InvalidDEANumber},
		{"ndc empty", "dispense", with("ndc", " "), pharmacy.InvalidNDC},
		{"ndc hyphens only", "dispense", with("ndc", "--"), pharmacy.InvalidNDC},
		{"schedule lower case accepted", "dispense", with("dea_schedule", "iin"), ""},
		{"schedule null", "dispense", with("dea_schedule", json.RawMessage("null")), pharmacy.InvalidDEASchedule},
		{"quantity 16 integer digits", "dispense", with("quantity_delta", "-1234567890123456"), codes.InvalidQuantity},
		{"quantity 7 fraction digits", "dispense", with("quantity_delta", "-1.1234567"), codes.InvalidQuantity},
		{"quantity leading point", "dispense", with("quantity_delta", "-.5"), codes.InvalidQuantity},
		{"quantity sign only", "dispense", with("quantity_delta", "-"), codes.InvalidQuantity},
		{"quantity empty", "dispense", with("quantity_delta", ""), codes.InvalidQuantity},
		{"quantity double sign", "dispense", with("quantity_delta", "--3"), codes.InvalidQuantity},
		{"count zero", "count", with("event_type", "count", "quantity_delta", "0"), ""},
		{"adjust negative", "adjust", with("event_type", "adjust", "quantity_delta", "-0.001"), ""},
		{"schedule II waste without lot", "waste", with("event_type", "waste", "lot", nil), codes.MissingLot},
		{"schedule II transfer_in without counterparty", "transfer_in", with("event_type", "transfer_in", "quantity_delta", "3"), pharmacy.MissingCounterparty},
		{"schedule II transfer_out empty counterparty", "transfer_out", with("event_type", "transfer_out", "counterparty_dea", ""), pharmacy.MissingCounterparty},
		{"time with a space for T and no offset", "dispense", with("occurred_at", "2025-03-14 15:42:10"), codes.UnparseableEventTime},
		{"expiry in another format", "dispense", with("expiry", "09/30/2026"), codes.SchemaValidation},
		{"lot longer than 20", "dispense", with("lot", strings.Repeat("A", 21)), codes.SchemaValidation},
		{"lot not a string", "dispense", with("lot", 12345), codes.SchemaValidation},
		{"blank transaction id", "dispense", with("transaction_id", "   "), codes.SchemaValidation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check(t, g, tt.token, tt.doc)
			if got := codes.Of(err); got != tt.want {
				t.Errorf("code = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestCheckWithoutSchema calls the Checker directly, as a caller that skips
// the schema would: every failure must still be coded.
func TestCheckWithoutSchema(t *testing.T) {
	tests := []struct {
		name string
		doc  map[string]any
		want codes.Code
	}{
		{"nil document", nil, codes.SchemaValidation},
		{"empty document", map[string]any{}, codes.SchemaValidation},
		{"event type not a string", with("event_type", 3), codes.SchemaValidation},
		{"no transaction id", with("transaction_id", nil), codes.SchemaValidation},
		{"transaction id a number", with("transaction_id", json.Number("7")), codes.SchemaValidation},
		{"no unit", with("unit", nil), codes.SchemaValidation},
		{"quantity a number", with("quantity_delta", json.Number("-30")), codes.InvalidQuantity},
		{"expiry a number", with("expiry", json.Number("20260930")), codes.SchemaValidation},
		{"valid", event(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pharmacy.Checker{}.Check("dispense", tt.doc)
			if got := codes.Of(err); got != tt.want {
				t.Errorf("code = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestEventType(t *testing.T) {
	tests := []struct {
		name string
		doc  map[string]any
		want string
		ok   bool
	}{
		{"lower case", map[string]any{"event_type": "transfer_out"}, "transfer_out", true},
		{"upper case and spaces", map[string]any{"event_type": " Waste "}, "waste", true},
		{"unknown", map[string]any{"event_type": "sale"}, "", false},
		{"missing", map[string]any{}, "", false},
		{"number", map[string]any{"event_type": json.Number("1")}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pharmacy.Checker{}.EventType(tt.doc)
			if got != tt.want || (err == nil) != tt.ok {
				t.Errorf("EventType = %q, %v; want %q, ok %v", got, err, tt.want, tt.ok)
			}
			if err != nil && codes.Of(err) != codes.SchemaValidation {
				t.Errorf("code = %q", codes.Of(err))
			}
		})
	}
}

func TestNormalizeNDC(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"4-4-2", "0591-2345-01", "00591234501", nil},
		{"5-3-2", "55150-123-10", "55150012310", nil},
		{"5-4-1", "68462-0387-1", "68462038701", nil},
		{"5-4-2", "00406-0512-01", "00406051201", nil},
		{"11 plain digits", "60505012301", "60505012301", nil},
		{"10 plain digits", "0591234501", "", pharmacy.ErrNDCAmbiguous},
		{"9 plain digits", "059123450", "", pharmacy.ErrNDCLayout},
		{"3-4-3", "059-1234-501", "", pharmacy.ErrNDCLayout},
		{"4-4-1", "0591-2345-1", "", pharmacy.ErrNDCLayout},
		{"two segments", "05912-345601", "", pharmacy.ErrNDCLayout},
		{"four segments", "00406-0512-01-5", "", pharmacy.ErrNDCLayout},
		{"empty segment", "00406--01", "", pharmacy.ErrNDCLayout},
		{"letter", "00406-05I2-01", "", pharmacy.ErrNDCLayout},
		{"non-ASCII digit", "00406-0512-0١", "", pharmacy.ErrNDCLayout},
		{"empty", "", "", pharmacy.ErrNDCLayout},
		{"spaces around hyphen", "00406 -0512-01", "", pharmacy.ErrNDCLayout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pharmacy.NormalizeNDC(tt.in)
			if got != tt.want || err != tt.err {
				t.Errorf("NormalizeNDC = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// TestNDC10Forms: the 10-digit forms an NDC may have, as a drug's GTIN
// carries them: one for a 10-digit layout, each padding an NDC-11 allows.
func TestNDC10Forms(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		err      error
	}{
		{"4-4-2", "0409-4888-20", []string{"0409488820"}, nil},
		{"5-3-2", "55150-123-10", []string{"5515012310"}, nil},
		{"5-4-1", "68462-0387-1", []string{"6846203871"}, nil},
		{"10 plain digits, as a GTIN carries them", "0409488820", []string{"0409488820"}, nil},
		{"NDC-11 padded in its labeler only", "00409-4888-20", []string{"0409488820"}, nil},
		{"NDC-11 with three possible paddings", "00406-0512-01", []string{"0406051201", "0040651201", "0040605121"}, nil},
		{"NDC-11 plain with no zero to remove", "12345678911", nil, pharmacy.ErrNDCLayout},
		{"3-4-3", "059-1234-501", nil, pharmacy.ErrNDCLayout},
		{"a name", "Müller & Söhne", nil, pharmacy.ErrNDCLayout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pharmacy.NDC10Forms(tt.in)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") || err != tt.err {
				t.Errorf("NDC10Forms = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestValidateDEA(t *testing.T) {
	tests := []struct {
		name, in string
		err      error
	}{
		{"practitioner A", "AB1234563", nil},
		{"hospital B", "BW4829137", nil},
		{"business address 9", "F92048711", nil},
		{"mid-level M", "MJ6473021", nil},
		{"distributor R", "RK5612088", nil},
		{"check digit from a sum ending in 0", "AA0000000", nil},
		{"wrong check digit", "AB1234564", pharmacy.ErrDEACheckDigit},
		{"registrant letter N", "NB1234563", pharmacy.ErrDEAType},
		{"registrant letter I", "IB1234563", pharmacy.ErrDEAType},
		{"registrant digit", "1B1234563", pharmacy.ErrDEAType},
		{"lower case not normalized", "ab1234563", pharmacy.ErrDEAType},
		{"second character digit", "A11234563", pharmacy.ErrDEASecond},
		{"letter among digits", "AB12345O3", pharmacy.ErrDEADigits},
		{"too short", "AB123456", pharmacy.ErrDEALength},
		{"too long", "AB12345630", pharmacy.ErrDEALength},
		{"suffix", "AB1234563-001AB", pharmacy.ErrDEALength},
		{"empty", "", pharmacy.ErrDEALength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := pharmacy.ValidateDEA(tt.in); err != tt.err {
				t.Errorf("ValidateDEA = %v, want %v", err, tt.err)
			}
		})
	}
}

// knownCodes are the codes the gate may return for a pharmacy event.
var knownCodes = map[codes.Code]bool{
	codes.MalformedJSON: true, codes.DuplicateKey: true, codes.NotAnObject: true, codes.InvalidUTF8: true,
	codes.PayloadTooLarge: true, codes.UnknownSubject: true, codes.SchemaValidation: true,
	codes.SubjectMismatch: true, codes.UnparseableEventTime: true, codes.MissingLot: true,
	pharmacy.InvalidNDC: true, pharmacy.InvalidDEANumber: true, pharmacy.InvalidDEASchedule: true,
	pharmacy.QuantitySignMismatch: true, pharmacy.MissingCounterparty: true, codes.InvalidQuantity: true,
}

func FuzzGatePharmacy(f *testing.F) {
	for _, tf := range testFiles(f) {
		f.Add(tf.data, "")
	}
	seed := testFiles(f)[0].data
	f.Add(seed, "receive")
	f.Add(seed, "Dispense")
	f.Add(bytes.Replace(seed, []byte(`"-30"`), []byte(`-30`), 1), "")
	f.Add(bytes.Replace(seed, []byte(`"II"`), []byte(`"ii"`), 1), "")
	f.Add(seed[:len(seed)/2], "")
	f.Add([]byte(`{"event_type":"count","quantity_delta":"-0.000000"}`), "count")
	f.Add([]byte(`[]`), "")
	f.Add([]byte("{\"ndc\":\"\xff\"}"), "")
	g := newGate(f)
	f.Fuzz(func(t *testing.T, data []byte, token string) {
		subject := subjectFor(data)
		if token != "" {
			subject = "events.pharmacy." + token
		}
		env, err := g.Check(subject, data)
		if err != nil {
			if c := codes.Of(err); c == codes.Internal || !knownCodes[c] {
				t.Fatalf("unexpected code %q: %v", c, err)
			}
			// A failed event's identity is derived without panicking,
			// the same for the same input.
			if id, again := g.Identify(subject, data), g.Identify(subject, data); !id.Partial || id.IdempotencyKey != again.IdempotencyKey ||
				id.OrderingKey != again.OrderingKey || id.PartyID != again.PartyID {
				t.Fatalf("identity %+v, then %+v", id, again)
			}
			return
		}
		checkEnvelope(t, env)
		if _, perr := pharmacy.NormalizeNDC(env.Identifiers["ndc"]); perr != nil {
			t.Errorf("accepted an invalid ndc: %v", perr)
		}
		if pharmacy.ValidateDEA(env.PartyID) != nil {
			t.Error("accepted an invalid registrant_dea")
		}
	})
}

func BenchmarkGatePharmacy(b *testing.B) {
	g := newGate(b)
	data, err := fs.ReadFile(schemas.FS, path.Join(testdataDir, "valid", "dispense-schedule-ii.json"))
	if err != nil {
		b.Fatal(err)
	}
	const subject = "events.pharmacy.dispense"
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.Check(subject, data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSheetDrugName: the pharmacy sheet shows the drug name as on the
// label, beside the NDC it names.
func TestSheetDrugName(t *testing.T) {
	for _, tt := range []struct {
		name, event string
		want        any
	}{
		{"with a drug name", `{"transaction_id":"T1","ndc":"0409-4888-20","drug_name":"Hydromorphone HCl 2 mg/mL <CII> & \"Müller\" 陈伟"}`,
			`Hydromorphone HCl 2 mg/mL <CII> & "Müller" 陈伟`},
		{"null drug name", `{"transaction_id":"T1","ndc":"0409-4888-20","drug_name":null}`, nil},
		{"without", `{"transaction_id":"T1","ndc":"0409-4888-20"}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := gate.Decode([]byte(tt.event))
			if err != nil {
				t.Fatal(err)
			}
			row := pharmacy.Spec().Sheet().Row(doc, "dispense")
			if got := row["drug_name"]; got != tt.want {
				t.Fatalf("drug_name = %#v, want %#v", got, tt.want)
			}
			if row["ndc11"] != "00409488820" {
				t.Errorf("ndc11 = %#v", row["ndc11"])
			}
		})
	}
}
