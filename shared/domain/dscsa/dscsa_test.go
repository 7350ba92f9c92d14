package dscsa_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
)

const (
	testdataDir = "testdata/dscsa"
	// fallbackToken is the subject token used when a document has no
	// derivable event type (malformed JSON, missing or unknown bizStep).
	fallbackToken = "shipping"
)

// newGate returns a gate with the built-in checkers.
func newGate(tb testing.TB) *gate.Gate {
	tb.Helper()
	g, err := gate.New(0)
	if err != nil {
		tb.Fatalf("gate.New: %v", err)
	}
	return g
}

// subjectFor derives the subject a publisher would use for data.
func subjectFor(data []byte) string {
	token := fallbackToken
	if doc, err := gate.Decode(data); err == nil {
		if et, err := (dscsa.Checker{}).EventType(doc); err == nil {
			token = et
		}
	}
	return "events.dscsa." + token
}

// testdataFile is one example event and the code its name promises.
type testdataFile struct {
	name string
	data []byte
	want codes.Code // "" for a valid file
}

func readTestdata(tb testing.TB) []testdataFile {
	tb.Helper()
	examples, err := schemas.Examples("dscsa")
	if err != nil {
		tb.Fatal(err)
	}
	files := make([]testdataFile, 0, len(examples))
	for _, ex := range examples {
		kind := "invalid"
		if ex.Valid {
			kind = "valid"
		}
		files = append(files, testdataFile{name: kind + "/" + ex.Name, data: ex.Data, want: codes.Code(ex.Code)})
	}
	return files
}

// checkEnvelope asserts what every accepted event's envelope must hold.
func checkEnvelope(t *testing.T, env envelope.Envelope) {
	t.Helper()
	if !strings.HasPrefix(env.IdempotencyKey, "dscsa_") || len(env.IdempotencyKey) != len("dscsa_")+32 {
		t.Errorf("IdempotencyKey = %q, want dscsa_<32 hex>", env.IdempotencyKey)
	}
	if env.KeySource == "" {
		t.Error("KeySource is empty")
	}
	if env.EventTime.IsZero() || env.EventTime.Location() != time.UTC {
		t.Errorf("EventTime = %v, want a UTC time", env.EventTime)
	}
	if env.OrderingKey == "" {
		t.Error("OrderingKey is empty")
	}
	if env.Domain != "dscsa" || env.EventType == "" {
		t.Errorf("Domain, EventType = %q, %q", env.Domain, env.EventType)
	}
	if !strings.HasPrefix(env.EventHashID, eventhash.Prefix) || !strings.HasSuffix(env.EventHashID, "?ver="+eventhash.Version) {
		t.Errorf("EventHashID = %q", env.EventHashID)
	}
}

func TestTestdata(t *testing.T) {
	g := newGate(t)
	files := readTestdata(t)
	valid, invalid := 0, 0
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			env, err := g.Check(subjectFor(f.data), f.data)
			if f.want == "" {
				if err != nil {
					t.Fatalf("valid file rejected: %v", err)
				}
				checkEnvelope(t, env)
				return
			}
			if got := codes.Of(err); got != f.want {
				t.Fatalf("code = %q (%v), want %q", got, err, f.want)
			}
		})
		if f.want == "" {
			valid++
		} else {
			invalid++
		}
	}
	if valid < 15 || invalid < 25 {
		t.Errorf("testdata has %d valid and %d invalid files, want at least 15 and 25", valid, invalid)
	}
}

// fileData returns the bytes of one testdata file.
func fileData(t testing.TB, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(schemas.FS, path.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEnvelopeFields(t *testing.T) {
	g := newGate(t)
	tests := []struct {
		name         string
		file         string
		eventType    string
		keySource    string
		eventTime    string
		ordering     string
		party        string
		identifiers  map[string]string
		keyFromEvent string // eventID the key must be derived from, if any
	}{
		{
			name: "commissioning with SGTIN URNs", file: "valid/commissioning-sgtin.json",
			eventType: "commissioning", keySource: "eventID",
			eventTime: "2024-02-05T14:02:11.35Z",
			ordering:  "00614141123452.10016550749981",
			party:     "0614141007776", // no sourceList: the bizLocation GLN
			identifiers: map[string]string{
				"gtin": "00614141123452", "serial": "10016550749981", "lot": "A24B017",
				"expiry": "2026-01-31", "read_point": "0614141007776",
				"biz_location": "0614141007776", "epc_count": "3",
			},
			keyFromEvent: "urn:uuid:6f1c2c7e-3b8e-4d55-9d43-5f0a9a1e2b01",
		},
		{
			name: "shipping at -05:00 normalized to UTC", file: "valid/shipping-offset-0500.json",
			eventType: "shipping", keySource: "eventID",
			eventTime: "2024-03-12T14:15:00Z",
			ordering:  "00614141123452.10016550749981",
			party:     "0614141000005", // owning_party PGLN
			identifiers: map[string]string{
				"gtin": "00614141123452", "serial": "10016550749981",
				"read_point": "0614141007776", "epc_count": "2",
			},
		},
		{
			name: "digital link on a custom host", file: "valid/commissioning-digital-link-custom-host.json",
			eventType: "commissioning", keySource: "eventID",
			eventTime: "2024-02-05T14:02:11.35Z",
			ordering:  "00350881120442.100200300401",
			party:     "0350881000102",
			identifiers: map[string]string{
				"gtin": "00350881120442", "serial": "100200300401", "lot": "L2309A",
				"expiry": "2026-11-30", "read_point": "0350881000102",
				"biz_location": "0350881000102", "epc_count": "2",
			},
		},
		{
			name: "indicator digit 9", file: "valid/commissioning-indicator-nine.json",
			eventType: "commissioning", keySource: "eventID",
			eventTime: "2024-02-05T14:02:11.35Z",
			ordering:  "90614141123455.V0001",
			party:     "0614141007776",
		},
		{
			name: "company prefix of 12 digits", file: "valid/dispensing-company-prefix-12.json",
			eventType: "dispensing", keySource: "eventHashID",
			eventTime: "2024-05-20T20:45:09.5Z",
			ordering:  "00369123456782.RX55000123",
			party:     "0369123456782",
		},
		{
			name: "company prefix of 6 digits", file: "valid/shipping-company-prefix-6.json",
			eventType: "shipping", keySource: "eventID",
			eventTime: "2024-03-12T14:15:00Z",
			ordering:  "00360001234560.202403120001",
			party:     "0614141000005",
		},
		{
			name: "company prefix of 10 digits", file: "valid/receiving-company-prefix-10.json",
			eventType: "receiving", keySource: "eventHashID",
			eventTime: "2024-03-14T16:40:27.118Z",
			ordering:  "00312345678050.ZX81QK",
			party:     "0614141000005", // https://ref.gs1.org/cbv/SDT-owning_party
		},
		{
			name: "percent-encoded serial", file: "valid/shipping-percent-encoded-serial.json",
			eventType: "shipping", keySource: "eventID",
			eventTime: "2024-03-12T14:15:00Z",
			ordering:  "10614141073464.SN/0042?A",
			party:     "0614141000005",
		},
		{
			name: "local eventTime read in eventTimeZoneOffset", file: "valid/receiving-local-time-with-offset.json",
			eventType: "receiving", keySource: "eventHashID",
			eventTime: "2024-03-14T16:40:27.118Z",
			ordering:  "00614141123452.10016550749981",
			party:     "0614141000005",
		},
		{
			name: "digital link locations with extension", file: "valid/destroying-digital-link-locations.json",
			eventType: "destroying", keySource: "eventHashID",
			eventTime: "2024-06-03T06:00:00Z",
			ordering:  "00360001234560.DX0093311",
			party:     "0614141007776",
			identifiers: map[string]string{
				"gtin": "00360001234560", "serial": "DX0093311",
				"read_point": "0614141007776.12", "biz_location": "0614141007776", "epc_count": "1",
			},
		},
		{
			name: "error declaration", file: "valid/receiving-error-declaration.json",
			eventType: "receiving", keySource: "eventID+errorDeclaration",
			eventTime: "2024-03-14T16:40:27.118Z",
			ordering:  "00614141123452.10016550749981",
			party:     "0614141000005",
		},
		{
			name: "owning party as digital link /417/ after a possessing party", file: "valid/shipping-compact-iri-and-quantity.json",
			eventType: "shipping", keySource: "eventID",
			eventTime: "2024-03-12T14:15:00Z",
			ordering:  "00614141123452.10016550749981",
			party:     "0614141000005",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := fileData(t, tt.file)
			env, err := g.Check(subjectFor(data), data)
			if err != nil {
				t.Fatal(err)
			}
			checkEnvelope(t, env)
			want, _ := time.Parse(time.RFC3339Nano, tt.eventTime)
			if env.EventType != tt.eventType || env.KeySource != tt.keySource ||
				!env.EventTime.Equal(want) || env.OrderingKey != tt.ordering || env.PartyID != tt.party {
				t.Errorf("got type %q source %q time %v ordering %q party %q;\nwant %q %q %v %q %q",
					env.EventType, env.KeySource, env.EventTime, env.OrderingKey, env.PartyID,
					tt.eventType, tt.keySource, want, tt.ordering, tt.party)
			}
			for k, v := range tt.identifiers {
				if env.Identifiers[k] != v {
					t.Errorf("Identifiers[%s] = %q, want %q", k, env.Identifiers[k], v)
				}
			}
			if tt.identifiers != nil && len(env.Identifiers) != len(tt.identifiers) {
				t.Errorf("Identifiers = %v, want %v", env.Identifiers, tt.identifiers)
			}
			if tt.keyFromEvent != "" && env.IdempotencyKey != domain.Key("dscsa", "eventID", tt.keyFromEvent) {
				t.Errorf("IdempotencyKey = %q, not derived from the eventID", env.IdempotencyKey)
			}
		})
	}
}

// baseIdentity is an event without eventID: its key is the identity hash.
const baseIdentity = `{
  "type": "ObjectEvent",
  "eventTime": "2024-03-12T09:15:00.250-05:00",
  "eventTimeZoneOffset": "-05:00",
  "epcList": [
    "urn:epc:id:sgtin:0614141.012345.1001",
    "urn:epc:id:sgtin:0614141.107346.2002"
  ],
  "action": "OBSERVE",
  "bizStep": "shipping",
  "disposition": "in_transit",
  "readPoint": {"id": "urn:epc:id:sgln:0614141.00777.0"},
  "bizLocation": {"id": "urn:epc:id:sgln:0860001.23456.0"}
}`

func TestIdentityKey(t *testing.T) {
	g := newGate(t)
	keyOf := func(t *testing.T, doc string) envelope.Envelope {
		t.Helper()
		env, err := g.Check(subjectFor([]byte(doc)), []byte(doc))
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return env
	}
	base := keyOf(t, baseIdentity)
	if base.KeySource != "eventHashID" {
		t.Fatalf("KeySource = %q", base.KeySource)
	}
	// The key derives from the CBV 2.0 event hash ID, whose pre-hash
	// string is, for this event:
	const wantPreHash = "eventType=ObjectEventeventTime=2024-03-12T14:15:00.250ZeventTimeZoneOffset=-05:00" +
		"epcListepc=https://id.gs1.org/01/00614141123452/21/1001epc=https://id.gs1.org/01/10614141073464/21/2002" +
		"action=OBSERVEbizStep=https://ref.gs1.org/cbv/BizStep-shippingdisposition=https://ref.gs1.org/cbv/Disp-in_transit" +
		"readPointid=https://id.gs1.org/414/0614141007776bizLocationid=https://id.gs1.org/414/0860001234565"
	doc, err := gate.Decode([]byte(baseIdentity))
	if err != nil {
		t.Fatal(err)
	}
	if pre := eventhash.PreHash(doc, nil); pre != wantPreHash {
		t.Fatalf("pre-hash\n got %s\nwant %s", pre, wantPreHash)
	}
	sum := sha256.Sum256([]byte(wantPreHash))
	wantHash := "ni:///sha-256;" + hex.EncodeToString(sum[:]) + "?ver=CBV2.0"
	if base.EventHashID != wantHash {
		t.Fatalf("EventHashID = %q, want %q", base.EventHashID, wantHash)
	}
	if wantBase := domain.Key("dscsa", "eventHashID", wantHash); base.IdempotencyKey != wantBase {
		t.Fatalf("key = %q, want %q", base.IdempotencyKey, wantBase)
	}
	r := strings.NewReplacer
	tests := []struct {
		name string
		edit *strings.Replacer
		same bool
	}{
		{"same instant given in UTC", r(`"2024-03-12T09:15:00.250-05:00"`, `"2024-03-12T14:15:00.25Z"`), true},
		{"same instant given at +01:00", r(`"2024-03-12T09:15:00.250-05:00"`, `"2024-03-12T15:15:00.250000+01:00"`), true},
		{"same instant given as local time in eventTimeZoneOffset", r(`"2024-03-12T09:15:00.250-05:00"`, `"2024-03-12T09:15:00.25"`), true},
		{"eventTimeZoneOffset alone differs (part of the event hash)", r(`"eventTimeZoneOffset": "-05:00"`, `"eventTimeZoneOffset": "-06:00"`), false},
		{"bizStep as CBV URN", r(`"shipping"`, `"urn:epcglobal:cbv:bizstep:shipping"`), true},
		{"bizStep as CBV web URI", r(`"shipping"`, `"https://ref.gs1.org/cbv/BizStep-shipping"`), true},
		{"disposition as CBV web URI", r(`"in_transit"`, `"https://ref.gs1.org/cbv/Disp-in_transit"`), true},
		{"EPCs in another order", r(`"urn:epc:id:sgtin:0614141.012345.1001",
    "urn:epc:id:sgtin:0614141.107346.2002"`, `"urn:epc:id:sgtin:0614141.107346.2002", "urn:epc:id:sgtin:0614141.012345.1001"`), true},
		{"EPC as Digital Link with lot and query", r(`"urn:epc:id:sgtin:0614141.012345.1001"`, `"https://dl.example.com/01/00614141123452/10/L1/21/1001?linkType=all"`), true},
		{"uppercase SGTIN prefix", r(`urn:epc:id:sgtin:0614141.012345`, `URN:EPC:ID:SGTIN:0614141.012345`), true},
		{"readPoint as Digital Link", r(`"urn:epc:id:sgln:0614141.00777.0"`, `"https://id.gs1.org/414/0614141007776"`), true},
		{"with @context", r(`"type": "ObjectEvent",`, `"@context": ["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld", {"example": "https://ns.example.com/epcis/"}], "type": "ObjectEvent",`), true},
		{"an extension (part of the event hash)", r(`"type": "ObjectEvent",`, `"type": "ObjectEvent", "example:note": "Müller & Söhne <Großhandel>",`), false},
		{"bizTransactionList added", r(`"action"`, `"bizTransactionList": [{"type": "po", "bizTransaction": "urn:epcglobal:cbv:bt:0860001234565:PO-1"}], "action"`), false},
		{"recordTime differs", r(`"action"`, `"recordTime": "2024-03-12T14:20:00Z", "action"`), true},
		{"compact JSON", r("\n", "", "  ", ""), true},
		{"one millisecond later", r(`09:15:00.250`, `09:15:00.251`), false},
		{"another serial", r(`.1001"`, `.1003"`), false},
		{"another action", r(`"OBSERVE"`, `"ADD"`), false},
		{"another disposition", r(`"in_transit"`, `"damaged"`), false},
		{"no disposition", r(`"disposition": "in_transit",`, ``), false},
		{"readPoint with extension", r(`"urn:epc:id:sgln:0614141.00777.0"`, `"urn:epc:id:sgln:0614141.00777.7"`), false},
		{"no bizLocation", r(`,
  "bizLocation": {"id": "urn:epc:id:sgln:0860001.23456.0"}`, ``), false},
		{"an extra EPC", r(`"urn:epc:id:sgtin:0614141.012345.1001",`, `"urn:epc:id:sgtin:0614141.012345.1001", "urn:epc:id:sgtin:0614141.012345.1004",`), false},
		{"an errorDeclaration", r(`"action"`, `"errorDeclaration": {"declarationTime": "2024-03-13T00:00:00Z"}, "action"`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.edit.Replace(baseIdentity)
			if doc == baseIdentity {
				t.Fatal("edit changed nothing")
			}
			env := keyOf(t, doc)
			if got := env.IdempotencyKey == base.IdempotencyKey; got != tt.same {
				t.Errorf("same key = %v, want %v", got, tt.same)
			}
			if tt.same && (env.OrderingKey != base.OrderingKey && !strings.Contains(tt.name, "order")) {
				t.Errorf("OrderingKey = %q, want %q", env.OrderingKey, base.OrderingKey)
			}
		})
	}
}

func TestEventIDKey(t *testing.T) {
	g := newGate(t)
	withID := strings.Replace(baseIdentity, `"type"`, `"eventID": "urn:uuid:11111111-2222-4333-8444-555555555555", "type"`, 1)
	tests := []struct {
		name string
		doc  string
		same bool
	}{
		{"same eventID, other EPCs", strings.Replace(withID, ".1001", ".1009", 1), true},
		{"same eventID, other time", strings.Replace(withID, "09:15:00.250", "10:00:00", 1), true},
		{"same eventID with surrounding spaces", strings.Replace(withID, `"urn:uuid:1111`, `" urn:uuid:1111`, 1), true},
		{"another eventID", strings.Replace(withID, "555555555555", "555555555556", 1), false},
		{"empty eventID falls back to the identity", strings.Replace(withID, "urn:uuid:11111111-2222-4333-8444-555555555555", "", 1), false},
	}
	ref, err := g.Check("events.dscsa.shipping", []byte(withID))
	if err != nil {
		t.Fatal(err)
	}
	if ref.KeySource != "eventID" || ref.IdempotencyKey != domain.Key("dscsa", "eventID", "urn:uuid:11111111-2222-4333-8444-555555555555") {
		t.Fatalf("eventID key: source %q key %q", ref.KeySource, ref.IdempotencyKey)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := g.Check("events.dscsa.shipping", []byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := env.IdempotencyKey == ref.IdempotencyKey; got != tt.same {
				t.Errorf("same key = %v, want %v (source %q)", got, tt.same, env.KeySource)
			}
		})
	}
}

func TestSubject(t *testing.T) {
	g := newGate(t)
	tests := []struct {
		name    string
		subject string
		doc     string
		want    codes.Code
	}{
		{"matching token", "events.dscsa.shipping", baseIdentity, ""},
		{"token in CBV URN form", "events.dscsa.urn:epcglobal:cbv:bizstep:shipping", baseIdentity, ""},
		{"receiving token for a shipping event", "events.dscsa.receiving", baseIdentity, codes.SubjectMismatch},
		{"commissioning token for a shipping event", "events.dscsa.commissioning", baseIdentity, codes.SubjectMismatch},
		{"unknown token", "events.dscsa.ship", baseIdentity, codes.SubjectMismatch},
		{"token differs only in case", "events.dscsa.Shipping", baseIdentity, codes.SubjectMismatch},
		{"URN bizStep on a bare token", "events.dscsa.shipping",
			strings.Replace(baseIdentity, `"shipping"`, `"urn:epcglobal:cbv:bizstep:shipping"`, 1), ""},
		{"URN bizStep on another token", "events.dscsa.receiving",
			strings.Replace(baseIdentity, `"shipping"`, `"urn:epcglobal:cbv:bizstep:shipping"`, 1), codes.SubjectMismatch},
		{"unknown bizStep wins over the subject", "events.dscsa.receiving",
			strings.Replace(baseIdentity, `"shipping"`, `"ship"`, 1), dscsa.InvalidBizStep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.Check(tt.subject, []byte(tt.doc))
			if got := codes.Of(err); got != tt.want {
				t.Fatalf("code = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestRules covers rules with edits of a valid event, one fault each.
func TestRules(t *testing.T) {
	g := newGate(t)
	tests := []struct {
		name string
		from string
		to   string
		want codes.Code
	}{
		{"SGTIN company prefix of 13 digits", `0614141.012345.1001`, `0614141012345..1001`, dscsa.InvalidEPC},
		{"SGTIN item reference with a letter", `0614141.012345.1001`, `0614141.01234A.1001`, dscsa.InvalidEPC},
		{"SGTIN serial with a bad character", `0614141.012345.1001`, `0614141.012345.10#1`, dscsa.InvalidEPC},
		{"SGTIN empty serial", `0614141.012345.1001`, `0614141.012345.`, dscsa.MissingSerial},
		{"SGTIN serial of 20 characters", `0614141.012345.1001`, `0614141.012345.ABCDEFGHIJ0123456789`, ""},
		{"SGTIN serial with set-82 punctuation", `0614141.012345.1001`, `0614141.012345.A-1_(b)*'+,;:=`, ""},
		{"EPC not a string", `"urn:epc:id:sgtin:0614141.012345.1001"`, `1001`, dscsa.InvalidEPC},
		{"readPoint id not a string", `{"id": "urn:epc:id:sgln:0614141.00777.0"}`, `{"id": 614141007776}`, dscsa.InvalidLocation},
		{"sourceList entry not an object", `"action"`, `"sourceList": ["urn:epc:id:pgln:0614141.00000"], "action"`, codes.SchemaValidation},
		{"Digital Link with a path prefix", `"urn:epc:id:sgtin:0614141.012345.1001"`, `"https://example.com/dl/01/00614141123452/21/1001"`, ""},
		{"Digital Link with a trailing slash", `"urn:epc:id:sgtin:0614141.012345.1001"`, `"https://example.com/01/00614141123452/21/1001/"`, ""},
		{"Digital Link with a fragment", `"urn:epc:id:sgtin:0614141.012345.1001"`, `"https://example.com/01/00614141123452/21/1001#x"`, ""},
		{"Digital Link with a dangling AI", `"urn:epc:id:sgtin:0614141.012345.1001"`, `"https://example.com/01/00614141123452/21/1001/10"`, dscsa.InvalidEPC},
		{"Digital Link with an empty serial", `"urn:epc:id:sgtin:0614141.012345.1001"`, `"https://example.com/01/00614141123452/21/"`, dscsa.MissingSerial},
		{"Digital Link GTIN of 12 digits", `"urn:epc:id:sgtin:0614141.012345.1001"`, `"https://example.com/01/614141123452/21/1001"`, dscsa.InvalidGTIN},
		{"Digital Link without host", `"urn:epc:id:sgtin:0614141.012345.1001"`, `"https:///01/00614141123452/21/1001"`, dscsa.InvalidEPC},
		{"bare GTIN", `"urn:epc:id:sgtin:0614141.012345.1001"`, `"00614141123452"`, dscsa.InvalidEPC},
		{"SGLN of 12 digits with a 12-digit prefix", `0614141.00777.0`, `061414100777..0`, ""},
		{"SGLN with a bad extension escape", `0614141.00777.0`, `0614141.00777.%zz`, dscsa.InvalidLocation},
		{"Digital Link location with 254 extension", `"urn:epc:id:sgln:0614141.00777.0"`, `"https://id.gs1.org/414/0614141007776/254/A1"`, ""},
		{"Digital Link location without /414/", `"urn:epc:id:sgln:0614141.00777.0"`, `"https://id.gs1.org/417/0614141007776"`, dscsa.InvalidLocation},
		{"readPoint without id", `{"id": "urn:epc:id:sgln:0614141.00777.0"}`, `{}`, codes.SchemaValidation},
		{"readPoint id empty", `{"id": "urn:epc:id:sgln:0614141.00777.0"}`, `{"id": " "}`, dscsa.InvalidLocation},
		{"eventTimeZoneOffset +14:00", `"-05:00",`, `"+14:00",`, ""},
		{"eventTimeZoneOffset +14:30", `"-05:00",`, `"+14:30",`, codes.UnparseableEventTime},
		{"eventTimeZoneOffset without colon", `"-05:00",`, `"-0500",`, codes.UnparseableEventTime},
		{"eventTime as a number", `"2024-03-12T09:15:00.250-05:00"`, `1710252900`, codes.SchemaValidation},
		{"eventTime date only", `"2024-03-12T09:15:00.250-05:00"`, `"2024-03-12"`, codes.UnparseableEventTime},
		{"eventTime with a space separator", `"2024-03-12T09:15:00.250-05:00"`, `"2024-03-12 09:15:00-05:00"`, codes.UnparseableEventTime},
		{"errorDeclaration time without offset", `"action"`, `"errorDeclaration": {"declarationTime": "2024-03-13T00:00:00"}, "action"`, codes.UnparseableEventTime},
		{"custom disposition URI", `"in_transit"`, `"https://ns.example.com/disp/held"`, ""},
		{"custom disposition URN", `"in_transit"`, `"urn:example:disp:quarantined-by-qa"`, ""},
		{"disposition as compact IRI", `"in_transit"`, `"cbv:Disp-in_transit"`, ""},
		{"disposition misspelled in its CBV URN", `"in_transit"`, `"urn:epcglobal:cbv:disp:in_transt"`, dscsa.InvalidDisposition},
		{"disposition misspelled in its CBV web URI", `"in_transit"`, `"https://ref.gs1.org/cbv/Disp-intransit"`, dscsa.InvalidDisposition},
		{"disposition as a bare word outside the CBV", `"in_transit"`, `"in-transit"`, dscsa.InvalidDisposition},
		{"disposition empty", `"in_transit"`, `" "`, dscsa.InvalidDisposition},
		{"type ObjectEvent missing", `"type": "ObjectEvent",`, ``, codes.SchemaValidation},
		{"expiry on a shipping event not a date", `"action"`, `"ilmd": {"cbvmda:itemExpirationDate": "2026-02-30"}, "action"`, dscsa.MissingExpiry},
		{"expiry as a JSON-LD value object", `"action"`, `"ilmd": {"cbvmda:itemExpirationDate": {"@value": "2026-02-28", "@type": "xsd:date"}}, "action"`, ""},
		{"expiry with a timezone", `"action"`, `"ilmd": {"cbvmda:itemExpirationDate": "2026-02-28Z"}, "action"`, ""},
		{"ilmd not an object", `"action"`, `"ilmd": [], "action"`, codes.SchemaValidation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(baseIdentity, tt.from, tt.to, 1)
			if doc == baseIdentity {
				t.Fatal("edit changed nothing")
			}
			env, err := g.Check("events.dscsa.shipping", []byte(doc))
			if got := codes.Of(err); got != tt.want {
				t.Fatalf("code = %q (%v), want %q", got, err, tt.want)
			}
			if err == nil {
				checkEnvelope(t, env)
			}
		})
	}
}

func TestCommissioningILMD(t *testing.T) {
	g := newGate(t)
	const commissioning = `{
  "type": "ObjectEvent",
  "eventTime": "2024-02-05T14:02:11Z",
  "eventTimeZoneOffset": "-05:00",
  "epcList": ["urn:epc:id:sgtin:0614141.012345.1001"],
  "action": "ADD",
  "bizStep": "commissioning",
  "ilmd": ILMD
}`
	tests := []struct {
		name   string
		ilmd   string
		want   codes.Code
		lot    string
		expiry string
	}{
		{"cbvmda forms", `{"cbvmda:lotNumber": "A1", "cbvmda:itemExpirationDate": "2026-01-31"}`, "", "A1", "2026-01-31"},
		{"CBV URN forms", `{"urn:epcglobal:cbv:mda:lotNumber": "A1", "urn:epcglobal:cbv:mda:itemExpirationDate": "2026-01-31"}`, "", "A1", "2026-01-31"},
		{"ref.gs1.org forms", `{"https://ref.gs1.org/cbv/lotNumber": "A1", "https://ref.gs1.org/cbv/itemExpirationDate": "2026-01-31"}`, "", "A1", "2026-01-31"},
		{"gs1 forms", `{"gs1:lotNumber": "A1", "gs1:expirationDate": "2026-01-31"}`, "", "A1", "2026-01-31"},
		{"lot keeps leading zeros", `{"cbvmda:lotNumber": "007", "cbvmda:itemExpirationDate": "2026-01-31"}`, "", "007", "2026-01-31"},
		{"cbvmda takes precedence", `{"lotNumber": "B2", "cbvmda:lotNumber": "A1", "cbvmda:itemExpirationDate": "2026-01-31"}`, "", "A1", "2026-01-31"},
		{"empty lot", `{"cbvmda:lotNumber": " ", "cbvmda:itemExpirationDate": "2026-01-31"}`, codes.MissingLot, "", ""},
		{"lot as object without @value", `{"cbvmda:lotNumber": {}, "cbvmda:itemExpirationDate": "2026-01-31"}`, codes.MissingLot, "", ""},
		{"empty ilmd", `{}`, codes.MissingLot, "", ""},
		{"expiry as a number", `{"cbvmda:lotNumber": "A1", "cbvmda:itemExpirationDate": 20260131}`, dscsa.MissingExpiry, "", ""},
		{"expiry as AI 17 YYMMDD", `{"cbvmda:lotNumber": "A1", "cbvmda:itemExpirationDate": "260131"}`, dscsa.MissingExpiry, "", ""},
		{"expiry as a date-time", `{"cbvmda:lotNumber": "A1", "cbvmda:itemExpirationDate": "2026-01-31T00:00:00Z"}`, dscsa.MissingExpiry, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(commissioning, "ILMD", tt.ilmd, 1)
			env, err := g.Check("events.dscsa.commissioning", []byte(doc))
			if got := codes.Of(err); got != tt.want {
				t.Fatalf("code = %q (%v), want %q", got, err, tt.want)
			}
			if err == nil && (env.Identifiers["lot"] != tt.lot || env.Identifiers["expiry"] != tt.expiry) {
				t.Errorf("lot, expiry = %q, %q; want %q, %q", env.Identifiers["lot"], env.Identifiers["expiry"], tt.lot, tt.expiry)
			}
		})
	}
}

func TestEventType(t *testing.T) {
	tests := []struct {
		name    string
		bizStep any
		want    string
		code    codes.Code
	}{
		{"bare word", "receiving", "receiving", ""},
		{"CBV URN", "urn:epcglobal:cbv:bizstep:decommissioning", "decommissioning", ""},
		{"CBV URN in upper case", "URN:EPCGLOBAL:CBV:BIZSTEP:packing", "packing", ""},
		{"CBV web URI", "https://ref.gs1.org/cbv/BizStep-void_shipping", "void_shipping", ""},
		{"compact IRI", "cbv:BizStep-dispensing", "dispensing", ""},
		{"surrounding spaces", " shipping ", "shipping", ""},
		{"unknown CBV word", "urn:epcglobal:cbv:bizstep:teleporting", "", dscsa.InvalidBizStep},
		{"word in upper case", "SHIPPING", "", dscsa.InvalidBizStep},
		{"custom URI", "https://example.com/bizstep/x", "", dscsa.InvalidBizStep},
		{"empty", "", "", dscsa.InvalidBizStep},
		{"not a string", 7, "", dscsa.InvalidBizStep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dscsa.Checker{}.EventType(domain.Doc{"bizStep": tt.bizStep})
			if got != tt.want || codes.Of(err) != tt.code {
				t.Fatalf("EventType = %q, %v; want %q, %q", got, err, tt.want, tt.code)
			}
		})
	}
}

// TestErrorDetails checks that details name fields and rules, never the
// payload's values.
func TestErrorDetails(t *testing.T) {
	g := newGate(t)
	for _, f := range readTestdata(t) {
		if f.want == "" {
			continue
		}
		_, err := g.Check(subjectFor(f.data), f.data)
		detail := codes.DetailOf(err)
		for _, secret := range []string{"10016550749981", "A24B017", "0614141.00777", "0860001234566", "quarantine_release", "12/03/2024", "ASN-2024"} {
			if strings.Contains(f.name, "SCHEMA") {
				break
			}
			if strings.Contains(detail, secret) {
				t.Errorf("%s: detail %q quotes a payload value", f.name, detail)
			}
		}
	}
}

// knownCodes are the codes the gate may return for a DSCSA event.
var knownCodes = map[codes.Code]bool{
	codes.MalformedJSON: true, codes.DuplicateKey: true, codes.NotAnObject: true, codes.InvalidUTF8: true,
	codes.PayloadTooLarge: true, codes.UnknownSubject: true, codes.SchemaValidation: true,
	codes.SubjectMismatch: true, codes.UnparseableEventTime: true, codes.MissingLot: true,
	dscsa.GTINCheckDigitFailed: true, dscsa.InvalidGTIN: true, dscsa.MissingSerial: true,
	dscsa.MissingExpiry: true, dscsa.InvalidEPC: true, dscsa.InvalidBizStep: true,
	dscsa.InvalidLocation: true, dscsa.UnsupportedEventType: true, dscsa.InvalidParentID: true,
	dscsa.InvalidAggregation: true, dscsa.UnsupportedGS1Key: true, dscsa.KeyNotForBizStep: true,
	dscsa.InvalidDisposition: true,
}

func FuzzGateDSCSA(f *testing.F) {
	for _, tf := range readTestdata(f) {
		f.Add(tf.data)
		f.Add(tf.data[:len(tf.data)/2])
		s := string(tf.data)
		for _, m := range [][2]string{
			{"urn:epc:id:sgtin:", "https://id.gs1.org/01/"},
			{".0\"", "\""},
			{"0614141", "06141"},
			{"-05:00", "-5:00"},
			{"Z\"", "\""},
			{"%2F", "%"},
			{"ObjectEvent", "TransformationEvent"},
			{"commissioning", "shipping"},
			{"\"ilmd\"", "\"ILMD\""},
		} {
			if strings.Contains(s, m[0]) {
				f.Add([]byte(strings.Replace(s, m[0], m[1], 1)))
			}
		}
	}
	f.Add([]byte(baseIdentity))
	f.Add([]byte(`{"type":"ObjectEvent","action":"ADD","bizStep":"commissioning","epcList":["https://a/01/00614141123452/21/"]}`))
	f.Add([]byte(`{"type":"ObjectEvent","action":"ADD","bizStep":"shipping","eventTime":"2024-01-01T00:00:00","eventTimeZoneOffset":"+14:00","epcList":["https://a/01/00614141123452/21/%41"],"readPoint":{"id":"https://h/414/0614141000005/254/%"}}`))
	g := newGate(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := g.Check(subjectFor(data), data)
		if err != nil {
			if c := codes.Of(err); !knownCodes[c] {
				t.Fatalf("unknown or internal code %q: %v", c, err)
			}
			// A failed event's identity is derived without panicking,
			// the same for the same input.
			if id, again := g.Identify(subjectFor(data), data), g.Identify(subjectFor(data), data); !id.Partial || id.IdempotencyKey != again.IdempotencyKey ||
				id.OrderingKey != again.OrderingKey || id.PartyID != again.PartyID || id.EventHashID != again.EventHashID {
				t.Fatalf("identity %+v, then %+v", id, again)
			}
			return
		}
		checkEnvelope(t, env)
	})
}

// typicalShipping is a typical DSCSA shipping event: three items, a PO and
// a despatch advice, owning party and location sources and destinations.
const typicalShipping = `{
  "@context": ["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"],
  "type": "ObjectEvent",
  "eventTime": "2024-03-12T09:15:00.118-05:00",
  "eventTimeZoneOffset": "-05:00",
  "epcList": [
    "urn:epc:id:sgtin:0614141.012345.10016550749981",
    "urn:epc:id:sgtin:0614141.012345.10016550749982",
    "urn:epc:id:sgtin:0614141.012345.10016550749983"
  ],
  "action": "OBSERVE",
  "bizStep": "shipping",
  "disposition": "in_transit",
  "readPoint": {"id": "urn:epc:id:sgln:0614141.00777.0"},
  "bizTransactionList": [
    {"type": "po", "bizTransaction": "urn:epcglobal:cbv:bt:0860001234565:PO-778120"},
    {"type": "desadv", "bizTransaction": "urn:epcglobal:cbv:bt:0614141000005:ASN-20240312-0042"}
  ],
  "sourceList": [
    {"type": "owning_party", "source": "urn:epc:id:pgln:0614141.00000"},
    {"type": "location", "source": "urn:epc:id:sgln:0614141.00777.0"}
  ],
  "destinationList": [
    {"type": "owning_party", "destination": "urn:epc:id:pgln:0860001.23456"},
    {"type": "location", "destination": "urn:epc:id:sgln:0860001.23456.0"}
  ]
}`

func BenchmarkGateDSCSA(b *testing.B) {
	g := newGate(b)
	commissioning, err := fs.ReadFile(schemas.FS, "testdata/dscsa/valid/commissioning-sgtin.json")
	if err != nil {
		b.Fatal(err)
	}
	aggShipping, err := fs.ReadFile(schemas.FS, "testdata/dscsa/valid/shipping-sscc-pallet-observe.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, subject string
		data          []byte
	}{
		{"shipping-3-epcs", "events.dscsa.shipping", []byte(typicalShipping)},
		{"commissioning-sgtin", "events.dscsa.commissioning", commissioning},
		{"aggregation-shipping-sscc-3-children", "events.dscsa.shipping", aggShipping},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := g.Check(bc.subject, bc.data); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				if _, err := g.Check(bc.subject, bc.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckDSCSA measures the domain rules alone, on a decoded event.
func BenchmarkCheckDSCSA(b *testing.B) {
	doc, err := gate.Decode([]byte(typicalShipping))
	if err != nil {
		b.Fatal(err)
	}
	c := dscsa.Checker{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Check("shipping", doc); err != nil {
			b.Fatal(err)
		}
	}
}
