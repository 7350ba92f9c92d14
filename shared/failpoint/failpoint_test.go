//go:build failpoint

package failpoint_test

import (
	"errors"
	"testing"

	"github.com/deadletter/deadletter/shared/failpoint"
)

// TestHit (built with -tags failpoint): an armed point kills at its
// place, for its key.
func TestHit(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		point     failpoint.Point
		key       string
		want      bool
	}{
		{"unarmed", "", failpoint.ValidatorAfterDownstream, "k", false},
		{"any key", "validator.after-downstream", failpoint.ValidatorAfterDownstream, "k", true},
		{"its key", "validator.after-downstream:k", failpoint.ValidatorAfterDownstream, "k", true},
		{"another key", "validator.after-downstream:k", failpoint.ValidatorAfterDownstream, "other", false},
		{"another point", "redriver.after-claim", failpoint.RedriverAfterReplay, "k", false},
		{"a point outside the chaos windows", "redriver.after-approved:k", failpoint.RedriverAfterApproved, "k", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := failpoint.Parse(tc.env)
			if err != nil {
				t.Fatal(err)
			}
			hit := false
			a.WithKill(func() { hit = true }).Hit(tc.point, tc.key)
			if hit != tc.want {
				t.Errorf("hit = %v, want %v", hit, tc.want)
			}
		})
	}
}

func TestParseUnknown(t *testing.T) {
	if _, err := failpoint.Parse("validator.nowhere"); !errors.Is(err, failpoint.ErrUnknown) {
		t.Fatalf("err = %v, want ErrUnknown", err)
	}
}
