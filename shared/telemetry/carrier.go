package telemetry

import (
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// Carrier adapts a nats.Header to the propagation.TextMapCarrier (and
// ValuesGetter) interfaces. Unlike http.Header, nats.Header is
// case-sensitive and does not canonicalize names, so:
//
//   - Get and Values look for the exact key first, then for any key equal
//     to it ignoring case (a gateway may have rewritten "traceparent" as
//     "Traceparent");
//   - Set removes every case variant of the key before storing the value
//     under the exact key, so a message never carries two traceparents;
//   - Get returns the first value, as record.ParseTraceparent does, so the
//     trace a quarantine record names is the one the services continue.
//
// Set on a nil Carrier panics: give messages a header first (nats.NewMsg does).
type Carrier nats.Header

// Compile-time checks.
var (
	_ propagation.TextMapCarrier = Carrier{}
	_ propagation.ValuesGetter   = Carrier{}
)

// Get returns the first value of key, or "".
func (c Carrier) Get(key string) string {
	if v := c.Values(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values returns every value of key: the exact key's, else those of the
// first key equal to it ignoring case.
func (c Carrier) Values(key string) []string {
	if v, ok := c[key]; ok {
		return v
	}
	for k, v := range c {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}

// Set stores value as the only value of key, removing case variants.
func (c Carrier) Set(key, value string) {
	for k := range c {
		if k != key && strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[key] = []string{value}
}

// Keys lists the header names, as stored.
func (c Carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
