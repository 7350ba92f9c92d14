package domain

import (
	"slices"
	"testing"
)

// TestPayloadIdentifiers: the identifiers of payload bytes are read
// whatever the bytes failed on, and bytes that are no JSON object (or a
// hook that panics) give none, never an error.
func TestPayloadIdentifiers(t *testing.T) {
	lots := Search{Identifiers: func(doc Doc) map[string][]string {
		var ids IdentifierSet
		for _, k := range []string{"lot", "tlc"} {
			if s, ok := String(doc, k); ok {
				ids.Add("lot", s)
			}
		}
		if n, ok := Number(doc, "lot"); ok {
			ids.Add("lot", n.String())
		}
		return ids.Map()
	}}
	panics := Search{Identifiers: func(Doc) map[string][]string { panic("a domain's bug") }}
	tests := []struct {
		name    string
		search  Search
		payload string
		want    []string
	}{
		{"lot with trade characters", lots, `{"lot":"A1&B<2>\"Müller\" 陈伟"}`, []string{`A1&B<2>"Müller" 陈伟`}},
		{"one value once", lots, `{"lot":"L1","tlc":"L1"}`, []string{"L1"}},
		{"a member named twice: the last", lots, `{"lot":"L1","lot":"L2"}`, []string{"L2"}},
		{"a number as written", lots, `{"lot":7.50}`, []string{"7.50"}},
		{"bytes after the object", lots, `{"lot":"L1"} {"lot":"L2"}`, []string{"L1"}},
		{"truncated", lots, `{"lot":"L1"`, nil},
		{"an array", lots, `[{"lot":"L1"}]`, nil},
		{"null", lots, `null`, nil},
		{"empty", lots, ``, nil},
		{"not UTF-8", lots, "{\"lot\":\"L\xff1\"}", []string{"L\uFFFD1"}},
		{"no hook", Search{}, `{"lot":"L1"}`, nil},
		{"a panicking hook", panics, `{"lot":"L1"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.search.PayloadIdentifiers([]byte(tt.payload))
			if !slices.Equal(got["lot"], tt.want) {
				t.Fatalf("lot = %q, want %q", got["lot"], tt.want)
			}
			c := Chain{PayloadIdentifiers: got, Listed: []string{"tlc", "T-<1>"}}
			for _, v := range tt.want {
				if !c.Has("lot", v) {
					t.Errorf("Has(lot, %q) = false", v)
				}
			}
			if !c.Has("tlc", "T-<1>") || c.Has("lot", "") || c.Has("lot", "T-<1>") {
				t.Error("Has mixes names, or finds the empty value")
			}
		})
	}
}
