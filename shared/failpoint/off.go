//go:build !failpoint

package failpoint

import "fmt"

// Live reports whether this build arms points (the build tag failpoint).
const Live = false

// Armed is one armed point; without the build tag failpoint there is
// none (Parse returns nil or ErrNotBuilt).
type Armed struct{}

// Parse refuses every point with ErrNotBuilt (an unknown one with
// ErrUnknown too); "" arms none (nil).
func Parse(v string) (*Armed, error) {
	if v == "" {
		return nil, nil
	}
	if _, _, err := parse(v); err != nil {
		return nil, fmt.Errorf("%w; %w", ErrNotBuilt, err)
	}
	return nil, ErrNotBuilt
}

// WithKill returns nil: nothing is armed in this build.
func (a *Armed) WithKill(func()) *Armed { return nil }

// Hit does nothing in this build.
func (a *Armed) Hit(Point, string) {}

// Drops reports false: nothing is armed in this build.
func (a *Armed) Drops(Point) bool { return false }

// String returns "": nothing is armed in this build.
func (a *Armed) String() string { return "" }
