package telemetry

import (
	"io"
	"log/slog"

	"github.com/deadletter/deadletter/shared/safetext"
)

// NewLogHandler is the services' log handler: one JSON object per line on
// w, every character a terminal acts on escaped (package safetext), so a
// log line shows as one line whatever text reaches it. slog's JSON
// escapes the C0 controls; this adds DEL, the C1 controls and the bidi
// overrides, as JSON escapes (the line stays valid JSON and means the
// same). The services log ids, codes and hashes, never payload values:
// this is the net under that rule.
func NewLogHandler(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	return slog.NewJSONHandler(safetext.NewWriter(w), opts)
}
