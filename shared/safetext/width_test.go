package safetext

import (
	"strings"
	"testing"
)

// TestDisplayWidth: a cell's width is the columns a terminal gives it.
func TestWidth(t *testing.T) {
	cases := []struct {
		name, in string
		want     int
	}{
		{name: "ascii", in: "amara.okafor", want: 12},
		{name: "ampersand and angle brackets", in: `Müller & Söhne <"GmbH">`, want: 23},
		{name: "cjk", in: "陈伟", want: 4},
		{name: "cjk beside latin", in: "Chen Wei (陈伟)", want: 15},
		{name: "combining marks", in: "Mu\u0308ller & So\u0308hne", want: 14},
		{name: "dotless i", in: "Elif Yılmaz", want: 11},
		{name: "emoji", in: "💊", want: 2},
		{name: "emoji with variation selector", in: "Rx 💊\ufe0f", want: 5},
		{name: "zwj sequence", in: "👩\u200d⚕\ufe0f", want: 2},
		{name: "zwj between letters", in: "क\u200dष", want: 2},
		{name: "fullwidth", in: "ＡＢＣ", want: 6},
		{name: "empty", in: "", want: 0},
		{name: "emoji beside text", in: "🧪 Lab", want: 6},
		{name: "neutral symbol with a variation selector", in: "\u2697\ufe0f", want: 1},
		{name: "half-width katakana", in: "ｶﾀｶﾅ", want: 4},
		{name: "a long name", in: strings.Repeat("陈伟 Müller & Söhne ", 10), want: 10 * 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Width(c.in); got != c.want {
				t.Errorf("Width(%q) = %d, want %d", c.in, got, c.want)
			}
		})
	}
}
