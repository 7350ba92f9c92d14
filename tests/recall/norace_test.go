//go:build !race

package recall

// raceEnabled: see race_test.go.
const raceEnabled = false
