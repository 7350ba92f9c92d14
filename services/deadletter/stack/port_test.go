package stack

import (
	"context"
	"net"
	"testing"

	"github.com/deadletter/deadletter/shared/access"
)

// TestPortTaken: with its NATS port held by another process's listener,
// the stack says which address is taken and how to choose another, not
// "server not ready".
func TestPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.AnchorDir = t.TempDir(), t.TempDir()
	cfg.Port = l.Addr().(*net.TCPAddr).Port
	cfg.PasswordCost = access.MinBcryptCost
	cfg.MetricsAddr, cfg.ConsoleAddr = "", ""
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(context.Background())
	want := l.Addr().String() + " is already in use (another deadletter or nats-server?); use --port (env DEADLETTER_PORT)"
	if err == nil || err.Error() != want {
		t.Fatalf("Run = %v, want %q", err, want)
	}
}
