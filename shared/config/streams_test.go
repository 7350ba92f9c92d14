package config_test

import (
	"testing"

	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/streams"
)

// TestEnvStreams: a service learns the replicas and whether the servers
// fsync every write from the environment; unset leaves the defaults, and
// a value that is not a boolean is an error.
func TestEnvStreams(t *testing.T) {
	for _, tc := range []struct {
		name         string
		env          map[string]string
		wantReplicas int
		wantSync     bool
		wantErr      bool
	}{
		{"unset: the defaults", nil, 1, true, false},
		{"a cluster whose servers fsync on an interval", map[string]string{"DEADLETTER_REPLICAS": "3", "DEADLETTER_SYNC_ALWAYS": "false"}, 3, false, false},
		{"not a boolean", map[string]string{"DEADLETTER_SYNC_ALWAYS": "sometimes"}, 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := streams.DefaultOptions()
			env := config.NewEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			env.Streams(&o)
			if (env.Err() != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", env.Err(), tc.wantErr)
			}
			if o.Replicas != tc.wantReplicas || o.SyncAlways != tc.wantSync {
				t.Fatalf("replicas %d, sync always %v; want %d, %v", o.Replicas, o.SyncAlways, tc.wantReplicas, tc.wantSync)
			}
		})
	}
}
