package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
)

// TestRecordsCell: an access row shows the first ids and how many more,
// not every id of a big read.
func TestRecordsCell(t *testing.T) {
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "pharmacy_" + strings.Repeat("a", 31) + string(rune('0'+i%10))
		}
		return out
	}
	cases := []struct {
		name string
		e    api.AccessEntry
		want string
	}{
		{name: "one", e: api.AccessEntry{AccessRecord: api.AccessRecord{DLQIDs: []string{"pharmacy_1"}, Count: 1}}, want: "pharmacy_1"},
		{name: "three", e: api.AccessEntry{AccessRecord: api.AccessRecord{DLQIDs: []string{"a", "b", "c"}, Count: 3}}, want: "a,b,c"},
		{name: "four", e: api.AccessEntry{AccessRecord: api.AccessRecord{DLQIDs: []string{"a", "b", "c", "d"}, Count: 4}}, want: "a,b,c +1 more"},
		{name: "an export of 250", e: api.AccessEntry{AccessRecord: api.AccessRecord{DLQIDs: ids(250), Count: 250}}, want: strings.Join(ids(3), ",") + " +247 more"},
		{name: "hash only", e: api.AccessEntry{AccessRecord: api.AccessRecord{Count: 20000, IDsHash: strings.Repeat("ab", 32)}}, want: "sha256:abababababab"},
		{name: "nothing", e: api.AccessEntry{}, want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := recordsCell(c.e); got != c.want {
				t.Errorf("recordsCell = %q, want %q", got, c.want)
			}
		})
	}
}

// TestFollowInterrupted: interrupting `drain status --follow` says once
// that it stopped following and how to follow again.
func TestFollowInterrupted(t *testing.T) {
	s := natstest.Start(t)
	nc := s.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := nc.Subscribe(api.DrainStatus, func(m *nats.Msg) {
		b, _ := json.Marshal(api.DrainState{DrainID: "drain-1", Status: api.DrainRunning})
		_ = m.Respond(b)
		cancel() // the person presses Ctrl-C while the drain runs
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := ExecuteContext(ctx, []string{"-s", s.ClientURL(), "drain", "status", "drain-1", "--follow", "--progress", "plain", "--interval", "1h"},
		IO{Out: &out, Err: &errOut})
	if code != ExitFailed {
		t.Errorf("exit %d, want %d; stderr %q", code, ExitFailed, errOut.String())
	}
	if n := strings.Count(errOut.String(), "stopped following"); n != 1 {
		t.Errorf("stderr says %d times that it stopped following: %q", n, errOut.String())
	}
	if !strings.Contains(errOut.String(), "dlqctl drain status drain-1 --follow") {
		t.Errorf("stderr does not say how to follow again: %q", errOut.String())
	}
}
