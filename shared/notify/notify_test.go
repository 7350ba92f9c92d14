package notify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/retry"
)

// marker is a payload value: it must appear in no notification.
const marker = "MARKER-Müller & Söhne <Großhandel> \"Pharmacie Saint-Étienne\""

// hook is an httptest webhook receiver that checks every POST's signature
// and answers from a script (then 200).
type hook struct {
	*httptest.Server
	key []byte

	mu       sync.Mutex
	script   []int
	attempts map[string]int // by webhook-id
	bodies   map[string][]byte
	bad      []string // problems seen
}

func newHook(tb testing.TB, key []byte, script ...int) *hook {
	h := &hook{key: key, script: script, attempts: map[string]int{}, bodies: map[string][]byte{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err := verify(h.key, r.Header, body); err != nil {
			h.bad = append(h.bad, "signature: "+err.Error())
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			h.bad = append(h.bad, "not a JSON POST")
		}
		id := r.Header.Get(notify.HeaderID)
		h.attempts[id]++
		code := http.StatusOK
		if len(h.script) > 0 {
			code, h.script = h.script[0], h.script[1:]
		}
		if code == http.StatusOK {
			h.bodies[id] = body
		}
		w.WriteHeader(code)
	}))
	tb.Cleanup(h.Close)
	return h
}

func (h *hook) delivered(id string) ([]byte, int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.bodies[id]
	return b, h.attempts[id], ok
}

// fast is a back-off fit for tests.
var fast = retry.Policy{Attempt: 5 * time.Second, Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}

// TestWebhookSignedRetriedNoValues: every notification is published on
// its kind's subject and POSTed signed (the receiver verifies each
// signature); a 500 is retried until the 200; a 400 is not retried; no
// member that could carry a payload value reaches NATS or the webhook.
func TestWebhookSignedRetriedNoValues(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	key := []byte("0123456789abcdef-secret")
	h := newHook(t, key, http.StatusInternalServerError, http.StatusOK)
	var omu sync.Mutex
	outcomes := map[string]int{}
	p, err := notify.New(nc, "test", notify.Config{WebhookURL: h.URL, WebhookSecret: "whsec_" + base64.StdEncoding.EncodeToString(key), Retry: fast,
		MaxElapsed: 30 * time.Second, OnOutcome: func(_ notify.Kind, o string) { omu.Lock(); outcomes[o]++; omu.Unlock() }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	sub, err := nc.SubscribeSync("deadletter.notify.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		ev       notify.Event
		attempts int // POSTs until delivered (the first event meets the 500)
	}{
		{"a poison record, first POST answered 500", notify.Event{ID: "poison.pharmacy_1.3", Kind: notify.KindPoison, DLQID: "pharmacy_1", Domain: "pharmacy", Code: "INVALID_NDC"}, 2},
		{"a payload value as the code", notify.Event{ID: "failure_group.x", Kind: notify.KindFailureGroup, Code: marker}, 1},
		{"a payload value as the reason", notify.Event{ID: "drain_paused.d1", Kind: notify.KindDrainPaused, DrainID: "drain-1", Reason: marker}, 1},
		{"a payload value as a dlq id", notify.Event{ID: "poison.y", Kind: notify.KindPoison, DLQID: marker}, 1},
		{"a payload value as a count key", notify.Event{ID: "verify_failed.z", Kind: notify.KindVerifyFailed, Codes: map[string]int{marker: 1, "chain_broken": 2}}, 1},
		{"a payload value as the id", notify.Event{ID: marker, Kind: notify.KindApprovalPending, ApprovalID: "ap-1", Reason: "correct"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.Publish(tc.ev)
			m, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject != "deadletter.notify."+string(tc.ev.Kind) {
				t.Errorf("subject %s", m.Subject)
			}
			var got notify.Event
			if err := json.Unmarshal(m.Data, &got); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(m.Data), "MARKER") || strings.Contains(string(m.Data), "Müller") {
				t.Errorf("a payload value on NATS: %s", m.Data)
			}
			if got.Source != "test" || got.At.IsZero() || got.Kind != tc.ev.Kind {
				t.Errorf("event %+v", got)
			}
			var body []byte
			var attempts int
			natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
				var ok bool
				if body, attempts, ok = h.delivered(got.ID); !ok {
					return errors.New("not delivered yet")
				}
				return nil
			})
			if attempts != tc.attempts {
				t.Errorf("delivered after %d POSTs, want %d", attempts, tc.attempts)
			}
			if string(body) != string(m.Data) {
				t.Errorf("webhook body %s, NATS %s", body, m.Data)
			}
			if strings.Contains(string(body), "MARKER") {
				t.Errorf("a payload value at the webhook: %s", body)
			}
		})
	}
	// The receiver has the last POST before the sender has its answer and
	// counts the delivery: poll.
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		omu.Lock()
		defer omu.Unlock()
		if outcomes[notify.OutcomePublished] != 6 || outcomes[notify.OutcomeDelivered] != 6 || len(outcomes) != 2 {
			return fmt.Errorf("outcomes %v, want 6 published and delivered", outcomes)
		}
		return nil
	})
	h.mu.Lock()
	if len(h.bad) > 0 {
		t.Errorf("receiver problems: %v", h.bad)
	}
	h.mu.Unlock()
}

// TestWebhookGivesUp: a 4xx other than 429 is not retried; a webhook that
// keeps failing is given up after MaxElapsed; neither blocks Publish.
func TestWebhookGivesUp(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	key := []byte("another-secret-of-24-byte")
	for _, tc := range []struct {
		name     string
		script   []int
		attempts func(int) bool
	}{
		{"400: not retried", []int{http.StatusBadRequest}, func(n int) bool { return n == 1 }},
		{"always 503: retried, then given up", []int{503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503},
			func(n int) bool { return n >= 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHook(t, key, tc.script...)
			p, err := notify.New(nc, "test", notify.Config{WebhookURL: h.URL, WebhookSecret: string(key), Retry: fast, MaxElapsed: 300 * time.Millisecond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.Publish(notify.Event{ID: "drain_paused.d", Kind: notify.KindDrainPaused, DrainID: "d"})
			natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
				if _, _, _, failed := p.Stats(); failed != 1 {
					return errors.New("not given up yet")
				}
				return nil
			})
			if _, n, _ := h.delivered("drain_paused.d"); !tc.attempts(n) {
				t.Errorf("%d POSTs", n)
			}
		})
	}
}

// TestBoundedQueueNeverBlocks: with the webhook stuck, Publish returns at
// once and drops what the queues cannot hold.
func TestBoundedQueueNeverBlocks(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(stuck.Close)
	t.Cleanup(func() { close(release) })
	p, err := notify.New(nc, "test", notify.Config{WebhookURL: stuck.URL, WebhookSecret: "0123456789abcdef", QueueSize: 4, Retry: fast}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for range 1000 {
			p.Publish(notify.Event{ID: "poison.x", Kind: notify.KindPoison})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Publish blocked")
	}
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if pub, dropped, _, _ := p.Stats(); pub+dropped < 1000 || dropped == 0 {
			return errors.New("still publishing")
		}
		return nil
	})
	go p.Close()
}

// TestConfig: a webhook needs an http(s) URL and a secret of 16 bytes.
func TestConfig(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte("whsec_"+base64.StdEncoding.EncodeToString([]byte("a secret of 24 bytes....."))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  notify.Config
		err  error
	}{
		{"no webhook", notify.Config{}, nil},
		{"file URL", notify.Config{WebhookURL: "file:///etc/passwd", WebhookSecret: "0123456789abcdef"}, notify.ErrBadWebhook},
		{"no secret", notify.Config{WebhookURL: "https://hooks.example/x"}, notify.ErrNoSecret},
		{"short secret", notify.Config{WebhookURL: "https://hooks.example/x", WebhookSecret: "short"}, notify.ErrNoSecret},
		{"whsec not base64", notify.Config{WebhookURL: "https://hooks.example/x", WebhookSecret: "whsec_???"}, notify.ErrNoSecret},
		{"secret from a file", notify.Config{WebhookURL: "https://hooks.example/x", WebhookSecretFile: secretFile}, nil},
		{"secret file missing", notify.Config{WebhookURL: "https://hooks.example/x", WebhookSecretFile: secretFile + ".gone"}, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := notify.New(nc, "test", tc.cfg, nil)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			p.Close()
		})
	}
	var nilP *notify.Publisher
	nilP.Publish(notify.Event{Kind: notify.KindPoison}) // a nil publisher publishes nothing
}

// BenchmarkPublish measures Publish (queue, no webhook) and the events
// reaching NATS.
func BenchmarkPublish(b *testing.B) {
	srv := natstest.Start(b)
	nc := srv.Connect(b)
	p, err := notify.New(nc, "bench", notify.Config{QueueSize: 1 << 16}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ev := notify.Event{ID: "poison.pharmacy_0123456789abcdef0123456789abcdef.3", Kind: notify.KindPoison, Domain: "pharmacy",
		DLQID: "pharmacy_0123456789abcdef0123456789abcdef", Code: "DOWNSTREAM_UNAVAILABLE", Counts: map[string]int{"redrive_count": 3}}
	for b.Loop() {
		p.Publish(ev)
	}
	p.Close()
	pub, dropped, _, _ := p.Stats()
	b.ReportMetric(float64(dropped)/float64(pub+dropped), "dropped/op")
}

// verify checks a POST as receivers do, twice: with the Standard Webhooks
// library's verifier, and by hand from the specification's text (v1: the
// base64 HMAC-SHA256, keyed by the secret, of "<id>.<timestamp>.<body>";
// the timestamp within five minutes), a reader that shares no code with
// the signer.
func verify(key []byte, h http.Header, body []byte) error {
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return err
	}
	if err := wh.Verify(body, h); err != nil {
		return fmt.Errorf("the library's verifier: %w", err)
	}
	ts, err := strconv.ParseInt(h.Get(notify.HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	if d := time.Since(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp %d is %s away", ts, d)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", h.Get(notify.HeaderID), ts)
	m.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, sig := range strings.Fields(h.Get(notify.HeaderSignature)) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no v1 signature is the specification's HMAC")
}
