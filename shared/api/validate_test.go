package api

import (
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/domain/registry"
)

// TestMessagesForPeople: a refused field says what to use in people's
// words, not a Go slice or layout.
func TestMessagesForPeople(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{name: "domain", err: ListRequest{Domain: "Müller & Söhne <Großhandel>"}.Validate(), want: "not a known domain: use " + strings.Join(registry.Names(), ", ") + " or unknown"},
		{name: "class", err: ListRequest{Class: "broken"}.Validate(), want: "not a known class: use validation, exhausted or poison"},
		{name: "grace", err: ReconcileRequest{Grace: "7d", From: time.Time{}}.Validate(), want: "not a duration: use 30s, 5m or 1h"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatal("accepted")
			}
			msg := c.err.Error()
			if !strings.Contains(msg, c.want) || strings.ContainsAny(msg, "[]") {
				t.Errorf("message %q, want %q and no brackets", msg, c.want)
			}
		})
	}
}
