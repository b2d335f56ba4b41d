//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/membership"
)

var (
	minioBin  = flag.String("e2e.minio", "", "MinIO server binary (scripts/gotool.sh minio); the backup scenario runs it on -e2e.minio-host")
	minioHost = flag.String("e2e.minio-host", "10.244.0.1", "an address of this process that pods reach (localkube: the node's bridge address)")
)

const (
	e2eMinioUser   = "etcdhook-e2e"
	e2eMinioSecret = "etcdhook-e2e-secret"
	e2eBucket      = "etcd-backups"
)

// startMinIO runs a throwaway MinIO where the pods reach it and returns its endpoint.
func startMinIO(t *testing.T) string {
	if *minioBin == "" {
		t.Fatal("-e2e.minio is required: e2e/local.sh passes the binary scripts/gotool.sh builds")
	}
	l, err := net.Listen("tcp", *minioHost+":0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cmd := exec.Command(*minioBin, "server", t.TempDir(), "--address", addr, "--console-address", *minioHost+":0", "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+e2eMinioUser, "MINIO_ROOT_PASSWORD="+e2eMinioSecret, "MINIO_BROWSER=off")
	out, err := os.Create(filepath.Join(t.TempDir(), "minio.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := "http://" + addr
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			break
		}
		require.True(t, time.Now().Before(deadline), "MinIO did not answer: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
	_, err = minioClient(endpoint).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(e2eBucket)})
	require.NoError(t, err)
	return endpoint
}

func minioClient(endpoint string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(e2eMinioUser, e2eMinioSecret, "")})
}

// manifests lists the snapshot manifests MinIO holds for one cluster.
func manifests(t *testing.T, endpoint, ns, name string) []string {
	resp, err := minioClient(endpoint).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
		Bucket: aws.String(e2eBucket), Prefix: aws.String("e2e/" + backup.ClusterDir(ns, name)),
	})
	require.NoError(t, err)
	var out []string
	for _, o := range resp.Contents {
		if strings.HasSuffix(*o.Key, ".json") {
			out = append(out, *o.Key)
		}
	}
	return out
}

// truncatedCopy stores the first half of the snapshot at url under e2e/damaged/, beside a copy of its
// manifest (which describes the whole one), and returns the copy's URL.
func truncatedCopy(t *testing.T, endpoint, url string) string {
	const dir = "/e2e/"
	i := strings.Index(url, dir)
	require.Positive(t, i, "snapshot URL %s", url)
	key, _, _ := strings.Cut(url[i+1:], "?")
	mc := minioClient(endpoint)
	get := func(k string) []byte {
		o, err := mc.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(e2eBucket), Key: aws.String(k)})
		require.NoError(t, err)
		defer o.Body.Close()
		b, err := io.ReadAll(o.Body)
		require.NoError(t, err)
		return b
	}
	put := func(k string, b []byte) {
		_, err := mc.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(e2eBucket), Key: aws.String(k), Body: bytes.NewReader(b)})
		require.NoError(t, err)
	}
	snap, manifest := get(key), get(backup.ManifestKey(key))
	damaged := "e2e/damaged/" + strings.TrimPrefix(key, "e2e/")
	put(damaged, snap[:len(snap)/2])
	put(backup.ManifestKey(damaged), manifest)
	return strings.Replace(url, dir, "/e2e/damaged/", 1)
}

// credentialsSecret puts MinIO's credentials into the scenario's namespace.
func (s *scenario) credentialsSecret() string {
	_, err := s.e.kube.CoreV1().Secrets(s.ns).Create(s.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "minio-credentials"},
		StringData: map[string]string{backup.KeyAWSAccessKeyID: e2eMinioUser, backup.KeyAWSSecretAccessKey: e2eMinioSecret},
	}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(s.t, err)
	}
	return "minio-credentials"
}

// putKeys writes n keys under /backup/ through the client Service and returns them.
func (s *scenario) putKeys(n int) map[string]string { return s.putKeysAt("/backup/", n) }

// putKeysAt writes n keys under prefix through the client Service and returns them.
func (s *scenario) putKeysAt(prefix string, n int) map[string]string {
	cl, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(s.t, err)
	defer cl.Close()
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("%s%05d", prefix, i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%500))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cl.Put(ctx, k, v)
		cancel()
		require.NoError(s.t, err)
		want[k] = v
	}
	return want
}

// readKeys reads every /backup/ key through the client Service.
func (s *scenario) readKeys() (map[string]string, int64) {
	got := map[string]string{}
	var rev int64
	s.withServiceClient(10*time.Second, func(ctx context.Context, cl *clientv3.Client) {
		resp, err := cl.Get(ctx, "/backup/", clientv3.WithPrefix())
		require.NoError(s.t, err)
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		rev = resp.Header.Revision
	})
	return got, rev
}

func (s *scenario) annotate(key, value string) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	_, err := s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Patch(s.ctx, s.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(s.t, err)
}

// TestBackupRestore: keys written to a 3-member cluster are backed up on demand to MinIO (an S3 store
// the pods reach), restored into a new 3-member cluster in another namespace (its seed restores, the
// others join as learners), all there with equal hashes on every member; meanwhile the schedule
// (every minute) backs up at least twice and retention (keepLast 2) prunes.
func TestBackupRestore(t *testing.T) {
	beside(t)
	endpoint := startMinIO(t)
	dest := fmt.Sprintf("s3://%s/e2e?endpoint=%s&region=us-east-1&use_path_style=true", e2eBucket, endpoint)
	src := newScenario(t, "backup")
	src.apply(map[string]any{"size": 3, "version": *etcdVersion, "backup": map[string]any{
		"schedule": "*/1 * * * *", "destination": dest, "credentialsSecret": src.credentialsSecret(),
		"retention": map[string]any{"keepLast": 2},
	}})
	src.waitFor("the source cluster", stepTimeout, src.settled(3))
	const n = 2000
	want := src.putKeys(n)

	// On demand with the plugin, as the README shows it (it sets etcd.io/backup-now and waits for the
	// outcome); the figure is the test's own wait.
	backupCmd := src.kubectlEtcdMeanwhile(src.ctx, "backup", src.name)
	var bst *api.BackupStatus
	backupTook := src.waitFor("the on-demand backup", stepTimeout, func() bool {
		ec := src.cluster()
		bst = ec.Status.Backup
		if bst != nil && bst.OnDemand != nil && bst.OnDemand.Phase == "Failed" {
			src.t.Fatalf("the on-demand backup failed: %s", bst.LastFailure)
		}
		return bst != nil && bst.OnDemand != nil && bst.OnDemand.Phase == "Succeeded" && bst.LastSnapshot != ""
	})
	code, out, _ := backupCmd()
	require.Equal(t, 0, code, "kubectl etcd backup")
	require.Contains(t, out, "succeeded: s3://"+e2eBucket+"/e2e/"+backup.ClusterDir(src.ns, src.name), "the plugin names the snapshot")
	snapshot, size, rev := bst.LastSnapshot, bst.Size, bst.Revision
	_, srcRev := src.readKeys()
	require.LessOrEqual(t, rev, srcRev)
	require.Positive(t, size)
	t.Logf("on-demand backup %s: %d bytes at revision %d in %s", snapshot, size, rev, backupTook)
	firstSuccess := bst.LastSuccessTime.Time

	// Restore into a new cluster in another namespace while the schedule runs, with the plugin (which
	// creates the cluster with spec.restore; the waits below are the test's own).
	dst := newScenario(t, "restore")
	restoreStart := time.Now()
	code, _, _ = dst.kubectlEtcd(dst.ctx, "restore", dst.name, "--from", snapshot, "--credentials-secret", dst.credentialsSecret(),
		"--size", "3", "--version", *etcdVersion, "--wait=false")
	require.Equal(t, 0, code, "kubectl etcd restore")
	dst.waitFor("phase Restoring", stepTimeout, func() bool {
		ec := dst.cluster()
		return ec.Status.Phase == api.PhaseRestoring || ec.Status.Phase == api.PhaseRunning
	})
	restoreTook := dst.waitFor("the restored cluster", stepTimeout, dst.settled(3))
	restoreTotal := time.Since(restoreStart)
	got, dstRev := dst.readKeys()
	require.Equal(t, len(want), len(got), "keys restored")
	require.Equal(t, want, got)
	dst.checkHashKV(dstRev)
	rs := dst.cluster().Status.Restore
	require.NotNil(t, rs)
	require.Equal(t, "Restored", rs.Phase)
	require.Equal(t, snapshot, rs.Snapshot)
	require.GreaterOrEqual(t, rs.Revision, rev, "the restored revision is at least the manifest's")
	require.NotEqual(t, src.cluster().Status.ClusterID, dst.cluster().Status.ClusterID, "a restore is a new etcd cluster")

	// The schedule: two more successes after the on-demand one, and retention keeps two snapshots.
	var successes []time.Time
	last := firstSuccess
	src.waitFor("two scheduled backups", 4*time.Minute, func() bool {
		b := src.cluster().Status.Backup
		if b != nil && b.LastSuccessTime != nil && b.LastSuccessTime.After(last) {
			last = b.LastSuccessTime.Time
			successes = append(successes, last)
		}
		return len(successes) >= 2
	})
	// A run of the schedule writes its manifest before it prunes: three for a moment is a run in flight.
	var ms []string
	src.waitFor("keepLast 2 to leave two snapshots", time.Minute, func() bool {
		ms = manifests(t, endpoint, src.ns, src.name)
		return len(ms) == 2
	})
	require.Len(t, ms, 2, "keepLast 2 leaves the two newest snapshots: %v", ms)
	// The CronJob is a fixed point under Metacontroller's merge: its spec was written once.
	cj, err := src.e.kube.BatchV1().CronJobs(src.ns).Get(src.ctx, src.names().BackupName(), metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 1, cj.Generation, "the CronJob's spec was rewritten after creation")
	c := condition(src.cluster(), api.CondBackupFailing)
	require.True(t, c == nil || c.Status != metav1.ConditionTrue, "BackupFailing: %v", c)

	// In place (etcd.io/restore-from, docs/design/16-backup-restore.md §16.8): keys written after the newest snapshot go,
	// the snapshot's come back, under a new cluster ID, on all three members. (The newest: retention has
	// pruned the on-demand one by now, and a named snapshot that is gone fails the restore Job.)
	newest := src.cluster().Status.Backup.LastSnapshot

	// A refused restore costs nothing (issue 24, class 7): a truncated copy of the newest snapshot, beside
	// a manifest that describes the whole one, is refused by the verify Job while the cluster serves. No
	// member stops or restarts, RestoreFailed and an Event say why, and the Job is not retried.
	bad := truncatedCopy(t, endpoint, newest)
	podsBefore := src.podRestarts()
	refuseStart := time.Now()
	code, _, stderr := src.kubectlEtcd(src.ctx, "restore", src.name, "--in-place", "--from", bad, "--timeout", stepTimeout.String())
	refuseTook := time.Since(refuseStart)
	require.NotEqual(t, 0, code, "kubectl etcd restore --in-place of a truncated snapshot")
	require.Contains(t, stderr, "failed verification")
	require.Contains(t, stderr, "truncated?")
	ec0 := src.cluster()
	require.Equal(t, podsBefore, src.podRestarts(), "no member stopped or restarted")
	require.Equal(t, api.PhaseRunning, ec0.Status.Phase)
	require.Nil(t, ec0.Status.Restore, "nothing was replaced")
	require.True(t, src.settled(3)())
	vj, err := src.e.kube.BatchV1().Jobs(src.ns).List(src.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, j := range vj.Items {
		if strings.HasPrefix(j.Name, src.name+"-restore-v") {
			require.LessOrEqual(t, j.Status.Failed, int32(1), "a damaged snapshot is not retried (podFailurePolicy)")
		}
	}
	src.checkEvents(membership.EventRestoreFailed)

	lost := len(src.putKeysAt("/backup/after/", 50))
	oldID := src.cluster().Status.ClusterID
	// With the plugin, which sets etcd.io/restore-from and waits for that restore (the waits below are
	// the test's own).
	inPlaceStart := time.Now()
	code, _, stderr = src.kubectlEtcd(src.ctx, "restore", src.name, "--in-place", "--from", newest, "--timeout", (2 * stepTimeout).String())
	require.Equal(t, 0, code, "kubectl etcd restore --in-place: %s", stderr)
	pluginTook := time.Since(inPlaceStart)
	inPlaceTook := src.waitFor("the in-place restore", 2*stepTimeout, func() bool {
		ec := src.cluster()
		if c := condition(ec, api.CondRestoreFailed); c != nil && c.Status == metav1.ConditionTrue {
			src.t.Fatalf("the in-place restore failed: %s", c.Message)
		}
		r := ec.Status.Restore
		return r != nil && r.Phase == "Restored" && src.settled(3)()
	})
	back, backRev := src.readKeys()
	require.Equal(t, want, back, "the snapshot's keys, and none written after it")
	src.checkHashKV(backRev)
	ec := src.cluster()
	require.NotEqual(t, oldID, ec.Status.ClusterID, "a restore in place is a new etcd cluster")
	require.Equal(t, []string{oldID}, ec.Status.Restore.ReplacedClusterIDs)
	require.Equal(t, newest, ec.Status.Restore.Snapshot)

	// Disaster recovery (spec.backup.restoreOnQuorumLoss, docs/design/16-backup-restore.md §16.9): a fresh snapshot, then
	// the volumes of two of the three members wiped and their pods restarted. After deadMemberSeconds
	// (60 s here) the hook restores the newest snapshot by itself.
	drTook, drLost := time.Duration(0), []string(nil)
	if *hostPath {
		src.apply(map[string]any{"backup": map[string]any{
			"schedule": "*/1 * * * *", "destination": dest, "credentialsSecret": src.credentialsSecret(),
			"retention": map[string]any{"keepLast": 2}, "restoreOnQuorumLoss": true,
		}, "timeouts": map[string]any{"deadMemberSeconds": 60}})
		src.waitFor("the flag applied", stepTimeout, src.settled(3))
		src.annotate(api.AnnBackupNow, "e2e-2")
		src.waitFor("a backup of the restored cluster", stepTimeout, func() bool {
			b := src.cluster().Status.Backup
			return b != nil && b.OnDemand != nil && b.OnDemand.Token == "e2e-2" && b.OnDemand.Phase == "Succeeded"
		})
		beforeDR := src.cluster().Status.ClusterID
		for _, i := range []int{1, 2} {
			dir := src.volumeDir(i)
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "data")))
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "etcdhook-binding.json")))
		}
		wiped := time.Now()
		for _, i := range []int{1, 2} {
			require.NoError(t, src.e.kube.CoreV1().Pods(src.ns).Delete(src.ctx, src.names().Pod(i), metav1.DeleteOptions{}))
		}
		src.waitFor("the automatic restore", 4*stepTimeout, func() bool {
			ec := src.cluster()
			if c := condition(ec, api.CondRestoreFailed); c != nil && c.Status == metav1.ConditionTrue {
				src.t.Fatalf("the automatic restore failed: %s", c.Message)
			}
			r := ec.Status.Restore
			return r != nil && len(r.LostMembers) > 0 && r.Phase == "Restored" && ec.Status.ClusterID != beforeDR && src.settled(3)()
		})
		drTook = time.Since(wiped)
		ec := src.cluster()
		drLost = ec.Status.Restore.LostMembers
		require.Equal(t, []string{src.names().Pod(1), src.names().Pod(2)}, drLost)
		require.Equal(t, []string{oldID, beforeDR}, ec.Status.Restore.ReplacedClusterIDs, "retired IDs add up across restores")
		again, againRev := src.readKeys()
		require.Equal(t, want, again, "every key back from the newest snapshot")
		src.checkHashKV(againRev)
	} else {
		t.Log("restoreOnQuorumLoss not exercised: volumes are not reachable as host paths (-e2e.hostpath=false)")
	}

	results.add(t.Name(), fmt.Sprintf("| figure | value |\n|---|---|\n"+
		"| keys written, restored and verified | %d of %d (hashkv equal on 3 members) |\n"+
		"| snapshot size | %d bytes (revision %d) |\n"+
		"| on-demand backup, annotation to status Succeeded | %s |\n"+
		"| restore, create to Available (3 members) | %s (phase Restoring seen, then learners joined; total %s) |\n"+
		"| scheduled backups (*/1) after the on-demand one | %d, retention kept %d |\n"+
		"| restore in place from a truncated snapshot: refused by the verify Job while serving, annotation to refusal | %s (no member stopped or restarted) |\n"+
		"| restore in place (etcd.io/restore-from), annotation to Available with 3 members | %s (%d keys back, %d written after the snapshot gone, hashkv equal) |\n"+
		"| restoreOnQuorumLoss: 2 of 3 volumes wiped to Available again (deadMemberSeconds 60) | %s (lost %v; every key back, hashkv equal) |\n",
		len(got), n, size, rev, backupTook.Round(100*time.Millisecond), restoreTook.Round(100*time.Millisecond),
		restoreTotal.Round(100*time.Millisecond), len(successes), len(ms), refuseTook.Round(100*time.Millisecond),
		(pluginTook+inPlaceTook).Round(100*time.Millisecond), len(back), lost,
		drTook.Round(100*time.Millisecond), drLost))
}
