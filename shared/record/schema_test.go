package record

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/schemas"
)

// Every record sealed by the tests through mustSeal is validated against
// the schema; these tests check the schema itself.

func TestSchemaDescribesEveryField(t *testing.T) {
	b, err := schemas.Read("quarantine-record")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ID         string `json:"$id"`
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
		Defs map[string]struct {
			Description string `json:"description"`
			Properties  map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ID != schemas.ID("quarantine-record") {
		t.Errorf("$id = %q", doc.ID)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[Record]()} {
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			p, ok := doc.Properties[name]
			if !ok || p.Description == "" {
				t.Errorf("record member %q has no described property", name)
			}
		}
	}
	if len(doc.Properties) != reflect.TypeFor[Record]().NumField() {
		t.Errorf("schema has %d properties, Record %d fields", len(doc.Properties), reflect.TypeFor[Record]().NumField())
	}
	for def, nested := range map[string]reflect.Type{"payload": reflect.TypeFor[Payload](), "attempt": reflect.TypeFor[Attempt](), "signature": reflect.TypeFor[Signature](), "hold": reflect.TypeFor[HoldMark](), "conflict": reflect.TypeFor[Conflict]()} {
		for i := 0; i < nested.NumField(); i++ {
			name, _, _ := strings.Cut(nested.Field(i).Tag.Get("json"), ",")
			if doc.Defs[def].Properties[name].Description == "" {
				t.Errorf("%s member %q has no described property", def, name)
			}
		}
	}
}

func TestSchemaRejects(t *testing.T) {
	_, raws := chain(t, ClassValidation, plain(KindCorrected, KindResolved)...)
	_, approved := chain(t, ClassExhausted, plain(KindApproved)...)
	_, held := chain(t, ClassExhausted, plain(KindHoldPlaced)...)
	edit := func(raw []byte, mod func(map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		mod(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		raw  []byte
	}{
		{"no audit_hash", edit(raws[0], func(m map[string]any) { delete(m, "audit_hash") })},
		{"upper-case audit_hash", edit(raws[0], func(m map[string]any) { m["audit_hash"] = strings.ToUpper(m["audit_hash"].(string)) })},
		{"unknown member", edit(raws[0], func(m map[string]any) { m["note"] = "x" })},
		{"time with an offset", edit(raws[0], func(m map[string]any) { m["quarantined_at"] = "2025-03-01T13:00:00+01:00" })},
		{"unknown kind", edit(raws[1], func(m map[string]any) { m["kind"] = "archived" })},
		{"unknown class", edit(raws[0], func(m map[string]any) { m["class"] = "transient" })},
		{"quarantined at index 1", edit(raws[1], func(m map[string]any) { m["kind"] = "quarantined" })},
		{"later record without prev_hash", edit(raws[1], func(m map[string]any) { m["prev_hash"] = "" })},
		{"corrected without payload", edit(raws[1], func(m map[string]any) { delete(m, "payload") })},
		{"resolved without actor", edit(raws[2], func(m map[string]any) { delete(m, "actor") })},
		{"approved without signature", edit(approved[1], func(m map[string]any) { delete(m, "signature") })},
		{"signature without meaning", edit(approved[1], func(m map[string]any) { delete(m["signature"].(map[string]any), "meaning") })},
		{"signature with an unknown member", edit(approved[1], func(m map[string]any) { m["signature"].(map[string]any)["password"] = "x" })},
		{"hold record without hold", edit(held[1], func(m map[string]any) { delete(m, "hold") })},
		{"hold record without actor", edit(held[1], func(m map[string]any) { delete(m, "actor") })},
		{"hold without case id", edit(held[1], func(m map[string]any) { delete(m["hold"].(map[string]any), "case_id") })},
		{"hold with an invalid status", edit(held[1], func(m map[string]any) { m["hold"].(map[string]any)["status"] = "invalid" })},
		{"negative index", edit(raws[1], func(m map[string]any) { m["index"] = -1 })},
		{"bad base64 payload", edit(raws[0], func(m map[string]any) {
			m["payload"] = map[string]any{"encoding": "base64", "data": "a b", "sha256": strings.Repeat("0", 64), "size": 1}
		})},
		{"identifier outside the allow-list", edit(raws[0], func(m map[string]any) { m["identifiers"] = map[string]any{"quantity": "500"} })},
		{"identifier not a string", edit(raws[0], func(m map[string]any) { m["identifiers"] = map[string]any{"tlc": 7} })},
		{"empty identifier", edit(raws[0], func(m map[string]any) { m["identifiers"] = map[string]any{"lot": ""} })},
		{"over-long identifier", edit(raws[0], func(m map[string]any) { m["identifiers"] = map[string]any{"lot": strings.Repeat("x", 257)} })},
		{"bad trace id", edit(raws[0], func(m map[string]any) { m["trace_id"] = "xyz" })},
		{"attempt with unknown stage", edit(raws[0], func(m map[string]any) {
			m["attempts"] = []any{map[string]any{"at": "2025-03-01T12:00:00Z", "stage": "deliver", "code": "X", "reason": ""}}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validateSchema(t, tt.raw); err == nil {
				t.Errorf("schema accepted %s", tt.raw)
			}
		})
	}
}
