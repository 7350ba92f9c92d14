package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is an io.Writer safe for Serve's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStandin walks an outage over real HTTP: accepted while up, 503 while
// down, accepted again once back; repeated keys are counted, not doubled.
func TestStandin(t *testing.T) {
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(true)
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, s, &out) }()
	base := "http://" + l.Addr().String()

	steps := []struct {
		name, method, path, key string
		want                    int
	}{
		{name: "event while up", method: http.MethodPost, path: "/capture", key: "pharmacy_1", want: http.StatusOK},
		{name: "non-ASCII key", method: http.MethodPost, path: "/capture", key: "fsma_Müller & Söhne <Großhandel>", want: http.StatusOK},
		{name: "the same key again", method: http.MethodPost, path: "/capture", key: "pharmacy_1", want: http.StatusOK},
		{name: "no idempotency key", method: http.MethodPost, path: "/capture", want: http.StatusBadRequest},
		{name: "get on the API", method: http.MethodGet, path: "/capture", key: "x", want: http.StatusMethodNotAllowed},
		{name: "get on down", method: http.MethodGet, path: DownPath, want: http.StatusMethodNotAllowed},
		{name: "take it down", method: http.MethodPost, path: DownPath, want: http.StatusOK},
		{name: "event while down", method: http.MethodPost, path: "/capture", key: "dscsa_2", want: http.StatusServiceUnavailable},
		{name: "down twice", method: http.MethodPost, path: DownPath, want: http.StatusOK},
		{name: "bring it back", method: http.MethodPost, path: UpPath, want: http.StatusOK},
		{name: "the refused event again", method: http.MethodPost, path: "/capture", key: "dscsa_2", want: http.StatusOK},
	}
	for _, st := range steps {
		req, err := http.NewRequest(st.method, base+st.path, strings.NewReader(`{"note":"<a&b>"}`))
		if err != nil {
			t.Fatal(err)
		}
		if st.key != "" {
			req.Header.Set("Idempotency-Key", st.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != st.want {
			t.Errorf("%s: HTTP %d, want %d", st.name, resp.StatusCode, st.want)
		}
	}
	resp, err := http.Get(base + StatusPath)
	if err != nil {
		t.Fatal(err)
	}
	var got Status
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Status{Up: true, Accepted: 3, Doubles: 1, Refused: 1}); got != want {
		t.Errorf("status %+v, want %+v", got, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	text := out.String()
	for _, want := range []string{
		"stand-in downstream UP on " + base,
		"--downstream-url " + base + "/capture",
		"curl -X POST " + base + "/down",
		"downstream DOWN: answering 503",
		"downstream UP: accepting events",
		"3 keys accepted, 1 received again, 1 posts refused while down",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "downstream DOWN") != 1 {
		t.Errorf("a second /down reported a change:\n%s", text)
	}
	if strings.Contains(text, "Müller") || strings.Contains(text, "pharmacy_1") {
		t.Errorf("output names a key:\n%s", text)
	}
}

// TestListenTaken: a taken port is named, with the flag to change it.
func TestListenTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Listen(l.Addr().String())
	want := l.Addr().String() + " is already in use (another stand-in downstream?); use --port"
	if !errors.Is(err, ErrAddrInUse) || err.Error() != want {
		t.Fatalf("Listen = %v, want %q", err, want)
	}
}
