package runner

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestServeMetrics: a free address is bound and its actual address logged;
// an address in use fails the start with ErrMetricsListen, naming the
// address and the variable to set.
func TestServeMetrics(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") })
	for _, tc := range []struct {
		name    string
		addr    string
		wantErr error
	}{
		{"free port", "127.0.0.1:0", nil},
		{"in use", busy.Addr().String(), ErrMetricsListen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			stop, err := serveMetrics(tc.addr, ok, slog.New(slog.NewTextHandler(&logs, nil)))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("serveMetrics: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.addr) || !strings.Contains(err.Error(), "DEADLETTER_METRICS_ADDR") {
					t.Errorf("error %q names neither the address nor the variable", err)
				}
				return
			}
			t.Cleanup(stop)
			_, bound, found := strings.Cut(logs.String(), "addr=")
			bound = strings.TrimSpace(bound)
			if !found || strings.HasSuffix(bound, ":0") {
				t.Fatalf("bound address not logged: %q", logs.String())
			}
			resp, err := http.Get("http://" + bound + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(body) != "metrics" {
				t.Errorf("body %q", body)
			}
		})
	}
}
