package embedded

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// TestAddrInUse: with its client port taken by another process's listener,
// Start names the address instead of "server not ready".
func TestAddrInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s, err := Start(Config{StoreDir: t.TempDir(), Port: port})
	if err == nil {
		s.Shutdown()
		t.Fatal("started on a taken port")
	}
	want := l.Addr().String() + " is already in use (another deadletter or nats-server?)"
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want %q", err, want)
	}
	// Free again, the same port serves.
	l.Close()
	s, err = Start(Config{StoreDir: t.TempDir(), Port: port})
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	s.Shutdown()
	s.WaitForShutdown()
}
