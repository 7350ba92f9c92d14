package config

import (
	"net"
	"strconv"

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
// every service of a host serves /metrics (package runner serves /metrics there by default; package kit writes
// the same ports into the deployment files). Instance index i of a service uses
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
