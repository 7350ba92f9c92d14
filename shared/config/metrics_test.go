package config

import "testing"

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
