package validator

import (
	"math/rand/v2"
	"time"
)

// backoff returns the delay before redelivery n+1 after delivery n failed
// transiently: base·2^(n-1) capped at max, with ±50 % jitter so that many
// events failing together do not retry in lockstep.
func backoff(base, max time.Duration, delivery uint64) time.Duration {
	d := base
	for i := uint64(1); i < delivery && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
