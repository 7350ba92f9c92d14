package safetext

import (
	"unicode"

	"golang.org/x/text/width"
)

// Width is how many terminal columns s takes: two for a wide or
// fullwidth character (CJK, most emoji: Unicode's East Asian Width, package
// golang.org/x/text/width), none for a combining mark, a format character
// (a zero width joiner, a variation selector) or a character joined to the
// previous wide one by a zero width joiner (the parts of one emoji), one for
// any other. s is escaped text (Escape): it holds no control characters.
// Tables of names such as 陈伟 align by it (text/tabwriter counts every
// character as one column).
func Width(s string) int {
	n, wide, joined := 0, false, false
	for _, r := range s {
		switch {
		case joined && wide:
			joined = false
		case r == '\u200d':
			joined = true
		case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		default:
			joined = false
			switch width.LookupRune(r).Kind() {
			case width.EastAsianWide, width.EastAsianFullwidth:
				n, wide = n+2, true
			default:
				n, wide = n+1, false
			}
		}
	}
	return n
}
