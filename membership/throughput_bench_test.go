package membership

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkBackupRestore measures `etcdhook backup` and `etcdhook restore`, each its own process as in
// a Job or a seed pod, on a database of ETCDHOOK_BENCH_MB (default 1024) MiB of incompressible values
// in a real etcd (the newest version, TLS), to real MinIO on loopback: MB/s and peak RSS. A load run,
// not a test: `go test ./membership -run - -bench BackupRestore -benchtime 1x`.
func BenchmarkBackupRestore(b *testing.B) {
	mb := 1024
	if v, err := strconv.Atoi(os.Getenv("ETCDHOOK_BENCH_MB")); err == nil && v > 0 {
		mb = v
	}
	bin := filepath.Join(b.TempDir(), "etcdhook")
	build := exec.Command("go", "build", "-o", bin, "../cmd/etcdhook")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(b, err, "%s", out)

	st := startMinIO(b, "etcd-backups")
	c := bootstrapped(b, newestEtcd, 1)
	cl := c.client()
	value := make([]byte, 512<<10) // etcd takes requests up to 1.5 MiB
	start := time.Now()
	for i := range mb * 2 {
		_, _ = rand.Read(value)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := cl.Put(ctx, fmt.Sprintf("/bench/%06d", i), string(value))
		cancel()
		require.NoError(b, err)
	}
	cl.Close()
	b.Logf("filled %d MiB in %s", mb, time.Since(start).Round(time.Second))
	creds := st.credentials

	b.ResetTimer()
	for range b.N {
		// Backup: the Job's command against the member's client URL.
		args := []string{"backup", "--cluster=src", "--namespace=ns", "--cluster-uid=" + c.parent,
			"--endpoints=" + c.slots[0].clientURL, "--destination=" + st.url, "--credentials-dir=" + creds,
			"--tls-dir=" + c.clientTLS(), "--keep-last=100"}
		stdout, took, rss := runMeasured(b, bin, args...)
		var rep struct {
			Snapshot string `json:"snapshot"`
			Size     int64  `json:"size"`
		}
		require.NoError(b, json.Unmarshal(bytes.TrimSpace(stdout), &rep), "%s", stdout)
		mib := float64(rep.Size) / (1 << 20)
		b.ReportMetric(mib/took.Seconds(), "backup-MiB/s")
		b.ReportMetric(float64(rss)/1024, "backup-RSS-MiB")
		b.Logf("backup: %.0f MiB in %s = %.1f MiB/s, peak RSS %d MiB", mib, took.Round(100*time.Millisecond), mib/took.Seconds(), rss/1024)

		// Restore: download, check, etcd's restore library, as a seed does.
		dir := filepath.Join(b.TempDir(), "member")
		require.NoError(b, os.MkdirAll(dir, 0o755))
		_, took, rss = runMeasured(b, bin, "restore", "--from="+rep.Snapshot, "--credentials-dir="+creds,
			"--data-dir="+filepath.Join(dir, "data"), "--name=r0", "--peer-url=https://127.0.0.1:2380", "--token=bench")
		b.ReportMetric(mib/took.Seconds(), "restore-MiB/s")
		b.ReportMetric(float64(rss)/1024, "restore-RSS-MiB")
		b.Logf("restore: %.0f MiB in %s = %.1f MiB/s, peak RSS %d MiB", mib, took.Round(100*time.Millisecond), mib/took.Seconds(), rss/1024)
	}
}

// runMeasured runs a command to completion: its stdout, wall time and peak RSS (KiB). It also logs
// the peak of the anonymous part (RssAnon, sampled every 20 ms): file-backed pages (an mmap'd
// database) count in RSS but are page cache the kernel can reclaim.
func runMeasured(b *testing.B, bin string, args ...string) ([]byte, time.Duration, int64) {
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(b, cmd.Start())
	done := make(chan struct{})
	var anonPeak int64
	go func() {
		defer close(done)
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			data, err := os.ReadFile(status)
			if err != nil {
				return
			}
			for _, line := range bytes.Split(data, []byte("\n")) {
				if v, ok := bytes.CutPrefix(line, []byte("RssAnon:")); ok {
					kb, _ := strconv.ParseInt(string(bytes.Fields(v)[0]), 10, 64)
					anonPeak = max(anonPeak, kb)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	err := cmd.Wait()
	took := time.Since(start)
	<-done
	require.NoError(b, err, "%s %v\n%s", bin, args, stderr.String())
	b.Logf("%s: peak anonymous RSS %d MiB (sampled)", args[0], anonPeak/1024)
	b.ReportMetric(float64(anonPeak)/1024, args[0]+"-anon-RSS-MiB")
	return stdout.Bytes(), took, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
}
