package console

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// Diff kinds of a diffRow.
const (
	diffAdded   = "added"
	diffRemoved = "removed"
	diffChanged = "changed"
)

// diffRow is one field-level difference between two JSON documents: the
// JSON path of the field (e.g. `$.lines[0].ndc`), its kind (added,
// removed, changed) and its values before and after as compact JSON
// (empty when absent). Values are shown through html/template, which
// escapes them.
type diffRow struct {
	Path   string
	Kind   string
	Before string
	After  string
}

// jsonDiff compares two JSON documents field by field: objects by key
// (sorted), arrays by index, anything else by value. A value that is not
// JSON is compared as a whole document. It never reports brackets, only
// leaf or whole-subtree differences.
func jsonDiff(before, after []byte) []diffRow {
	var a, b any
	if decode(before, &a) != nil || decode(after, &b) != nil {
		if bytes.Equal(before, after) {
			return nil
		}
		return []diffRow{{Path: "$", Kind: diffChanged, Before: string(before), After: string(after)}}
	}
	var rows []diffRow
	walkDiff("$", a, b, &rows)
	return rows
}

// decode reads one JSON value keeping numbers as written.
func decode(b []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func walkDiff(path string, a, b any, rows *[]diffRow) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, dup := av[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			p := path + keyPath(k)
			switch {
			case !inB:
				*rows = append(*rows, diffRow{Path: p, Kind: diffRemoved, Before: compact(x)})
			case !inA:
				*rows = append(*rows, diffRow{Path: p, Kind: diffAdded, After: compact(y)})
			default:
				walkDiff(p, x, y, rows)
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := 0; i < len(av) || i < len(bv); i++ {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i >= len(bv):
				*rows = append(*rows, diffRow{Path: p, Kind: diffRemoved, Before: compact(av[i])})
			case i >= len(av):
				*rows = append(*rows, diffRow{Path: p, Kind: diffAdded, After: compact(bv[i])})
			default:
				walkDiff(p, av[i], bv[i], rows)
			}
		}
		return
	}
	if x, y := compact(a), compact(b); x != y {
		*rows = append(*rows, diffRow{Path: path, Kind: diffChanged, Before: x, After: y})
	}
}

// keyPath is an object key as a JSON path step: `.name` for a plain
// identifier, `["any key"]` (JSON-quoted) otherwise.
func keyPath(k string) string {
	plain := k != ""
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return "." + k
	}
	return "[" + compact(k) + "]"
}

// compact is v as compact JSON without HTML escaping (the template
// escapes it where it is shown).
func compact(v any) string {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
