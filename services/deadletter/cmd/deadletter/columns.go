package main

import (
	"io"
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// displayWidth is how many terminal columns s takes: an East Asian wide or
// fullwidth character (陈, an emoji such as 🧪) two, a combining mark or a
// format character (a zero-width joiner, a variation selector) none, any
// other one. text/tabwriter counts every character as one column, which
// misaligns a table holding a name such as 陈伟.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		case width.LookupRune(r).Kind() == width.EastAsianWide, width.LookupRune(r).Kind() == width.EastAsianFullwidth:
			n += 2
		default:
			n++
		}
	}
	return n
}

// columnGap is the number of spaces between two columns.
const columnGap = 2

// writeColumns writes rows as a table, each column padded with spaces to
// its widest cell's display width (displayWidth) plus columnGap; the last
// cell of a row is not padded. Cells must hold no newline or tab (printable
// replaces control characters).
func writeColumns(w io.Writer, rows [][]string) error {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-displayWidth(cell)+columnGap))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
