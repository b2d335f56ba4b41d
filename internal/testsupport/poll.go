package testsupport

import "time"

// Poll calls cond every interval until it holds, for at most timeout, and returns how long it took to
// hold and whether it did. The tests that wait on real processes poll this way (membership's harness;
// e2e's scenario.waitFor the same, every 500 ms), and each says itself what it waited for.
func Poll(timeout, interval time.Duration, cond func() bool) (took time.Duration, held bool) {
	start := time.Now()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start), true
		}
		time.Sleep(interval)
	}
	return 0, false
}
