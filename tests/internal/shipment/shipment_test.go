package shipment

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/gate"
)

// TestGateGivesEachPlantedMistakeItsCode: in both bindings, the reader
// reads every event of a generated shipment, the gate passes every
// correct event and gives each planted mistake its code (the changed
// duplicate passes the gate with its original's key: its conflict is the
// commit's), and the same configuration gives the same bytes.
func TestGateGivesEachPlantedMistakeItsCode(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"EPCIS 1.2 XML with SBDH", Config{Seed: 7, Format: XML12, ID: "DESADV-7 <Müller & Söhne → 陈伟>", Mistakes: len(Kinds)}},
		{"EPCIS 2.0 JSON-LD", Config{Seed: 8, Format: JSONLD20, ID: "urn:uuid:6f1c1e52-8b1e-4d1f-9c3a-0a4a8d1f0b08", Mistakes: len(Kinds) + 3}},
		{"no mistake", Config{Seed: 9, Format: XML12, Pallets: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Generate(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Generate(tc.cfg)
			if err != nil || !bytes.Equal(again.Data, s.Data) {
				t.Fatalf("a second generation differs (%v)", err)
			}
			if len(s.Mistakes) != tc.cfg.Mistakes {
				t.Fatalf("%d mistakes planted, want %d", len(s.Mistakes), tc.cfg.Mistakes)
			}
			want := map[int]Mistake{}
			for _, m := range s.Mistakes {
				want[m.Index] = m
			}
			keys := map[string]int{}
			info, err := document.Scan(s.Data, func(ev document.Event) error {
				env, err := g.Check(document.EventSubject("", ev.Data), ev.Data)
				m, planted := want[ev.Index]
				switch {
				case planted && m.Code == codes.IdempotencyConflict:
					if err != nil {
						return fmt.Errorf("event %d (%s): %v, want it to pass the gate", ev.Index, m.Kind, err)
					}
					if _, ok := keys[env.IdempotencyKey]; !ok {
						return fmt.Errorf("event %d (%s): its key is no earlier event's", ev.Index, m.Kind)
					}
				case planted && codes.Of(err) != m.Code:
					return fmt.Errorf("event %d (%s): %v, want %s", ev.Index, m.Kind, err, m.Code)
				case !planted && err != nil:
					return fmt.Errorf("correct event %d: %v", ev.Index, err)
				case !planted:
					if i, dup := keys[env.IdempotencyKey]; dup {
						return fmt.Errorf("events %d and %d share a key", i, ev.Index)
					}
					keys[env.IdempotencyKey] = ev.Index
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if info.Count != s.Events || info.Format != string(tc.cfg.Format) || info.ID != withDefaults(tc.cfg).ID {
				t.Fatalf("read %d events (%s, id %q), want %d (%s)", info.Count, info.Format, info.ID, s.Events, tc.cfg.Format)
			}
		})
	}
}
