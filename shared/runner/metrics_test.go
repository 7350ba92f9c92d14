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

// TestDefaultMetricsAddr: no two services, nor two instances of one
// service, share a default /metrics address on one host (issue 16: every
// standalone service bound 127.0.0.1:9464, so all but one failed).
func TestDefaultMetricsAddr(t *testing.T) {
	seen := map[string]string{}
	for _, p := range MetricsPorts() {
		for index := range 4 {
			addr := DefaultMetricsAddr(p.Name, index)
			who := p.Name + "#" + string(rune('0'+index))
			if other, dup := seen[addr]; dup {
				t.Errorf("%s and %s both default to %s", who, other, addr)
			}
			seen[addr] = who
		}
	}
	for _, tc := range []struct {
		name, service string
		index         int
		want          string
	}{
		{"validator", "validator", 0, "127.0.0.1:9464"},
		{"auditor", "auditor", 0, "127.0.0.1:9467"},
		{"second validator", "validator", 1, "127.0.0.1:9468"},
		{"unknown service", "other", 0, "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultMetricsAddr(tc.service, tc.index); got != tc.want {
				t.Errorf("DefaultMetricsAddr(%q, %d) = %s, want %s", tc.service, tc.index, got, tc.want)
			}
		})
	}
}

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
