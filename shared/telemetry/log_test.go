package telemetry

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestLogHandlerEscapes: a log line carrying a payload's terminal escapes
// (OSC 52, erase line, CR, LF, C1 CSI, a bidi override, DEL) is one line
// of valid JSON with none of them raw, and decodes to the same text.
func TestLogHandlerEscapes(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"OSC 52", "SUP\x1b]52;c;Y3VybA==\x07"},
		{"erase line and CR", "\x1b[2K\rSUP-OK"},
		{"LF", "SUP\n{\"level\":\"ERROR\",\"msg\":\"forged\"}"},
		{"C1 CSI", "SUP\u009b2K"},
		{"bidi override", "Müller & Söhne \u202e<Großhandel>"},
		{"DEL", "SUP\x7f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			slog.New(NewLogHandler(&b, nil)).Info("quarantined", "party", tc.value)
			line := b.String()
			if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
				t.Fatalf("not one line: %q", line)
			}
			if strings.ContainsAny(line, "\x1b\r\x07\u009b\u202e\x7f") {
				t.Errorf("raw control character in %q", line)
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["party"] != tc.value {
				t.Errorf("decoded %v (%v) from %q", rec["party"], err, line)
			}
		})
	}
}
