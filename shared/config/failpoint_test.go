package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/failpoint"
)

// TestEnvFailpoint: DEADLETTER_FAILPOINT arms a point only in a binary
// built with -tags failpoint; a production binary refuses to start with
// it set, naming the variable and the build it needs.
func TestEnvFailpoint(t *testing.T) {
	var notBuilt error // nil when this test binary has live failpoints
	if !failpoint.Live {
		notBuilt = failpoint.ErrNotBuilt
	}
	for _, tc := range []struct {
		name, value string
		set         bool
		wantArmed   bool
		wantErr     error
	}{
		{"unset", "", false, false, nil},
		{"empty", "", true, false, nil},
		{"a point", string(failpoint.QuarantinerAfterWrite) + ":dscsa_0123", true, failpoint.Live, notBuilt},
		{"an unknown point", "quarantiner.nowhere", true, false, failpoint.ErrUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := config.NewEnv(func(name string) (string, bool) {
				if name == failpoint.Env && tc.set {
					return tc.value, true
				}
				return "", false
			})
			var a *failpoint.Armed
			env.Failpoint(&a)
			err := env.Err()
			if (a != nil) != tc.wantArmed {
				t.Errorf("armed = %v, want %v", a, tc.wantArmed)
			}
			if (tc.wantErr == nil && err != nil) || (tc.wantErr != nil && (!errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), failpoint.Env))) {
				t.Errorf("err = %v, want %v naming %s", err, tc.wantErr, failpoint.Env)
			}
		})
	}
}
