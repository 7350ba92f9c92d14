package access_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestImportPaths checks the two ways into the services' account: a
// publisher's event is stored in EVENTS and its PubAck comes back through
// the service import, and a person's request reaches a service with the
// identity the server attached (a forged Nats-Request-Info is overwritten)
// and a reply subject of the server's (_R_), never the requester's.
func TestImportPaths(t *testing.T) {
	e := startEnv(t, 0)
	js := e.js(t, e.conn(t, string(access.RolePublisher), nil))
	ack, err := js.Publish(testCtx(t, 5*time.Second), subjects.Event("pharmacy", "dispense"), []byte(`{}`))
	if err != nil || ack.Stream != subjects.EventsStream {
		t.Fatalf("publish through the import: %+v, %v", ack, err)
	}

	r := e.conn(t, access.Redriver, nil)
	type seen struct {
		h     nats.Header
		reply string
	}
	got := make(chan seen, 1)
	sub, err := r.Subscribe(api.DrainStart, func(m *nats.Msg) {
		got <- seen{m.Header, m.Reply}
		_ = m.Respond([]byte("ok"))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, user string
		forged     string
	}{
		{"plain request", access.DefaultPerson(access.RoleOperator), ""},
		{"forged identity", access.DefaultPerson(access.RoleOperator), `{"acc":"DEADLETTER_OPERATOR","user":"mallory"}`},
		{"forged account", access.DefaultPerson(access.RoleOperator), `{"acc":"DEADLETTER","user":"admin"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := nats.NewMsg(api.DrainStart)
			if tc.forged != "" {
				m.Header.Set(access.RequestInfoHeader, tc.forged)
			}
			rep, err := e.conn(t, tc.user, nil).RequestMsg(m, 5*time.Second)
			if err != nil || string(rep.Data) != "ok" {
				t.Fatalf("request: %v", err)
			}
			s := <-got
			id, err := access.CallerOf(s.h)
			if err != nil || id.User != tc.user || id.Role != access.RoleOperator {
				t.Errorf("caller %v, %v; want %s (operator)", id, err, tc.user)
			}
			if len(s.reply) < 4 || s.reply[:4] != "_R_." {
				t.Errorf("reply subject %q, want the server's _R_ mapping", s.reply)
			}
		})
	}
}
