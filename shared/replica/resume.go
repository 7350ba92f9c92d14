package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/subjects"
)

// ErrResume: the validator's position on the promoted copy could not be
// set.
var ErrResume = errors.New("replica: resume the validator")

// Resume sets the validator's durable consumer on the promoted copy (js:
// its admin; the consumer provisioned) to the first event of EVENTS, among
// those the consumer takes, that has no outcome in the copy: no committed
// state in IDEMPOTENCY and no QUARANTINE record naming it as its source. A
// mirror carries no consumer position: without this the validator would
// start over and try again every event quarantined because the downstream
// was unavailable, held ones included. Events after the returned sequence
// are handled again, which the IDEMPOTENCY and QUARANTINE checks make
// harmless. It returns the sequence the consumer resumes at.
func Resume(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	done := map[uint64]bool{}
	err := each(ctx, js, subjects.BucketStream(subjects.IdempotencyBucket), nil, func(m jetstream.Msg) {
		if st, err := idempotency.Decode(m.Data()); err == nil && st.Committed() && st.SourceSeq > 0 {
			done[st.SourceSeq] = true
		}
	})
	if err != nil {
		return 0, err
	}
	err = each(ctx, js, subjects.QuarantineStream, nil, func(m jetstream.Msg) {
		var r struct {
			SourceStream string `json:"source_stream"`
			SourceSeq    uint64 `json:"source_seq"`
		}
		if json.Unmarshal(m.Data(), &r) == nil && r.SourceStream == subjects.EventsStream {
			done[r.SourceSeq] = true
		}
	})
	if err != nil {
		return 0, err
	}
	c, err := js.Consumer(ctx, subjects.EventsStream, subjects.ValidatorConsumer)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrResume, err)
	}
	cfg := c.CachedInfo().Config
	filters := cfg.FilterSubjects
	if cfg.FilterSubject != "" {
		filters = append(filters, cfg.FilterSubject)
	}
	s, err := js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrResume, err)
	}
	at := s.CachedInfo().State.LastSeq + 1
	found := false
	err = each(ctx, js, subjects.EventsStream, filters, func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil || found || done[md.Sequence.Stream] {
			return
		}
		at, found = md.Sequence.Stream, true
	})
	if err != nil {
		return 0, err
	}
	body, _ := json.Marshal(map[string]uint64{"seq": at})
	r, err := js.Conn().RequestWithContext(ctx, "$JS.API.CONSUMER.RESET."+subjects.EventsStream+"."+subjects.ValidatorConsumer, body)
	if err != nil {
		return 0, fmt.Errorf("%w: reset to %d: %w", ErrResume, at, err)
	}
	var rep struct {
		Error *struct {
			Description string `json:"description"`
			ErrCode     int    `json:"err_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Data, &rep); err != nil {
		return 0, fmt.Errorf("%w: reset to %d: %w", ErrResume, at, err)
	}
	if rep.Error != nil {
		return 0, fmt.Errorf("%w: reset to %d: %s (%d)", ErrResume, at, rep.Error.Description, rep.Error.ErrCode)
	}
	return at, nil
}

// each calls fn with every message of stream (of filters, when given),
// in order, through an ordered consumer, up to the last one stored when it
// reads it (no wait for more).
func each(ctx context.Context, js jetstream.JetStream, stream string, filters []string, fn func(jetstream.Msg)) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrResume, stream, err)
	}
	if s.CachedInfo().State.Msgs == 0 {
		return nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: filters})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrResume, stream, err)
	}
	for {
		b, err := c.FetchNoWait(1024)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrResume, stream, err)
		}
		n := 0
		last := false
		for m := range b.Messages() {
			n++
			fn(m)
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				last = true
			}
		}
		if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("%w: %s: %w", ErrResume, stream, err)
		}
		if last || n == 0 {
			return nil
		}
	}
}
