package client

import "github.com/nats-io/nats.go"

// Conn returns the client's NATS connection (backup and restore speak
// JetStream's snapshot protocol on it directly).
func (c *Client) Conn() *nats.Conn { return c.nc }
