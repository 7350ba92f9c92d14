// Package notify publishes deadletter's notifications: small JSON events a
// team routes to its pager or ticketing — a new failure group, a poison
// record, a paused drain, a pending approval, a failed verify. Each is a
// core NATS publish on deadletter.notify.<kind> (subjects.Notify) and,
// when a webhook is configured, an HTTP POST signed the Standard Webhooks
// way (as Svix does): headers webhook-id, webhook-timestamp and
// webhook-signature "v1,<base64 HMAC-SHA256 over id.timestamp.body>",
// retried with back-off (package retry) on a transport error, a 429 or a
// 5xx.
//
// An event carries ids, codes, classes and counts only: never a payload
// value, a party, an actor's free text or a reason a person typed (Event
// has no field that could hold one; Publish drops what does not look like
// an id or a code).
//
// Notifying never blocks the pipeline: Publish puts the event in a bounded
// queue and returns; a full queue drops the event (counted, logged with
// its kind and id). Delivery is at most once (a core publish reaches only
// the subscribers present; a webhook that stays down past MaxElapsed loses
// the event) and may repeat (several instances may see the same fact): an
// event's id is stable per fact, so a receiver de-duplicates on it
// (webhook-id).
package notify

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Kind is what a notification reports.
type Kind string

// The kinds of notifications, each on subjects.Notify(kind).
const (
	// KindFailureGroup: the first event of a new triage group (domain,
	// error code, class) was quarantined. The auditor's live view
	// publishes it.
	KindFailureGroup Kind = subjects.NotifyFailureGroup
	// KindPoison: an event became poison (its replays reached the redrive
	// cap). The auditor's live view publishes it.
	KindPoison Kind = subjects.NotifyPoison
	// KindDrainPaused: a drain's canary or failure window paused it. The
	// redriver publishes it.
	KindDrainPaused Kind = subjects.NotifyDrainPaused
	// KindApprovalPending: an action waits for a second person's
	// approval. The redriver publishes it.
	KindApprovalPending Kind = subjects.NotifyApprovalPending
	// KindVerifyFailed: a verification of QUARANTINE and AUDIT found
	// problems. The auditor publishes it.
	KindVerifyFailed Kind = subjects.NotifyVerifyFailed
)

// Kinds lists every kind.
func Kinds() []Kind {
	return []Kind{KindFailureGroup, KindPoison, KindDrainPaused, KindApprovalPending, KindVerifyFailed}
}

// Subject returns the subject of kind k's notifications.
func Subject(k Kind) string { return subjects.Notify(string(k)) }

// Event is one notification. Every member is an id, a code, a class, a
// fixed word or a count.
type Event struct {
	// ID is stable per fact (e.g. "poison.<dlq_id>.<index>"): receivers
	// de-duplicate on it (the webhook-id header).
	ID   string    `json:"id"`
	Kind Kind      `json:"kind"`
	At   time.Time `json:"at"`
	// Source is the service that published it.
	Source string `json:"source"`
	// Domain, DLQID, DrainID, ApprovalID and Fingerprint name what it is
	// about (those that apply).
	Domain      string `json:"domain,omitempty"`
	DLQID       string `json:"dlq_id,omitempty"`
	DrainID     string `json:"drain_id,omitempty"`
	ApprovalID  string `json:"approval_id,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	// Code and Class are an error code and a failure class.
	Code  string `json:"code,omitempty"`
	Class string `json:"class,omitempty"`
	// Reason is a fixed word: a pause's reason (canary, failure_rate), an
	// approval's action (drain, correct, release, dismiss, hold_lift).
	Reason string `json:"reason,omitempty"`
	// Codes counts error codes (a pause's failing codes, a verify's
	// problem kinds); Counts other figures (outcomes, failures, problems,
	// selected).
	Codes  map[string]int `json:"codes,omitempty"`
	Counts map[string]int `json:"counts,omitempty"`
}

// token reports whether s looks like an id, a code or a fixed word:
// letters, digits and -_.:, at most 128 bytes. Anything else (free text,
// a value) is not sent.
func token(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// scrub blanks every string member that is not a token and drops the
// count keys that are not: an id or a code cannot carry a payload value
// out by mistake.
func (ev Event) scrub() Event {
	for _, p := range []*string{&ev.ID, &ev.Source, &ev.Domain, &ev.DLQID, &ev.DrainID, &ev.ApprovalID, &ev.Fingerprint, &ev.Code, &ev.Class, &ev.Reason} {
		if !token(*p) {
			*p = "redacted"
		}
	}
	clean := func(m map[string]int) map[string]int {
		if m == nil {
			return nil
		}
		out := make(map[string]int, len(m))
		for k, v := range m {
			if token(k) {
				out[k] = v
			}
		}
		return out
	}
	ev.Codes, ev.Counts = clean(ev.Codes), clean(ev.Counts)
	return ev
}

// Config configures a Publisher. The zero Config publishes on NATS only.
type Config struct {
	// WebhookURL, when set, receives every notification as a signed POST
	// (http or https). LoadEnv: DEADLETTER_NOTIFY_WEBHOOK_URL.
	WebhookURL string
	// WebhookSecret signs the POSTs (required with WebhookURL, at least
	// 16 bytes): "whsec_<base64>" is decoded (the Standard Webhooks
	// form), any other value is used as it is. LoadEnv reads it from the
	// file DEADLETTER_NOTIFY_WEBHOOK_SECRET_FILE names.
	WebhookSecret string
	// WebhookSecretFile is the file WebhookSecret was read from.
	WebhookSecretFile string
	// QueueSize bounds the events waiting to be published, and those
	// waiting for the webhook (default 1024 each).
	QueueSize int
	// MaxElapsed bounds how long one event is retried at the webhook
	// (default 2 minutes; LoadEnv: DEADLETTER_NOTIFY_WEBHOOK_MAX_ELAPSED).
	MaxElapsed time.Duration
	// Retry is the back-off between webhook attempts (retry.Policy;
	// default 10 s per attempt, 200 ms doubling to 10 s).
	Retry retry.Policy
	// Client posts to the webhook (default: a client with a 10 s timeout).
	Client *http.Client
	// OnOutcome, when set, is told of each event's outcomes (a service's
	// metric): OutcomePublished, OutcomeDropped, OutcomeDelivered,
	// OutcomeFailed. It must not block.
	OnOutcome func(kind Kind, outcome string)
}

// Outcomes of an event (Config.OnOutcome).
const (
	// OutcomePublished: published on NATS.
	OutcomePublished = "published"
	// OutcomeDropped: dropped by a full queue (or published after Close).
	OutcomeDropped = "dropped"
	// OutcomeDelivered: the webhook answered 2xx.
	OutcomeDelivered = "delivered"
	// OutcomeFailed: given up at the webhook.
	OutcomeFailed = "failed"
)

// count records an outcome of an event of kind k.
func (p *Publisher) count(k Kind, outcome string) {
	switch outcome {
	case OutcomePublished:
		p.published.Add(1)
	case OutcomeDropped:
		p.dropped.Add(1)
	case OutcomeDelivered:
		p.delivered.Add(1)
	case OutcomeFailed:
		p.failed.Add(1)
	}
	if p.cfg.OnOutcome != nil {
		p.cfg.OnOutcome(k, outcome)
	}
}

// Env is what LoadEnv reads the environment through: *config.Env (not
// imported: shared/config imports shared/access, whose tests import this
// package's dependencies).
type Env interface {
	String(name string, dst *string)
	Duration(name string, dst *time.Duration)
}

// LoadEnv overrides c from DEADLETTER_NOTIFY_WEBHOOK_URL,
// DEADLETTER_NOTIFY_WEBHOOK_SECRET_FILE and
// DEADLETTER_NOTIFY_WEBHOOK_MAX_ELAPSED.
func (c *Config) LoadEnv(env Env) {
	env.String("DEADLETTER_NOTIFY_WEBHOOK_URL", &c.WebhookURL)
	env.String("DEADLETTER_NOTIFY_WEBHOOK_SECRET_FILE", &c.WebhookSecretFile)
	env.Duration("DEADLETTER_NOTIFY_WEBHOOK_MAX_ELAPSED", &c.MaxElapsed)
}

// Errors of a Config.
var (
	ErrBadWebhook = errors.New("notify: the webhook URL must be an absolute http or https URL")
	ErrNoSecret   = errors.New("notify: a webhook needs a secret of at least 16 bytes")
)

// key returns the webhook's signing key.
func (c Config) key() ([]byte, error) {
	s := c.WebhookSecret
	if s == "" && c.WebhookSecretFile != "" {
		b, err := os.ReadFile(c.WebhookSecretFile)
		if err != nil {
			return nil, fmt.Errorf("notify: webhook secret: %w", err)
		}
		s = strings.TrimSpace(string(b))
	}
	k := []byte(s)
	if rest, ok := strings.CutPrefix(s, "whsec_"); ok {
		b, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: whsec_ secret is not base64", ErrNoSecret)
		}
		k = b
	}
	if len(k) < 16 {
		return nil, ErrNoSecret
	}
	return k, nil
}

// Publisher publishes notifications; the nil Publisher publishes nothing.
type Publisher struct {
	nc     *nats.Conn
	source string
	log    *slog.Logger
	cfg    Config
	hook   *standardwebhooks.Webhook
	q, hq  chan Event
	stop   context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup
	// mu guards closed: Publish after Close drops the event.
	mu     sync.RWMutex
	closed bool
	// Published, Dropped, Delivered and Failed count events (published
	// on NATS; dropped by a full queue; delivered to the webhook; given
	// up at the webhook).
	published, dropped, delivered, failed atomic.Int64
}

// New returns a running Publisher for service source on nc; Close stops
// it. A Config with a webhook must be valid.
func New(nc *nats.Conn, source string, cfg Config, log *slog.Logger) (*Publisher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1024
	}
	if cfg.MaxElapsed <= 0 {
		cfg.MaxElapsed = 2 * time.Minute
	}
	if cfg.Retry == (retry.Policy{}) {
		cfg.Retry = retry.Policy{Attempt: 10 * time.Second, Initial: 200 * time.Millisecond, Max: 10 * time.Second}
	}
	cfg.Retry.Kind = "webhook"
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	p := &Publisher{nc: nc, source: source, log: log, cfg: cfg, q: make(chan Event, cfg.QueueSize)}
	if cfg.WebhookURL != "" {
		u, err := url.Parse(cfg.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, ErrBadWebhook
		}
		key, err := cfg.key()
		if err != nil {
			return nil, err
		}
		if p.hook, err = standardwebhooks.NewWebhookRaw(key); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoSecret, err)
		}
		p.hq = make(chan Event, cfg.QueueSize)
	}
	p.ctx, p.stop = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.publishLoop()
	if p.hq != nil {
		p.wg.Add(1)
		go p.webhookLoop()
	}
	return p, nil
}

// Publish queues ev (its At and Source filled in when empty) and returns
// at once; a full queue drops it.
func (p *Publisher) Publish(ev Event) {
	if p == nil {
		return
	}
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	if ev.Source == "" {
		ev.Source = p.source
	}
	ev = ev.scrub()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.count(ev.Kind, OutcomeDropped)
		return
	}
	select {
	case p.q <- ev:
	default:
		p.count(ev.Kind, OutcomeDropped)
		p.log.Warn("NOTIFY_DROPPED", "kind", string(ev.Kind), "id", ev.ID, "queue", "publish")
	}
}

// Close stops the publisher: the events queued are published on NATS;
// those still waiting for the webhook are given up (counted failed); an
// event published after Close is dropped.
func (p *Publisher) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.q)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Stats returns how many events were published on NATS, dropped by a full
// queue, delivered to the webhook and given up at the webhook.
func (p *Publisher) Stats() (published, dropped, delivered, failed int64) {
	if p == nil {
		return 0, 0, 0, 0
	}
	return p.published.Load(), p.dropped.Load(), p.delivered.Load(), p.failed.Load()
}

func (p *Publisher) publishLoop() {
	defer p.wg.Done()
	defer func() {
		p.stop()
		if p.hq != nil {
			close(p.hq)
		}
	}()
	for ev := range p.q {
		b, err := json.Marshal(ev)
		if err != nil {
			continue
		}
		if err := p.nc.Publish(Subject(ev.Kind), b); err != nil {
			p.log.Warn("NOTIFY_NOT_PUBLISHED", "kind", string(ev.Kind), "id", ev.ID, "err", err)
		} else {
			p.count(ev.Kind, OutcomePublished)
		}
		if p.hq == nil {
			continue
		}
		select {
		case p.hq <- ev:
		default:
			p.count(ev.Kind, OutcomeDropped)
			p.log.Warn("NOTIFY_DROPPED", "kind", string(ev.Kind), "id", ev.ID, "queue", "webhook")
		}
	}
}

func (p *Publisher) webhookLoop() {
	defer p.wg.Done()
	for ev := range p.hq {
		if p.ctx.Err() != nil {
			p.count(ev.Kind, OutcomeFailed)
			continue
		}
		if err := p.deliver(ev); err != nil {
			p.count(ev.Kind, OutcomeFailed)
			p.log.Warn("NOTIFY_WEBHOOK_FAILED", "kind", string(ev.Kind), "id", ev.ID, "err", err)
			continue
		}
		p.count(ev.Kind, OutcomeDelivered)
	}
}

// errStatus is a webhook answer that is not a success.
type errStatus struct{ code int }

func (e errStatus) Error() string { return "webhook answered " + strconv.Itoa(e.code) }

// deliver posts ev to the webhook, retrying a transport error, a 429 or a
// 5xx with back-off for at most MaxElapsed; another answer ends it.
func (p *Publisher) deliver(ev Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.MaxElapsed)
	defer cancel()
	return p.cfg.Retry.Do(ctx, p.log, "notify "+string(ev.Kind), func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.WebhookURL, bytes.NewReader(body))
		if err != nil {
			return backoff.Permanent(err)
		}
		ts := time.Now()
		sig, err := p.hook.Sign(ev.ID, ts, body)
		if err != nil {
			return backoff.Permanent(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderID, ev.ID)
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set(HeaderSignature, sig)
		resp, err := p.cfg.Client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		switch c := resp.StatusCode; {
		case c >= 200 && c < 300:
			return nil
		case c == http.StatusTooManyRequests || c >= 500:
			return errStatus{c}
		default:
			return backoff.Permanent(errStatus{c})
		}
	})
}

// The Standard Webhooks headers of a POST.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)
