package fsma_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
)

// FuzzGateFsma feeds arbitrary payloads and subject tokens through the
// whole gate: it must never panic, and must return either a complete
// envelope (the same one for the same input) or a known, non-internal code.
func FuzzGateFsma(f *testing.F) {
	for _, tf := range loadTestdata(f) {
		token := strings.TrimPrefix(subjectFor(tf.data), "events.fsma.")
		f.Add(tf.data, token)
		if tf.valid {
			f.Add(tf.data, "receiving")
			f.Add(bytes.Replace(tf.data, []byte(`"gln": "0`), []byte(`"gln": "`), 1), token)
			f.Add(bytes.Replace(tf.data, []byte(`Z"`), []byte(`"`), 1), token)
			f.Add(bytes.Replace(tf.data, []byte(`-0`), []byte(`+1`), -1), token)
			f.Add(tf.data[:len(tf.data)/2], token)
		}
	}
	f.Add([]byte(`{}`), "shipping")
	f.Add([]byte(`{"cte_type":"transformation","input_tlcs":[null,1,""]}`), "transformation")
	f.Add([]byte(`{"cte_type":"shipping","quantity":-0.0e-0}`), "shipping")
	f.Add([]byte(`null`), "x.y")
	g := newGate(f)
	f.Fuzz(func(t *testing.T, data []byte, token string) {
		subject := "events.fsma." + token
		env, err := g.Check(subject, data)
		if err != nil {
			c := codes.Of(err)
			if c == codes.Internal || !knownCodes[c] {
				t.Fatalf("code %q: %v", c, err)
			}
			// A failed event's identity is derived without panicking,
			// the same for the same input.
			if id, again := g.Identify(subject, data), g.Identify(subject, data); !id.Partial || id.IdempotencyKey != again.IdempotencyKey ||
				id.OrderingKey != again.OrderingKey || id.PartyID != again.PartyID {
				t.Fatalf("identity %+v, then %+v", id, again)
			}
			return
		}
		checkEnvelope(t, env)
		again, err := g.Check(subject, data)
		if err != nil || again.IdempotencyKey != env.IdempotencyKey || again.OrderingKey != env.OrderingKey {
			t.Fatalf("second check differs: %v, %+v vs %+v", err, again, env)
		}
	})
}
