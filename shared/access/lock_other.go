//go:build !unix

package access

// LockFile is a no-op where flock(2) is missing: changes to the
// credentials file are then not serialized between processes.
func LockFile(path string) (unlock func(), err error) { return func() {}, nil }
