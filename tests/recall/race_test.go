//go:build race

package recall

// raceEnabled: the race detector makes the validator's reading of a
// document about thirty times slower (about 26 events a second here, 2
// cores shared): the shipments are smaller under it.
const raceEnabled = true
