package cli

import (
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/safetext"
	"github.com/deadletter/deadletter/shared/when"
)

// table writes aligned columns (two spaces between them), as
// text/tabwriter would with a padding of 2, except that a cell's width is
// its display width (safetext.Width: 陈伟 takes four columns of a terminal, a
// combining mark none), not its count of runes. Rows are kept until flush.
type table struct {
	w    io.Writer
	rows [][]string
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row adds one line of cells, each escaped (safetext.Escape): a cell's
// text, from a payload or not, cannot break the line or the columns or
// act on the terminal.
func (t *table) row(cells ...string) {
	line := make([]string, len(cells))
	for i, c := range cells {
		if c == "" {
			line[i] = "-"
		} else {
			line[i] = safetext.Escape(c)
		}
	}
	t.rows = append(t.rows, line)
}

// tablePadding is the space between two columns.
const tablePadding = 2

// flush writes the rows added since the last flush. A column is aligned
// over a block of consecutive rows that have a cell after it (the last
// cell of a row is never padded), as text/tabwriter aligns its columns.
func (t *table) flush() {
	var b strings.Builder
	t.format(&b, nil, 0, len(t.rows))
	t.rows = nil
	_, _ = io.WriteString(t.w, b.String())
}

// format writes rows [from, to) with the widths of the columns before
// len(widths) known, working out the next column's width block by block.
func (t *table) format(b *strings.Builder, widths []int, from, to int) {
	col := len(widths)
	for i := from; i < to; {
		if col >= len(t.rows[i])-1 {
			t.writeRow(b, widths, t.rows[i])
			i++
			continue
		}
		end, width := i, 0
		for ; end < to && col < len(t.rows[end])-1; end++ {
			width = max(width, safetext.Width(t.rows[end][col])+tablePadding)
		}
		t.format(b, append(widths, width), i, end)
		i = end
	}
}

// writeRow writes one row, padding each cell with a known width.
func (t *table) writeRow(b *strings.Builder, widths []int, cells []string) {
	for i, c := range cells {
		b.WriteString(c)
		if i < len(widths) && i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", max(widths[i]-safetext.Width(c), 0)))
		}
	}
	b.WriteByte('\n')
}

// textf writes a text line like fmt.Fprintf, with every string, error and
// Stringer argument escaped (safetext.Escape): the format is dlqctl's own,
// the values may come from a payload or a service.
func textf(w io.Writer, format string, args ...any) {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = safetext.Escape(v)
		case error:
			args[i] = safetext.Escape(v.Error())
		case fmt.Stringer:
			args[i] = safetext.Escape(v.String())
		default:
			if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
				args[i] = safetext.Escape(rv.String())
			}
		}
	}
	fmt.Fprintf(w, format, args...)
}

// timeLayout is the fixed-width UTC layout of every time in a table.
const timeLayout = "2006-01-02T15:04:05Z"

// fmtTime formats t in UTC to the second ("-" for the zero time).
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

// fmtAge formats a duration as one unit, right-aligned in 5 columns
// ("   4s", "  12m", "   3h", "  21d").
func fmtAge(d time.Duration) string {
	var s string
	switch {
	case d < time.Minute:
		s = strconv.Itoa(int(max(d, 0)/time.Second)) + "s"
	case d < time.Hour:
		s = strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d/time.Hour)) + "h"
	default:
		s = strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return fmt.Sprintf("%5s", s)
}

// fmtETA formats a remaining time for progress lines.
func fmtETA(d time.Duration) string {
	if d <= 0 || math.IsInf(d.Seconds(), 0) {
		return "-"
	}
	return d.Round(time.Second).String()
}

// fmtCounts formats a count map as "a=1 b=2" sorted by name.
func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// parseTime reads a --since/--until value (shared/when: RFC 3339, a date,
// or a duration ago such as "90m", "2h", "7d").
func parseTime(v string, now time.Time) (time.Time, error) { return when.Parse(v, now) }

// Values for completion and validation.
var (
	domains  = registry.NamesAndUnknown()
	classes  = []string{string(record.ClassValidation), string(record.ClassExhausted), string(record.ClassPoison)}
	statuses = []string{string(record.StatusOpen), string(record.StatusRedriving), string(record.StatusPoison), string(record.StatusResolved), string(record.StatusInvalid)}
)

// codeNames lists every error code.
func codeNames() []string {
	var out []string
	for _, c := range codes.Known() {
		out = append(out, string(c.Code))
	}
	return out
}

// oneOf checks a flag value against its allowed values ("" passes).
func oneOf(flag, v string, allowed []string) error {
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return usageErrorf("--%s must be one of %s, not %q", flag, strings.Join(allowed, ", "), v)
}

// short abbreviates a hash for tables.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
