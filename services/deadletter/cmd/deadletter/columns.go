package main

import (
	"io"
	"strings"

	"github.com/deadletter/deadletter/shared/safetext"
)

// columnGap is the number of spaces between two columns.
const columnGap = 2

// writeColumns writes rows as a table, each column padded with spaces to
// its widest cell's display width (safetext.Width) plus columnGap; the last
// cell of a row is not padded. Cells must hold no newline or tab (printable
// replaces control characters).
func writeColumns(w io.Writer, rows [][]string) error {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], safetext.Width(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-safetext.Width(cell)+columnGap))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
