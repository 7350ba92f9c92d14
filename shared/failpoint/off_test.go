//go:build !failpoint

package failpoint_test

import (
	"errors"
	"testing"

	"github.com/deadletter/deadletter/shared/failpoint"
)

// TestOffBuild: built without the tag failpoint (production), every point
// is refused with ErrNotBuilt, nothing is armed and Hit does nothing.
func TestOffBuild(t *testing.T) {
	if failpoint.Live {
		t.Fatal("Live in a build without the tag failpoint")
	}
	for _, tc := range []struct {
		name, env   string
		wantUnknown bool
	}{
		{"unarmed", "", false},
		{"a chaos window", string(failpoint.QuarantinerAfterWrite), false},
		{"a window with a key", string(failpoint.RedriverAfterClaim) + ":dscsa_0123", false},
		{"a point outside the chaos windows", string(failpoint.RedriverAfterApproved), false},
		{"an unknown point", "validator.nowhere", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := failpoint.Parse(tc.env)
			if a != nil {
				t.Fatalf("Parse(%q) armed %v", tc.env, a)
			}
			if tc.env == "" {
				if err != nil {
					t.Fatalf("Parse(\"\") = %v", err)
				}
			} else if !errors.Is(err, failpoint.ErrNotBuilt) || errors.Is(err, failpoint.ErrUnknown) != tc.wantUnknown {
				t.Fatalf("Parse(%q) = %v, want ErrNotBuilt (unknown %v)", tc.env, err, tc.wantUnknown)
			}
			hit := false
			a.WithKill(func() { hit = true }).Hit(failpoint.QuarantinerAfterWrite, "dscsa_0123")
			if hit {
				t.Error("Hit killed in a build without failpoints")
			}
		})
	}
}
