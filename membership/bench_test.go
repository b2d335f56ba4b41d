package membership

import (
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/internal/writer"
)

// What the leader benchmarks (BenchmarkLeaderChange, BenchmarkLeaderStop) share: their knobs, their
// writer and the failed writes they report.

// benchEnv is the duration in the environment variable name when it parses and is not below floor,
// else def.
func benchEnv(name string, def, floor time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d >= floor {
		return d
	}
	return def
}

// startBenchWriter starts a writer through cl every every (no retries, 2 s timeout, bounded by count
// and an hour) and lets it warm up for a second.
func startBenchWriter(cl *clientv3.Client, prefix string, every time.Duration) *writer.Writer {
	w := writer.Start(cl, writer.Limits{Prefix: prefix, Max: 1 << 20, For: time.Hour, Every: every, Timeout: 2 * time.Second}, "warm-up")
	time.Sleep(time.Second)
	return w
}

// reportFailed ends a benchmark's writes and reports the failed writes per event (what: "change",
// "stop"), apart for the events of the writer's own member and of the others; it returns both counts.
func reportFailed(b *testing.B, w *writer.Writer, what string, own, others []string) (ownFailed, othersFailed int) {
	b.StopTimer()
	w.Step("settled")
	time.Sleep(200 * time.Millisecond)
	ownFailed, othersFailed = w.Failed(own...), w.Failed(others...)
	b.ReportMetric(float64(ownFailed+othersFailed)/float64(b.N), "failed/"+what)
	if len(own) > 0 {
		b.ReportMetric(float64(ownFailed)/float64(len(own)), "failed/"+what+"-of-own")
	}
	if len(others) > 0 {
		b.ReportMetric(float64(othersFailed)/float64(len(others)), "failed/"+what+"-elsewhere")
	}
	return ownFailed, othersFailed
}
