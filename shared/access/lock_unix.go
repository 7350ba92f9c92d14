//go:build unix

package access

import (
	"fmt"
	"os"
	"syscall"
)

// LockFile takes an exclusive lock on path's lock file (path + ".lock",
// mode 0600), waiting for it, and returns its release. Every writer of a
// credentials file holds it across its read, change and write (the
// `deadletter people` command, a running server's reload), so that no
// change overwrites another written meanwhile.
func LockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("access: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("access: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
