package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ErrMetricsListen: /metrics could not be bound; the service does not start.
var ErrMetricsListen = errors.New("runner: /metrics not served")

// serveMetrics binds addr and serves h there until the returned stop is
// called. A bind failure is an error, not a log line: a service without
// /metrics is invisible to its "service down" alert, and failing the start
// makes a supervisor and the operator see it at once. The bound address
// (the port chosen for ":0") is logged.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w on %s (set DEADLETTER_METRICS_ADDR or --metrics-addr; empty disables): %w", ErrMetricsListen, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Info("metrics served", "addr", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return func() { _ = srv.Close() }, nil
}
