//go:build failpoint

package failpoint

import (
	"os"
	"syscall"
)

// Live reports whether this build arms points (the build tag failpoint).
const Live = true

// Armed is one armed point (nil: none).
type Armed struct {
	point Point
	key   string
	kill  func()
}

// Parse arms the point v names ("<point>" or "<point>:<key>"); "" arms
// none (nil).
func Parse(v string) (*Armed, error) {
	if v == "" {
		return nil, nil
	}
	p, key, err := parse(v)
	if err != nil {
		return nil, err
	}
	return &Armed{point: p, key: key, kill: killSelf}, nil
}

// WithKill returns a copy of a that calls kill instead of killing the
// process (for tests of the points' placement).
func (a *Armed) WithKill(kill func()) *Armed {
	if a == nil {
		return nil
	}
	b := *a
	b.kill = kill
	return &b
}

// Hit kills the process when a is armed at p and its key is empty or key.
func (a *Armed) Hit(p Point, key string) {
	if a == nil || a.point != p || (a.key != "" && a.key != key) {
		return
	}
	a.kill()
}

// Drops reports whether a is armed at p, a point that drops what it
// names instead of killing (QuarantinerDropMaxDeliveries).
func (a *Armed) Drops(p Point) bool { return a != nil && a.point == p }

// String names the armed point.
func (a *Armed) String() string {
	if a == nil {
		return ""
	}
	if a.key == "" {
		return string(a.point)
	}
	return string(a.point) + ":" + a.key
}

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never returns: the signal is on its way
}
