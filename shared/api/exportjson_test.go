package api

import (
	"encoding/json"
	"testing"
)

// TestExportRecordJSON: the one export form undoes what JSON encoders do
// on the way (HTML escapes, raw separators, whitespace) and nothing else;
// it is what encoding/json writes without HTML escaping, and a record
// marshalled with HTML escaping comes back to it.
func TestExportRecordJSON(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"already in form", `{"a":"Romaine & kale <fresh>"}`, `{"a":"Romaine & kale <fresh>"}`},
		{"html escapes", `{"a":"Romaine \u0026 kale \u003cfresh\u003E"}`, `{"a":"Romaine & kale <fresh>"}`},
		{"escaped backslash before u0026", `{"a":"\\u0026"}`, `{"a":"\\u0026"}`},
		{"other escapes kept", `{"a":"\u00e9\n\"\/\u0001"}`, `{"a":"\u00e9\n\"\/\u0001"}`},
		{"raw separators", "{\"a\":\"x\u2028y\u2029\"}", `{"a":"x\u2028y\u2029"}`},
		{"whitespace", "{ \"a\" :\t[1, 2],\n\"b c\": \"d e\" }", `{"a":[1,2],"b c":"d e"}`},
		{"non-ASCII kept", `{"a":"Müller 中文 🥬"}`, `{"a":"Müller 中文 🥬"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(ExportRecordJSON([]byte(tc.in)))
			if got != tc.want {
				t.Fatalf("ExportRecordJSON(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := string(ExportRecordJSON([]byte(got))); again != got {
				t.Fatalf("not idempotent: %q then %q", got, again)
			}
			escaped, err := json.Marshal(json.RawMessage(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if back := string(ExportRecordJSON(escaped)); back != tc.want {
				t.Fatalf("after json.Marshal %q: %q, want %q", escaped, back, tc.want)
			}
		})
	}
}
