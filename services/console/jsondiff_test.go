package console

import (
	"reflect"
	"testing"
)

func TestJSONDiff(t *testing.T) {
	tests := []struct {
		name          string
		before, after string
		want          []diffRow
	}{
		{name: "equal", before: `{"a":1,"b":[1,2]}`, after: `{ "b": [1, 2], "a": 1 }`},
		{name: "changed leaf", before: `{"qty":10}`, after: `{"qty":12}`,
			want: []diffRow{{Path: "$.qty", Kind: diffChanged, Before: "10", After: "12"}}},
		{name: "number kept as written", before: `{"qty":1.50}`, after: `{"qty":1.5}`,
			want: []diffRow{{Path: "$.qty", Kind: diffChanged, Before: "1.50", After: "1.5"}}},
		{name: "added and removed, sorted", before: `{"lot":"A1","b":true}`, after: `{"b":true,"tlc":"T9"}`,
			want: []diffRow{{Path: "$.lot", Kind: diffRemoved, Before: `"A1"`}, {Path: "$.tlc", Kind: diffAdded, After: `"T9"`}}},
		{name: "nested object", before: `{"party":{"name":"Müller","addr":{"city":"Köln"}}}`, after: `{"party":{"name":"Müller","addr":{"city":"Düsseldorf"}}}`,
			want: []diffRow{{Path: "$.party.addr.city", Kind: diffChanged, Before: `"Köln"`, After: `"Düsseldorf"`}}},
		{name: "arrays by index", before: `{"lines":[{"ndc":"1"},{"ndc":"2"}]}`, after: `{"lines":[{"ndc":"1"},{"ndc":"3"},{"ndc":"4"}]}`,
			want: []diffRow{{Path: "$.lines[1].ndc", Kind: diffChanged, Before: `"2"`, After: `"3"`}, {Path: "$.lines[2]", Kind: diffAdded, After: `{"ndc":"4"}`}}},
		{name: "array shrinks", before: `[1,2,3]`, after: `[1]`,
			want: []diffRow{{Path: "$[1]", Kind: diffRemoved, Before: "2"}, {Path: "$[2]", Kind: diffRemoved, Before: "3"}}},
		{name: "type change is one row", before: `{"x":{"a":1}}`, after: `{"x":[1]}`,
			want: []diffRow{{Path: "$.x", Kind: diffChanged, Before: `{"a":1}`, After: `[1]`}}},
		{name: "html characters kept raw for the template to escape", before: `{"name":"Müller & Söhne <Großhandel>"}`, after: `{"name":"Müller & Söhne <Großhandel> \"Nord\""}`,
			want: []diffRow{{Path: "$.name", Kind: diffChanged, Before: `"Müller & Söhne <Großhandel>"`, After: `"Müller & Söhne <Großhandel> \"Nord\""`}}},
		{name: "key needing quotes", before: `{"a b":1,"<x>":1}`, after: `{"a b":2}`,
			want: []diffRow{{Path: `$["<x>"]`, Kind: diffRemoved, Before: "1"}, {Path: `$["a b"]`, Kind: diffChanged, Before: "1", After: "2"}}},
		{name: "unicode key", before: `{"Établissement":"Pharmacie Saint-Étienne"}`, after: `{"Établissement":"Pharmacie Saint-Étienne & Cie"}`,
			want: []diffRow{{Path: `$["Établissement"]`, Kind: diffChanged, Before: `"Pharmacie Saint-Étienne"`, After: `"Pharmacie Saint-Étienne & Cie"`}}},
		{name: "null versus absent", before: `{"a":null}`, after: `{}`,
			want: []diffRow{{Path: "$.a", Kind: diffRemoved, Before: "null"}}},
		{name: "not JSON compared whole", before: `not json`, after: `{"a":1}`,
			want: []diffRow{{Path: "$", Kind: diffChanged, Before: "not json", After: `{"a":1}`}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := jsonDiff([]byte(tc.before), []byte(tc.after))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("jsonDiff:\n got %#v\nwant %#v", got, tc.want)
			}
			for _, r := range got {
				if r.Before == "}" || r.After == "}" || r.Before == "]" || r.After == "]" {
					t.Fatalf("bracket row %#v", r)
				}
			}
		})
	}
}
