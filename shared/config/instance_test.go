package config

import (
	"os"
	"testing"
)

// TestInstance: DEADLETTER_INSTANCE_ID wins; otherwise the id is
// <hostname>-<service>-<DEADLETTER_INSTANCE_INDEX>, the same on every start.
func TestInstance(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"default", nil, host + "-redriver-0", false},
		{"index", map[string]string{"DEADLETTER_INSTANCE_INDEX": "2"}, host + "-redriver-2", false},
		{"explicit", map[string]string{"DEADLETTER_INSTANCE_ID": "r-a", "DEADLETTER_INSTANCE_INDEX": "2"}, "r-a", false},
		{"empty explicit", map[string]string{"DEADLETTER_INSTANCE_ID": ""}, host + "-redriver-0", false},
		{"bad index", map[string]string{"DEADLETTER_INSTANCE_INDEX": "x"}, host + "-redriver-0", true},
		{"negative index", map[string]string{"DEADLETTER_INSTANCE_INDEX": "-1"}, host + "-redriver-0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			for range 2 { // two starts, one id
				env := NewEnv(lookup)
				var got string
				env.Instance("redriver", &got)
				if got != tc.want {
					t.Errorf("Instance %q, want %q", got, tc.want)
				}
				if (env.Err() != nil) != tc.wantErr {
					t.Errorf("Err %v, want error %v", env.Err(), tc.wantErr)
				}
			}
		})
	}
}
