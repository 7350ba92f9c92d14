package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/deadletter/deadletter/shared/access"
)

// ServicePort is a service's default /metrics port.
type ServicePort struct {
	// Name is the service (and its NATS user's) name.
	Name string
	// Port is its /metrics port for instance index 0.
	Port int
}

// MetricsPorts is the one table of the services' default /metrics ports,
// in the order a deployment starts them: distinct per service, so that
// every service of a host serves /metrics (package kit writes the same
// ports into the deployment files). Instance index i of a service uses
// Port + i·len(MetricsPorts()), so several instances on one host never
// collide either.
func MetricsPorts() []ServicePort {
	return []ServicePort{
		{Name: access.Validator, Port: 9464},
		{Name: access.Quarantiner, Port: 9465},
		{Name: access.Redriver, Port: 9466},
		{Name: access.Auditor, Port: 9467},
	}
}

// DefaultMetricsAddr is where service's instance index serves /metrics
// when DEADLETTER_METRICS_ADDR and --metrics-addr say nothing: loopback
// and the service's port from MetricsPorts; a service not in the table
// gets a free port (":0"), whose bound address is logged.
func DefaultMetricsAddr(service string, index int) string {
	ports := MetricsPorts()
	for _, p := range ports {
		if p.Name == service {
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port+index*len(ports)))
		}
	}
	return "127.0.0.1:0"
}

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
